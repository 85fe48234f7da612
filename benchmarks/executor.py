"""The executor's own cost, measured against trio doing the same work by hand.

    python3 dev.py bench executor

Three measurements, each taken in one run, with the executor and its
baseline interleaved so that machine noise hits both alike:

(a) overhead per tool: a 1,000-tool DAG of in-process no-op tools (each
    yields to trio once, as any real async tool does), run by the executor as
    a sequential plan, against the same 1,000 coroutines awaited in the same
    order by hand, each under its own deadline (`trio.fail_after` of the
    tool timeout), which is the executor's contract. Target: at most 2x.
    Printed beside it: the ratio to the same coroutines without deadlines.
(b) overhead per process: one call of a bundled skill script through the
    executor (request, NDJSON parsing and validation, process group
    clean-up) against `trio.run_process` of the same script with the same
    input. Target: at most 1.3x.
(c) concurrency: the makespan of 8 independent 0.5 s script calls at
    concurrency limits 1, 2 and 4, against the ideal ceil(8/k) x 0.5 s.
    Target: within 15%.
(d) seed 003's SC-005: of 210 calls of the bundled skills' scripts, each
    with an example from its input schema, 14 to a plan at the default
    concurrency, the share that succeeded within its timeout (30 s unless
    its manifest sets one), and the slowest call. Target: at least 99%.
(e) tracing: the plan of (a) and a plan of 6 of (d)'s script calls, each
    timed with OpenTelemetry off (not imported), idle (the API, no provider)
    and on (the SDK exporting to memory, as `--otel` sets it up but for the
    exporter), in interleaved rounds (`tracing_overhead.py`), with the
    spans each run exported and the memory. Target: on within 3% of off.
    It runs last: (a) to (d) run with no OpenTelemetry in the process.

Figures are the best (a) or the median (b, e) of several rounds; the ratios
vary far less than the absolute times. Exits 1 when a target is missed.
"""

from __future__ import annotations

import importlib.util
import math
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec
import trio

from plancontracts.generated.tool_plans import Plan, ToolInvocation, ToolRequest
from plancontracts.runtime.engine.executor import EmitEvent, execute_plan
from plancontracts.runtime.engine.limits import Limits
from plancontracts.runtime.engine.skills import SkillSet, bundled_skills, discover_skills

ROUNDS = 7
TOOLS = 1000
PROCESS_ROUNDS = 15
SLEEP = 0.5
TARGET_TOOL_OVERHEAD = 2.0
TARGET_PROCESS_OVERHEAD = 1.3
TARGET_MAKESPAN_SLACK = 0.15
SCRIPT_CALLS = 210
TARGET_WITHIN_TIMEOUT = 0.99
BENCH_SKILLS = Path(__file__).parent / "executor_skills"
TRACING_ROUNDS = 15
TRACING_SCRIPT_ROUNDS = 15
TRACING_SCRIPT_CALLS = 6
TARGET_TRACING_OVERHEAD = 0.03


def _beside(name: str) -> ModuleType:
    """The module `name` of the file beside this one: benchmarks/ is no package, and putting
    it on the path would let its modules (skills, validation...) shadow others of those names."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs, as an import would: dataclasses look their module up there.
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


tracing_overhead = _beside("tracing_overhead")


async def noop(request: ToolRequest, emit: EmitEvent) -> None:
    await trio.lowlevel.checkpoint()


def dag(tools: int) -> Plan:
    """A sequential plan of `tools` no-op calls, each depending on up to 3 earlier ones."""
    rng = random.Random(tools)
    calls = [
        ToolInvocation(
            tool_id=f"t{i}",
            tool_path="bench/noop",
            dependencies=[f"t{j}" for j in rng.sample(range(i), min(i, 3))],
        )
        for i in range(tools)
    ]
    return Plan(request_id=str(uuid.uuid4()), tools=calls)


async def tool_overhead() -> tuple[float, float, float]:
    """Best times in seconds for the 1,000-tool DAG: the executor, by hand with a
    deadline per coroutine, by hand without deadlines."""
    plan = dag(TOOLS)
    requests = [
        ToolRequest(
            version="0",
            request_id=f"{plan.request_id}/{call.tool_id}",
            tool_id=call.tool_id,
            tool_path=call.tool_path,
            attempt=1,
            input={},
            dependencies={},
            data_dir="",
        )
        for call in plan.tools
    ]
    functions = {"bench/noop": noop}
    timeout = Limits().tool_timeout
    executor, by_hand, bare = math.inf, math.inf, math.inf
    for _ in range(ROUNDS):
        started = time.perf_counter()
        result = await execute_plan(plan, skills=SkillSet(), functions=functions)
        executor = min(executor, time.perf_counter() - started)
        assert result.success
        started = time.perf_counter()
        for request in requests:  # the plan's order is already a dependency order
            with trio.fail_after(timeout):
                await noop(request, _ignore)
        by_hand = min(by_hand, time.perf_counter() - started)
        started = time.perf_counter()
        for request in requests:
            await noop(request, _ignore)
        bare = min(bare, time.perf_counter() - started)
    return executor, by_hand, bare


def _ignore(event: object) -> None:
    return None


async def process_overhead() -> tuple[float, float]:
    """Median seconds per call of the torch lighter: through the executor, and alone."""
    skills = bundled_skills()
    tool_path = "skills/torch-lighter/light.py"
    script = skills.resolve(tool_path)
    call = ToolInvocation(tool_id="light", tool_path=tool_path, input={"action": "light"})
    data = Path.home() / ".cache" / "plancontracts-bench"
    data.mkdir(parents=True, exist_ok=True)
    request = ToolRequest(
        version="0",
        request_id="bench/light",
        tool_id="light",
        tool_path=tool_path,
        attempt=1,
        input={"action": "light"},
        dependencies={},
        data_dir=str(data),
    )
    stdin = msgspec.json.encode(request)
    environment = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
    executor: list[float] = []
    alone: list[float] = []
    for _ in range(PROCESS_ROUNDS):
        plan = Plan(request_id=str(uuid.uuid4()), tools=[call])
        started = time.perf_counter()
        result = await execute_plan(plan, skills=skills, data_root=data.parent)
        executor.append(time.perf_counter() - started)
        assert result.success, result
        started = time.perf_counter()
        await trio.run_process(
            [sys.executable, str(script.file)],
            stdin=stdin,
            capture_stdout=True,
            cwd=script.skill_folder,
            env=environment,
        )
        alone.append(time.perf_counter() - started)
    return statistics.median(executor), statistics.median(alone)


async def makespan(limit: int) -> float:
    """Seconds to run 8 independent 0.5 s script calls at most `limit` at a time."""
    calls = [
        ToolInvocation(tool_id=f"s{i}", tool_path="skills/bench/sleep.sh", async_=True)
        for i in range(8)
    ]
    plan = Plan(request_id=str(uuid.uuid4()), tools=calls, parallel=True)
    started = time.perf_counter()
    result = await execute_plan(
        plan,
        skills=discover_skills([BENCH_SKILLS]),
        limits=Limits(max_concurrency=limit),
        data_root=Path.home() / ".cache" / "plancontracts-bench",
    )
    assert result.success, result
    return time.perf_counter() - started


def script_calls(skills: SkillSet, calls: int) -> list[tuple[str, Any]]:
    """`calls` calls of the scripts of `skills`, each with an example of its input schema,
    the examples taken in turn: (tool path, input)."""
    examples = [
        (script.tool_path, example)
        for skill in skills.skills.values()
        for script in skill.scripts.values()
        if script.input_validator is not None
        for example in script.input_validator.schema.get("examples", [])
    ]
    return [examples[n % len(examples)] for n in range(calls)]


async def scripts_within_timeout(data_root: Path) -> tuple[int, int, float, list[str]]:
    """Run the bundled scripts on their schemas' examples: calls, successes, slowest s, failures."""
    skills = bundled_skills()
    calls = script_calls(skills, SCRIPT_CALLS)
    succeeded, slowest, failures = 0, 0.0, []
    for first in range(0, len(calls), 14):
        tools = [
            ToolInvocation(tool_id=f"c{n}", tool_path=path, input=example, async_=True)
            for n, (path, example) in enumerate(calls[first : first + 14])
        ]
        plan = Plan(request_id=str(uuid.uuid4()), tools=tools, parallel=True)
        result = await execute_plan(plan, skills=skills, data_root=data_root)
        for trace in result.tool_results:
            slowest = max(slowest, trace.execution_time_ms / 1000)
            if trace.state == "success":
                succeeded += 1
            else:
                failures.append(f"{trace.tool_id}: {trace.state}")
    return len(calls), succeeded, slowest, failures


async def tracing(
    data_root: Path, *, tools: int = TOOLS, rounds: int = TRACING_ROUNDS, scripts: bool = True
) -> list[Any]:
    """Tracing's cost (`tracing_overhead.Comparison`) on the `tools`-tool DAG of (a) in
    `rounds` rounds, then, with `scripts`, on one plan of 6 of (d)'s script calls, their data
    under `data_root`.

    Raises ImportError without OpenTelemetry's SDK (the `otel` extra).
    """
    plan = dag(tools)
    functions = {"bench/noop": noop}

    async def in_process(mode: str) -> None:
        result = await execute_plan(plan, skills=SkillSet(), functions=functions)
        assert result.success, result

    comparisons = [await tracing_overhead.compare(in_process, rounds=rounds)]
    if not scripts:
        return comparisons
    skills = bundled_skills()
    invocations = [
        ToolInvocation(tool_id=f"c{n}", tool_path=path, input=example, async_=True)
        for n, (path, example) in enumerate(script_calls(skills, TRACING_SCRIPT_CALLS))
    ]
    calling = Plan(request_id=str(uuid.uuid4()), tools=invocations, parallel=True)

    async def calling_scripts(mode: str) -> None:
        result = await execute_plan(calling, skills=skills, data_root=data_root)
        assert result.success, result

    comparisons.append(
        await tracing_overhead.compare(calling_scripts, rounds=TRACING_SCRIPT_ROUNDS)
    )
    return comparisons


async def main() -> int:
    met = True

    executor, by_hand, bare = await tool_overhead()
    ratio = executor / by_hand
    met &= ratio <= TARGET_TOOL_OVERHEAD
    print(
        f"(a) {TOOLS}-tool in-process DAG: executor {executor * 1000:.1f} ms, "
        f"by hand with a deadline each {by_hand * 1000:.1f} ms: {ratio:.2f}x "
        f"(target at most {TARGET_TOOL_OVERHEAD:g}x): "
        f"{'met' if ratio <= TARGET_TOOL_OVERHEAD else 'NOT met'}"
    )
    print(
        f"    by hand without deadlines {bare * 1000:.1f} ms: the executor is "
        f"{executor / bare:.1f}x that; a deadline costs trio "
        f"{(by_hand - bare) / TOOLS * 1e6:.1f} us a coroutine"
    )

    through, alone = await process_overhead()
    ratio = through / alone
    met &= ratio <= TARGET_PROCESS_OVERHEAD
    print(
        f"(b) one script call: executor {through * 1000:.1f} ms, "
        f"trio.run_process {alone * 1000:.1f} ms: {ratio:.2f}x "
        f"(target at most {TARGET_PROCESS_OVERHEAD:g}x): "
        f"{'met' if ratio <= TARGET_PROCESS_OVERHEAD else 'NOT met'}"
    )

    for limit in (1, 2, 4):
        ideal = math.ceil(8 / limit) * SLEEP
        measured = await makespan(limit)
        slack = measured / ideal - 1
        met &= slack <= TARGET_MAKESPAN_SLACK
        print(
            f"(c) 8 x {SLEEP:g} s at concurrency {limit}: {measured:.2f} s, "
            f"ideal {ideal:.1f} s: {slack:+.0%} "
            f"(target within {TARGET_MAKESPAN_SLACK:.0%}): "
            f"{'met' if slack <= TARGET_MAKESPAN_SLACK else 'NOT met'}"
        )

    with tempfile.TemporaryDirectory() as data:
        calls, succeeded, slowest, failures = await scripts_within_timeout(Path(data))
    share = succeeded / calls
    met &= share >= TARGET_WITHIN_TIMEOUT
    print(
        f"(d) SC-005: {succeeded} of {calls} calls of the bundled scripts succeeded within "
        f"their timeout ({share:.1%}; target at least {TARGET_WITHIN_TIMEOUT:.0%}): "
        f"{'met' if share >= TARGET_WITHIN_TIMEOUT else 'NOT met'}; the slowest took "
        f"{slowest:.2f} s" + (f"; not: {', '.join(failures[:5])}" if failures else "")
    )

    try:
        with tempfile.TemporaryDirectory() as data:
            in_process, calling = await tracing(Path(data))
    except ImportError:
        print("(e) tracing not measured: OpenTelemetry's SDK is not installed (the otel extra)")
        return 1
    for comparison, run, per in (
        (in_process, f"(e) the {TOOLS}-tool DAG of (a)", (TOOLS, "tool")),
        (calling, f"(e) a plan of {TRACING_SCRIPT_CALLS} script calls of (d)", None),
    ):
        print("\n".join(comparison.report(run, per=per)))
        overhead = comparison.ratio("on") - 1
        met &= overhead < TARGET_TRACING_OVERHEAD
        print(
            f"    on against off: {overhead:+.1%} (target under {TARGET_TRACING_OVERHEAD:.0%}): "
            f"{'met' if overhead < TARGET_TRACING_OVERHEAD else 'NOT met'}"
        )
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(trio.run(main))
