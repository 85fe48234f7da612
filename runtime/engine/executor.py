"""The plan executor: runs a `plan` and returns its `execution-result`.

    result = await execute_plan(plan)                       # bundled skills
    result = await execute_plan(plan, skills=discover_skills([folder]))
    result = await execute_plan(plan, functions={"inventory/add": add_item})

Before anything runs, the plan is checked: unique `toolId`s, dependencies
that name tools of the plan, no cycle, every `toolPath` a declared script of
an enabled skill (or a registered function), every input valid against its
script's input schema. A plan that fails a check is rejected: the result has
`success` false, no tool results, and the reason in `error`.

Then tools run in dependency order, ties broken by their order in the plan.
With `parallel` on the plan and `async` on a tool, ready tools run together,
at most `Limits.max_concurrency` at once; any other tool runs alone. A tool
whose dependency failed while `required`, or was skipped, is skipped; a
dependency that failed without being required reaches its dependents as
`null`. Tools that do not depend on a failure keep running.

Each failed attempt is retried up to the policy's `maxRetries`, waiting
`backoffMs * 2^(n-1)` before retry n, never past the plan's deadline. At the
plan's deadline, running tools are stopped (state `timeout`) and tools not
started are `skipped`.

A program that traces (OpenTelemetry) gets one `execute plan` span per
execution, with one `execute_tool {toolPath}` span per tool under it
(`spans.py`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import trio

from ...generated.tool_plans import ExecutionResult, Plan
from .attempts import ToolAttempts
from .checks import Rejected, prepare, with_defaults
from .limits import MAX_ATTEMPT_NUMBER, Limits
from .result import execution_result
from .runs import EmitEvent, ToolFunction, UiEventHandler
from .scheduling import run_in_order
from .sink import merge_patch
from .skills import SkillSet
from .spans import plan_ended, plan_span

__all__ = [
    "EmitEvent",
    "Limits",
    "ToolFunction",
    "UiEventHandler",
    "default_data_root",
    "execute_plan",
    "merge_patch",
]


async def execute_plan(
    plan: Plan,
    *,
    skills: SkillSet | None = None,
    functions: Mapping[str, ToolFunction] | None = None,
    limits: Limits | None = None,
    data_root: Path | None = None,
    asset_folders: Sequence[Path] = (),
    on_ui_event: UiEventHandler | None = None,
    attempt_number: int = 1,
) -> ExecutionResult:
    """Run `plan` and return its execution result, valid against `execution-result`.

    `skills` defaults to the bundled skills. `functions` registers in-process
    tools by name; a plan calls one by giving its name as `toolPath`. A name
    is a relative path whose first segment is the skill name reported in
    `disabledSkills` when it fails, and it may not start with `skills/`.
    Scripts keep files in `data_root/<skill>` (default: `default_data_root()`).
    An asset path is relative to the skill folder or, when no file is there,
    to the data folder (for an in-process tool: to the first asset folder);
    it must resolve inside one of those or of `asset_folders`. `on_ui_event`
    is called for every `ui_event` as it arrives; an exception from it stops
    the execution and propagates.

    Raises ValueError for a bad function name or `attempt_number` outside
    1..MAX_ATTEMPT_NUMBER. Cancellation from outside stops every script's process group
    (within the shutdown grace) and propagates.
    """
    if not 1 <= attempt_number <= MAX_ATTEMPT_NUMBER:
        raise ValueError(f"attempt_number must be 1 to {MAX_ATTEMPT_NUMBER}")
    with plan_span(plan.request_id, parallel=plan.parallel, attempt=attempt_number) as told:
        result = await _execute(
            plan,
            skills,
            functions,
            limits or Limits(),
            data_root=data_root,
            asset_folders=asset_folders,
            on_ui_event=on_ui_event,
            attempt_number=attempt_number,
        )
        plan_ended(told, plan, result)
    return result


async def _execute(
    plan: Plan,
    skills: SkillSet | None,
    functions: Mapping[str, ToolFunction] | None,
    limits: Limits,
    *,
    data_root: Path | None,
    asset_folders: Sequence[Path],
    on_ui_event: UiEventHandler | None,
    attempt_number: int,
) -> ExecutionResult:
    """`execute_plan`'s work, inside its span; arguments and exceptions as there."""
    folders = tuple(folder.resolve() for folder in asset_folders)
    skills, functions = with_defaults(skills, functions)
    started = trio.current_time()
    deadline = started + limits.plan_timeout
    try:
        runs, order = prepare(plan, skills, functions, seconds=deadline - trio.current_time())
    except Rejected as rejection:
        elapsed = trio.current_time() - started
        return execution_result(
            plan, [], [], [], elapsed=elapsed, attempt_number=attempt_number, error=rejection.error
        )
    failed: list[int] = []
    attempts = ToolAttempts(
        plan,
        runs,
        limits=limits,
        deadline=deadline,
        data_root=data_root,
        asset_folders=folders,
        on_ui_event=on_ui_event,
        failed=failed,
    )
    try:
        await run_in_order(
            runs,
            order,
            parallel=plan.parallel,
            limits=limits,
            deadline=deadline,
            run_tool=attempts.run_tool,
            failed=failed,
        )
    except BaseExceptionGroup as group:
        # The nurseries inside are an implementation detail: one failure is
        # raised as itself, so callers can catch it by its type.
        leaves = list(_leaves(group))
        if len(leaves) == 1:
            raise leaves[0] from None
        raise
    elapsed = trio.current_time() - started
    return execution_result(
        plan, runs, order, failed, elapsed=elapsed, attempt_number=attempt_number
    )


def _leaves(group: BaseExceptionGroup[BaseException]) -> Iterable[BaseException]:
    for error in group.exceptions:
        if isinstance(error, BaseExceptionGroup):
            yield from _leaves(error)
        else:
            yield error


def default_data_root() -> Path:
    """Where skills keep their data unless told otherwise: `$XDG_DATA_HOME/plancontracts/skills`.

    `XDG_DATA_HOME` defaults to `~/.local/share`. Each skill gets a folder of
    its own name inside.
    """
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "plancontracts" / "skills"
