"""What awaiting plancontracts' trio code from asyncio costs, and how the bridges compare.

    python3 dev.py bench asyncio_bridge

Three ways an asyncio program can await a trio function, measured in one run
under `asyncio.run`:

- `from_asyncio` (plancontracts' bridge): one trio run per event loop, in a
  thread of its own, started by the first call and ended by the last; each
  call is a task of that run.
- thread per call: `asyncio.to_thread(trio.run, fn)`, a trio run in a thread
  of asyncio's default pool per call (min(32, cores + 4) threads).
- guest mode: `trio.lowlevel.start_guest_run` on the asyncio loop, one run
  shared the same way as `from_asyncio`'s (a thread holds one guest run at a
  time, so calls must share it); written here as the bridge would be.

(a) microseconds per call of a trivial trio function, each call alone (the
    run started and ended for it) and while another call keeps the run up,
    against awaiting it inside trio; (b) the same for `execute_plan` of a
    one-tool plan of an in-process function; (c) 100 asyncio tasks each
    awaiting a 0.2 s trio sleep at once: the makespan against the ideal
    0.2 s; (d) cancellation from asyncio of a trio sleep and of a plan whose
    tool is a process (a 0.5 s script): the time from `cancel()` to the
    task's end, and whether the process is gone; (e) the threads left once
    the calls have returned; (f) the longest the asyncio loop stalls while a
    trio call validates plans for 0.2 s without yielding (sync work inside
    trio code, as decoding a large document is), against a ticker task that
    sleeps 1 ms at a time; then the peak resident memory. Figures are the
    best of several rounds; read the ratios, which vary less than the
    times. Exits 1 when a target is missed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import outcome
import trio

from plancontracts import (
    PLAN,
    Limits,
    SkillSet,
    decode,
    discover_skills,
    execute_plan,
    from_asyncio,
)
from plancontracts.generated.tool_plans import DoneEvent, Plan, ToolInvocation, ToolRequest
from plancontracts.runtime.engine.executor import EmitEvent

_T = TypeVar("_T")
Bridge = Callable[..., Awaitable[Any]]

ROUNDS = 5
CALLS = 300
AT_ONCE = 100
SLEEP = 0.2
TOOL_SECONDS = 0.5
TARGET_MAKESPAN_SLACK = 0.25
TARGET_CANCEL_SECONDS = 0.25
CPU_SECONDS = 0.2
BENCH_SKILLS = Path(__file__).parent / "executor_skills"


async def trivial() -> int:
    return 1


async def roll(request: ToolRequest, emit: EmitEvent) -> None:
    emit(DoneEvent(version="0", ok=True, summary="rolled 7"))


def one_tool_plan() -> Plan:
    return Plan(
        request_id=str(uuid.uuid4()), tools=[ToolInvocation(tool_id="r", tool_path="dice/roll")]
    )


async def run_plan() -> Any:
    return await execute_plan(one_tool_plan(), skills=SkillSet(), functions={"dice/roll": roll})


# The two bridges from_asyncio is measured against -------------------------------------------


async def thread_per_call(fn: Callable[..., Awaitable[_T]], *args: Any) -> _T:
    return await asyncio.to_thread(trio.run, partial(fn, *args))


class _GuestRun:
    """A guest run of trio on the asyncio loop, shared by the calls running at once."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.calls = 0
        self.nursery: trio.Nursery | None = None
        self.ended: asyncio.Future[None] = loop.create_future()
        self.started: asyncio.Future[None] = loop.create_future()
        trio.lowlevel.start_guest_run(
            self.serve,
            run_sync_soon_threadsafe=loop.call_soon_threadsafe,
            done_callback=lambda result: self.ended.set_result(None),
            host_uses_signal_set_wakeup_fd=True,
        )

    async def serve(self) -> None:
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            self.started.set_result(None)
            await trio.sleep_forever()


_guests: dict[asyncio.AbstractEventLoop, _GuestRun] = {}
_ending: dict[asyncio.AbstractEventLoop, _GuestRun] = {}


async def guest_mode(fn: Callable[..., Awaitable[_T]], *args: Any) -> _T:
    loop = asyncio.get_running_loop()
    guest = _guests.get(loop)
    if guest is None:
        if loop in _ending:  # one guest run per thread: the last one must end first
            await asyncio.shield(_ending[loop].ended)
        guest = _guests[loop] = _GuestRun(loop)
    guest.calls += 1
    try:
        await asyncio.shield(guest.started)
        done: asyncio.Future[outcome.Outcome[_T]] = loop.create_future()

        async def call() -> None:
            done.set_result(await outcome.acapture(fn, *args))

        assert guest.nursery is not None
        guest.nursery.start_soon(call)  # on the loop's thread: trio's too, in guest mode
        return (await asyncio.shield(done)).unwrap()
    finally:
        guest.calls -= 1
        if guest.calls == 0:
            del _guests[loop]
            _ending[loop] = guest
            assert guest.nursery is not None
            guest.nursery.cancel_scope.cancel()
            await asyncio.shield(guest.ended)
            if _ending.get(loop) is guest:
                del _ending[loop]


BRIDGES: dict[str, Bridge] = {
    "from_asyncio": from_asyncio,
    "thread per call": thread_per_call,
    "guest mode": guest_mode,
}


# The measurements ----------------------------------------------------------------------------


async def per_call(bridge: Bridge, fn: Callable[[], Awaitable[Any]], calls: int) -> float:
    """Best seconds per call of `fn` through `bridge`, `calls` calls one after another."""
    best = float("inf")
    for _ in range(ROUNDS):
        started = time.perf_counter()
        for _ in range(calls):
            await bridge(fn)
        best = min(best, (time.perf_counter() - started) / calls)
    return best


async def per_call_kept_up(bridge: Bridge, fn: Callable[[], Awaitable[Any]], calls: int) -> float:
    """`per_call`, while another call keeps the bridge's run up."""
    if bridge is thread_per_call:
        return await per_call(bridge, fn, calls)  # nothing to keep up: a run per call
    keeper = asyncio.ensure_future(bridge(trio.sleep, 3600))
    await asyncio.sleep(0.05)
    try:
        return await per_call(bridge, fn, calls)
    finally:
        keeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await keeper


def in_trio(fn: Callable[[], Awaitable[Any]], calls: int) -> float:
    """Best seconds per await of `fn` inside one trio run."""

    async def rounds() -> float:
        best = float("inf")
        for _ in range(ROUNDS):
            started = time.perf_counter()
            for _ in range(calls):
                await fn()
            best = min(best, (time.perf_counter() - started) / calls)
        return best

    return trio.run(rounds)


async def makespan(bridge: Bridge) -> float:
    started = time.perf_counter()
    await asyncio.gather(*(bridge(trio.sleep, SLEEP) for _ in range(AT_ONCE)))
    return time.perf_counter() - started


def children() -> set[int]:
    """This process's child processes (Linux)."""
    found: set[int] = set()
    for task in Path("/proc/self/task").iterdir():
        try:
            text = (task / "children").read_text()
        except FileNotFoundError:
            continue  # a thread that ended since the folder was listed
        found.update(int(pid) for pid in text.split())
    return found


async def cancelled_after(call: Awaitable[Any], started: Callable[[], bool]) -> float:
    """Seconds from `cancel()` to the end of the task awaiting `call`, once `started()`."""
    task = asyncio.ensure_future(call)
    while not started():
        await asyncio.sleep(0.005)
    began = time.perf_counter()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return time.perf_counter() - began


async def cancellation(data: Path) -> tuple[float, float, bool]:
    """Seconds to stop a trio sleep and a plan's 0.5 s process, and whether the process is gone."""
    entered = threading.Event()

    async def forever() -> None:
        entered.set()
        await trio.sleep_forever()

    sleep = await cancelled_after(from_asyncio(forever), entered.is_set)
    before = children()
    plan = Plan(
        request_id=str(uuid.uuid4()),
        tools=[ToolInvocation(tool_id="s", tool_path="skills/bench/sleep.sh")],
    )
    stopping = await cancelled_after(
        from_asyncio(
            execute_plan,
            plan,
            skills=discover_skills([BENCH_SKILLS]),
            data_root=data,
            limits=Limits(shutdown_grace=1.0),
        ),
        lambda: bool(children() - before),
    )
    return sleep, stopping, not (children() - before)


async def validating() -> int:
    """Validate a ten-tool plan again and again for CPU_SECONDS, never yielding to trio."""
    plan = msgspec.json.encode(
        Plan(
            request_id=str(uuid.uuid4()),
            tools=[ToolInvocation(tool_id=f"t{i}", tool_path="dice/roll") for i in range(10)],
        )
    )
    count = 0
    end = time.perf_counter() + CPU_SECONDS
    while time.perf_counter() < end:
        decode(PLAN, plan)
        count += 1
    return count


async def longest_stall(bridge: Bridge) -> float:
    """The longest gap between ticks of a 1 ms ticker while `validating` runs through `bridge`."""
    gaps: list[float] = []
    running = True

    async def ticker() -> None:
        last = time.perf_counter()
        while running:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticking = asyncio.ensure_future(ticker())
    await asyncio.sleep(0.01)
    gaps.clear()
    await bridge(validating)
    running = False
    await ticking
    return max(gaps)


async def main() -> int:
    met = True
    print(f"{os.cpu_count()} cores; best of {ROUNDS} rounds\n")

    native = in_trio(trivial, CALLS)
    print(f"(a) a trivial trio function: awaited in trio {native * 1e6:.2f} us")
    left: dict[str, list[str]] = {}
    for name, bridge in BRIDGES.items():
        before = set(threading.enumerate())
        alone = await per_call(bridge, trivial, CALLS)
        kept = await per_call_kept_up(bridge, trivial, CALLS)
        left[name] = sorted(thread.name for thread in set(threading.enumerate()) - before)
        print(
            f"    {name:16} each call alone {alone * 1e6:6.0f} us, "
            f"another call running {kept * 1e6:6.0f} us ({kept / native:,.0f}x trio)"
        )

    native = in_trio(run_plan, CALLS // 3)
    print(f"(b) execute_plan of a one-tool in-process plan: in trio {native * 1e6:.0f} us")
    for name, bridge in BRIDGES.items():
        alone = await per_call(bridge, run_plan, CALLS // 3)
        kept = await per_call_kept_up(bridge, run_plan, CALLS // 3)
        print(
            f"    {name:16} each call alone {alone * 1e6:6.0f} us ({alone / native:.2f}x), "
            f"another call running {kept * 1e6:6.0f} us ({kept / native:.2f}x)"
        )

    print(f"(c) {AT_ONCE} asyncio tasks each awaiting a {SLEEP:g} s trio sleep at once")
    for name, bridge in BRIDGES.items():
        measured = min([await makespan(bridge) for _ in range(3)])
        slack = measured / SLEEP - 1
        verdict = ""
        if bridge is from_asyncio:
            met &= slack <= TARGET_MAKESPAN_SLACK
            verdict = f" (target within {TARGET_MAKESPAN_SLACK:.0%}): " + (
                "met" if slack <= TARGET_MAKESPAN_SLACK else "NOT met"
            )
        print(f"    {name:16} {measured:.2f} s, {measured / SLEEP:.1f}x the ideal{verdict}")

    data = Path(os.environ.get("TMPDIR", "/tmp")) / f"asyncio-bridge-{os.getpid()}"
    sleep, stopping, gone = await cancellation(data)
    fast = max(sleep, stopping) <= TARGET_CANCEL_SECONDS
    met &= fast and gone
    print(
        f"(d) from_asyncio cancelled: a trio sleep ended {sleep * 1000:.1f} ms after cancel(); "
        f"a plan's {TOOL_SECONDS:g} s process {stopping * 1000:.0f} ms after, "
        f"{'gone' if gone else 'STILL RUNNING'} (target within {TARGET_CANCEL_SECONDS * 1000:.0f} "
        f"ms, nothing left): {'met' if fast and gone else 'NOT met'}"
    )
    print(
        "    (thread per call cannot cancel: asyncio.to_thread returns, the trio run goes on; "
        "guest mode cancels as from_asyncio does)"
    )

    print("(e) threads each bridge left once its calls in (a) had returned:")
    for name, names in left.items():
        print(f"    {name:16} {len(names)}: {', '.join(names) or 'none'}")
    print("    ('Trio thread N': trio's idle worker, kept 10 s; guest mode waits for I/O in one)")
    met &= not left["from_asyncio"]
    print(f"(f) the asyncio loop's longest stall while a trio call works {CPU_SECONDS:g} s:")
    for name, bridge in BRIDGES.items():
        stall = min([await longest_stall(bridge) for _ in range(3)])
        print(f"    {name:16} {stall * 1000:.1f} ms")

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"peak resident memory: {peak / 1024:.0f} MiB")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
