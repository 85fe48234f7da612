"""Story packages: the rules beyond the schema, which finalizing a package checks.

A small valid package is built here; each defective package breaks one thing
of it, and the test names the pointer and the message of every violation it
gets, through `violations` and `decode` as the Python API reports them and
through `validate` as the command line does. The upstream fixtures are read
in place: the synthetic package passes and each legacy one fails for its
stated reason. Property tests mutate the valid package at random: the rules
never fail, and every violation points at a value of the document.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from commands import cli
from hypothesis import given
from hypothesis import strategies as st
from schema_strategies import locations, mutated

from plancontracts import STORY_PACKAGE, ContractError, Violation, decode, violations
from plancontracts.runtime.story_packages import RULES, STORY_PACKAGE_RULES

Document = dict[str, Any]
Breakage = Callable[[Document], None]

ACT = "/plot/acts/0"
LAMP = f"{ACT}/sandboxLocations/0"
HARBOUR = f"{ACT}/sandboxLocations/1"
ARC = "/characters/1/personalArc/arcEncounters"
DEAD_END = (
    "is a dead end: it gives no progression, sets no flag and is not repeatable "
    "(give it givesProgression, potentialFlags or repeatable: true)"
)


def encounter(name: str, **fields: Any) -> Document:
    return {
        "id": name,
        "title": name.title(),
        "description": f"What happens in {name}.",
        "type": "discovery",
        "pacing": {"expectedFrames": 6, "focus": "standard"},
        **fields,
    }


def location(name: str, connections: list[str], encounters: list[Document] | None) -> Document:
    place: Document = {
        "id": name,
        "title": name.title(),
        "location": name,
        "requiredCharacters": ["ines"],
        "connections": connections,
        "mood": "fog-theme",
    }
    if encounters is not None:
        place["encounters"] = encounters
    return place


def act(name: str, places: list[Document], **fields: Any) -> Document:
    return {
        "id": name,
        "title": name.title(),
        "objective": "Learn who writes in the logbook",
        "scenarioContext": "The lamp writes the entries.",
        "narrativeGuidelines": "Hint, never show.",
        "sandboxLocations": places,
        **fields,
    }


def package() -> Document:
    """A small valid package: one act of two connected locations, and an ally with an arc.

    Act 1 needs 2 progress: its encounters give 1 + 1, and Tomas's arc
    encounter 1 more (Tomas is in the act: an encounter requires him), so
    any one of the three can be left out.
    """
    arc = encounter(
        "arc_tomas",
        type="npc_interaction",
        arcPhase="crisis",
        arcCharacterId="tomas",
        potentialFlags=["tomas_talked"],
        givesProgression=1,
    )
    places = [
        location(
            "loc_lamp",
            ["loc_harbour"],
            [encounter("enc_entry", givesProgression=1, potentialFlags=["saw_entry"])],
        ),
        location(
            "loc_harbour",
            ["loc_lamp"],
            [
                encounter(
                    "enc_pilot",
                    givesProgression=1,
                    prerequisites=["saw_entry"],
                    requiredCharacters=["tomas"],
                ),
                encounter(
                    "enc_fog",
                    type="atmospheric",
                    repeatable=True,
                    pacing={"expectedFrames": 3, "focus": "dialogue_and_worldbuilding"},
                ),
            ],
        ),
    ]
    clock = {
        "trackerLabel": "Fog",
        "requiredValue": 5,
        "escalationEvents": [
            {"threshold": 2, "description": "The foghorn sounds."},
            {"threshold": 4, "description": "The lamp fails."},
        ],
    }
    progression = {"requiredValue": 2, "trackerLabel": "Entries Explained"}
    file = {"url": "/generated/x.png", "mimeType": "image/png"}
    return {
        "id": "9a4e2c71-5b3d-4f08-8c6e-1d2f3a4b5c6d",
        "createdAt": "2026-11-20T18:45:00Z",
        "title": "Fog Bank",
        "genre": "mystery",
        "artStyle": "ink wash",
        "characters": [
            {
                "id": "ines",
                "name": "Ines",
                "role": "protagonist",
                "description": "The keeper.",
                "imagePrompt": "a keeper with a logbook",
            },
            {
                "id": "tomas",
                "name": "Tomas",
                "role": "ally",
                "description": "The pilot.",
                "imagePrompt": "",
                "personalArc": {"want": "Peace", "need": "Truth", "arcEncounters": [arc]},
            },
        ],
        "plot": {
            "premise": "A logbook records ships that have not sailed.",
            "themes": ["foresight"],
            "globalContext": {
                "setting": "A foggy coast",
                "tone": "unease",
                "overarchingTruths": [],
            },
            "acts": [
                act("act_1", places, globalProgression=progression, opposingForce=clock),
            ],
            "possibleEndings": ["The wreck is prevented"],
        },
        "assets": {
            "backgrounds": {"loc_lamp": file, "loc_harbour": file, "loc_attic": file},
            "characters": {"ines": file},
            "music": {"fog-theme": file},
        },
        "meta": {"estimatedDuration": "10 minutes", "generationMs": 0},
    }


CLIMAX = {
    "id": "evt_climax",
    "title": "The Storm",
    "triggerCondition": "When the Director judges it time",
    "description": "The storm breaks.",
    "forcesClimax": True,
}
"An inevitable event that ends an act whenever the Director fires it."


def second_act(*encounters: Document) -> Document:
    cellar = location("loc_cellar", [], list(encounters))
    return act("act_2", [cellar], inevitableEvents=[CLIMAX])


def broken(breakage: Breakage) -> Document:
    document = package()
    breakage(document)
    return document


def found(document: Any) -> list[tuple[str, str]]:
    return [
        (violation.pointer, violation.message) for violation in violations(STORY_PACKAGE, document)
    ]


# The defective packages ---------------------------------------------------------


def places(document: Document, act_index: int = 0) -> list[Document]:
    places_: list[Document] = document["plot"]["acts"][act_index]["sandboxLocations"]
    return places_


def pool(document: Document, place: int) -> list[Document]:
    encounters: list[Document] = places(document)[place]["encounters"]
    return encounters


def arc_pool(document: Document) -> list[Document]:
    encounters: list[Document] = document["characters"][1]["personalArc"]["arcEncounters"]
    return encounters


def add_act(document: Document, *encounters: Document) -> None:
    document["plot"]["acts"].append(second_act(*encounters))
    document["assets"]["backgrounds"]["loc_cellar"] = document["assets"]["backgrounds"]["loc_lamp"]


def connect_to_another_act(document: Document) -> None:
    add_act(document, FILLER)
    places(document)[0]["connections"].append("loc_cellar")


def add_an_empty_location(document: Document) -> None:
    places(document).append(location("loc_attic", ["loc_lamp"], []))
    places(document)[0]["connections"].append("loc_attic")


def cut_every_connection(document: Document) -> None:
    for place in places(document):
        place["connections"].clear()


def require_a_flag_of_a_later_act(document: Document) -> None:
    add_act(document, encounter("enc_ghost", potentialFlags=["saw_ghost"]))
    pool(document, 1)[0]["prerequisites"].append("saw_ghost")


def require_flags_in_a_cycle(document: Document) -> None:
    pool(document, 0)[0]["prerequisites"] = ["pilot_done"]  # set by enc_pilot, which needs...
    pool(document, 1)[0]["potentialFlags"] = ["pilot_done"]  # ...saw_entry, set by enc_entry


FILLER = encounter("enc_drip", type="atmospheric", repeatable=True)
WHO = 'its characters are "ines", "tomas"'
NEVER = "so this encounter can never happen"

DEFECTIVE = [
    pytest.param(
        lambda d: places(d)[0]["connections"].append("loc_attic"),
        [(f"{LAMP}/connections/1", '"loc_attic" is not a location of act "act_1"')],
        id="connection-to-no-location",
    ),
    pytest.param(
        connect_to_another_act,
        [(f"{LAMP}/connections/1",
          '"loc_cellar" is not a location of act "act_1" '
          '(it is a location of act "act_2": connections stay within their act)')],
        id="connection-to-another-act",
    ),
    pytest.param(
        lambda d: places(d)[0]["requiredCharacters"].append("mira"),
        [(f"{LAMP}/requiredCharacters/1", f'"mira" is not a character of the package ({WHO})')],
        id="location-requires-no-character",
    ),
    pytest.param(
        lambda d: pool(d, 1)[0]["requiredCharacters"].append("mira"),
        [(f"{HARBOUR}/encounters/0/requiredCharacters/1",
          f'"mira" is not a character of the package ({WHO})')],
        id="encounter-requires-no-character",
    ),
    pytest.param(
        lambda d: arc_pool(d)[0].update(requiredCharacters=["ines", "mira"]),
        [(f"{ARC}/0/requiredCharacters/1", f'"mira" is not a character of the package ({WHO})')],
        id="arc-encounter-requires-no-character",
    ),
    pytest.param(
        lambda d: arc_pool(d)[0].update(arcCharacterId="ines"),
        [(f"{ARC}/0/arcCharacterId", '"ines" is not "tomas", whose arc holds this encounter')],
        id="arc-of-another-character",
    ),
    pytest.param(
        lambda d: d["assets"]["characters"].clear(),
        [("/characters/0/id",
          '"ines" has no portrait in /assets/characters, though its imagePrompt asks for one')],
        id="portrait-missing",
    ),
    pytest.param(
        lambda d: places(d)[1].update(location="loc_dock"),
        [(f"{HARBOUR}/location", '"loc_dock" has no background in /assets/backgrounds')],
        id="background-missing",
    ),
    pytest.param(
        lambda d: places(d)[1].update(mood="storm-theme"),
        [(f"{HARBOUR}/mood", '"storm-theme" has no music in /assets/music')],
        id="music-missing",
    ),
    pytest.param(
        lambda d: places(d).append(location("loc_attic", [], None)),
        [(f"{ACT}/sandboxLocations/2",
          "is a placeholder: it has no connections and no encounters "
          "(the node web and the encounters never filled it in)")],
        id="placeholder-left",
    ),
    pytest.param(
        add_an_empty_location,
        [(f"{ACT}/sandboxLocations/2",
          "has no encounters: every location has at least one for the Director")],
        id="location-without-encounters",
    ),
    pytest.param(
        lambda d: places(d).append(location("loc_attic", ["loc_lamp"], [FILLER])),
        [(f"{ACT}/sandboxLocations/2",
          "cannot be reached from the act's start, \"loc_lamp\" (its first location), "
          "by following connections")],
        id="location-unreachable",
    ),
    pytest.param(
        lambda d: places(d)[1]["connections"].clear(),
        [],
        id="one-way-connection-still-reaches",
    ),
    pytest.param(
        cut_every_connection,
        [(HARBOUR,
          "cannot be reached from the act's start, \"loc_lamp\" (its first location), "
          "by following connections")],
        id="reachability-follows-connections-one-way",
    ),
    pytest.param(
        lambda d: pool(d, 1)[0]["prerequisites"].append("saw_ghost"),
        [(f"{HARBOUR}/encounters/0/prerequisites/1",
          f"\"saw_ghost\": no encounter's potentialFlags name it, {NEVER}")],
        id="flag-set-by-nobody",
    ),
    pytest.param(
        require_a_flag_of_a_later_act,
        [(f"{HARBOUR}/encounters/0/prerequisites/1",
          "\"saw_ghost\": only encounters of a later act, act \"act_2\", set it, "
          "so this one can never happen")],
        id="flag-set-only-in-a-later-act",
    ),
    pytest.param(
        require_flags_in_a_cycle,
        [(f"{LAMP}/encounters/0/prerequisites/0",
          '"pilot_done": only encounters that can never happen set it, so neither can this one'),
         (f"{HARBOUR}/encounters/0/prerequisites/0",
          '"saw_entry": only encounters that can never happen set it, so neither can this one')],
        id="flags-in-a-cycle",
    ),
    pytest.param(
        lambda d: add_act(
            d, encounter("enc_late", prerequisites=["saw_entry", "tomas_talked"], repeatable=True)
        ),
        [],
        id="flags-carry-over-to-later-acts-arcs-included",
    ),
    pytest.param(
        lambda d: arc_pool(d).append(encounter("arc_two", arcPhase="resolution", repeatable=True,
                                               prerequisites=["never_set"])),
        [(f"{ARC}/1/prerequisites/0",
          f"\"never_set\": no encounter's potentialFlags name it, {NEVER}")],
        id="arc-flag-set-by-nobody",
    ),
    pytest.param(
        lambda d: d["plot"]["acts"][0]["globalProgression"].update(requiredValue=5),
        [(f"{ACT}/globalProgression/requiredValue",
          "is 5, but the act's encounters give 3 in all (1 of it from character arcs): "
          "the act can never be completed")],
        id="progression-unreachable",
    ),
    pytest.param(
        lambda d: d["plot"]["acts"][0]["globalProgression"].update(requiredValue=3),
        [(f"{ACT}/globalProgression/requiredValue",
          "is 3, and the act's encounters give 3 in all (1 of it from character arcs): "
          "reaching it takes every encounter that gives progression, a single path; "
          "give more (one more encounter giving progression is enough) "
          "so that there is more than one")],
        id="progression-by-a-single-path",
    ),
    pytest.param(
        lambda d: pool(d, 1)[0].pop("requiredCharacters"),
        [(f"{ACT}/globalProgression/requiredValue",
          "is 2, and the act's encounters give 2 in all: "
          "reaching it takes every encounter that gives progression, a single path; "
          "give more (one more encounter giving progression is enough) "
          "so that there is more than one")],
        id="arcs-count-only-where-their-character-is",
    ),
    pytest.param(
        lambda d: pool(d, 1)[1].update(givesProgression=5),
        [],
        id="a-repeatable-encounter-counts-once",
    ),
    pytest.param(
        lambda d: d["plot"]["acts"][0]["opposingForce"]["escalationEvents"][1].update(threshold=2),
        [(f"{ACT}/opposingForce/escalationEvents/1/threshold",
          "is 2, not above an earlier threshold, 2: thresholds strictly increase")],
        id="thresholds-not-increasing",
    ),
    pytest.param(
        lambda d: d["plot"]["acts"][0]["opposingForce"]["escalationEvents"][1].update(threshold=6),
        [(f"{ACT}/opposingForce/escalationEvents/1/threshold",
          "is 6, past the doom clock's maximum, its requiredValue 5")],
        id="threshold-past-the-maximum",
    ),
    pytest.param(
        lambda d: d["plot"]["acts"][0]["opposingForce"]["escalationEvents"][1].update(threshold=5),
        [],
        id="threshold-at-the-maximum",
    ),
    pytest.param(
        lambda d: pool(d, 1)[1].update(repeatable=False),
        [(f"{HARBOUR}/encounters/1", DEAD_END)],
        id="dead-end-encounter",
    ),
    pytest.param(
        lambda d: arc_pool(d).append(encounter("arc_two", arcPhase="resolution")),
        [(f"{ARC}/1", DEAD_END)],
        id="dead-end-arc-encounter",
    ),
    pytest.param(
        lambda d: d["characters"][1].update(imagePrompt=" \t"),
        [],
        id="a-blank-image-prompt-wants-no-portrait",
    ),
]  # fmt: skip


def test_the_package_built_here_is_valid() -> None:
    assert found(package()) == []
    assert decode(STORY_PACKAGE, json.dumps(package())).plot.acts[0].id == "act_1"


@pytest.mark.parametrize(("breakage", "expected"), DEFECTIVE)
def test_each_rule_on_a_package_that_breaks_it(
    breakage: Breakage, expected: list[tuple[str, str]]
) -> None:
    document = broken(breakage)
    assert found(document) == expected
    if expected:
        with pytest.raises(ContractError) as raised:
            decode(STORY_PACKAGE, json.dumps(document))
        assert list(raised.value.violations) == [Violation(*pair) for pair in expected]
    else:
        decode(STORY_PACKAGE, json.dumps(document))


def test_every_problem_is_reported_together_with_the_schemas() -> None:
    def breakage(document: Document) -> None:
        document["title"] = ""  # the schema's
        places(document)[0]["connections"].append("loc_attic")
        pool(document, 1)[1]["repeatable"] = False
        document["plot"]["acts"][0]["opposingForce"]["escalationEvents"][1]["threshold"] = 1

    pointers = [pointer for pointer, _ in found(broken(breakage))]
    assert pointers == [  # in document order, keys by name
        f"{ACT}/opposingForce/escalationEvents/1/threshold",
        f"{LAMP}/connections/1",
        f"{HARBOUR}/encounters/1",
        "/title",
    ]


def test_the_rules_are_the_familys_and_read_any_value() -> None:
    assert RULES[STORY_PACKAGE.name] is STORY_PACKAGE_RULES
    values: list[Any] = [None, [], "package", {"plot": {"acts": [None, {"sandboxLocations": 3}]}}]
    for value in values:
        assert list(STORY_PACKAGE_RULES.find(value)) == []


def test_the_schema_example_is_valid() -> None:
    from plancontracts.runtime.core.contracts import contract_schema

    for example in contract_schema(STORY_PACKAGE)["examples"]:
        assert found(example) == []


def test_validate_story_package_reports_the_rules(tmp_path: Path) -> None:
    path = tmp_path / "package.json"
    path.write_text(json.dumps(broken(lambda d: places(d)[1].update(mood="storm-theme"))))
    done = cli("validate", "--json", STORY_PACKAGE.name, str(path))
    assert done.returncode == 1, done.stderr
    record = json.loads(done.stdout)
    assert [(error["pointer"], error["message"]) for error in record["errors"]] == [
        (f"{HARBOUR}/mood", '"storm-theme" has no music in /assets/music')
    ]


def test_long_chains_of_locations_and_flags_are_walked_in_loops() -> None:
    """Far past the schema's limits, a chain as long as the parser allows costs no recursion."""
    length = 20_000
    document = package()
    chain = [
        location(
            f"loc_{index}",
            [f"loc_{index + 1}"] if index + 1 < length else [],
            [encounter(f"enc_{index}", prerequisites=[f"flag_{index - 1}"] if index else [],
                       potentialFlags=[f"flag_{index}"])],
        )
        for index in range(length)
    ]  # fmt: skip
    chain[1:] = reversed(chain[1:])  # the flags are met in the opposite order to the listing
    document["plot"]["acts"][0] = act("act_1", chain, inevitableEvents=[CLIMAX])
    document["assets"] = {"backgrounds": {}, "characters": {}, "music": {}}
    problems = list(STORY_PACKAGE_RULES.find(document))
    assert len(problems) == 2 * length + 1  # each location's background and music; a portrait
    assert not any("reached" in p.message or "flag" in p.message for p in problems)


# The upstream fixtures ----------------------------------------------------------


def test_the_synthetic_upstream_package_passes(upstream: Path) -> None:
    document = json.loads((upstream / "vn/synthetic_full_package.json").read_text())
    assert found(document) == []


def test_the_synthetic_package_has_more_than_one_path_only_through_its_arc(
    upstream: Path,
) -> None:
    """Its act needs 3; the altered card and Oren give 1 + 2, Oren's arc 1 more."""
    document = json.loads((upstream / "vn/synthetic_full_package.json").read_text())
    del document["characters"][1]["personalArc"]
    assert found(document) == [
        ("/plot/acts/0/globalProgression/requiredValue",
         "is 3, and the act's encounters give 3 in all: reaching it takes every encounter "
         "that gives progression, a single path; give more (one more encounter giving "
         "progression is enough) so that there is more than one"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "reasons"),
    [
        # "LEGACY scene-based shape; createdAt was new Date().toISOString()"
        ("legacy_fixture_tests_vnLanguage_spec.json", ["/createdAt", "/plot/acts/0/scenes"]),
        # "LEGACY scene-based shape (acts[].scenes[])"
        ("legacy_fixture_tests_vnPackage_spec.json", ["/plot/acts/0/scenes"]),
        # "node-based legacy shape (plot.nodes, beats with string pacing)"
        ("legacy_mock_src_lib_mockVNData_MOCK_PACK.json", ["/plot/nodes"]),
    ],
)
def test_each_legacy_upstream_package_fails_for_its_stated_reason(
    upstream: Path, name: str, reasons: list[str]
) -> None:
    document = json.loads((upstream / "vn" / name).read_text())
    pointers = [pointer for pointer, _ in found(document)]
    assert set(reasons) <= set(pointers), pointers
    # Their acts hold no locations the rules could read: the schema alone refuses them.
    assert list(STORY_PACKAGE_RULES.find(document)) == []


# Random mutations ---------------------------------------------------------------


def value_at(document: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        document = document[step]
    return document


IDS = sorted(
    {
        value
        for path in locations(package())
        if isinstance(value := value_at(package(), path), str)
        and re.fullmatch("[a-z0-9_-]+", value)
    }
)
"The package's ids, keys and flags: set where another was, they make references go astray."


@st.composite
def renamed(draw: st.DrawFn, document: Any) -> Any:
    """`document` with one of its strings replaced by one of the valid package's names."""
    paths = [
        path for path in locations(document) if path and isinstance(value_at(document, path), str)
    ]
    if not paths:
        return document
    path = draw(st.sampled_from(paths))
    target = copy.deepcopy(document)
    value_at(target, path[:-1])[path[-1]] = draw(st.sampled_from(IDS))
    return target


@st.composite
def mutated_packages(draw: st.DrawFn) -> Any:
    document: Any = package()
    for _ in range(draw(st.integers(1, 6))):
        document = draw(st.one_of(mutated(document), renamed(document)))
    return document


def resolves(document: Any, pointer: str) -> bool:
    """Whether the JSON Pointer names a value in `document`."""
    node = document
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and re.fullmatch("[0-9]+", token) and int(token) < len(node):
            node = node[int(token)]
        else:
            return False
    return True


@given(mutated_packages())
def test_random_mutations_never_break_the_rules_and_every_pointer_resolves(document: Any) -> None:
    for violation in STORY_PACKAGE_RULES.find(document):
        assert resolves(document, violation.pointer), violation
    for violation in violations(STORY_PACKAGE, document):
        assert resolves(document, violation.pointer), violation
