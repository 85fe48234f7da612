"""`story tools` and `story drive`: the tools for an outside agent, and the model as co-author.

The drive's commands ask a stub model server whose answers each test
scripts (`tests/local_servers.py`): what the model reads back after each
call, refusals included, is the subject, not the packaged model's writing.
The profile tests draw calls from the drive's decoding schema.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest
from commands import cli
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from local_servers import ModelServer, Reply, model_server
from schema_strategies import valid_documents
from tiers import examples_at_most

from plancontracts import STORY_PACKAGE, decode
from plancontracts.generated import STORY_PREMISE
from plancontracts.generated.story_packages import StoryDraft
from plancontracts.pytest_plugin import PromptSnapshot
from plancontracts.runtime.core.contracts import contract_schema
from plancontracts.runtime.core.sessions import ToolCall
from plancontracts.runtime.model.chat import render_chat
from plancontracts.runtime.story_packages import TOOLS, DraftSession, DraftStore
from plancontracts.runtime.story_packages.agent import DRIVE_CALLS, MAX_DRIVE_CALLS
from plancontracts.runtime.story_packages.profiles import NUMBER_STEPS, drive_profile, drive_tools
from plancontracts.runtime.story_packages.prompts import RECENT_CALLS, drive_messages
from plancontracts.runtime.story_packages.tools import tool_definitions

PREMISE = "A keeper finds a logbook of ships not yet sailed."


# A story, call by call ---------------------------------------------------------------------


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool": tool, "arguments": arguments}


def place(id: str, *connections: str) -> dict[str, Any]:
    return {
        "id": id,
        "title": id.title(),
        "location": id,
        "requiredCharacters": [],
        "ambientDetail": "Salt on the glass.",
        "mood": f"{id}-theme",
        "connections": list(connections),
    }


def encounters(node: str) -> dict[str, Any]:
    made = [
        {
            "id": f"{node}_{number}",
            "title": f"{node.title()} {number}",
            "description": "Something happens.",
            "type": "discovery",
            "pacing": {"expectedFrames": 6, "focus": focus},
            "givesProgression": 1,
        }
        # A location's pool varies its pacing (the package's rules).
        for number, focus in ((1, "dialogue_and_worldbuilding"), (2, "tension_and_action"))
    ]
    return call("draftNodeEncounters", actId="act_1", nodeId=node, encounters=made)


def finalized(node: str) -> dict[str, Any]:
    music = [{"text": "low drones", "weight": 1}]
    return call(
        "finalizeNode", actId="act_1", nodeId=node, backgroundPrompt=node, musicPrompts=music
    )


PREMISE_CALL = call(
    "proposeStoryPremise",
    title="Salt and Signal",
    genre="mystery",
    artStyle="ink wash",
    globalContext={"setting": "A foggy coast", "tone": "hushed", "overarchingTruths": []},
    premise=PREMISE,
    themes=["guilt"],
    globalMaterials=[],
    possibleEndings=["The wreck is prevented", "The wreck happens"],
)
OUTLINE = call(
    "draftActOutline",
    id="act_1",
    title="Fog Bank",
    objective="Learn who writes the logbook",
    scenarioContext="The lamp writes it.",
    narrativeGuidelines="Hint, never show.",
    intendedLocations=["lamp", "harbour"],
    globalProgression={"requiredValue": 1, "trackerLabel": "Entries"},
)
# Each location leads back to the act's start: no player is stranded.
WEB = call(
    "draftNodeWeb", actId="act_1", locations=[place("lamp", "harbour"), place("harbour", "lamp")]
)
STORY = [
    PREMISE_CALL,
    call(
        "proposeCharacter",
        id="ines",
        name="Ines",
        role="protagonist",
        description="The keeper.",
        imagePrompt="a keeper",
    ),
    OUTLINE,
    WEB,
    encounters("lamp"),
    encounters("harbour"),
    finalized("lamp"),
    finalized("harbour"),
    call("finalizePackage", title="Salt and Signal"),
]
"A one-act story, every call accepted, in the pipeline's order: what a co-author writes."


def scripted(answers: Sequence[dict[str, Any] | str]) -> Callable[[int, dict[str, Any]], Reply]:
    """A server answering its n-th request with `answers[n]` (a call, or text as it is)."""

    def answer(number: int, body: dict[str, Any]) -> Reply:
        given = answers[min(number, len(answers) - 1)]
        return Reply(content=given if isinstance(given, str) else json.dumps(given))

    return answer


@contextmanager
def server_of(answers: Sequence[dict[str, Any] | str]) -> Iterator[ModelServer]:
    with model_server(scripted(answers)) as server:
        yield server


def drive(server: ModelServer, *arguments: str) -> tuple[int, list[dict[str, Any]], str]:
    """`story drive ARGUMENTS` against `server`: its status, its NDJSON lines and its stderr."""
    done = cli("story", "drive", *arguments, "--server", server.url)
    assert "Traceback" not in done.stderr
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines()], done.stderr


def last_user_message(request: dict[str, Any]) -> str:
    content: str = request["messages"][-1]["content"]
    return content


# story tools ---------------------------------------------------------------------------------


def test_story_tools_prints_the_eight_tools_for_function_calling(
    prompt_snapshot: PromptSnapshot,
) -> None:
    done = cli("story", "tools")
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout) == tool_definitions()
    assert done.stdout == prompt_snapshot.with_tokenizer(None)


def test_each_definition_is_its_tools_contract_whole() -> None:
    definitions = tool_definitions()
    assert [each["function"]["name"] for each in definitions] == [tool.name for tool in TOOLS]
    for definition, tool in zip(definitions, TOOLS, strict=True):
        function = definition["function"]
        assert definition["type"] == "function"
        assert function["description"] == tool.description
        assert function["parameters"] == contract_schema(tool.parameters)
        # Self-contained: every reference points into the schema's own definitions.
        references = re.findall(r'"\$ref": "([^"]*)"', json.dumps(function["parameters"]))
        assert references
        assert all(each.startswith("#/$defs/") for each in references)
    definitions[0]["function"]["parameters"]["title"] = "changed"
    assert tool_definitions()[0]["function"]["parameters"]["title"] != "changed"  # a fresh copy


@pytest.mark.parametrize("tool", [tool.name for tool in TOOLS])
def test_every_parameters_schema_accepts_its_contracts_examples(tool: str) -> None:
    (definition,) = [each for each in tool_definitions() if each["function"]["name"] == tool]
    parameters = definition["function"]["parameters"]
    Draft202012Validator.check_schema(parameters)
    examples = contract_schema(TOOLS.named(tool).parameters)["examples"]
    assert examples
    for example in examples:
        Draft202012Validator(parameters).validate(example)
    assert not Draft202012Validator(parameters).is_valid({"unknown": 1})


# The profile and the prompt ------------------------------------------------------------------


def session_after(*calls: dict[str, Any]) -> DraftSession:
    session = DraftSession()
    for each in calls:
        assert session.call(each["tool"], each["arguments"]).ok
    return session


def names(draft: StoryDraft) -> list[str]:
    return [tool.name for tool in drive_tools(draft)]


def test_a_drive_offers_the_tools_the_draft_does_not_refuse() -> None:
    premise = TOOLS.taking(STORY_PREMISE).name
    assert names(DraftSession().draft) == [premise]  # every other tool needs the premise
    drafting = session_after(PREMISE_CALL).draft
    assert names(drafting) == [tool.name for tool in TOOLS if tool.name != premise]
    done = session_after(*STORY).draft
    assert names(done) == []
    with pytest.raises(ValueError, match="is finalized: no call is left to write"):
        drive_profile(done, PREMISE)


def test_the_drive_profile_holds_only_what_the_local_models_grammar_can() -> None:
    # With a free-form object's propertyNames, llama-cpp-python's grammar admitted no answer
    # (the whole call came back empty); a free number ran on in digits until the tokens ran out.
    profile = drive_profile(session_after(PREMISE_CALL).draft, PREMISE)
    text = json.dumps(profile)
    assert "propertyNames" not in text
    assert '"type": "number"' not in text
    (finalize,) = [
        b for b in profile["anyOf"] if b["properties"]["tool"] == {"const": "finalizeNode"}
    ]
    music = finalize["properties"]["arguments"]["properties"]["musicPrompts"]
    weights = music["items"]["properties"]["weight"]["enum"]
    weight = contract_schema("story-finalize-node")["$defs"]["MusicPrompt"]["properties"]["weight"]
    assert (min(weights), max(weights)) == (weight["minimum"], weight["maximum"])
    assert len(weights) == NUMBER_STEPS + 1


@pytest.mark.parametrize("state", ["new", "drafting"])
@settings(max_examples=examples_at_most(30))
@given(data=st.data())
def test_every_call_the_drive_profile_allows_is_judged_by_the_pipeline_never_raises(
    state: str, data: st.DataObject
) -> None:
    session = DraftSession() if state == "new" else session_after(PREMISE_CALL, OUTLINE)
    profile = drive_profile(session.draft, PREMISE)
    written = data.draw(valid_documents(profile), label="call")
    assert written["tool"] in names(session.draft)
    if written["tool"] == "proposeStoryPremise":
        assert written["arguments"]["premise"] == PREMISE  # fixed, never the model's
    done = session.call(written["tool"], written["arguments"])
    assert done.ok or "\n" not in done.message  # accepted, or refused in one line


def made(session: DraftSession, written: dict[str, Any]) -> ToolCall[StoryDraft]:
    return ToolCall(
        written["tool"], written["arguments"], session.call(written["tool"], written["arguments"])
    )


def test_the_drive_prompt(prompt_snapshot: PromptSnapshot) -> None:
    session = DraftSession()
    calls = [
        made(session, PREMISE_CALL),
        made(session, WEB),  # refused: the act is not outlined yet
        made(session, OUTLINE),
    ]
    assert [each.result.ok for each in calls] == [True, False, True]
    messages = drive_messages(PREMISE, session.draft, calls)
    assert render_chat(messages, None, answer="Tool call JSON") == prompt_snapshot


def test_the_prompt_keeps_the_last_calls_and_the_story_so_far() -> None:
    session = session_after(PREMISE_CALL)
    calls = [
        made(session, call("updateElement", type="premise", changes={"title": f"Salt {n}"}))
        for n in range(RECENT_CALLS + 3)
    ]
    messages = drive_messages(PREMISE, session.draft, calls)
    assert len(messages) == 2 + 2 * RECENT_CALLS
    assert '"Salt 3"' in messages[2]["content"]  # the first three are left out
    assert f'- "Salt {RECENT_CALLS + 2}", mystery' in messages[-1]["content"]
    # Going on with a stored draft: no calls, the story so far read from the draft.
    again = drive_messages(PREMISE, session.draft, [])
    assert len(again) == 2
    assert "The story so far:" in again[-1]["content"]


# story drive ----------------------------------------------------------------------------------


def test_a_drive_co_writes_a_package_and_prints_each_call_then_it(tmp_path: Path) -> None:
    with server_of(STORY) as server:
        status, lines, stderr = drive(server, PREMISE, "--out", str(tmp_path))
    assert status == 0, stderr
    *calls, last = lines
    assert [each["call"] for each in calls] == list(range(1, len(STORY) + 1))
    assert [each["tool"] for each in calls] == [each["tool"] for each in STORY]
    assert all(each["ok"] for each in calls)
    assert len({each["session"] for each in calls}) == 1
    assert list(last) == ["package"]
    package = decode(STORY_PACKAGE, json.dumps(last["package"]))  # the schema and the rules
    assert package.id == calls[0]["session"]
    assert len(server.requests) == len(STORY)
    saved = tmp_path / f"{package.id}.json"  # --out
    assert json.loads(saved.read_bytes()) == last["package"]


def test_a_refusal_is_read_back_and_the_model_corrects_the_call() -> None:
    # The node web before its act is outlined: refused, read back, then the outline comes.
    answers = [PREMISE_CALL, WEB, OUTLINE, WEB]
    with server_of(answers) as server:
        status, lines, stderr = drive(server, PREMISE, "--max-calls", "4")
    assert status == 0, stderr
    assert [(each["tool"], each["ok"]) for each in lines] == [
        ("proposeStoryPremise", True),
        ("draftNodeWeb", False),
        ("draftActOutline", True),
        ("draftNodeWeb", True),
    ]
    refusal = lines[1]["error"]["message"]
    assert 'no act "act_1" is outlined' in refusal
    read = last_user_message(server.requests[2])
    assert read.startswith(f"Result (refused): {refusal}")
    assert '- "Salt and Signal", mystery' in read  # and the story so far
    assert "Result (ok): " in last_user_message(server.requests[3])
    assert "the drive made its 4 calls; the package is not finalized" in stderr


def test_a_refused_packages_violations_are_read_back_and_repaired() -> None:
    # An act needing more progress than its encounters give: finalizePackage refuses the package.
    needy = {**OUTLINE["arguments"], "globalProgression": {"requiredValue": 5, "trackerLabel": "E"}}
    repair = encounters("lamp")  # drafted again, each now giving 3
    for each in repair["arguments"]["encounters"]:
        each["givesProgression"] = 3
    answers = [*STORY[:2], {**OUTLINE, "arguments": needy}, *STORY[3:], repair, STORY[-1]]
    with server_of(answers) as server:
        status, lines, stderr = drive(server, PREMISE)
    assert status == 0, stderr
    *calls, last = lines
    assert [(each["tool"], each["ok"]) for each in calls[-3:]] == [
        ("finalizePackage", False),
        ("draftNodeEncounters", True),
        ("finalizePackage", True),
    ]
    violations = calls[-3]["error"]["violations"]
    assert violations[0]["pointer"] == "/plot/acts/0/globalProgression/requiredValue"
    read = last_user_message(server.requests[len(STORY)])
    assert read.startswith("Result (refused): the package is not valid: ")
    for violation in violations:  # each with its pointer, as the package's report gives it
        assert f"\n- {violation['pointer']}: {violation['message']}\n" in read
    lamp = last["package"]["plot"]["acts"][0]["sandboxLocations"][0]
    assert [each["givesProgression"] for each in lamp["encounters"]] == [3, 3]
    decode(STORY_PACKAGE, json.dumps(last["package"]))  # the schema and the rules


def test_an_answer_outside_the_tools_contract_is_asked_again_never_applied() -> None:
    bad = call("proposeCharacter", id="ines", name="Ines", role="villain-ish", description="x")
    answers = [PREMISE_CALL, bad, STORY[1]]
    with server_of(answers) as server:
        status, lines, stderr = drive(server, PREMISE, "--max-calls", "2")
    assert status == 0, stderr
    # The profile holds the model's calls to their tool's contract: a server that does not
    # hold it is asked again with the profile's violations, and the call is never made.
    assert [(each["tool"], each["ok"]) for each in lines] == [
        ("proposeStoryPremise", True),
        ("proposeCharacter", True),
    ]
    again = last_user_message(server.requests[2])
    assert again.startswith("That answer was refused")
    assert "/arguments/" in again


def test_calls_running_out_end_the_drive_as_session_drive_does(tmp_path: Path) -> None:
    database = tmp_path / "stories.db"
    with server_of(STORY) as server:
        status, lines, stderr = drive(server, PREMISE, "--max-calls", "2", "--db", str(database))
    assert status == 0
    assert [each["call"] for each in lines] == [1, 2]  # no package line
    session = lines[0]["session"]
    assert stderr.splitlines()[-1] == (
        "plancontracts: the drive made its 2 calls; the package is not finalized; "
        f"the draft is kept in {database} as session {session}"
    )


def test_a_drive_goes_on_with_the_draft_stored_in_db(tmp_path: Path) -> None:
    database = tmp_path / "stories.db"
    with server_of(STORY[:4]) as server:
        status, first, _ = drive(server, PREMISE, "--max-calls", "4", "--db", str(database))
    assert status == 0
    session = first[0]["session"]
    with server_of(STORY[4:]) as server:
        status, lines, stderr = drive(server, "--db", str(database), "--session", session)
        opening = server.requests[0]["messages"]
    assert status == 0, stderr
    *calls, last = lines
    assert [each["tool"] for each in calls] == [each["tool"] for each in STORY[4:]]
    assert {each["session"] for each in calls} == {session}
    assert decode(STORY_PACKAGE, json.dumps(last["package"])).id == session
    # The earlier calls are summarised from the stored draft, not replayed.
    assert [message["role"] for message in opening] == ["system", "user"]
    assert f"Premise: {PREMISE}" in opening[1]["content"]
    assert '- act_1: "Fog Bank", needs progress 1' in opening[1]["content"]
    assert '- lamp "Lamp", to harbour: 0 encounters' in opening[1]["content"]
    with DraftStore(database) as store:
        assert store.load_draft(session).status == "finalized"
        assert store.load_package(session).id == session
    # A finalized draft takes no more calls: said before any model is looked for.
    done = cli("story", "drive", "--db", str(database), "--session", session)
    assert (done.returncode, done.stdout) == (2, "")
    assert "is finalized already: it takes no more calls" in done.stderr
    assert "model:" not in done.stderr


@pytest.mark.parametrize(
    ("answers", "said"),
    [
        (["not JSON at all", PREMISE_CALL], "malformed JSON"),
        (
            [call("planStory", premise=PREMISE), PREMISE_CALL],
            '/tool: "planStory" is not a tool offered now: the tools offered are '
            "proposeStoryPremise",
        ),
        (
            [{"tool": "rm -rf /", "arguments": {}}],
            '/tool: "rm -rf /" is not a tool offered now: the tools offered are '
            "proposeStoryPremise",
        ),
        (['{"arguments": {}}', PREMISE_CALL], "/tool: the answer names no tool: the tools"),
        (
            [{**PREMISE_CALL, "arguments": {**PREMISE_CALL["arguments"], "title": "x" * 100_000}}],
            "/arguments/title",
        ),
        (["[1, 2, 3]", PREMISE_CALL], "not a JSON object"),
    ],
)
def test_a_hostile_answer_is_refused_and_asked_again(
    answers: list[Any], said: str, tmp_path: Path
) -> None:
    database = tmp_path / "stories.db"
    with server_of(answers) as server:
        status, lines, stderr = drive(server, PREMISE, "--max-calls", "1", "--db", str(database))
    refused = [line for line in stderr.splitlines() if "answer 1 of 2 refused" in line]
    assert len(refused) == 1
    assert said in refused[0]
    assert len(refused[0]) < 1000  # the answer is not echoed whole
    if len(answers) > 1:  # the re-asked answer is a good one
        assert (status, [each["tool"] for each in lines]) == (0, ["proposeStoryPremise"])
        assert "That answer was refused" in last_user_message(server.requests[1])
        return
    # Twice refused: the drive stops in one line, exit status 1.
    assert (status, lines) == (1, [])
    last = stderr.splitlines()[-1]
    assert last.startswith("plancontracts: the drive stopped after 0 calls: ")
    assert last.endswith("; nothing is kept: no call was accepted")
    assert not database.exists()  # made by this run, which saved nothing in it


def test_a_failed_run_leaves_no_database_it_made_and_touches_no_other(tmp_path: Path) -> None:
    made = tmp_path / "made.db"
    done = cli("story", "drive", PREMISE, "--db", str(made), "--server", "http://127.0.0.1:9")
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert not made.exists()  # no server: nothing was saved, nothing is left
    other = tmp_path / "other.db"
    with closing(sqlite3.connect(other)) as connection:
        connection.execute("CREATE TABLE notes (text TEXT)")
        connection.commit()
    done = cli("story", "drive", PREMISE, "--db", str(other), "--server", "http://127.0.0.1:9")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"plancontracts: error: {other}: not a story database (no drafts or packages table)\n"
    )
    with closing(sqlite3.connect(other)) as connection:
        tables = connection.execute("SELECT name FROM sqlite_master").fetchall()
    assert tables == [("notes",)]  # no story table added to it


def test_the_model_stopping_keeps_the_calls_made(tmp_path: Path) -> None:
    database = tmp_path / "stories.db"
    with server_of([PREMISE_CALL, "no", "no"]) as server:
        status, lines, stderr = drive(server, PREMISE, "--db", str(database))
    assert (status, [each["ok"] for each in lines]) == (1, [True])
    assert "the drive stopped after 1 call: " in stderr
    with DraftStore(database) as store:
        assert store.load_draft(lines[0]["session"]).premise is not None


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ([], "a PREMISE is needed to start a story (or --db and --session to go on)"),
        (["  "], "the premise is empty"),
        ([PREMISE, "--session", "x"], "--session needs --db"),
        ([PREMISE, "--max-calls", "0"], f"argument --max-calls: must be 1 to {MAX_DRIVE_CALLS}: 0"),
        (
            [PREMISE, "--max-calls", str(MAX_DRIVE_CALLS + 1)],
            f"must be 1 to {MAX_DRIVE_CALLS}: {MAX_DRIVE_CALLS + 1}",
        ),
        (["--db", "{db}", "--session", "nope"], '--session "nope": not a UUID'),
        (
            ["--db", "{db}", "--session", "00000000-0000-4000-8000-000000000000"],
            'no draft "00000000-0000-4000-8000-000000000000" in ',
        ),
        (["--db", "{tmp}", PREMISE], "cannot be used as a story database"),
        ([PREMISE, "--out", "{tmp}/missing"], "missing: not an existing folder"),
    ],
)
def test_the_drive_command_refuses_a_bad_command_line(
    arguments: list[str], message: str, tmp_path: Path
) -> None:
    given = [part.format(db=tmp_path / "stories.db", tmp=tmp_path) for part in arguments]
    done = cli("story", "drive", *given)
    assert (done.returncode, done.stdout) == (2, "")
    assert message in done.stderr
    assert done.stderr.count("\n") == 1 or done.stderr.startswith("usage:")
    assert "Traceback" not in done.stderr
    assert "model:" not in done.stderr  # refused before any model is looked for


def test_going_on_with_another_premise_is_refused(tmp_path: Path) -> None:
    database = tmp_path / "stories.db"
    with server_of([PREMISE_CALL]) as server:
        _, lines, _ = drive(server, PREMISE, "--max-calls", "1", "--db", str(database))
    session = lines[0]["session"]
    again = cli("story", "drive", "Another story.", "--db", str(database), "--session", session)
    assert again.returncode == 2
    assert "the session's draft has a premise of its own, not this one" in again.stderr
    with server_of([OUTLINE]) as server:  # the same premise, trimmed: the drive goes on
        status, lines, _ = drive(
            server, f" {PREMISE}", "--db", str(database), "--session", session, "--max-calls", "1"
        )
    assert (status, [each["tool"] for each in lines]) == (0, ["draftActOutline"])
    with sqlite3.connect(database) as connection:
        (count,) = connection.execute("SELECT count(*) FROM drafts").fetchone()
    assert count == 1


def test_the_default_and_most_calls() -> None:
    assert 1 <= DRIVE_CALLS <= MAX_DRIVE_CALLS
    assert len(STORY) <= DRIVE_CALLS  # the smallest story fits the default
