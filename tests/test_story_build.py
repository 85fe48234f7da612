"""`story build`: the local model building a story package through the eight tools.

The profile tests drive the builder with a writer that draws each call from
its step's decoding profile: every call passes its tool's contract (the
builder raises ProfileBug if not), and any pipeline of such calls ends in a
package that finalize accepts. The model tests use the packaged model, as CI
does.
"""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
from commands import cli, without_a_model
from hypothesis import assume, find, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from local_servers import Reply, conforming, model_server
from schema_strategies import valid_documents
from tiers import examples_at_most
from writers import WrittenWhole

from plancontracts import STORY_PACKAGE, decode
from plancontracts.generated.story_packages import AssetFile
from plancontracts.pytest_plugin import PromptSnapshot
from plancontracts.runtime.core.contracts import contract_schema
from plancontracts.runtime.core.errors import AssetGenerationError
from plancontracts.runtime.core.validation import convert, violations
from plancontracts.runtime.model.chat import Message, render_chat
from plancontracts.runtime.model.local import LocalModel
from plancontracts.runtime.story_packages import (
    TOOLS,
    AssetRequest,
    Build,
    Builder,
    DraftSession,
    DraftStore,
    checked_premise,
)
from plancontracts.runtime.story_packages.profiles import (
    ACTS,
    ENCOUNTERS,
    LOCATIONS,
    Shape,
    pipeline_length,
)

PREMISE = "A keeper finds a logbook of ships not yet sailed."
PIPELINE = [
    "proposeStoryPremise",
    "proposeCharacter",
    "draftActOutline",
    "draftNodeWeb",
    "draftNodeEncounters",
    "draftNodeEncounters",
    "finalizeNode",
    "finalizeNode",
    "finalizePackage",
]


class Drawing(WrittenWhole):
    """Writes each call as a document drawn from its profile: any call the profile allows."""

    def __init__(self, draw: Any) -> None:
        self.draw = draw
        self.prompts: list[str] = []

    async def write_chat(
        self,
        messages: list[Message],
        schema: dict[str, Any],
        *,
        answer: str,
        max_tokens: int,
        seed: int | None,
    ) -> dict[str, Any]:
        self.prompts.append(render_chat(messages, None, answer=answer))  # as a base model reads it
        document: dict[str, Any] = self.draw(schema)
        assert Draft202012Validator(schema).is_valid(document)
        return document


def drawn(data: st.DataObject) -> Drawing:
    return Drawing(lambda schema: data.draw(valid_documents(schema)))


def simplest(schema: dict[str, Any]) -> Any:
    """The simplest document of `schema`, the same every time: for the prompt snapshots."""
    return copy.deepcopy(_simplest(json.dumps(schema, sort_keys=True)))


@cache
def _simplest(schema: str) -> Any:
    # Shrinking to the simplest document takes seconds: once per profile.
    return find(valid_documents(json.loads(schema)), lambda _: True, settings=_FIND)


# SIMPLEST_COST: the simplest documents of the pipeline's profiles take some ten
# seconds to find, which the first test that builds from them pays: every such test
# is marked slow, so that the fast tier pays it in none.


_FIND = settings(database=None, max_examples=examples_at_most(10))


def built(writer: Any, **options: Any) -> Build:
    return trio.run(lambda: Builder(writer).build(PREMISE, **options))


# Profiles and the pipeline ---------------------------------------------------------------


# A pipeline takes about half a second to draw: a hundred of them at most, whatever the profile.
@pytest.mark.slow  # even the fast tier's thirty pipelines take seconds
@settings(max_examples=examples_at_most(100))
@given(
    data=st.data(),
    acts=st.integers(1, 2),
    locations=st.integers(LOCATIONS[0], 4),
    encounters=st.integers(ENCOUNTERS[0], 3),
)
def test_any_pipeline_of_calls_the_profiles_allow_makes_a_package_finalize_accepts(
    data: st.DataObject, acts: int, locations: int, encounters: int
) -> None:
    assume(locations * encounters >= 2)  # an act of one encounter is refused (below)
    # Each call is checked against its tool's contract before it is made (ProfileBug if not).
    build = built(drawn(data), acts=acts, locations=locations, encounters=encounters)
    assert all(call.result.ok for call in build.calls), [c.result.message for c in build.calls]
    assert len(build.calls) == pipeline_length(Shape(acts, locations, encounters))
    package = build.package
    assert package is not None
    document = msgspec.to_builtins(package)
    assert not violations(STORY_PACKAGE, document)  # the schema and the package's rules
    for act in package.plot.acts:
        assert len(act.sandbox_locations) == locations
        for location in act.sandbox_locations:
            assert isinstance(location.encounters, list)
            assert len(location.encounters) == encounters


@pytest.mark.slow  # twenty whole pipelines, even in the fast tier
@settings(max_examples=examples_at_most(20))
@given(data=st.data())
def test_every_call_of_the_pipeline_passes_its_tools_contract(data: st.DataObject) -> None:
    build = built(drawn(data), acts=1, locations=2)
    assert [call.tool for call in build.calls] == PIPELINE
    for call in build.calls:
        convert(TOOLS.named(call.tool).parameters, call.arguments)  # raises if not


@pytest.mark.slow  # builds from the simplest documents (SIMPLEST_COST)
def test_the_code_fills_the_ids_and_the_premise() -> None:
    build = built(Drawing(simplest), acts=1, locations=3)
    arguments = {call.tool: call.arguments for call in build.calls}
    assert arguments["proposeStoryPremise"]["premise"] == PREMISE
    assert arguments["proposeCharacter"]["id"] == "char_1"
    assert arguments["proposeCharacter"]["role"] == "protagonist"
    assert arguments["draftActOutline"]["id"] == "act_1"
    assert arguments["draftActOutline"]["intendedLocations"] == ["loc_1", "loc_2", "loc_3"]
    webs = arguments["draftNodeWeb"]["locations"]
    assert [web["id"] for web in webs] == ["loc_1", "loc_2", "loc_3"]
    assert [web["connections"][:1] for web in webs[:2]] == [["loc_2"], ["loc_3"]]
    assert arguments["finalizePackage"] == {"title": arguments["proposeStoryPremise"]["title"]}


@pytest.mark.parametrize(
    ("text", "message"),
    [("  ", "the premise is empty"), ("x" * 601, "at most 600 allowed")],
)
def test_a_premise_is_not_empty_nor_longer_than_its_contracts(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        checked_premise(text)
    assert checked_premise(f" {PREMISE}\n") == PREMISE


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"acts": 0}, "a package has 1 to 8 acts (story-package's plot.acts), not 0"),
        ({"acts": 9}, "1 to 8 acts (story-package's plot.acts), not 9"),
        ({"locations": 25}, "an act has 1 to 24 locations (story-package's sandboxLocations)"),
        ({"encounters": 0}, "a location has 1 to 24 encounters (story-node-encounters' "),
        ({"locations": 1, "encounters": 1}, "an act needs 2 encounters or more in all"),
        ({"max_calls": 0}, "at least 1 call, not 0"),
    ],
)
def test_a_build_refuses_sizes_out_of_range(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        built(Drawing(simplest), **options)


def test_a_builds_sizes_are_the_schemas_bounds() -> None:
    package = contract_schema("story-package")["$defs"]
    pool = contract_schema("story-node-encounters")["properties"]["encounters"]
    for sizes, schema in (
        (ACTS, package["Plot"]["properties"]["acts"]),
        (LOCATIONS, package["Act"]["properties"]["sandboxLocations"]),
        (ENCOUNTERS, pool),
    ):
        assert (sizes[0], sizes[-1]) == (schema["minItems"], schema["maxItems"])
    assert Shape() == Shape(acts=1, locations=2, encounters=2)  # the build's defaults


# Refusals, repairs and running out of calls ----------------------------------------------


@pytest.mark.slow  # builds from the simplest documents (SIMPLEST_COST)
def test_a_refused_call_is_written_again_with_its_refusal_in_the_prompt() -> None:
    writer = Drawing(simplest)
    asked: list[AssetRequest] = []

    def assets(request: AssetRequest) -> AssetFile:
        asked.append(request)
        if len(asked) == 1:
            raise AssetGenerationError("the generator is busy")
        return AssetFile(url=f"/x/{request.key}.png", mime_type="image/png")

    build = trio.run(lambda: Builder(writer).build(PREMISE, session=DraftSession(assets=assets)))
    refused = [index for index, call in enumerate(build.calls) if not call.result.ok]
    assert len(refused) == 1
    again = build.calls[refused[0] + 1]
    assert again.tool == build.calls[refused[0]].tool
    assert again.result.ok
    assert [call.tool for call in build.calls if call.result.ok] == PIPELINE
    message = f"The last call, {again.tool}, was refused: the "
    assert (
        sum(message in prompt and "generator is busy" in prompt for prompt in writer.prompts) == 1
    )
    assert build.package is not None


@pytest.mark.slow  # builds from the simplest documents (SIMPLEST_COST)
def test_a_refused_package_goes_back_to_the_model_until_the_calls_run_out(tmp_path: Path) -> None:
    writer = Drawing(simplest)
    # The package cannot be saved in a folder that is not there: finalizePackage is refused.
    session = DraftSession(packages=tmp_path / "gone")
    build = trio.run(
        lambda: Builder(writer).build(PREMISE, session=session, max_calls=len(PIPELINE) + 3)
    )
    tools = [call.tool for call in build.calls]
    assert tools[: len(PIPELINE)] == PIPELINE
    repairs = tools[len(PIPELINE) :: 2]
    assert tools[len(PIPELINE) - 1 :: 2] == ["finalizePackage"] * 2
    assert len(tools) == len(PIPELINE) + 3
    assert set(repairs) <= {"updateElement", "draftNodeEncounters"}
    assert build.package is None
    refusal = "The last call, finalizePackage, was refused: cannot save the package"
    assert refusal in writer.prompts[-1]
    assert "a repair of the package finalizePackage refused" in writer.prompts[-1]
    assert session.draft.status == "drafting"  # every successful call kept, nothing finalized


@pytest.mark.slow  # builds from the simplest documents (SIMPLEST_COST)
def test_calls_that_run_out_before_the_end_leave_no_package() -> None:
    build = built(Drawing(simplest), max_calls=3)
    assert [call.tool for call in build.calls] == PIPELINE[:3]
    assert build.package is None


@pytest.mark.slow  # builds from the simplest documents (SIMPLEST_COST)
def test_a_build_starts_a_draft() -> None:
    started = built(Drawing(simplest), max_calls=1).session
    with pytest.raises(ValueError, match="has a premise already"):
        trio.run(lambda: Builder(Drawing(simplest)).build(PREMISE, session=started))


# The prompt ---------------------------------------------------------------------------------


@cache
def prompts_of_a_build() -> dict[str, str]:
    """The first prompt of each kind a build renders: a step's, a refused call's, a repair's."""
    writer = Drawing(simplest)
    asked: list[AssetRequest] = []

    def assets(request: AssetRequest) -> AssetFile:
        asked.append(request)
        if len(asked) == 2:  # the second background: its finalizeNode call is refused once
            raise AssetGenerationError("the generator is busy")
        return AssetFile(url=f"/x/{request.key}.png", mime_type="image/png")

    missing = Path("/nonexistent/packages")  # finalizePackage is refused: it cannot save
    session = DraftSession(assets=assets, packages=missing)
    build = trio.run(
        lambda: Builder(writer).build(PREMISE, session=session, max_calls=len(PIPELINE) + 2)
    )
    written = [call for call in build.calls if call.tool != "finalizePackage"]
    assert len(written) == len(writer.prompts)
    found: dict[str, str] = {}
    for call, prompt in zip(written, writer.prompts, strict=True):
        kind = "refused" if "was refused" in prompt else call.tool
        kind = "repair" if "a repair of" in prompt else kind
        found.setdefault(kind, prompt)
    return found


KINDS = [*dict.fromkeys(PIPELINE[:-1]), "refused", "repair"]


@pytest.mark.slow  # builds from the simplest documents (SIMPLEST_COST)
def test_a_build_renders_a_prompt_per_tool_and_for_refusals_and_repairs() -> None:
    assert list(prompts_of_a_build()) == KINDS


@pytest.mark.slow  # builds from the simplest documents (SIMPLEST_COST)
@pytest.mark.parametrize("kind", KINDS)
def test_the_build_prompt(kind: str, prompt_snapshot: PromptSnapshot) -> None:
    assert prompts_of_a_build()[kind] == prompt_snapshot


# With the packaged model --------------------------------------------------------------------


@pytest.fixture
def builder(packaged_model: LocalModel) -> Builder:
    return Builder(packaged_model, say=lambda line: None)


def test_the_model_builds_a_package_that_finalize_and_validate_accept(
    builder: Builder, tmp_path: Path
) -> None:
    seen: list[Any] = []
    session = DraftSession(packages=tmp_path)
    build = trio.run(
        lambda: builder.build(PREMISE, acts=1, seed=1, on_call=seen.append, session=session)
    )
    assert build.calls == seen
    assert build.package is not None, [call.result.message for call in build.calls]
    assert [call.tool for call in build.calls if call.result.ok] == PIPELINE
    for call in build.calls:  # each passed its contract before it was made (or ProfileBug)
        convert(TOOLS.named(call.tool).parameters, call.arguments)
    decode(STORY_PACKAGE, msgspec.json.encode(build.package))  # the schema and the rules
    saved = tmp_path / f"{build.package.id}.json"
    done = cli("validate", "story-package", str(saved))
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.usefixtures("shared_model")
def test_the_build_command_prints_each_call_and_says_why_there_is_no_package(
    tmp_path: Path,
) -> None:
    database = tmp_path / "stories.db"
    done = cli("story", "build", PREMISE, "--max-calls", "1", "--seed", "1", "--db", str(database))
    assert done.returncode == 1, done.stderr
    [line] = done.stdout.splitlines()
    call = json.loads(line)
    assert (call["call"], call["tool"], call["ok"]) == (1, "proposeStoryPremise", True)
    assert call["arguments"]["premise"] == PREMISE
    assert call["result"] == {"ok": True, "title": call["arguments"]["title"]}
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("plancontracts: no package: the build ran out of calls after 1 call; ")
    session = last.rsplit(" ", 1)[-1]
    with DraftStore(database) as store:  # the draft is kept, to go on with by `story run`
        assert store.load_draft(session).premise is not None
    assert "Traceback" not in done.stderr


@pytest.mark.slow  # a stub server finds the simplest document of each of eleven profiles
def test_the_build_command_makes_the_shape_asked_for() -> None:
    shape = ["--acts", "1", "--locations-per-act", "3", "--encounters-per-location", "3"]
    with model_server(conforming) as server:
        done = cli("story", "build", PREMISE, *shape, "--server", server.url)
    assert done.returncode == 0, done.stderr
    *calls, last = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(calls) == pipeline_length(Shape(1, 3, 3))
    package = decode(STORY_PACKAGE, json.dumps(last["package"]))  # the schema and the rules
    (act,) = package.plot.acts
    assert [len(each.encounters or ()) for each in act.sandbox_locations] == [3, 3, 3]


def test_a_build_that_no_call_of_succeeds_says_nothing_is_kept(tmp_path: Path) -> None:
    database = tmp_path / "stories.db"
    with model_server(lambda number, body: Reply(content="not JSON")) as server:
        done = cli("story", "build", PREMISE, "--max-calls", "1", "--db", str(database),
                   "--server", server.url)  # fmt: skip
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("plancontracts: no package: ")
    assert last.endswith("; nothing is kept: no call was accepted")
    assert not database.exists()  # made by this run, which saved nothing in it


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["  "], "the premise is empty"),
        ([PREMISE, "--acts", "9"], "a package has 1 to 8 acts (story-package's plot.acts), not 9"),
        ([PREMISE, "--locations-per-act", "25"], "1 to 24 locations (story-package's "),
        ([PREMISE, "--encounters-per-location", "0"], "1 to 24 encounters (story-node-"),
        (
            [PREMISE, "--locations-per-act", "1", "--encounters-per-location", "1"],
            "an act needs 2 encounters or more in all",
        ),
        ([PREMISE, "--acts", "two"], "argument --acts: invalid int value: 'two'"),
        ([PREMISE, "--max-calls", "0"], "argument --max-calls: must be 1 to 100: 0"),
        ([PREMISE, "--out", "/nonexistent/folder"], "not an existing folder"),
    ],
)
def test_the_build_command_refuses_a_bad_command_line(arguments: list[str], message: str) -> None:
    done = cli("story", "build", *arguments)
    assert (done.returncode, done.stdout) == (2, "")
    assert message in done.stderr
    assert "model:" not in done.stderr  # refused before any model is looked for


def test_without_a_model_the_build_command_says_so(tmp_path: Path) -> None:
    done = without_a_model("story", "build", PREMISE, "--no-download", hub_cache=tmp_path)
    assert done.returncode == 1
    assert done.stdout == ""
    assert "no model could be loaded, and a story build needs one" in done.stderr
    assert "Traceback" not in done.stderr
