"""plancontracts' trio code awaited from asyncio: `from_asyncio` and `stream_from_asyncio`.

Every test runs under `asyncio.run`, as an asyncio program does. What each
checks of the bridge: results and errors arrive as themselves, cancellation
from asyncio reaches the trio task and waits for its end, calls awaited at
once run at once, and no thread is left once the calls have returned.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import re
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest
import trio
from local_servers import A_PLAN, Reply, conforming, model_server
from test_tool_protocol import FAULTS, GRACE, assert_nothing_left, started_pids, tool

from plancontracts import (
    PLAN,
    Contract,
    ContractError,
    Limits,
    ModelChoice,
    Partial,
    ServerSettings,
    SkillSet,
    bundled_skills,
    decode,
    discover_skills,
    execute_plan,
    from_asyncio,
    load_contracts,
    load_writer,
    stream_from_asyncio,
    violations,
    write,
)
from plancontracts.generated.tool_plans import DoneEvent, Plan, ToolInvocation, ToolRequest
from plancontracts.runtime.core import asyncio_bridge
from plancontracts.runtime.engine.executor import EmitEvent
from plancontracts.runtime.model import Writer
from plancontracts.runtime.tool_plans import Planner

_T = TypeVar("_T")
OTHERS = re.compile(r"Trio thread \d+|Thread-\d+ \(process_request_thread\)")
HANG = 60
"Seconds after which a test that waits is hung: only a broken bridge takes that long."


def in_asyncio(main: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    """`asyncio.run(main())`, checking that the bridge left no thread behind.

    Threads of others may outlive the run for a moment and are not counted:
    trio's idle workers ("Trio thread N", which trio keeps for 10 s after a
    process is waited for or a function run in a thread, as after any
    `trio.run`), and the stub server's request threads, which end as their
    connection closes.
    """
    before = set(threading.enumerate())
    result = asyncio.run(main())
    left = set(threading.enumerate()) - before
    assert [thread.name for thread in left if not OTHERS.fullmatch(thread.name)] == []
    return result


@contextlib.asynccontextmanager
async def another_call_running() -> AsyncIterator[None]:
    """Another call running all along: the bridge's run stays up, so only a call's own
    cancellation can stop that call (the last call to end stops the whole run)."""
    other = asyncio.create_task(from_asyncio(trio.sleep_forever))
    try:
        yield
        assert not other.done()
    finally:
        other.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await other


async def added(a: int, *, b: int) -> int:
    await trio.sleep(0)
    return a + b


def test_a_trio_function_s_result_arrives() -> None:
    async def main() -> tuple[int, list[int]]:
        one = await from_asyncio(added, 1, b=2)
        many = await asyncio.gather(*(from_asyncio(added, n, b=n) for n in range(5)))
        return one, many

    assert in_asyncio(main) == (3, [0, 2, 4, 6, 8])


def test_the_trio_task_sees_the_caller_s_context_variables() -> None:
    who: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")

    async def read() -> str:
        return who.get()

    async def main() -> str:
        who.set("the asyncio task")
        return await from_asyncio(read)

    assert in_asyncio(main) == "the asyncio task"


def test_errors_arrive_as_themselves() -> None:
    raised = KeyError("the very one")

    async def raises() -> None:
        await trio.sleep(0)
        raise raised

    async def decodes() -> Plan:
        return decode(PLAN, b'{"tools": []}')

    async def main() -> None:
        with pytest.raises(KeyError) as caught:
            await from_asyncio(raises)
        assert caught.value is raised
        with pytest.raises(ContractError) as refused:
            await from_asyncio(decodes)
        with pytest.raises(ContractError) as directly:
            decode(PLAN, b'{"tools": []}')
        assert refused.value.violations == directly.value.violations != ()

    in_asyncio(main)


def test_cancelling_the_asyncio_task_cancels_the_trio_side_and_waits_for_it() -> None:
    events: list[str] = []
    started = threading.Event()

    async def forever() -> None:
        try:
            started.set()
            await trio.sleep_forever()
        finally:
            await trio.lowlevel.cancel_shielded_checkpoint()  # clean-up that yields to trio
            events.append("trio finally")

    async def main() -> None:
        async with another_call_running():
            task = asyncio.create_task(from_asyncio(forever))
            await asyncio.to_thread(started.wait, HANG)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            events.append("asyncio saw the cancellation")

    in_asyncio(main)
    assert events == ["trio finally", "asyncio saw the cancellation"]


def test_an_asyncio_timeout_stops_the_trio_call() -> None:
    async def main() -> None:
        async with another_call_running():
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.01):
                    await from_asyncio(trio.sleep, HANG)

    in_asyncio(main)


def test_an_error_while_the_trio_side_is_cancelled_is_raised_in_place_of_cancellation() -> None:
    started = threading.Event()

    async def fails_when_stopped() -> None:
        try:
            started.set()
            await trio.sleep_forever()
        finally:
            raise RuntimeError("could not clean up")

    async def main() -> None:
        async with another_call_running():
            task = asyncio.create_task(from_asyncio(fails_when_stopped))
            await asyncio.to_thread(started.wait, HANG)
            task.cancel()
            with pytest.raises(RuntimeError, match="could not clean up"):
                await task

    in_asyncio(main)


def test_calls_awaited_at_once_run_at_once() -> None:
    calls = 50
    # Each call waits until every call has started: calls run one by one, or a few at a
    # time (asyncio's default pool has min(32, cores + 4) threads), would never finish.
    arrived = 0
    everyone = trio.Event()

    async def meet() -> int:
        nonlocal arrived
        arrived += 1
        if arrived == calls:
            everyone.set()
        await everyone.wait()
        return arrived

    async def main() -> list[int]:
        async with asyncio.timeout(HANG):
            return await asyncio.gather(*(from_asyncio(meet) for _ in range(calls)))

    assert in_asyncio(main) == [calls] * calls


def test_a_function_that_returns_no_awaitable_is_one_line() -> None:
    def not_async() -> int:
        return 1

    async def main() -> None:
        with pytest.raises(TypeError) as caught:
            await from_asyncio(not_async)  # type: ignore[arg-type]
        assert str(caught.value) == (
            "from_asyncio awaits what "
            "test_a_function_that_returns_no_awaitable_is_one_line.<locals>.not_async returns, "
            "and it returned a int: for a stream, use stream_from_asyncio"
        )

    in_asyncio(main)


def test_awaited_from_trio_it_says_to_await_the_function_itself() -> None:
    async def main() -> None:
        with pytest.raises(RuntimeError, match="in trio, await the function itself"):
            await from_asyncio(added, 1, b=2)

    trio.run(main)


async def counting(limit: int, ended: list[str]) -> AsyncIterator[int]:
    try:
        for number in range(limit):
            await trio.sleep(0)
            yield number
    finally:
        ended.append("trio side closed")


def test_a_stream_is_iterated_from_asyncio_and_closed_when_left() -> None:
    ended: list[str] = []

    async def main() -> tuple[list[int], list[int]]:
        async with stream_from_asyncio(counting, 4, ended) as numbers:
            whole = [number async for number in numbers]
        cut = []
        async with stream_from_asyncio(counting, 1_000_000, ended) as numbers:
            async for number in numbers:
                cut.append(number)
                if number == 2:
                    break
        return whole, cut

    assert in_asyncio(main) == ([0, 1, 2, 3], [0, 1, 2])
    assert ended == ["trio side closed", "trio side closed"]


def test_a_stream_s_error_arrives_as_itself() -> None:
    async def fails() -> AsyncIterator[int]:
        yield 1
        decode(PLAN, b"{}")

    async def main() -> list[int]:
        seen: list[int] = []

        async def read() -> None:
            async with stream_from_asyncio(fails) as numbers:
                async for number in numbers:
                    seen.append(number)  # noqa: PERF401  # what came before the error

        with pytest.raises(ContractError):
            await read()
        return seen

    assert in_asyncio(main) == [1]


@pytest.mark.process
def test_a_plan_cancelled_from_asyncio_leaves_no_process(tmp_path: Path) -> None:
    plan = Plan(request_id=str(uuid.uuid4()), tools=[tool("t", "hang")])

    async def main() -> None:
        async with another_call_running():
            task = asyncio.create_task(
                from_asyncio(
                    execute_plan,
                    plan,
                    skills=discover_skills([FAULTS]),
                    data_root=tmp_path,
                    limits=Limits(shutdown_grace=GRACE),
                )
            )
            async with asyncio.timeout(HANG):
                while not started_pids(tmp_path):
                    await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # Gone by the time the cancelled call returned, with the bridge still up.
            assert_nothing_left(tmp_path)

    in_asyncio(main)


def test_a_plan_of_an_in_process_tool_runs_from_asyncio() -> None:
    async def roll(request: ToolRequest, emit: EmitEvent) -> None:
        await trio.sleep(0)
        emit(DoneEvent(version="0", ok=True, summary="rolled 7"))

    plan = Plan(
        request_id=str(uuid.uuid4()), tools=[ToolInvocation(tool_id="r", tool_path="dice/roll")]
    )

    async def main() -> tuple[bool, Any]:
        result = await from_asyncio(
            execute_plan, plan, skills=SkillSet(), functions={"dice/roll": roll}
        )
        return result.success, result.tool_results[0].output

    success, output = in_asyncio(main)
    assert success
    assert output["summary"] == "rolled 7"


RECIPE = {
    "title": "Recipe",
    "type": "object",
    "required": ["name", "serves"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 20},
        "serves": {"type": "integer", "minimum": 1, "maximum": 12},
    },
}
GOOD = {"name": "Leek soup", "serves": 4}


@pytest.fixture
def recipe(tmp_path: Path) -> Contract[Any]:
    path = tmp_path / "recipe.json"
    path.write_text(json.dumps(RECIPE))
    return load_contracts(path)["recipe"]


def served(url: str) -> Writer:
    return load_writer(ModelChoice(server=ServerSettings(url, backoff=0.01)), say=lambda line: None)


def test_a_user_s_contract_is_written_from_asyncio(recipe: Contract[Any]) -> None:
    with model_server(conforming) as server:
        writer = served(server.url)

        async def main() -> Any:
            return await from_asyncio(write, recipe, "A soup for four", writer=writer)

        document = in_asyncio(main)
    assert violations(recipe, document) == ()
    assert len(server.requests) == 1


def test_a_written_stream_is_read_from_asyncio(recipe: Contract[Any]) -> None:
    with model_server(lambda number, body: Reply(content=json.dumps(GOOD), piece=3)) as server:
        writer = served(server.url)

        async def main() -> list[Partial[Any]]:
            async with stream_from_asyncio(
                write, recipe, "A soup for four", writer=writer, stream=True
            ) as partials:
                return [partial async for partial in partials]

        seen = in_asyncio(main)
    assert seen[-1].done
    assert seen[-1].value == GOOD
    assert all(not partial.done for partial in seen[:-1])


def test_calls_at_once_share_one_run_so_a_server_s_in_flight_bound_holds(
    recipe: Contract[Any],
) -> None:
    # Each call of a thread-per-call bridge would be a trio run of its own, with a
    # pool of `in_flight` places of its own: ten calls would all reach the server.
    with model_server(lambda number, body: Reply(content=json.dumps(GOOD), delay=0.05)) as server:
        writer = served(server.url)

        async def main() -> list[Any]:
            return await asyncio.gather(
                *(from_asyncio(write, recipe, "A soup", writer=writer) for _ in range(10))
            )

        documents = in_asyncio(main)
    assert documents == [GOOD] * 10
    assert len(server.requests) == 10
    assert server.most_at_once <= ServerSettings().in_flight


def test_a_stream_that_fails_to_open_raises_its_error_and_the_run_goes_on() -> None:
    failed = threading.Event()

    def opens_nothing() -> AsyncIterator[int]:
        failed.set()
        raise LookupError("no such stream")

    async def ask_once() -> None:
        async with stream_from_asyncio(opens_nothing) as numbers:
            # Asked for an item once the trio side has failed and closed its end.
            await asyncio.to_thread(failed.wait, HANG)
            await asyncio.sleep(0.05)
            await anext(numbers)

    async def main() -> int:
        async with another_call_running():
            with pytest.raises(LookupError, match="no such stream"):
                await ask_once()
            return await from_asyncio(added, 1, b=1)

    assert in_asyncio(main) == 2


@pytest.mark.process
def test_an_agent_plans_and_the_plan_runs_from_asyncio(tmp_path: Path) -> None:
    # A family's agent is trio code like the rest: the planner asks the server, then
    # the executor runs the bundled scripts of its plan as processes.
    with model_server(lambda number, body: Reply(content=A_PLAN)) as server:
        planner = Planner(served(server.url), bundled_skills(), say=lambda line: None)

        async def main() -> tuple[Plan, bool]:
            plan = await from_asyncio(planner.plan, "I roll a die", seed=1)
            result = await from_asyncio(execute_plan, plan, data_root=tmp_path)
            return plan, result.success

        plan, success = in_asyncio(main)
    assert plan.tools[0].tool_path == "skills/dice-roller/roll.py"
    assert success


def test_a_trio_run_that_fails_fails_its_calls_and_the_next_call_gets_a_new_run() -> None:
    # Only a failure inside trio itself ends the run under its calls; here, a callback
    # handed to the run that raises (trio then ends the run with TrioInternalError).
    def fails() -> None:
        raise ZeroDivisionError

    async def main() -> int:
        call = asyncio.create_task(from_asyncio(trio.sleep_forever))
        while asyncio.get_running_loop() not in asyncio_bridge._bridges:
            await asyncio.sleep(0)
        bridge = asyncio_bridge._bridges[asyncio.get_running_loop()]
        await bridge.ready()
        bridge.send(fails)
        with pytest.raises(RuntimeError, match="the trio run ended under the call") as ended:
            async with asyncio.timeout(HANG):
                await call
        assert isinstance(ended.value.__cause__, trio.TrioInternalError)
        return await from_asyncio(added, 2, b=2)

    assert in_asyncio(main) == 4
