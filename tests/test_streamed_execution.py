"""Streamed execution: tools started as their plan entries arrive, cancelled when the plan fails."""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, ParamSpec

import msgspec
import pytest
import trio

from plancontracts.generated.tool_plans import (
    ExecutionResult,
    Plan,
    ToolError,
    ToolEvent,
    ToolInvocation,
    ToolRequest,
)
from plancontracts.runtime.engine.executor import EmitEvent, execute_plan
from plancontracts.runtime.engine.skills import discover_skills
from plancontracts.runtime.engine.streamed import (
    PlanHeader,
    Refusal,
    StreamItem,
    execute_streamed,
)

FAULTS = Path(__file__).parent / "fault_skills"
_P = ParamSpec("_P")


def _trio(test: Callable[_P, Awaitable[None]]) -> Callable[_P, None]:
    """`test` run in a trio run of its own, its fixtures given as pytest finds them."""

    @functools.wraps(test)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> None:
        trio.run(functools.partial(test, *args, **kwargs))

    return run


async def _echo(request: ToolRequest, emit: EmitEvent) -> None:
    # Output and state that depend on the input and the dependencies' outputs.
    patch = {"seen": {request.tool_id: sorted(request.dependencies)}}
    emit(msgspec.convert({"version": "0", "type": "state_patch", "patch": patch}, ToolEvent))
    if request.input.get("fail"):
        raise RuntimeError("asked to fail")
    summary = f"{request.tool_id} after {sorted(request.dependencies)}"
    emit(
        msgspec.convert({"version": "0", "type": "done", "ok": True, "summary": summary}, ToolEvent)
    )


FUNCTIONS = {"demo/echo": _echo}


def _plan(tools: Sequence[dict[str, Any]], *, parallel: bool = False) -> Plan:
    document = {
        "requestId": "00000000-0000-4000-8000-000000000001",
        "tools": list(tools),
        "parallel": parallel,
    }
    return msgspec.convert(document, Plan)


def _tool(tool_id: str, *deps: str, **fields: Any) -> dict[str, Any]:
    return {"toolId": tool_id, "toolPath": "demo/echo", "dependencies": list(deps), **fields}


async def _items(plan: Plan, end: StreamItem | None = None) -> AsyncIterator[StreamItem]:
    for call in plan.tools:
        await trio.sleep(0)
        yield call
    yield plan if end is None else end


def _header(plan: Plan) -> PlanHeader:
    return PlanHeader(plan.request_id, plan.parallel, tuple(plan.disabled_skills))


def _timeless(result: ExecutionResult) -> dict[str, Any]:
    document: dict[str, Any] = msgspec.to_builtins(result)
    document.pop("executionTimeMs")
    for tool in document["toolResults"]:
        tool.pop("executionTimeMs")
    return document


PLANS = [
    _plan([_tool("a"), _tool("b", "a"), _tool("c", "a", "b")]),
    _plan([_tool("a", "c"), _tool("b"), _tool("c")]),  # a dependency on a later tool
    _plan(
        [_tool("a", **{"async": True}), _tool("b", **{"async": True}), _tool("c", "a", "b")],
        parallel=True,
    ),
    _plan([_tool("a", input={"fail": True}), _tool("b", "a"), _tool("c")]),
    _plan([_tool("a", input={"fail": True}, required=False), _tool("b", "a")]),
    _plan([_tool("a"), _tool("a")]),  # a duplicate toolId: rejected as execute_plan does
    _plan([_tool("a", "b"), _tool("b", "a")]),  # a cycle: rejected at the end
    _plan([_tool("a", "nowhere")]),  # a dependency never written
    _plan([]),
]


@pytest.mark.parametrize("plan", PLANS, ids=range(len(PLANS)))
@_trio
async def test_streamed_result_is_execute_plans(plan: Plan) -> None:
    expected = await execute_plan(plan, functions=FUNCTIONS)
    streamed = await execute_streamed(_header(plan), _items(plan), functions=FUNCTIONS)
    assert _timeless(streamed) == _timeless(expected)


@_trio
async def test_first_tool_starts_before_the_last_entry_arrives() -> None:
    plan = _plan([_tool("a"), _tool("b"), _tool("c", "a")])
    first_started = trio.Event()
    order: list[str] = []

    async def items() -> AsyncIterator[StreamItem]:
        yield plan.tools[0]
        await first_started.wait()  # the stream goes on only once tool a started
        order.append("a started, then the rest arrived")
        for call in plan.tools[1:]:
            yield call
        yield plan

    def started(tool_id: str) -> None:
        if tool_id == "a":
            first_started.set()

    with trio.fail_after(30):  # only a hang: tool a never started before the plan ended
        result = await execute_streamed(
            _header(plan), items(), functions=FUNCTIONS, on_start=started
        )
    assert result.success
    assert order == ["a started, then the rest arrived"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for every purpose here: it runs nothing.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(") ")[1][0] != "Z"


@pytest.mark.process
@_trio
async def test_a_refused_plan_cancels_the_started_process(tmp_path: Path) -> None:
    plan = _plan([{"toolId": "h", "toolPath": "skills/faults/hang.py"}, _tool("b")])
    pids = tmp_path / "faults" / "pids"

    async def items() -> AsyncIterator[StreamItem]:
        yield plan.tools[0]
        while not pids.exists() or not pids.read_text().strip():
            await trio.sleep(0.05)  # until the script is running
        yield plan.tools[1]
        yield Refusal(ToolError(category="invalid_plan", code="refused", message="no"))

    with trio.fail_after(60):
        result = await execute_streamed(
            _header(plan),
            items(),
            skills=discover_skills([FAULTS]),
            functions=FUNCTIONS,
            data_root=tmp_path,
        )
    assert not result.success
    assert isinstance(result.error, ToolError)
    assert result.error.code == "refused"
    assert result.tool_results == []
    pid = int(pids.read_text().split()[0])
    assert not _alive(pid)


@_trio
async def test_an_input_its_schema_refuses_ends_the_plan_at_its_arrival() -> None:
    bad = {"toolId": "d", "toolPath": "skills/dice-roller/roll.py", "input": {"formula": 7}}
    plan = _plan([_tool("a"), bad, _tool("c")])
    read: list[str] = []

    async def items() -> AsyncIterator[StreamItem]:
        for call in plan.tools:
            read.append(call.tool_id)
            yield call
        read.append("end")
        yield plan

    result = await execute_streamed(_header(plan), items(), functions=FUNCTIONS)
    expected = await execute_plan(plan, functions=FUNCTIONS)
    assert read == ["a", "d"]  # nothing after the refused entry was read
    assert _timeless(result) == _timeless(expected)
    assert result.error is not None
    assert result.tool_results == []


@_trio
async def test_a_stream_without_an_end_is_refused() -> None:
    plan = _plan([_tool("a")])

    async def items() -> AsyncIterator[StreamItem]:
        yield plan.tools[0]

    result = await execute_streamed(_header(plan), items(), functions=FUNCTIONS)
    assert isinstance(result.error, ToolError)
    assert result.error.code == "no_plan"


@_trio
async def test_a_whole_plan_other_than_its_entries_is_refused() -> None:
    plan = _plan([_tool("a"), _tool("b")])
    other = _plan([_tool("a")])
    result = await execute_streamed(_header(plan), _items(plan, other), functions=FUNCTIONS)
    assert isinstance(result.error, ToolError)
    assert result.error.code == "plan_changed"


def test_tool_invocation_is_the_entry_type() -> None:
    assert isinstance(PLANS[0].tools[0], ToolInvocation)


@_trio
async def test_a_stream_that_fails_raises_its_error_as_itself() -> None:
    plan = _plan([_tool("a")])

    async def items() -> AsyncIterator[StreamItem]:
        yield plan.tools[0]
        raise KeyError("the writer failed")

    with pytest.raises(KeyError, match="the writer failed"):
        await execute_streamed(_header(plan), items(), functions=FUNCTIONS)
