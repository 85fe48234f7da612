"""The checks a plan passes before anything of it runs.

Unique `toolId`s, dependencies that name tools of the plan, no cycle, every
`toolPath` a declared script of an enabled skill (or a registered function),
every input valid against its script's input schema. The first check that
fails rejects the plan with a `ToolError` saying why.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import msgspec

from ...generated.tool_plans import (
    Plan,
    RelativePath,
    SkillName,
    ToolError,
    ToolInvocation,
)
from ..core.errors import UnusableScript
from ..core.typed_patterns import conforming
from .limits import Limits
from .runs import ToolFunction, ToolRun, call_input, fit
from .skills import Script, SkillSet, bundled_skills

__all__ = ["Rejected", "check_function_names", "check_plan", "prepare", "with_defaults"]


class Rejected(Exception):
    """A plan that fails a check; `error` says which and why."""

    def __init__(self, category: Literal["circular_dependency", "invalid_plan"], code: str,
                 message: str, details: dict[str, Any]) -> None:  # fmt: skip
        super().__init__(message)
        self.error = ToolError(category=category, code=code, message=fit(message), details=details)


def check_function_names(names: Iterable[str]) -> None:
    """Raise ValueError for the first name that cannot name an in-process tool."""
    for name in names:
        skill, _, rest = name.partition("/")
        try:
            conforming(name, RelativePath)
            conforming(skill, SkillName)
        except msgspec.ValidationError:
            valid = False
        else:
            valid = bool(rest) and skill != "skills"
        if not valid:
            raise ValueError(
                f"function name {name!r} must be <skill name>/<tool name>, a relative path "
                "as a toolPath is, and must not start with skills/"
            )


def prepare(
    plan: Plan,
    skills: SkillSet,
    functions: Mapping[str, ToolFunction],
    *,
    seconds: float,
) -> tuple[list[ToolRun], list[int]]:
    """The plan's tools, each ready to run, and their indices in dependency order.

    Ties in the order go to the tool listed first. Checking the inputs may
    take `seconds` in all: they share the time before the plan's deadline.
    Raises Rejected for the first check the plan fails.
    """
    checks_deadline = time.monotonic() + seconds
    tools = plan.tools
    index: dict[str, int] = {}
    for position, call in enumerate(tools):
        if call.tool_id in index:
            raise Rejected(
                "invalid_plan",
                "duplicate_tool_id",
                f"toolId {call.tool_id!r} is used twice, by tools {index[call.tool_id]} "
                f"and {position}",
                {"toolId": call.tool_id},
            )
        index[call.tool_id] = position
    dependencies: list[tuple[int, ...]] = []
    for call in tools:
        try:
            positions = [index[name] for name in call.dependencies]
        except KeyError as missing:
            name = missing.args[0]
            raise Rejected(
                "invalid_plan",
                "unknown_dependency",
                f"tool {call.tool_id!r} depends on {name!r}, which is not a tool of this plan",
                {"toolId": call.tool_id, "dependency": name},
            ) from None
        dependencies.append(tuple(dict.fromkeys(positions)))
    order = _dependency_order(tools, dependencies)
    runs: list[ToolRun] = []
    for position, call in enumerate(tools):
        target, skill = _target(plan, skills, functions, call, checks_deadline)
        runs.append(ToolRun(position, call, target, skill, dependencies[position]))
    for run in runs:
        for dependency in run.dependencies:
            runs[dependency].dependents.append(run.index)
    return runs, order


def _target(
    plan: Plan,
    skills: SkillSet,
    functions: Mapping[str, ToolFunction],
    call: ToolInvocation,
    checks_deadline: float,
) -> tuple[Script | ToolFunction, str | None]:
    """What `call` runs, and the skill it belongs to; Rejected when it cannot run as given."""
    function = functions.get(call.tool_path)
    if function is not None:
        skill = call.tool_path.split("/", 1)[0]
        if skill in plan.disabled_skills:
            raise Rejected(
                "invalid_plan",
                "disabled_skill",
                f"tool {call.tool_id!r}: {call.tool_path} belongs to the disabled skill {skill!r}",
                {"toolId": call.tool_id, "toolPath": call.tool_path},
            )
        return function, skill
    try:
        script = skills.resolve(call.tool_path, plan.disabled_skills)
    except UnusableScript as unusable:
        raise Rejected(
            "invalid_plan",
            "unusable_script",
            f"tool {call.tool_id!r}: {unusable}",
            {"toolId": call.tool_id, "toolPath": call.tool_path},
        ) from None
    problem = script.check_input(call_input(call), seconds=checks_deadline - time.monotonic())
    if problem is not None:
        details = {"toolId": call.tool_id}
        if problem.pointer is not None:
            details["pointer"] = problem.pointer
        raise Rejected(
            "invalid_plan", problem.code, f"tool {call.tool_id!r}: {problem.message}", details
        )
    return script, script.skill


def _dependency_order(
    tools: Sequence[ToolInvocation], dependencies: list[tuple[int, ...]]
) -> list[int]:
    """Plan indices in dependency order, ties by plan order; rejects a cycle."""
    waiting = [len(depends) for depends in dependencies]
    dependents: list[list[int]] = [[] for _ in tools]
    for index, depends in enumerate(dependencies):
        for dependency in depends:
            dependents[dependency].append(index)
    ready = [index for index, count in enumerate(waiting) if count == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        index = heapq.heappop(ready)
        order.append(index)
        for dependent in dependents[index]:
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                heapq.heappush(ready, dependent)
    if len(order) < len(tools):
        cycle = _find_cycle({i for i, count in enumerate(waiting) if count}, dependencies)
        names = [tools[index].tool_id for index in cycle]
        raise Rejected(
            "circular_dependency",
            "cycle",
            "the dependencies form a cycle: " + " -> ".join(names),
            {"cycle": names},
        )
    return order


def _find_cycle(left: set[int], dependencies: list[tuple[int, ...]]) -> list[int]:
    # Every tool left after the topological sort waits on another one left, so
    # following dependencies inside `left` must come back to a tool already seen.
    path: list[int] = []
    seen: dict[int, int] = {}
    node = min(left)
    while node not in seen:
        seen[node] = len(path)
        path.append(node)
        node = next(dependency for dependency in dependencies[node] if dependency in left)
    # Shown as "needed by" arrows, starting from the tool listed first in the plan.
    cycle = path[seen[node] :][::-1]
    first = cycle.index(min(cycle))
    cycle = cycle[first:] + cycle[:first]
    return [*cycle, cycle[0]]


def check_plan(
    plan: Plan,
    *,
    skills: SkillSet | None = None,
    functions: Mapping[str, ToolFunction] | None = None,
) -> ToolError | None:
    """Why `execute_plan` would reject `plan` before running anything, or None.

    The same checks, with the same errors: duplicate ids, unknown
    dependencies, cycles, unusable script paths, inputs that break their
    script's input schema. Runs nothing; needs no event loop. Inputs are
    checked within the default plan timeout. Raises ValueError for a bad
    function name.
    """
    skills, functions = with_defaults(skills, functions)
    try:
        prepare(plan, skills, functions, seconds=Limits().plan_timeout)
    except Rejected as rejection:
        return rejection.error
    return None


def with_defaults(
    skills: SkillSet | None, functions: Mapping[str, ToolFunction] | None
) -> tuple[SkillSet, dict[str, ToolFunction]]:
    """The skills (by default the bundled ones) and the functions a plan may call, checked.

    Raises ValueError for a bad function name.
    """
    skills = bundled_skills() if skills is None else skills
    functions = dict(functions or {})
    check_function_names(functions)
    return skills, functions
