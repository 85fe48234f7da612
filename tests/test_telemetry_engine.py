"""A plan's execution is one `execute plan` span with an `execute_tool` span per tool.

Read through OpenTelemetry's SDK in memory (`traces.traced`): the spans'
names, parents and attributes, the retries as events, the metrics, and no
tool input or output on any span unless content capture is on.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
import pytest
import trio
import trio.testing
from traces import Traced, all_text, attributes

from plancontracts.generated.tool_plans import (
    ExecutionResult,
    Plan,
    RetryPolicy,
    ToolEvent,
    ToolInvocation,
    ToolRequest,
)
from plancontracts.runtime.core.telemetry import CONTENT_VARIABLE, span
from plancontracts.runtime.engine.executor import EmitEvent, ToolFunction, execute_plan
from plancontracts.runtime.engine.limits import Limits
from plancontracts.runtime.engine.skills import SkillSet, discover_skills
from plancontracts.runtime.engine.streamed import (
    PlanHeader,
    StreamItem,
    execute_streamed,
)

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

FAULTS = Path(__file__).parent / "fault_skills"
SECRET_INPUT = "a password-shaped input"
SECRET_OUTPUT = "a summary only the player should read"
SECRET_ERROR = "an error that quotes the input"
_T = TypeVar("_T")


def done(ok: bool = True, summary: str = "done") -> ToolEvent:
    document = {"version": "0", "type": "done", "ok": ok, "summary": summary}
    event: ToolEvent = msgspec.convert(document, ToolEvent)
    return event


async def works(request: ToolRequest, emit: EmitEvent) -> None:
    await trio.sleep(0.5)
    emit(done(summary=request.input.get("say", "done")))


async def fails(request: ToolRequest, emit: EmitEvent) -> None:
    await trio.sleep(0.5)
    raise RuntimeError(request.input.get("why", "it broke"))


async def hangs(request: ToolRequest, emit: EmitEvent) -> None:
    await trio.sleep_forever()


FUNCTIONS: dict[str, ToolFunction] = {
    "test/works": works,
    "test/fails": fails,
    "test/hangs": hangs,
}


def call(tool_id: str, path: str, *dependencies: str, **fields: Any) -> ToolInvocation:
    fields.setdefault("retry_policy", RetryPolicy(max_retries=0))
    return ToolInvocation(
        tool_id=tool_id, tool_path=path, dependencies=list(dependencies), **fields
    )


def plan_of(*tools: ToolInvocation, **fields: Any) -> Plan:
    return Plan(request_id=str(uuid.uuid4()), tools=list(tools), **fields)


def mocked(run: Callable[[], Awaitable[_T]]) -> _T:
    """`run` in trio, on a clock that jumps over every sleep."""
    return trio.run(run, clock=trio.testing.MockClock(autojump_threshold=0))


def execute(plan: Plan, **options: Any) -> ExecutionResult:
    options.setdefault("skills", SkillSet())
    return mocked(partial(execute_plan, plan, functions=FUNCTIONS, **options))


def the_plan_span(traced: Traced) -> ReadableSpan:
    (plan,) = traced.named("execute plan")
    return plan


def by_tool(spans: list[ReadableSpan]) -> dict[str, ReadableSpan]:
    """`spans` by their `gen_ai.tool.call.id`, each named after its tool."""
    found = {str(attributes(each)["gen_ai.tool.call.id"]): each for each in spans}
    assert len(found) == len(spans)
    for each in spans:
        assert each.name == f"execute_tool {attributes(each)['gen_ai.tool.name']}"
    return found


def test_a_plan_is_one_span_with_a_child_per_tool(traced: Traced) -> None:
    plan = plan_of(
        call("a", "test/works"), call("b", "test/works", "a"), call("c", "test/works", "b")
    )

    async def inside_a_span() -> ExecutionResult:
        with span("caller"):
            return await execute_plan(plan, skills=SkillSet(), functions=FUNCTIONS)

    result = mocked(inside_a_span)
    assert result.success
    planned = the_plan_span(traced)
    (caller,) = traced.named("caller")
    assert planned.parent is not None
    assert caller.context is not None
    assert planned.parent.span_id == caller.context.span_id
    assert planned.kind.name == "INTERNAL"
    assert attributes(planned) == {
        "plancontracts.plan.id": plan.request_id,
        "plancontracts.plan.parallel": False,
        "plancontracts.plan.attempt": 1,
        "plancontracts.plan.tools": 3,
        "plancontracts.plan.success": True,
        "plancontracts.plan.failed": 0,
        "plancontracts.plan.skipped": 0,
    }
    tools = traced.children(planned)
    assert [attributes(each)["gen_ai.tool.call.id"] for each in tools] == ["a", "b", "c"]
    assert len(traced.spans) == 5  # the caller, the plan, three tools
    for each in tools:
        assert each.kind.name == "INTERNAL"
        assert each.status.status_code.name == "UNSET"
        assert each.events == ()
        assert attributes(each) == {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "test/works",
            "gen_ai.tool.call.id": attributes(each)["gen_ai.tool.call.id"],
            "gen_ai.tool.type": "function",
            "plancontracts.skill": "test",
            "plancontracts.tool.state": "success",
            "plancontracts.tool.retries": 0,
        }
    (duration,) = traced.metric_points("plancontracts.plan.duration")
    assert duration.count == 1
    assert dict(duration.attributes) == {"plancontracts.plan.success": True}
    (tool_duration,) = traced.metric_points("plancontracts.tool.duration")
    assert tool_duration.count == 3
    assert traced.counted("plancontracts.tool.failures") == 0


def test_a_failing_tool_shows_its_retries_and_what_it_took_down(traced: Traced) -> None:
    retrying = RetryPolicy(max_retries=2, backoff_ms=100)
    plan = plan_of(
        call("broken", "test/fails", retry_policy=retrying),
        call("after", "test/works", "broken"),
        call("aside", "test/works"),
    )
    result = execute(plan)
    assert not result.success
    planned = the_plan_span(traced)
    assert attributes(planned)["plancontracts.plan.success"] is False
    assert attributes(planned)["plancontracts.plan.failed"] == 1
    assert attributes(planned)["plancontracts.plan.skipped"] == 1
    # A plan whose tools failed ran: its own span is no error, its tool's is.
    assert planned.status.status_code.name == "UNSET"
    tools = by_tool(traced.children(planned))
    assert set(tools) == {"broken", "after", "aside"}

    broken = tools["broken"]
    assert attributes(broken)["plancontracts.tool.state"] == "failed"
    assert attributes(broken)["plancontracts.tool.retries"] == 2
    assert attributes(broken)["error.type"] == "tool_failure"
    assert broken.status.status_code.name == "ERROR"
    assert [event.name for event in broken.events] == ["retry", "retry"]
    assert [dict(event.attributes or {}) for event in broken.events] == [
        {"plancontracts.attempt": 2, "error.type": "tool_failure"},
        {"plancontracts.attempt": 3, "error.type": "tool_failure"},
    ]

    after = tools["after"]
    assert attributes(after)["plancontracts.tool.state"] == "skipped"
    assert attributes(after)["plancontracts.tool.retries"] == 0
    assert after.status.status_code.name == "UNSET"
    assert attributes(tools["aside"])["plancontracts.tool.state"] == "success"

    failures = {"gen_ai.tool.name": "test/fails", "plancontracts.tool.state": "failed"}
    assert traced.counted("plancontracts.tool.failures", **failures) == 1
    assert traced.counted("plancontracts.tool.failures", **{"error.type": "tool_failure"}) == 1
    assert traced.counted("plancontracts.tool.failures") == 1
    durations = {
        tuple(sorted(point.attributes.items())): point
        for point in traced.metric_points("plancontracts.tool.duration")
    }
    # Three attempts of half a second and two waits (0.1 s, 0.2 s) between them.
    failed_duration = durations[tuple(sorted(failures.items()))]
    assert failed_duration.count == 1
    assert failed_duration.sum == pytest.approx(1.8)
    (plan_duration,) = traced.metric_points("plancontracts.plan.duration")
    assert dict(plan_duration.attributes) == {"plancontracts.plan.success": False}


def test_a_rejected_plan_is_a_failed_span_without_tools(traced: Traced) -> None:
    plan = plan_of(call("a", "test/works"), call("a", "test/works"))
    result = execute(plan)
    assert result.error
    planned = the_plan_span(traced)
    assert traced.spans == [planned]
    assert attributes(planned)["error.type"] == "plancontracts.rejected"
    assert attributes(planned)["plancontracts.plan.success"] is False
    assert attributes(planned)["plancontracts.plan.tools"] == 2
    assert planned.status.status_code.name == "ERROR"
    # The rejection's message is content: not without capture.
    assert planned.status.description == "plancontracts.rejected"
    (duration,) = traced.metric_points("plancontracts.plan.duration")
    assert duration.count == 1


def test_tools_running_together_are_children_of_the_plan(traced: Traced) -> None:
    running = 0
    together = trio.Event()

    async def meets(request: ToolRequest, emit: EmitEvent) -> None:
        # Returns only once all three run at once: proof they ran together.
        nonlocal running
        running += 1
        if running == 3:
            together.set()
        await together.wait()

    plan = plan_of(
        *(call(name, "test/meets", async_=True) for name in "abc"),
        call("d", "test/meets", "a", "b", "c", async_=True),
        parallel=True,
    )
    result = mocked(
        partial(
            execute_plan,
            plan,
            skills=SkillSet(),
            functions={"test/meets": meets},
            limits=Limits(max_concurrency=4),
        )
    )
    assert result.success
    planned = the_plan_span(traced)
    assert attributes(planned)["plancontracts.plan.parallel"] is True
    tools = by_tool(traced.children(planned))
    assert set(tools) == set("abcd")
    assert len(traced.spans) == 5


def test_no_tool_input_or_output_on_a_span_without_capture(
    traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CONTENT_VARIABLE, raising=False)
    plan = plan_of(
        call("said", "test/works", input={"say": SECRET_OUTPUT, "secret": SECRET_INPUT}),
        call("failed", "test/fails", input={"why": SECRET_ERROR}, required=False),
    )
    execute(plan)
    assert len(traced.spans) == 3
    seen = all_text(traced.spans)
    for secret in (SECRET_INPUT, SECRET_OUTPUT, SECRET_ERROR):
        assert secret not in seen
    for each in traced.spans:
        assert "gen_ai.tool.call.arguments" not in attributes(each)
        assert "gen_ai.tool.call.result" not in attributes(each)
    (failed,) = [each for each in traced.spans if each.name == "execute_tool test/fails"]
    assert failed.status.description == "tool_failure"


def test_tool_input_and_output_are_on_the_span_with_capture(
    traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CONTENT_VARIABLE, "true")
    said_input = {"say": SECRET_OUTPUT, "secret": SECRET_INPUT}
    plan = plan_of(
        call("said", "test/works", input=said_input),
        call("failed", "test/fails", input={"why": SECRET_ERROR}, required=False),
    )
    execute(plan)
    tools = by_tool(traced.children(the_plan_span(traced)))
    said = attributes(tools["said"])
    assert json.loads(said["gen_ai.tool.call.arguments"]) == said_input
    assert json.loads(said["gen_ai.tool.call.result"]) == {"summary": SECRET_OUTPUT}
    failed = tools["failed"]
    assert json.loads(attributes(failed)["gen_ai.tool.call.arguments"]) == {"why": SECRET_ERROR}
    assert "gen_ai.tool.call.result" not in attributes(failed)
    assert failed.status.description is not None
    assert SECRET_ERROR in failed.status.description
    # Even so, error.type stays a category, never a message.
    assert attributes(failed)["error.type"] == "tool_failure"


def test_a_tool_stopped_at_the_plans_deadline_timed_out(traced: Traced) -> None:
    plan = plan_of(call("slow", "test/hangs"), call("next", "test/works", "slow"))
    result = execute(plan, limits=Limits(plan_timeout=5))
    assert [tool.state for tool in result.tool_results] == ["timeout", "skipped"]
    planned = the_plan_span(traced)
    tools = by_tool(traced.children(planned))
    slow = tools["slow"]
    assert attributes(slow)["plancontracts.tool.state"] == "timeout"
    assert attributes(slow)["error.type"] == "timeout"
    assert slow.status.status_code.name == "ERROR"
    assert attributes(tools["next"])["plancontracts.tool.state"] == "skipped"
    assert attributes(planned)["plancontracts.plan.failed"] == 1
    assert attributes(planned)["plancontracts.plan.skipped"] == 1
    timeouts = {"gen_ai.tool.name": "test/hangs", "plancontracts.tool.state": "timeout"}
    assert traced.counted("plancontracts.tool.failures", **timeouts) == 1


def test_an_outside_cancellation_fails_the_spans_by_its_type(traced: Traced) -> None:
    plan = plan_of(call("slow", "test/hangs"))

    async def cancelled() -> None:
        with trio.move_on_after(1):
            await execute_plan(plan, skills=SkillSet(), functions=FUNCTIONS)

    mocked(cancelled)
    planned = the_plan_span(traced)
    (slow,) = traced.children(planned)
    for each in (planned, slow):
        assert attributes(each)["error.type"] == "trio.Cancelled"
    assert "plancontracts.tool.state" not in attributes(slow)
    assert traced.counted("plancontracts.tool.failures") == 0


@pytest.mark.process
def test_a_skill_script_names_its_skill_and_exit_code(traced: Traced, tmp_path: Path) -> None:
    plan = plan_of(
        call("fine", "skills/faults/ok.py"),
        call("exits", "skills/faults/exit_status.py", required=False),
    )
    result = trio.run(
        partial(execute_plan, plan, skills=discover_skills([FAULTS]), data_root=tmp_path)
    )
    assert [tool.state for tool in result.tool_results] == ["success", "failed"]
    tools = by_tool(traced.children(the_plan_span(traced)))
    fine, exits = attributes(tools["fine"]), attributes(tools["exits"])
    assert fine["plancontracts.skill"] == exits["plancontracts.skill"] == "faults"
    assert fine["gen_ai.tool.name"] == "skills/faults/ok.py"
    assert (fine["plancontracts.tool.state"], fine["plancontracts.tool.exit_code"]) == (
        "success",
        0,
    )
    assert (exits["plancontracts.tool.state"], exits["plancontracts.tool.exit_code"]) == (
        "failed",
        3,
    )
    assert exits["error.type"] == "process_error"
    failures = {"gen_ai.tool.name": "skills/faults/exit_status.py", "error.type": "process_error"}
    assert traced.counted("plancontracts.tool.failures", **failures) == 1


async def streamed_items(plan: Plan) -> AsyncIterator[StreamItem]:
    for entry in plan.tools:
        await trio.sleep(0)
        yield entry
    yield plan


def test_a_streamed_execution_has_the_same_spans(traced: Traced) -> None:
    plan = plan_of(
        call("a", "test/works", async_=True),
        call("b", "test/fails", async_=True),
        call("c", "test/works", "a", "b"),
        parallel=True,
    )
    execute(plan)
    planned = the_plan_span(traced)
    expected = {
        tool_id: attributes(each) for tool_id, each in by_tool(traced.children(planned)).items()
    }
    expected_plan = attributes(planned)
    traced.clear()

    header = PlanHeader(plan.request_id, plan.parallel, tuple(plan.disabled_skills))
    result = mocked(
        partial(
            execute_streamed,
            header,
            streamed_items(plan),
            skills=SkillSet(),
            functions=FUNCTIONS,
        )
    )
    assert not result.success
    planned = the_plan_span(traced)
    assert attributes(planned) == {**expected_plan, "plancontracts.plan.streamed": True}
    tools = by_tool(traced.children(planned))
    assert {tool_id: attributes(each) for tool_id, each in tools.items()} == expected
    assert expected["c"]["plancontracts.tool.state"] == "skipped"
    assert expected["b"]["plancontracts.tool.state"] == "failed"
    assert len(traced.spans) == 4
    assert traced.counted("plancontracts.tool.failures") == 1
    assert len(traced.metric_points("plancontracts.plan.duration")) == 1
