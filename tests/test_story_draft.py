"""Story drafts: the eight tools through `Session.call`, the pipeline's order, saving, `story run`.

Each decision the story schemas record (in their descriptions) has its own
test, through the session as a model meets it: the message it reads, the
field the error points at, and a refused call that leaves the draft as it
was. Tool names are read from the schemas. Property tests run random call
sequences and check that refused calls change nothing and that drafts and
packages come back identical from SQLite and JSON; the command line runs
in this process, as a user runs it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
from commands import cli
from hypothesis import given
from hypothesis import strategies as st
from schema_strategies import JSON_VALUES

from plancontracts import Violation, decode, violations
from plancontracts.generated import (
    STORY_ACT_OUTLINE,
    STORY_CHARACTER,
    STORY_DRAFT,
    STORY_FINALIZE_NODE,
    STORY_FINALIZE_PACKAGE,
    STORY_NODE_ENCOUNTERS,
    STORY_NODE_WEB,
    STORY_PACKAGE,
    STORY_PREMISE,
    STORY_UPDATE_ELEMENT,
)
from plancontracts.generated.story_packages import AssetFile, StoryDraft
from plancontracts.runtime.core import rules as core_rules
from plancontracts.runtime.core.contracts import contract_schema, field_bound
from plancontracts.runtime.core.errors import AssetGenerationError, StoreError
from plancontracts.runtime.core.rules import Rules
from plancontracts.runtime.core.sessions import CallResult
from plancontracts.runtime.core.validation import BUNDLED
from plancontracts.runtime.story_packages import (
    TOOLS,
    AssetRequest,
    DraftSession,
    DraftStore,
    RecordingAssets,
    read_package,
    write_package,
)

PREMISE = TOOLS.taking(STORY_PREMISE).name
CHARACTER = TOOLS.taking(STORY_CHARACTER).name
OUTLINE = TOOLS.taking(STORY_ACT_OUTLINE).name
WEB = TOOLS.taking(STORY_NODE_WEB).name
ENCOUNTERS = TOOLS.taking(STORY_NODE_ENCOUNTERS).name
FINALIZE_NODE = TOOLS.taking(STORY_FINALIZE_NODE).name
UPDATE = TOOLS.taking(STORY_UPDATE_ELEMENT).name
FINALIZE = TOOLS.taking(STORY_FINALIZE_PACKAGE).name
MAX_MS = field_bound(StoryDraft, "generation_ms", "le")
NOW = datetime(2026, 11, 20, 18, 45, tzinfo=UTC)


# Arguments of a small story -------------------------------------------------------------------


def premise(**more: Any) -> dict[str, Any]:
    return {
        "title": "Salt and Signal",
        "genre": "mystery",
        "artStyle": "ink wash, muted greens",
        "globalContext": {"setting": "A foggy coast", "tone": "hushed", "overarchingTruths": []},
        "premise": "A keeper finds a logbook of ships not yet sailed.",
        "themes": ["guilt"],
        "globalMaterials": ["a logbook"],
        "possibleEndings": ["The wreck is prevented", "The wreck happens"],
        **more,
    }


def character(id: str = "ines", **more: Any) -> dict[str, Any]:
    return {
        "id": id,
        "name": id.title(),
        "role": "protagonist",
        "description": "The keeper.",
        "imagePrompt": f"portrait of {id}",
        **more,
    }


def outline(id: str = "act_1", locations: tuple[str, ...] = ("lamp", "harbour")) -> dict[str, Any]:
    return {
        "id": id,
        "title": "Fog Bank",
        "objective": "Learn who writes the logbook",
        "scenarioContext": "The lamp writes it.",
        "narrativeGuidelines": "Hint, never show.",
        "intendedLocations": list(locations),
        "globalProgression": {"requiredValue": 1, "trackerLabel": "Entries Explained"},
    }


def place(id: str, *connections: str, characters: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "id": id,
        "title": id.title(),
        "location": id,
        "requiredCharacters": list(characters),
        "ambientDetail": "Salt on the glass.",
        "mood": f"{id}-theme",
        "connections": list(connections),
    }


def web(act: str = "act_1", *places: dict[str, Any]) -> dict[str, Any]:
    return {
        "actId": act,
        "locations": list(places or (place("lamp", "harbour"), place("harbour", "lamp"))),
    }


def encounter(id: str, frames: int = 6, **more: Any) -> dict[str, Any]:
    return {
        "id": id,
        "title": id.title(),
        "description": "Something happens.",
        "type": "discovery",
        "pacing": {"expectedFrames": frames, "focus": "standard"},
        "givesProgression": 1,
        "potentialFlags": [f"{id}_done"],
        **more,
    }


def pool(node: str, *encounters: dict[str, Any], act: str = "act_1") -> dict[str, Any]:
    return {
        "actId": act,
        "nodeId": node,
        "encounters": list(encounters or (encounter(f"enc_{node}"),)),
    }


def finalize_node(node: str, act: str = "act_1", prompt: str = "a lamp room") -> dict[str, Any]:
    return {
        "actId": act,
        "nodeId": node,
        "backgroundPrompt": prompt,
        "musicPrompts": [{"text": "low drones", "weight": 0.7}, {"text": "piano", "weight": 0.3}],
    }


STORY = [
    (PREMISE, premise()),
    (CHARACTER, character()),
    (OUTLINE, outline()),
    (WEB, web()),
    (ENCOUNTERS, pool("lamp")),
    (ENCOUNTERS, pool("harbour")),
    (FINALIZE_NODE, finalize_node("lamp")),
    (FINALIZE_NODE, finalize_node("harbour", prompt="a harbour")),
]
"Every step of a one-act story but the last, in the pipeline's order."


# Helpers --------------------------------------------------------------------------------------


def encoded(draft: StoryDraft) -> bytes:
    return msgspec.json.encode(draft)


def succeeded(session: DraftSession, tool: str, arguments: Any) -> CallResult[StoryDraft]:
    """Call `tool`, which must succeed, return a result of its contract and leave a valid draft."""
    before = session.draft
    done = session.call(tool, arguments)
    assert done.ok, done.message
    assert done.state is session.draft is not before
    result = json.loads(msgspec.json.encode(done.result))
    assert result["ok"] is True
    assert violations(next(t.result for t in TOOLS if t.name == tool), result) == ()
    assert violations(STORY_DRAFT, json.loads(encoded(session.draft))) == ()
    return done


def refused(session: DraftSession, tool: str, arguments: Any) -> CallResult[StoryDraft]:
    """Call `tool`, which must be refused, and leave the draft exactly as it was."""
    before = session.draft
    text = encoded(before)
    done = session.call(tool, arguments)
    assert not done.ok
    assert done.error is not None
    assert done.result is None
    assert done.message == str(done.error)
    assert "\n" not in done.message
    assert done.state is session.draft is before
    assert encoded(session.draft) == text
    return done


def story(*, upto: int = len(STORY), **options: Any) -> DraftSession:
    """A session that went through the first `upto` steps of `STORY`."""
    session = DraftSession(now=lambda: NOW, **options)
    for tool, arguments in STORY[:upto]:
        succeeded(session, tool, arguments)
    return session


def finalized(**options: Any) -> tuple[DraftSession, CallResult[StoryDraft]]:
    session = story(**options)
    return session, succeeded(session, FINALIZE, {"title": "The Final Title"})


# The tools and their contracts ----------------------------------------------------------------


def test_the_tools_are_named_by_their_schemas_in_the_seeds_order() -> None:
    assert [tool.name for tool in TOOLS] == [
        contract_schema(tool.parameters)["x-tool"] for tool in TOOLS
    ]
    assert [tool.name for tool in TOOLS] == [
        PREMISE,
        CHARACTER,
        OUTLINE,
        WEB,
        ENCOUNTERS,
        FINALIZE_NODE,
        UPDATE,
        FINALIZE,
    ]
    for tool in TOOLS:
        result = contract_schema(tool.result)
        assert result["additionalProperties"] is False
        assert result["properties"]["ok"]["const"] is True
        assert all(field["description"] for field in result["properties"].values())
        assert "Decision" in tool.description or tool.parameters is STORY_UPDATE_ELEMENT


def test_a_new_draft_has_a_uuid_package_id_and_a_locale() -> None:
    one, two = DraftSession(), DraftSession(locale="fr")
    assert str(uuid.UUID(one.draft.package_id)) == one.draft.package_id
    assert one.draft.package_id != two.draft.package_id
    assert (one.draft.locale, two.draft.locale) == ("en", "fr")
    assert one.draft.status == "drafting"
    assert violations(STORY_DRAFT, json.loads(encoded(one.draft))) == ()


def test_an_unknown_tool_is_refused_and_the_tools_named() -> None:
    done = refused(DraftSession(), "planStory", {})
    assert done.message.startswith('no story tool is called "planStory"; the tools are: ')
    assert all(tool.name in done.message for tool in TOOLS)


# The pipeline's order ------------------------------------------------------------------------


@pytest.mark.parametrize("tool", [t.name for t in TOOLS if t.name != PREMISE])
def test_every_tool_but_the_premise_needs_the_premise_first(tool: str) -> None:
    done = refused(DraftSession(), tool, {})
    assert done.message == f"there is no premise yet: propose one with {PREMISE} first"
    assert done.error is not None
    assert done.error.field is None


def test_each_step_of_an_act_is_refused_until_the_step_before_it() -> None:
    session = story(upto=2)
    done = refused(session, WEB, web())
    assert done.message == (
        f'actId: no act "act_1" is outlined (the acts: none): outline it with {OUTLINE} first'
    )
    succeeded(session, OUTLINE, outline())
    done = refused(session, ENCOUNTERS, pool("lamp"))
    assert (
        done.message == f'location "lamp" of act "act_1" is a placeholder: wire it with {WEB} first'
    )
    succeeded(session, WEB, web())
    done = refused(session, FINALIZE_NODE, finalize_node("lamp"))
    assert done.message == (
        f'location "lamp" of act "act_1" has no encounters: draft them with {ENCOUNTERS} first'
    )
    succeeded(session, ENCOUNTERS, pool("lamp"))
    succeeded(session, ENCOUNTERS, pool("harbour"))
    succeeded(session, FINALIZE_NODE, finalize_node("lamp"))
    done = refused(session, FINALIZE, {"title": "T"})
    assert done.message == (
        'location "harbour" of act "act_1" is not finalized: '
        f"finalize it with {FINALIZE_NODE} first"
    )
    succeeded(session, FINALIZE_NODE, finalize_node("harbour"))
    succeeded(session, FINALIZE, {"title": "T"})


def test_finalizing_the_package_needs_a_character_and_an_act() -> None:
    session = story(upto=1)
    assert refused(session, FINALIZE, {"title": "T"}).message == (
        f"there is no character yet: propose one with {CHARACTER} first"
    )
    succeeded(session, CHARACTER, character())
    assert refused(session, FINALIZE, {"title": "T"}).message == (
        f"there is no act yet: outline one with {OUTLINE} first"
    )


def test_a_finalized_draft_takes_no_more_calls() -> None:
    session, _ = finalized()
    assert session.draft.status == "finalized"
    for tool, arguments in [*STORY, (FINALIZE, {"title": "Again"})]:
        done = refused(session, tool, arguments)
        assert done.message == (
            f"the package {session.draft.package_id} is finalized: it takes no more calls"
        )


def test_arguments_are_judged_by_the_tools_contract_and_the_field_named() -> None:
    session = story(upto=1)
    done = refused(session, CHARACTER, character(role="villain"))
    assert done.error is not None
    assert done.error.field == "/role"
    assert done.message.startswith('role: "villain" is not one of')


# The decisions --------------------------------------------------------------------------------


def test_a_second_premise_is_refused() -> None:
    session = story(upto=1)
    done = refused(session, PREMISE, premise(title="Another"))
    assert done.message == f"the premise is already proposed: change it with {UPDATE}"


def test_a_premise_that_names_a_language_sets_the_locale_and_one_that_does_not_takes_it() -> None:
    french = DraftSession(locale="fr")
    succeeded(french, PREMISE, premise())
    assert french.draft.locale == "fr"
    assert french.draft.premise is not None
    assert french.draft.premise.language == "fr"
    named = DraftSession(locale="fr")
    succeeded(named, PREMISE, premise(language="de"))
    assert named.draft.locale == "de"


def test_the_genre_is_asked_for_by_the_premise() -> None:
    assert "genre" in contract_schema(STORY_PREMISE)["required"]
    arguments = premise()
    del arguments["genre"]
    assert (
        refused(DraftSession(), PREMISE, arguments).message
        == 'arguments: missing required field "genre"'
    )


def test_character_ids_are_unique_in_the_draft() -> None:
    session = story(upto=2)
    done = refused(session, CHARACTER, character(name="Other"))
    assert done.error is not None
    assert done.error.field == "/id"
    assert done.message == f'id: a character "ines" is already proposed: change it with {UPDATE}'


def arc(*encounters: dict[str, Any]) -> dict[str, Any]:
    return {"want": "To be left alone", "need": "To speak", "arcEncounters": list(encounters)}


def arc_encounter(id: str, **more: Any) -> dict[str, Any]:
    return {**encounter(id), "arcPhase": "crisis", **more}


def test_encounter_ids_are_unique_across_the_draft_arcs_included() -> None:
    session = story()
    clash = character("tomas", role="ally", personalArc=arc(arc_encounter("enc_lamp")))
    done = refused(session, CHARACTER, clash)
    assert done.error is not None
    assert done.error.field == "/personalArc/arcEncounters/0/id"
    assert done.message.endswith('"enc_lamp" is already the id of an encounter: ids are unique')
    succeeded(session, CHARACTER, character("tomas", personalArc=arc(arc_encounter("arc_tomas"))))
    done = refused(session, ENCOUNTERS, pool("lamp", encounter("arc_tomas")))
    assert done.error is not None
    assert done.error.field == "/encounters/0/id"
    done = refused(session, ENCOUNTERS, pool("lamp", encounter("a"), encounter("a")))
    assert done.error is not None
    assert done.error.field == "/encounters/1/id"
    # Outside the pool it replaces: the location's own encounters may be named again.
    succeeded(session, ENCOUNTERS, pool("lamp", encounter("enc_lamp"), encounter("more")))


def test_an_arc_belongs_to_its_character_and_needs_characters_proposed() -> None:
    session = story(upto=2)
    done = refused(
        session,
        CHARACTER,
        character("tomas", personalArc=arc(arc_encounter("a", arcCharacterId="ines"))),
    )
    assert done.error is not None
    assert done.error.field == "/personalArc/arcEncounters/0/arcCharacterId"
    assert done.message.endswith("""is "ines", but the arc is "tomas"'s""")
    stranger = arc_encounter("a", requiredCharacters=["tomas", "nobody"])
    done = refused(session, CHARACTER, character("tomas", personalArc=arc(stranger)))
    assert done.error is not None
    assert done.error.field == "/personalArc/arcEncounters/0/requiredCharacters/1"


def test_an_empty_image_prompt_asks_for_no_portrait() -> None:
    hook = RecordingAssets()
    session = DraftSession(assets=hook)
    succeeded(session, PREMISE, premise())
    done = succeeded(session, CHARACTER, character(imagePrompt=""))
    assert json.loads(msgspec.json.encode(done.result))["imageUrl"] is None
    assert hook.requests == []
    assert session.draft.assets.characters == {}


def test_the_node_web_names_only_intended_locations_each_once() -> None:
    session = story(upto=3)
    done = refused(session, WEB, web("act_1", place("lamp"), place("attic")))
    assert done.error is not None
    assert done.error.field == "/locations/1/id"
    assert done.message == (
        'locations[1].id: "attic" is not an intended location of act "act_1": '
        'they are "lamp", "harbour"'
    )
    done = refused(session, WEB, web("act_1", place("lamp"), place("lamp")))
    assert done.error is not None
    assert done.error.field == "/locations/1/id"


def test_a_node_web_may_wire_some_locations_and_rewiring_keeps_the_pool_and_assets() -> None:
    session = story()
    before = session.draft.acts[0].locations[0]
    done = succeeded(session, WEB, web("act_1", {**place("lamp", "harbour"), "title": "Lamp Room"}))
    assert json.loads(msgspec.json.encode(done.result))["updatedLocations"] == 1
    after = session.draft.acts[0].locations[0]
    assert after.web is not None
    assert after.web.title == "Lamp Room"
    assert (after.encounters, after.finalized) == (before.encounters, before.finalized)


def test_connections_go_one_way_and_name_other_intended_locations_once() -> None:
    session = story(upto=3)
    succeeded(session, WEB, web("act_1", place("lamp", "harbour"), place("harbour")))
    lamp, harbour = (location.web for location in session.draft.acts[0].locations)
    assert lamp is not None
    assert harbour is not None
    assert (lamp.connections, harbour.connections) == (["harbour"], [])  # no way back added
    for connections, problem in [
        (["lamp"], "a location does not connect to itself"),
        (["harbour", "harbour"], '"harbour" is named twice'),
        (["attic"], '"attic" is not an intended location of act "act_1"'),
    ]:
        done = refused(session, WEB, web("act_1", place("lamp", *connections)))
        assert done.error is not None
        assert done.error.field == f"/locations/0/connections/{len(connections) - 1}"
        assert problem in done.message


def test_required_characters_name_characters_already_proposed() -> None:
    session = story(upto=3)
    done = refused(session, WEB, web("act_1", place("lamp", characters=("ines", "tomas"))))
    assert done.error is not None
    assert done.error.field == "/locations/0/requiredCharacters/1"
    assert done.message.endswith(
        'no character "tomas" is proposed (the characters: "ines"): '
        f"propose it with {CHARACTER} first"
    )
    succeeded(session, WEB, web())
    stranger = encounter("e", requiredCharacters=["tomas"])
    done = refused(session, ENCOUNTERS, pool("lamp", stranger))
    assert done.error is not None
    assert done.error.field == "/encounters/0/requiredCharacters/0"


def test_intended_locations_are_unique_in_an_act_and_may_recur_in_another() -> None:
    session = story(upto=2)
    done = refused(session, OUTLINE, outline(locations=("lamp", "lamp")))
    assert done.error is not None
    assert done.error.field == "/intendedLocations/1"
    succeeded(session, OUTLINE, outline("act_1", ("lamp",)))
    succeeded(session, OUTLINE, outline("act_2", ("lamp",)))
    assert [act.outline.id for act in session.draft.acts] == ["act_1", "act_2"]


def test_re_outlining_replaces_an_act_until_one_of_its_locations_is_wired() -> None:
    session = story(upto=3)
    done = succeeded(session, OUTLINE, outline(locations=("lamp", "cliff")))
    assert done.message == 'The act "act_1" is outlined again, with 2 placeholder locations.'
    assert [location.id for location in session.draft.acts[0].locations] == ["lamp", "cliff"]
    succeeded(session, WEB, web("act_1", place("lamp")))
    done = refused(session, OUTLINE, outline())
    assert done.error is not None
    assert done.error.field == "/id"
    assert done.message == (
        'id: the act "act_1" is outlined already and its location "lamp" is wired: '
        f"change the act with {UPDATE}"
    )


def test_new_encounters_replace_a_pool_and_a_finalized_location_keeps_its_assets() -> None:
    session = story()
    done = succeeded(session, ENCOUNTERS, pool("lamp", encounter("fresh")))
    assert json.loads(msgspec.json.encode(done.result)) == {
        "ok": True,
        "updated": "lamp",
        "encounterCount": 1,
    }
    lamp = session.draft.acts[0].locations[0]
    assert [each.id for each in lamp.encounters] == ["fresh"]
    assert lamp.finalized is not None


class Recorder:
    """An asset hook that keeps what it was asked and makes files named by kind."""

    def __init__(self, fail: str | None = None) -> None:
        self.requests: list[AssetRequest] = []
        self.fail = fail

    def __call__(self, request: AssetRequest) -> AssetFile:
        if request.key == self.fail:
            raise AssetGenerationError("the generator is out of credit")
        self.requests.append(request)
        return AssetFile(
            url=f"https://cdn.example/{request.kind}/{request.key}", mime_type="image/webp"
        )


def test_the_asset_hook_is_called_with_the_steps_prompts_and_keys() -> None:
    hook = Recorder()
    session, _ = finalized(assets=hook)
    package_id, style = session.draft.package_id, premise()["artStyle"]
    music = (("low drones", 0.7), ("piano", 0.3))
    assert hook.requests == [
        AssetRequest(package_id, "portrait", "ines", (("portrait of ines", 1.0),), style),
        AssetRequest(package_id, "background", "lamp", (("a lamp room", 1.0),), style),
        AssetRequest(package_id, "music", "lamp-theme", music, style),
        AssetRequest(package_id, "background", "harbour", (("a harbour", 1.0),), style),
        AssetRequest(package_id, "music", "harbour-theme", music, style),
    ]
    assert session.draft.assets.backgrounds["lamp"].url == "https://cdn.example/background/lamp"


def test_the_default_hook_makes_no_file_and_answers_the_planned_path() -> None:
    hook = RecordingAssets()
    session = story(assets=hook)
    assert len(hook.requests) == 5
    assert session.draft.assets.music["lamp-theme"] == AssetFile(
        url=f"/generated/{session.draft.package_id}/lamp-theme.wav", mime_type="audio/wav"
    )


def test_a_key_asked_for_again_is_made_again_and_replaces_the_file() -> None:
    hook = Recorder()
    session = story(assets=hook)
    succeeded(session, FINALIZE_NODE, finalize_node("lamp", prompt="the lamp at dawn"))
    assert hook.requests[-2].prompts == (("the lamp at dawn", 1.0),)
    assert session.draft.acts[0].locations[0].finalized is not None
    assert session.draft.acts[0].locations[0].finalized.background_prompt == "the lamp at dawn"


def test_a_failing_asset_hook_refuses_the_call() -> None:
    session = story(upto=1, assets=Recorder(fail="ines"))
    done = refused(session, CHARACTER, character())
    assert done.message == 'the portrait "ines" was not made: the generator is out of credit'


# updateElement --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"type": "act", "changes": {"title": "T"}},
            'arguments: missing required field "id": type "act" needs it',
        ),
        (
            {"type": "character", "changes": {"name": "N"}},
            'arguments: missing required field "id": type "character" needs it',
        ),
        (
            {"type": "node", "id": "lamp", "changes": {"title": "T"}},
            'arguments: missing required field "actId": type "node" needs it',
        ),
        (
            {"type": "premise", "id": "x", "changes": {"title": "T"}},
            'id: type "premise" takes no id',
        ),
        (
            {"type": "act", "id": "act_1", "actId": "act_1", "changes": {"title": "T"}},
            'actId: type "act" takes no actId',
        ),
        ({"type": "act", "id": "act_1", "changes": {}}, "changes: has 0 fields; needs at least 1"),
    ],
)
def test_update_element_needs_the_ids_of_its_kind_of_element(
    arguments: dict[str, Any], message: str
) -> None:
    assert refused(story(), UPDATE, arguments).message == message


def test_changes_merge_at_the_top_level_replacing_whole_fields() -> None:
    session = story()
    changes = {"globalContext": {"setting": "An island", "tone": "grim", "overarchingTruths": []}}
    done = succeeded(session, UPDATE, {"type": "premise", "changes": changes})
    assert json.loads(msgspec.json.encode(done.result)) == {
        "ok": True,
        "updated": "premise",
        "id": None,
    }
    assert session.draft.premise is not None
    assert session.draft.premise.global_context.setting == "An island"
    assert session.draft.premise.title == "Salt and Signal"  # the fields not named stay
    succeeded(session, UPDATE, {"type": "premise", "changes": {"themes": ["grief"]}})
    assert session.draft.premise.themes == ["grief"]  # a list is replaced, never extended
    succeeded(session, UPDATE, {"type": "premise", "changes": {"language": "fr"}})
    assert session.draft.locale == "fr"


@pytest.mark.parametrize(
    ("arguments", "field", "message"),
    [
        (
            {"type": "premise", "changes": {"genre": ""}},
            "/changes/genre",
            "is 0 characters long; needs at least 1",
        ),
        (
            {"type": "premise", "changes": {"rating": "PG"}},
            "/changes/rating",
            'unknown field "rating"',
        ),
        (
            {"type": "character", "id": "ines", "changes": {"role": "hero"}},
            "/changes/role",
            '"hero" is not one of',
        ),
        (
            {"type": "act", "id": "act_1", "changes": {"globalProgression": {"requiredValue": 0}}},
            "/changes/globalProgression",
            'missing required field "trackerLabel"',
        ),
        (
            {"type": "node", "actId": "act_1", "id": "lamp", "changes": {"encounters": []}},
            "/changes/encounters",
            'unknown field "encounters"',
        ),
        (
            {"type": "node", "actId": "act_1", "id": "lamp", "changes": {"connections": ["attic"]}},
            "/changes/connections/0",
            '"attic" is not an intended location',
        ),
    ],
)
def test_changes_are_checked_against_the_elements_own_contract(
    arguments: dict[str, Any], field: str, message: str
) -> None:
    done = refused(story(), UPDATE, arguments)
    assert done.error is not None
    assert done.error.field == field
    assert message in done.message


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"type": "character", "id": "ines", "changes": {"id": "mira"}}, "/changes/id"),
        ({"type": "act", "id": "act_1", "changes": {"id": "act_9"}}, "/changes/id"),
        (
            {"type": "act", "id": "act_1", "changes": {"intendedLocations": ["lamp"]}},
            "/changes/intendedLocations",
        ),
        (
            {"type": "node", "actId": "act_1", "id": "lamp", "changes": {"id": "attic"}},
            "/changes/id",
        ),
    ],
)
def test_ids_and_intended_locations_cannot_be_changed(
    arguments: dict[str, Any], field: str
) -> None:
    done = refused(story(), UPDATE, arguments)
    assert done.error is not None
    assert done.error.field == field
    assert "cannot be changed by updateElement" in done.message


def test_an_element_to_update_must_exist_and_a_node_be_wired() -> None:
    session = story(upto=3)
    done = refused(session, UPDATE, {"type": "character", "id": "tomas", "changes": {"name": "T"}})
    assert done.message == 'id: no character "tomas" is proposed (the characters: "ines")'
    done = refused(
        session, UPDATE, {"type": "node", "actId": "act_1", "id": "lamp", "changes": {"title": "T"}}
    )
    assert (
        done.message == f'location "lamp" of act "act_1" is a placeholder: wire it with {WEB} first'
    )


def test_regenerating_an_image_remakes_a_portrait_or_a_finalized_background_only() -> None:
    hook = Recorder()
    session = story(upto=4, assets=hook)
    for kind, ids in (("premise", {}), ("act", {"id": "act_1"})):
        done = refused(
            session,
            UPDATE,
            {"type": kind, **ids, "changes": {"title": "T"}, "regenerateImage": True},
        )
        assert done.error is not None
        assert done.error.field == "/regenerateImage"
    node = {
        "type": "node",
        "actId": "act_1",
        "id": "lamp",
        "changes": {"title": "T"},
        "regenerateImage": True,
    }
    assert "has no image yet" in refused(session, UPDATE, node).message
    done = succeeded(
        session,
        UPDATE,
        {
            "type": "character",
            "id": "ines",
            "changes": {"imagePrompt": "older"},
            "regenerateImage": True,
        },
    )
    assert done.message == 'Updated the character "ines", its image made again.'
    assert hook.requests[-1].prompts == (("older", 1.0),)


# finalizePackage ------------------------------------------------------------------------------


def test_the_package_takes_its_fields_from_the_draft_as_the_schema_says() -> None:
    session, done = finalized()
    assert json.loads(msgspec.json.encode(done.result)) == {
        "ok": True,
        "packageId": session.draft.package_id,
        "title": "The Final Title",
        "totalNodes": 2,
    }
    with DraftStore(Path(":memory:")) as store:
        session, _ = finalized(store=store)
        saved = store.load_package(session.draft.package_id)
    assert saved.title == "The Final Title"
    assert saved.genre == "mystery"
    assert saved.language == "en"
    assert saved.created_at == "2026-11-20T18:45:00.000Z"
    # Two encounters of 6 frames each, at 10 to 20 seconds a frame.
    assert saved.meta.estimated_duration == "2-4 minutes"
    assert saved.meta.total_nodes == 2
    assert 0 <= saved.meta.generation_ms <= MAX_MS
    assert saved.plot.premise == premise()["premise"]
    assert [location.id for location in saved.plot.acts[0].sandbox_locations] == ["lamp", "harbour"]
    assert set(saved.assets.backgrounds) == {"lamp", "harbour"}
    assert set(saved.assets.music) == {"lamp-theme", "harbour-theme"}
    assert set(saved.assets.characters) == {"ines"}
    assert violations(STORY_PACKAGE, json.loads(msgspec.json.encode(saved))) == ()


def test_the_packages_assets_hold_only_the_keys_it_uses() -> None:
    with DraftStore(Path(":memory:")) as store:
        session = story(store=store)
        mood = {"type": "node", "actId": "act_1", "id": "lamp", "changes": {"mood": "storm"}}
        succeeded(session, UPDATE, mood)
        succeeded(session, FINALIZE_NODE, finalize_node("lamp"))
        succeeded(session, FINALIZE, {"title": "T"})
        saved = store.load_package(session.draft.package_id)
    assert "lamp-theme" in session.draft.assets.music
    assert set(saved.assets.music) == {"storm", "harbour-theme"}


def test_finalize_judges_the_package_by_its_familys_rules_reporting_every_problem(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_harbour(value: Any) -> Iterator[Violation]:
        for index, _location in enumerate(value["plot"]["acts"][0]["sandboxLocations"]):
            yield Violation(f"/plot/acts/0/sandboxLocations/{index}", "a test rule")

    declared = {STORY_PACKAGE.name: Rules(STORY_PACKAGE.name, "test rules", no_harbour)}
    monkeypatch.setattr(core_rules, "_declared", lambda family: declared)
    # The contracts look a family's rules up once: forget what an earlier test found.
    monkeypatch.setattr(BUNDLED, "_default_rules", {})
    session = story()
    done = refused(session, FINALIZE, {"title": "T"})
    assert done.message == (
        "the package is not valid: /plot/acts/0/sandboxLocations/0: a test rule and 1 more"
    )
    assert done.error is not None
    assert [each.pointer for each in done.error.violations] == [
        "/plot/acts/0/sandboxLocations/0",
        "/plot/acts/0/sandboxLocations/1",
    ]


# Saving ---------------------------------------------------------------------------------------


def test_the_draft_is_saved_after_every_successful_call_and_resumes_identical(
    tmp_path: Path,
) -> None:
    with DraftStore(tmp_path / "stories.db") as store:
        session = DraftSession(store=store, now=lambda: NOW)
        for tool, arguments in [*STORY, (WEB, web("act_9"))]:
            session.call(tool, arguments)
            assert store.load_draft(session.draft.package_id) == session.draft
    with DraftStore(tmp_path / "stories.db") as store:
        resumed = DraftSession.resume(store, session.draft.package_id, now=lambda: NOW)
        assert encoded(resumed.draft) == encoded(session.draft)
        assert store.sessions() == [session.draft.package_id]
        succeeded(resumed, FINALIZE, {"title": "T"})
    with sqlite3.connect(tmp_path / "stories.db") as connection:
        rows = connection.execute("SELECT id, draft FROM drafts").fetchall()
    assert len(rows) == 1  # one row per session
    assert decode(STORY_DRAFT, rows[0][1]).status == "finalized"


def test_a_store_refuses_what_is_no_database_and_drafts_it_does_not_hold(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a database, but long enough to be read as a header of one\n" * 20)
    with pytest.raises(StoreError, match="cannot be used as a story database"):
        DraftStore(text)
    with DraftStore(tmp_path / "stories.db") as store:
        missing = str(uuid.uuid4())
        with pytest.raises(StoreError, match=f'no draft "{missing}" in '):
            store.load_draft(missing)


def test_a_saved_draft_that_breaks_its_contract_is_refused_when_loaded(tmp_path: Path) -> None:
    with DraftStore(tmp_path / "stories.db") as store:
        session = story(store=store)
    with sqlite3.connect(tmp_path / "stories.db") as connection:
        connection.execute("UPDATE drafts SET draft = json_set(draft, '$.status', 'lost')")
    with (
        DraftStore(tmp_path / "stories.db") as store,
        pytest.raises(StoreError, match="is not valid"),
    ):
        store.load_draft(session.draft.package_id)


@pytest.mark.parametrize("stored", [5, 3.5, None, b"\x00"])
def test_a_saved_draft_that_is_no_text_is_refused_when_loaded(tmp_path: Path, stored: Any) -> None:
    # A table another program made, with no type for the column: SQLite keeps what it is given.
    session = str(uuid.uuid4())
    with sqlite3.connect(tmp_path / "stories.db") as connection:
        connection.execute("CREATE TABLE drafts (id TEXT PRIMARY KEY, draft)")
        connection.execute("INSERT INTO drafts VALUES (?, ?)", (session, stored))
    with DraftStore(tmp_path / "stories.db") as store, pytest.raises(StoreError, match="not valid"):
        store.load_draft(session)


# Random call sequences ------------------------------------------------------------------------

NODES = st.sampled_from(["lamp", "harbour"])
SOME_NODES = st.lists(NODES, min_size=1, max_size=2, unique=True)
# Mostly the first act, whose locations the other calls name, so that calls get far along.
ACTS = st.sampled_from(["act_1", "act_1", "act_1", "act_2"])
INTENDED = st.sampled_from([("lamp", "harbour"), ("lamp", "harbour"), ("lamp",), ("attic",)])
TEXTS = st.text(min_size=0, max_size=8)


def ring(act: str, nodes: list[str], linked: bool) -> dict[str, Any]:
    """A node web of `nodes`, each connected to the next when `linked`."""
    after = nodes[1:] + nodes[:1]
    return web(
        act,
        *(
            place(node, *([then] if linked and then != node else []))
            for node, then in zip(nodes, after, strict=True)
        ),
    )


ARGUMENTS = {
    PREMISE: st.sampled_from([premise(), premise(language="fr"), premise(title="")]),
    CHARACTER: st.builds(character, st.sampled_from(["ines", "tomas", "Bad Id"])),
    OUTLINE: st.builds(outline, ACTS, INTENDED),
    WEB: st.builds(ring, ACTS, SOME_NODES, st.booleans()),
    ENCOUNTERS: st.builds(
        lambda node, act, ids: pool(node, *map(encounter, ids), act=act),
        NODES,
        ACTS,
        st.lists(st.sampled_from(["e1", "e2", "e3", "e4"]), min_size=1, max_size=2, unique=True),
    ),
    FINALIZE_NODE: st.builds(finalize_node, NODES, ACTS),
    UPDATE: st.one_of(
        st.builds(lambda title: {"type": "premise", "changes": {"title": title}}, TEXTS),
        st.builds(lambda act: {"type": "act", "id": act, "changes": {"title": "New"}}, ACTS),
        st.builds(
            lambda act, node: {"type": "node", "actId": act, "id": node, "changes": {"mood": "m"}},
            ACTS,
            NODES,
        ),
    ),
    FINALIZE: st.builds(lambda title: {"title": title}, TEXTS),
}
assert set(ARGUMENTS) == {tool.name for tool in TOOLS}
CALLS = st.lists(
    st.one_of(
        st.sampled_from(sorted(ARGUMENTS)).flatmap(
            lambda name: st.tuples(st.just(name), ARGUMENTS[name])
        ),
        st.tuples(st.sampled_from(sorted(ARGUMENTS)), JSON_VALUES),
    ),
    max_size=25,
)
"Calls of every tool, many in the pipeline's order, many out of it, some of any shape."


# The calls start from a draft at each step of the pipeline, so that they reach every state.
STARTS = st.integers(0, len(STORY))


@given(STARTS, CALLS)
def test_refused_calls_change_nothing_and_successful_ones_leave_a_valid_draft(
    start: int, calls: list[tuple[str, Any]]
) -> None:
    session = DraftSession(now=lambda: NOW)
    for tool, arguments in STORY[:start] + calls:
        before = session.draft
        text = encoded(before)
        done = session.call(tool, arguments)
        assert done.message
        assert "\n" not in done.message
        if done.ok:
            assert violations(STORY_DRAFT, json.loads(encoded(session.draft))) == ()
            result = json.loads(msgspec.json.encode(done.result))
            assert violations(next(t.result for t in TOOLS if t.name == tool), result) == ()
        else:
            assert session.draft is before
            assert encoded(session.draft) == text


@given(CALLS, st.text(min_size=1, max_size=20))
def test_drafts_and_packages_come_back_identical_from_sqlite_and_json(
    calls: list[tuple[str, Any]], title: str
) -> None:
    with DraftStore(Path(":memory:")) as store:
        session = DraftSession(store=store, now=lambda: NOW)
        for tool, arguments in [*STORY[:2], *calls]:
            session.call(tool, arguments)
        assert store.load_draft(session.draft.package_id) == session.draft
        session = DraftSession(store=store, now=lambda: NOW)
        for tool, arguments in STORY:
            session.call(tool, arguments)
        done = session.call(FINALIZE, {"title": title})
        assert done.ok, done.message
        package = store.load_package(session.draft.package_id)
        assert store.load_draft(session.draft.package_id) == session.draft
    assert package.title == title
    with tempfile.TemporaryDirectory() as name:  # a fresh folder per example
        folder = Path(name)
        assert read_package(write_package(package, folder)) == package
        assert [path.name for path in folder.iterdir()] == [f"{package.id}.json"]


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_a_package_file_has_the_mode_the_umask_gives(tmp_path: Path, umask: int) -> None:
    session, _ = finalized()
    assert session.package is not None
    previous = os.umask(umask)
    try:
        path = write_package(session.package, tmp_path)
    finally:
        os.umask(previous)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask
    assert [each.name for each in tmp_path.iterdir()] == [path.name]


# The command line -----------------------------------------------------------------------------


def call(tool: str, arguments: Any) -> str:
    return json.dumps({"tool": tool, "arguments": arguments})


def run(tmp_path: Path, lines: list[str], *options: str) -> tuple[int, list[dict[str, Any]], str]:
    path = tmp_path / "calls.ndjson"
    path.write_text("".join(line + "\n" for line in lines))
    done = cli("story", "run", str(path), *options)
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines()], done.stderr


def test_story_run_applies_the_calls_saves_and_resumes(tmp_path: Path) -> None:
    db, out = tmp_path / "stories.db", tmp_path / "packages"
    out.mkdir()
    lines = [call(tool, arguments) for tool, arguments in STORY[:4]]
    lines[2:2] = [call(WEB, web()), "{not json"]
    status, records, stderr = run(tmp_path, lines, "--db", str(db))
    assert (status, stderr) == (1, "")
    assert [record["ok"] for record in records] == [True, True, False, False, True, True]
    session = records[0]["session"]
    assert {record["session"] for record in records} == {session}
    assert records[1] == {
        "line": 2,
        "tool": CHARACTER,
        "ok": True,
        "message": 'The character "ines" is proposed.',
        "result": {
            "ok": True,
            "id": "ines",
            "name": "Ines",
            "imageUrl": f"/generated/{session}/ines.png",
        },
        "session": session,
    }
    assert records[2] == {
        "line": 3,
        "tool": WEB,
        "ok": False,
        "error": {
            "field": "/actId",
            "message": (
                'actId: no act "act_1" is outlined (the acts: none): '
                f"outline it with {OUTLINE} first"
            ),
        },
        "session": session,
    }
    assert records[3]["tool"] is None
    assert records[3]["error"]["message"].startswith("malformed JSON")
    rest = [call(tool, arguments) for tool, arguments in STORY[4:]]
    rest.append(call(FINALIZE, {"title": "Salt"}))
    status, records, stderr = run(
        tmp_path, rest, "--db", str(db), "--session", session, "--out", str(out)
    )
    assert (status, stderr) == (0, "")
    assert records[-1]["result"] == {
        "ok": True,
        "packageId": session,
        "title": "Salt",
        "totalNodes": 2,
    }
    with DraftStore(db) as store:
        assert read_package(out / f"{session}.json") == store.load_package(session)
        assert store.load_draft(session).status == "finalized"


def test_story_run_without_a_database_writes_nothing(tmp_path: Path) -> None:
    lines = [call(tool, arguments) for tool, arguments in STORY]
    status, records, stderr = run(tmp_path, [*lines, call(FINALIZE, {"title": "T"})])
    assert (status, stderr) == (0, "")
    assert len(records) == len(STORY) + 1
    assert sorted(path.name for path in tmp_path.iterdir()) == ["calls.ndjson"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--session", "3f1c2a9e-0000-4000-8000-000000000001"], "--session needs --db"),
        (["--db", "DB", "--session", "nope"], '--session "nope": not a UUID'),
        (["--db", "DB", "--session", "3f1c2a9e-0000-4000-8000-000000000001"], 'no draft "3f1c2a9e'),
        (["--out", "missing"], "not an existing folder"),
    ],
)
def test_story_run_refuses_a_bad_command_line_in_one_line(
    tmp_path: Path, options: list[str], message: str
) -> None:
    options = [str(tmp_path / "stories.db") if each == "DB" else each for each in options]
    status, records, stderr = run(tmp_path, [call(PREMISE, premise())], *options)
    assert (status, records) == (2, [])
    assert len(stderr.splitlines()) == 1
    assert message in stderr
    assert "Traceback" not in stderr
