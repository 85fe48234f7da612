"""The `execution-result` of a plan, built from its tools' runs once they have all settled."""

from __future__ import annotations

from typing import Any, Literal, cast

from ...generated.tool_plans import (
    AssetReference,
    DroppedEvents,
    ExecutionResult,
    Plan,
    ToolError,
    ToolResult,
)
from .limits import MAX_GENERATIONS
from .runs import ToolRun
from .sink import merge_patch

__all__ = ["execution_result", "milliseconds"]


def execution_result(
    plan: Plan,
    runs: list[ToolRun],
    order: list[int],
    failed: list[int],
    *,
    elapsed: float,
    attempt_number: int,
    error: ToolError | None = None,
) -> ExecutionResult:
    """The result of executing `plan`, whose tools' `runs` have all settled.

    `order` is the dependency order the state and assets are merged in;
    `failed` the indices of the tools that failed, in the order they did
    (one whose asset was swapped since is failed here and joins it).
    `elapsed` is how long the execution took, in seconds; `error`, why
    the plan was rejected before anything ran (`runs` is empty then).
    """
    for run in runs:
        # A later tool, or a process a script left behind, may have swapped an
        # asset's file since its attempt ended: the tool that registered it fails.
        swapped = next((asset for asset in run.assets if asset.swapped()), None)
        if swapped is not None:
            run.state, run.error = "failed", swapped.refusal()
            failed.append(run.index)
    state: dict[str, Any] = {}
    assets: list[AssetReference] = []
    for index in order:
        run = runs[index]
        if run.state == "success":
            for patch in run.patches:
                merge_patch(state, patch)
            assets.extend(asset.reference for asset in run.assets)
    failed_runs = [runs[index] for index in failed]
    disabled = list(plan.disabled_skills)
    for run in failed_runs:
        if run.skill and run.skill not in disabled:
            disabled.append(run.skill)
    success = error is None and all(run.state == "success" or not run.call.required for run in runs)
    generation = plan.metadata.generation_attempt if plan.metadata else 1
    result = ExecutionResult(
        plan_id=plan.request_id,
        success=success,
        can_replan=not success and generation < MAX_GENERATIONS,
        failed_tools=[run.call.tool_id for run in failed_runs],
        disabled_skills=disabled,
        tool_results=[_tool_result(run) for run in runs],
        aggregated_state=state,
        aggregated_assets=assets,
        execution_time_ms=milliseconds(elapsed),
        attempt_number=attempt_number,
    )
    if error is not None:
        result.error = error
    return result


def _tool_result(run: ToolRun) -> ToolResult:
    assert run.settled
    result = ToolResult(
        tool_id=run.call.tool_id,
        state=cast(Literal["success", "failed", "skipped", "timeout"], run.state),
        events=run.events,
        execution_time_ms=milliseconds(run.elapsed),
        retry_count=run.retries,
    )
    if run.dropped:
        result.dropped_events = DroppedEvents(count=run.dropped, bytes=run.dropped_bytes)
    if run.output is not None and run.state == "success":
        result.output = run.output
    if run.error is not None and run.state in ("failed", "timeout"):
        result.error = run.error
    return result


def milliseconds(seconds: float) -> int:
    """`seconds` in whole milliseconds, within the contracts' bounds for a duration (0 to a day)."""
    return min(86_400_000, max(0, round(seconds * 1000)))
