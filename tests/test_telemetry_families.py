"""Session and story tool calls are `execute_tool` spans; a goal simulation's cycles are spans.

Read through OpenTelemetry's SDK in memory (`traces.traced`): each call of a
session's tools, refused or not, one span with the GenAI conventions'
attributes and the session's id, the tool metrics counting it; each goal
cycle one span, the model's answers inside it its children; and, with
`--otel`, the drives' writes and calls under the command's own span. No
argument or result text without content capture.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import trio
from commands import cli
from local_servers import Reply, model_server
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode
from test_story_drive import PREMISE, PREMISE_CALL, WEB
from test_write import ScriptedWriter
from traces import Traced, all_text, attributes

from plancontracts.generated.goal_plans import Goal
from plancontracts.runtime.core.errors import ToolValidationError
from plancontracts.runtime.core.telemetry import CONTENT_VARIABLE
from plancontracts.runtime.goal_plans import GoalPlanner, PlanningSystem
from plancontracts.runtime.goal_plans.session import OVERRIDES_TO_REPLAN
from plancontracts.runtime.goal_plans.simulation import Person
from plancontracts.runtime.session_plans import PlanSession
from plancontracts.runtime.story_packages import DraftSession, DraftStore

OBJECTIVE = "Triage the open bug reports"
SECRET = "Label the reports from Quinn Ashworth"
"A step's title: what a person wrote, never on a span unless content is captured."
SET_UP = {"objective": OBJECTIVE, "initial_steps": [{"title": SECRET}]}


@pytest.fixture(autouse=True)
def no_capture(monkeypatch: pytest.MonkeyPatch) -> None:
    """Content capture off, as by default, whatever the environment running the tests says."""
    monkeypatch.delenv(CONTENT_VARIABLE, raising=False)


def durations(traced: Traced, **wanted: Any) -> int:
    """How many tool calls `plancontracts.tool.duration` measured with `wanted` attributes."""
    return sum(
        point.count
        for point in traced.metric_points("plancontracts.tool.duration")
        if all(point.attributes.get(key) == value for key, value in wanted.items())
    )


# Session plans ------------------------------------------------------------------------------


def test_a_session_call_is_one_execute_tool_span_ok_or_refused(traced: Traced) -> None:
    session = PlanSession()
    assert session.call("planning_setup_plan", SET_UP).ok
    refused = session.call("planning_mark_step", {"step_id": "S009", "status": "done"})
    assert not refused.ok

    setup, mark = traced.spans
    assert setup.name == "execute_tool planning_setup_plan"
    assert attributes(setup) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "planning_setup_plan",
        "gen_ai.tool.type": "function",
        "gen_ai.conversation.id": session.session_id,
        "plancontracts.tool.state": "ok",
    }
    assert setup.status.status_code is StatusCode.UNSET
    assert setup.parent is None

    assert mark.name == "execute_tool planning_mark_step"
    assert attributes(mark)["plancontracts.tool.state"] == "refused"
    assert attributes(mark)["plancontracts.violations.count"] == 1
    assert attributes(mark)["error.type"] == "plancontracts.refused"
    assert attributes(mark)["gen_ai.conversation.id"] == session.session_id
    assert mark.status.status_code is StatusCode.ERROR
    # The refusal's message names what the call gave: content, kept off.
    assert "S009" not in all_text(traced.spans)
    assert SECRET not in all_text(traced.spans)

    assert durations(traced, **{"gen_ai.tool.name": "planning_setup_plan"}) == 1
    assert durations(traced, **{"plancontracts.tool.state": "refused"}) == 1
    assert traced.counted("plancontracts.tool.failures") == 1
    assert (
        traced.counted(
            "plancontracts.tool.failures",
            **{"gen_ai.tool.name": "planning_mark_step", "plancontracts.tool.state": "refused"},
        )
        == 1
    )


def test_a_call_of_no_tool_is_a_span_that_does_not_say_the_name_written(traced: Traced) -> None:
    session = PlanSession()
    assert not session.call("planning_make_coffee", {"cups": 2}).ok
    refused = ToolValidationError("", None, "not a call: the line is no JSON")
    assert not session.refuse("", refused).ok  # a line that is no call, as `session calls` reads

    made_up, no_call = traced.spans
    for span in (made_up, no_call):
        assert span.name == "execute_tool"
        assert "gen_ai.tool.name" not in attributes(span)
        assert attributes(span)["plancontracts.tool.state"] == "refused"
    assert "coffee" not in all_text(traced.spans)
    assert traced.counted("plancontracts.tool.failures") == 2
    assert durations(traced) == 2


def test_a_subscriber_s_call_is_a_span_of_its_own_not_a_child(traced: Traced) -> None:
    session = PlanSession()

    def reads(event: Any) -> None:
        if event.tool == "planning_setup_plan":
            session.call("planning_read_plan", {})

    session.subscribe(reads)
    assert session.call("planning_setup_plan", SET_UP).ok
    assert [span.name for span in traced.spans] == [
        "execute_tool planning_setup_plan",
        "execute_tool planning_read_plan",
    ]
    assert all(span.parent is None for span in traced.spans)


def test_content_capture_puts_a_call_s_arguments_and_result_on_its_span(
    traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CONTENT_VARIABLE, "true")
    session = PlanSession()
    assert session.call("planning_setup_plan", SET_UP).ok
    assert not session.call("planning_mark_step", {"step_id": "S009", "status": "done"}).ok

    setup, mark = traced.spans
    assert json.loads(attributes(setup)["gen_ai.tool.call.arguments"]) == SET_UP
    assert SECRET in attributes(setup)["gen_ai.tool.call.result"]
    assert json.loads(attributes(mark)["gen_ai.tool.call.arguments"])["step_id"] == "S009"
    # A refused call's result is what its caller read back: the refusal, also the status.
    assert "S009" in attributes(mark)["gen_ai.tool.call.result"]
    assert "S009" in (mark.status.description or "")


# Story drafts -------------------------------------------------------------------------------


def test_a_story_draft_call_is_one_span_with_the_draft_as_its_conversation(
    traced: Traced, tmp_path: Any
) -> None:
    with DraftStore(tmp_path / "drafts.db") as store:
        session = DraftSession(store=store)
        arguments = PREMISE_CALL["arguments"]
        assert session.call("proposeStoryPremise", arguments).ok
        assert not session.call("draftActOutline", {"actId": "act_1"}).ok

    premise, outline = traced.spans  # one each: the store's transaction is inside the call
    assert premise.name == "execute_tool proposeStoryPremise"
    assert outline.name == "execute_tool draftActOutline"
    for span in (premise, outline):
        assert attributes(span)["gen_ai.conversation.id"] == session.draft.package_id
        assert attributes(span)["gen_ai.tool.type"] == "function"
    assert attributes(premise)["plancontracts.tool.state"] == "ok"
    assert attributes(outline)["plancontracts.tool.state"] == "refused"
    assert attributes(outline)["error.type"] == "plancontracts.refused"
    assert PREMISE not in all_text(traced.spans)
    assert traced.counted("plancontracts.tool.failures", **{"gen_ai.tool.name": "draftActOutline"})
    assert durations(traced, **{"plancontracts.tool.state": "ok"}) == 1


def test_a_story_draft_call_s_arguments_only_with_capture(
    traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = DraftSession()
    assert session.call("proposeStoryPremise", PREMISE_CALL["arguments"]).ok
    assert PREMISE not in all_text(traced.spans)
    monkeypatch.setenv(CONTENT_VARIABLE, "true")
    traced.clear()
    assert not session.call("proposeStoryPremise", PREMISE_CALL["arguments"]).ok
    (again,) = traced.spans
    assert PREMISE in attributes(again)["gen_ai.tool.call.arguments"]


# Goal cycles --------------------------------------------------------------------------------


def plan_answer(hint: str) -> str:
    step = {
        "description": f"Go and {hint}",
        "action_hint": hint,
        "expected_outcome": "closer to the tower",
        "estimated_cycles": 2,
    }
    return json.dumps({"steps": [step, {**step, "description": f"Then {hint} again"}]})


def test_a_goal_cycle_is_a_span_and_the_planner_s_writes_inside_are_its_children(
    traced: Traced,
) -> None:
    writer = ScriptedWriter([plan_answer("walk north"), plan_answer("climb the stairs")])
    person = Person(PlanningSystem(), GoalPlanner(load=lambda: writer))
    goal = Goal(description="Reach the old lighthouse tower", horizon="short")

    async def day() -> None:
        await person.add_goal(goal)
        for _ in range(OVERRIDES_TO_REPLAN):
            await person.cycle("sing a song", 0.0)  # overridden until the plan is replanned
        await person.cycle("climb the stairs", 1.0)

    trio.run(day)
    cycles = traced.named("goal cycle")
    assert [attributes(each)["plancontracts.goal.cycle"] for each in cycles] == list(
        range(1, OVERRIDES_TO_REPLAN + 2)
    )
    assert person.cycles == OVERRIDES_TO_REPLAN + 1
    replanning, completing = cycles[-2:]
    assert attributes(replanning) == {
        "plancontracts.goal.cycle": OVERRIDES_TO_REPLAN,
        "plancontracts.goal.outcome": "step_overridden",
        "plancontracts.goal.planned": 0,
        "plancontracts.goal.replanned": 1,
        "plancontracts.goal.abandoned": 0,
        "plancontracts.goal.completed": 0,
    }
    assert attributes(completing)["plancontracts.goal.outcome"] == "step_completed"

    # The first plan was written for the goal, outside any cycle; the replan within its cycle.
    writes = [span for span in traced.spans if span.name.startswith("write ")]
    assert len(writes) == 2
    assert writes[0].parent is None
    (inside,) = traced.children(replanning)
    assert inside is writes[1]
    assert [child.name for child in traced.children(inside)] == ["chat ScriptedWriter"]
    for cycle in cycles:
        if cycle is not replanning:
            assert traced.children(cycle) == []
    text = all_text(traced.spans)
    for content in ("lighthouse", "sing a song", "climb the stairs"):
        assert content not in text


def test_a_goal_cycle_s_action_only_with_capture(
    traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CONTENT_VARIABLE, "true")
    person = Person(PlanningSystem(), GoalPlanner())
    trio.run(person.cycle, "sing a song", 0.0)
    (cycle,) = traced.named("goal cycle")
    assert attributes(cycle)["plancontracts.goal.action"] == "sing a song"
    assert attributes(cycle)["plancontracts.goal.outcome"] == "no_plan"


# The drives, with --otel --------------------------------------------------------------------


def answering(*answers: dict[str, Any]) -> Callable[[int, dict[str, Any]], Reply]:
    def answer(number: int, body: dict[str, Any]) -> Reply:
        return Reply(content=json.dumps(answers[min(number, len(answers) - 1)]))

    return answer


OFFLINE = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
"Where `--otel`'s own exporters send nothing: the fixture's providers are the program's."


def assert_each_write_then_call_under(traced: Traced, root: ReadableSpan, calls: int) -> None:
    names = [child.name.split(" ")[0] for child in traced.children(root)]
    assert names == ["write", "execute_tool"] * calls


def test_session_drive_puts_each_write_and_its_call_under_the_command(traced: Traced) -> None:
    setup = {"tool": "planning_setup_plan", "arguments": SET_UP}
    done_step = {"tool": "planning_mark_step", "arguments": {"step_id": "S001", "status": "done"}}
    with model_server(answering(setup, done_step)) as server:
        done = cli(
            "session",
            "drive",
            OBJECTIVE,
            "--max-calls",
            "4",
            "--server",
            server.url,
            "--otel",
            env=OFFLINE,
        )
    assert done.returncode == 0, done.stderr
    (root,) = traced.named("plancontracts session drive")
    assert_each_write_then_call_under(traced, root, 2)
    setup_span, mark = traced.named("execute_tool planning_setup_plan") + traced.named(
        "execute_tool planning_mark_step"
    )
    assert attributes(setup_span)["plancontracts.tool.state"] == "ok"
    assert attributes(mark)["plancontracts.tool.state"] == "ok"
    assert (
        attributes(setup_span)["gen_ai.conversation.id"]
        == attributes(mark)["gen_ai.conversation.id"]
    )
    assert SECRET not in all_text(traced.spans)


def test_story_drive_puts_each_write_and_its_call_under_the_command(traced: Traced) -> None:
    with model_server(answering(PREMISE_CALL, WEB)) as server:
        done = cli(
            "story",
            "drive",
            PREMISE,
            "--max-calls",
            "2",
            "--server",
            server.url,
            "--otel",
            env=OFFLINE,
        )
    assert done.returncode == 0, done.stderr
    (root,) = traced.named("plancontracts story drive")
    assert_each_write_then_call_under(traced, root, 2)
    (premise,) = traced.named("execute_tool proposeStoryPremise")
    (web,) = traced.named("execute_tool draftNodeWeb")
    assert attributes(premise)["plancontracts.tool.state"] == "ok"
    assert attributes(web)["plancontracts.tool.state"] == "refused"  # no act outlined yet
    assert PREMISE not in all_text(traced.spans)


def test_story_build_puts_each_write_and_its_call_under_the_command(traced: Traced) -> None:
    premise = {key: PREMISE_CALL["arguments"][key] for key in ("title", "genre", "artStyle")}
    premise |= {"themes": ["guilt"], "possibleEndings": ["Prevented", "Happens"]}
    premise["globalContext"] = {"setting": "A foggy coast", "tone": "hushed"}
    character = {"name": "Ines", "description": "The keeper.", "imagePrompt": "a keeper"}
    with model_server(answering(premise, character)) as server:
        done = cli(
            "story",
            "build",
            PREMISE,
            "--max-calls",
            "2",
            "--server",
            server.url,
            "--otel",
            env=OFFLINE,
        )
    assert "Traceback" not in done.stderr
    (root,) = traced.named("plancontracts story build")
    assert_each_write_then_call_under(traced, root, 2)
    assert [span.name for span in traced.spans if span.name.startswith("execute_tool")] == [
        "execute_tool proposeStoryPremise",
        "execute_tool proposeCharacter",
    ]
    assert all(
        attributes(span)["plancontracts.tool.state"] == "ok"
        for span in traced.spans
        if span.name.startswith("execute_tool")
    )
    assert PREMISE not in all_text(traced.spans)
    assert "foggy coast" not in all_text(traced.spans)


def test_goals_simulate_puts_each_cycle_under_the_command_and_its_replan_in_it(
    traced: Traced,
) -> None:
    goal = {"event": "goal", "description": "Reach the old lighthouse tower", "horizon": "short"}
    cycle = {"event": "cycle", "action": "sing a song", "satisfaction_delta": 0.0}
    script = "".join(json.dumps(line) + "\n" for line in [goal, *[cycle] * OVERRIDES_TO_REPLAN])

    def answer(number: int, body: dict[str, Any]) -> Reply:
        return Reply(content=plan_answer("walk north"))

    with model_server(answer) as server:
        done = cli(
            "goals", "simulate", "-", "--server", server.url, "--otel", stdin=script, env=OFFLINE
        )
    assert done.returncode == 0, done.stderr
    (root,) = traced.named("plancontracts goals simulate")
    cycles = traced.named("goal cycle")
    assert len(cycles) == OVERRIDES_TO_REPLAN
    assert all(traced.root(each) is root for each in cycles)
    assert [child.name for child in traced.children(root)] == ["write goals"] + [
        "goal cycle"
    ] * OVERRIDES_TO_REPLAN
    assert [child.name for child in traced.children(cycles[-1])] == ["write goals"]
    assert "lighthouse" not in all_text(traced.spans)
