"""The order tools run in, how many at once, and what the plan's deadline leaves.

Tools run in dependency order, ties broken by their order in the plan. With
`parallel` on the plan and `async` on a tool, ready tools run together, at
most `max_concurrency` at once; any other tool runs alone. A tool whose
dependency failed while `required`, or was skipped, is skipped. At the
plan's deadline, running tools are stopped (state `timeout`) and tools not
started are `skipped`. A skipped tool is traced as it is skipped (`spans.py`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Awaitable, Callable

import trio

from ...generated.tool_plans import ToolError
from .limits import Limits
from .runs import ToolRun
from .spans import tool_skipped

__all__ = ["must_skip", "run_in_order", "settle_at_deadline"]


async def run_in_order(
    runs: list[ToolRun],
    order: list[int],
    *,
    parallel: bool,
    limits: Limits,
    deadline: float,
    run_tool: Callable[[ToolRun], Awaitable[None]],
    failed: list[int],
) -> None:
    """Run every tool of `runs` with `run_tool`, in `order`, until all settle or `deadline`.

    `deadline` (on trio's clock) is where the plan's timeout ends. A tool
    stopped there times out, and its index joins `failed`; a tool not
    started by then is skipped.
    """
    with trio.CancelScope(deadline=deadline):
        await _schedule(runs, order, parallel, limits.max_concurrency, run_tool)
    settle_at_deadline(runs, limits, failed)


def settle_at_deadline(runs: list[ToolRun], limits: Limits, failed: list[int]) -> None:
    """After scheduling stopped: a tool still running timed out (joining `failed`).

    A tool still pending is skipped.
    """
    now = trio.current_time()
    for run in runs:
        if run.state == "running":
            run.state = "timeout"
            run.elapsed = now - (run.started or now)
            run.error = ToolError(
                category="timeout",
                code="plan_deadline",
                message=f"stopped at the plan's deadline ({limits.plan_timeout:g} s)",
            )
            failed.append(run.index)
        elif run.state == "pending":
            run.state = "skipped"
            tool_skipped(run)


async def _schedule(
    runs: list[ToolRun],
    order: list[int],
    parallel: bool,
    max_concurrency: int,
    run_tool: Callable[[ToolRun], Awaitable[None]],
) -> None:
    rank = {index: position for position, index in enumerate(order)}
    waiting = [len(run.dependencies) for run in runs]
    ready = [(rank[run.index], run.index) for run in runs if not run.dependencies]
    heapq.heapify(ready)
    finished_send, finished_receive = trio.open_memory_channel[int](math.inf)
    running = 0
    unsettled = len(runs)

    def settle(run: ToolRun) -> None:
        nonlocal unsettled
        unsettled -= 1
        for dependent in run.dependents:
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                heapq.heappush(ready, (rank[dependent], dependent))

    async def run_concurrently(run: ToolRun) -> None:
        await run_tool(run)
        finished_send.send_nowait(run.index)

    async with trio.open_nursery() as nursery:
        while unsettled:
            while ready:
                run = runs[ready[0][1]]
                if must_skip(runs, run):
                    heapq.heappop(ready)
                    run.state = "skipped"
                    tool_skipped(run)
                    settle(run)
                    continue
                if parallel and run.call.async_:
                    if running >= max_concurrency:
                        break
                    heapq.heappop(ready)
                    running += 1
                    run.state = "running"
                    nursery.start_soon(run_concurrently, run)
                elif running:
                    break
                else:
                    # A tool that runs alone runs here, without a task of its own;
                    # so no concurrent tool can start while it runs.
                    heapq.heappop(ready)
                    run.state = "running"
                    await run_tool(run)
                    settle(run)
            if not unsettled:
                break
            finished = await finished_receive.receive()
            running -= 1
            settle(runs[finished])


def must_skip(runs: list[ToolRun], run: ToolRun) -> bool:
    """Whether `run` is skipped: a dependency was skipped, or failed while required."""
    for index in run.dependencies:
        dependency = runs[index]
        if dependency.state == "skipped":
            return True
        if dependency.state in ("failed", "timeout") and dependency.call.required:
            return True
    return False
