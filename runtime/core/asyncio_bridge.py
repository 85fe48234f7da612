"""trio code awaited from an asyncio program: `await from_asyncio(fn, *args, **kwargs)`.

    result = await from_asyncio(execute_plan, plan)            # inside asyncio.run(...)
    recipe = await from_asyncio(write, RECIPE, "A soup", writer=writer)
    async with stream_from_asyncio(write, RECIPE, "A soup", writer=writer, stream=True) as partials:
        async for partial in partials:
            ...

plancontracts is trio code (the executor, the writers, the agents). An
asyncio program reaches it through one trio run in a thread of its own per
event loop: each call is a trio task there, so a hundred calls awaited at
once run at once, and cancelling the awaiting asyncio task cancels the trio
task and waits until it has ended (a tool's process group stopped, the
model's writing stopped). The thread is started by the first call and ends
with the last one running, so nothing is left once every call has returned.
Why a thread rather than trio's guest mode or trio-asyncio, with the
measurements: docs/asyncio.md (benchmarks/asyncio_bridge.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import threading
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Generic, ParamSpec, TypeVar

import outcome
import trio

__all__ = ["from_asyncio", "stream_from_asyncio"]

_P = ParamSpec("_P")
_T = TypeVar("_T")
_R = TypeVar("_R")

_bridges: dict[asyncio.AbstractEventLoop, _Bridge] = {}
"The trio run serving each event loop that has calls running; touched on the loop's thread only."


async def from_asyncio(
    fn: Callable[_P, Awaitable[_T]], /, *args: _P.args, **kwargs: _P.kwargs
) -> _T:
    """Await `fn(*args, **kwargs)`, a trio function, from asyncio; return what it returns.

    `fn` runs as a task of the bridge's trio run, in another thread, with a
    copy of the caller's context variables; callbacks it is given run
    there too (to reach an asyncio object from one, use the loop's
    `call_soon_threadsafe`). Raises what `fn` raises, as itself. Cancelling
    the awaiting task cancels `fn`'s trio task and waits for it to end,
    then raises CancelledError (or the error `fn` ended with, other than
    its cancellation). Raises RuntimeError when awaited outside asyncio,
    and TypeError, inside the trio task, when `fn` returns no awaitable.
    """
    bridge = _bridge_for(_running_loop("from_asyncio"))
    bridge.calls += 1
    try:
        return await bridge.run(functools.partial(_awaited, fn, *args, **kwargs))
    finally:
        bridge.calls -= 1
        if bridge.calls == 0:
            await bridge.stop()


def stream_from_asyncio(
    fn: Callable[_P, AbstractAsyncContextManager[AsyncIterable[_T]] | AsyncIterable[_T]],
    /,
    *args: _P.args,
    **kwargs: _P.kwargs,
) -> AbstractAsyncContextManager[AsyncIterator[_T]]:
    """Iterate from asyncio what a trio function streams: `write(..., stream=True)`'s partials.

    `fn(*args, **kwargs)` gives an async iterable, or an async context
    manager giving one; it is entered and iterated in the bridge's trio
    run, one item each time the asyncio side asks for the next (so a
    stream that makes an item only when a reader waits keeps doing so).
    Leaving the `async with` block, however it is left, closes the trio
    side and waits for it to end. Raises what the trio side raises, as
    itself, from the `async for` or the `async with`.
    """
    return _streamed(functools.partial(fn, *args, **kwargs))


@asynccontextmanager
async def _streamed(
    open_stream: Callable[[], AbstractAsyncContextManager[AsyncIterable[_T]] | AsyncIterable[_T]],
) -> AsyncIterator[AsyncIterator[_T]]:
    loop = _running_loop("stream_from_asyncio")
    # The asyncio side asks for an item by sending a future down this channel;
    # the trio side answers each with the next item, or the end of the stream.
    asks, questions = trio.open_memory_channel[asyncio.Future[outcome.Outcome[_T]]](1)

    async def serve() -> None:
        async with questions:
            opened = open_stream()
            if isinstance(opened, AbstractAsyncContextManager):
                async with opened as iterable:
                    await _answer(questions, aiter(iterable), loop)
            else:
                await _answer(questions, aiter(opened), loop)

    bridge = _bridge_for(loop)
    bridge.calls += 1
    served = asyncio.ensure_future(bridge.run(serve))

    async def items() -> AsyncGenerator[_T, None]:
        await bridge.ready()
        while True:
            answer: asyncio.Future[outcome.Outcome[_T]] = loop.create_future()
            bridge.send(_ask, asks, answer)
            either: set[asyncio.Future[Any]] = {answer, served}
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if not answer.done():
                await served  # the trio side ended without answering: its error, or the end
                return
            result = answer.result()
            if isinstance(result, outcome.Error) and isinstance(result.error, StopAsyncIteration):
                return
            yield result.unwrap()

    iterator = items()
    try:
        yield iterator
    finally:
        await iterator.aclose()
        try:
            bridge.send(asks.close)
            if not served.done():
                served.cancel()
            await _quietly(served)
        finally:
            bridge.calls -= 1
            if bridge.calls == 0:
                await bridge.stop()


def _ask(
    asks: trio.MemorySendChannel[asyncio.Future[outcome.Outcome[_T]]],
    answer: asyncio.Future[outcome.Outcome[_T]],
) -> None:
    """Ask the trio side for the next item; run by the trio run, where nothing may raise."""
    # A trio side that has ended (its stream failed to open, or failed) has closed its
    # end: the asyncio side sees its task end instead of an answer.
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        asks.send_nowait(answer)


async def _answer(
    questions: trio.MemoryReceiveChannel[asyncio.Future[outcome.Outcome[_T]]],
    iterator: AsyncIterator[_T],
    loop: asyncio.AbstractEventLoop,
) -> None:
    async for answer in questions:
        try:
            item = await anext(iterator)
        except StopAsyncIteration as end:
            _post(loop, _settle, answer, outcome.Error(end))
            return
        _post(loop, _settle, answer, outcome.Value(item))


async def _quietly(served: asyncio.Future[Any]) -> None:
    """Wait for the stream's trio task; raise its error, but not the cancellation that ended it."""
    try:
        await served
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise


async def _awaited(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    called = fn(*args, **kwargs)
    if not inspect.isawaitable(called):
        name = getattr(fn, "__qualname__", repr(fn))
        raise TypeError(
            f"from_asyncio awaits what {name} returns, and it returned a "
            f"{type(called).__name__}: for a stream, use stream_from_asyncio"
        )
    return await called


def _running_loop(caller: str) -> asyncio.AbstractEventLoop:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError(
            f"{caller} is awaited from asyncio; in trio, await the function itself"
        ) from None


def _bridge_for(loop: asyncio.AbstractEventLoop) -> _Bridge:
    bridge = _bridges.get(loop)
    if bridge is None or bridge.stopping:
        bridge = _bridges[loop] = _Bridge(loop)
    return bridge


class _Bridge:
    """One trio run in a thread of its own, running calls for one asyncio event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.calls = 0
        "Calls running or about to: the last one to end stops the run."
        self.stopping = False
        self._started: asyncio.Future[tuple[trio.lowlevel.TrioToken, trio.Nursery]] = (
            loop.create_future()
        )
        self._ended: asyncio.Future[None] = loop.create_future()
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._running: set[asyncio.Future[Any]] = set()
        "Each running call's future, settled by `_finish` should the run end under it."
        self._failure: BaseException | None = None
        "What ended the trio run, when something in trio failed."
        # A daemon thread: were the event loop stopped with calls still running,
        # the program could still exit.
        self._thread = threading.Thread(
            target=self._thread_main, name="plancontracts trio bridge", daemon=True
        )
        self._thread.start()

    async def run(self, call: Callable[[], Awaitable[_T]]) -> _T:
        """Run `call()` as a task of the trio run; see `from_asyncio` for cancellation."""
        await self.ready()
        done: asyncio.Future[outcome.Outcome[_T]] = self.loop.create_future()
        task = _Task(call, done, self.loop)
        self._running.add(done)
        try:
            self.send(self._spawn, task, contextvars.copy_context())
            try:
                result = await asyncio.shield(done)
            except asyncio.CancelledError:
                self.send(task.cancel)
                await _wait_out(done)
                result = done.result()
                if isinstance(result, outcome.Error) and not _only_cancelled(result.error):
                    return result.unwrap()  # the error it ended with says more than CancelledError
                raise
        finally:
            self._running.discard(done)
        if isinstance(result, outcome.Error) and _only_cancelled(result.error):
            # Cancelled without being asked: the run itself is ending under the call.
            await _wait_out(self._ended)
            raise self._ended_under_a_call()
        return result.unwrap()

    async def ready(self) -> None:
        """Wait until the trio run has started (at once after the first call)."""
        if self._token is None:
            self._token, self._nursery = await asyncio.shield(self._started)

    def send(self, fn: Callable[..., object], *args: object) -> None:
        """Call `fn(*args)` in the trio run, soon: from the event loop's thread.

        `fn` must not raise: an error there ends the whole trio run (TrioInternalError).
        """
        assert self._token is not None, "sent before the run started"
        # A run that has ended takes nothing more: `_finish` has settled every call.
        with contextlib.suppress(trio.RunFinishedError):
            self._token.run_sync_soon(fn, *args)

    async def stop(self) -> None:
        """End the trio run once its last call has ended, and wait for its thread to end."""
        self.stopping = True
        if _bridges.get(self.loop) is self:
            del _bridges[self.loop]
        cancelled = await _wait_out(self._started)
        if self._started.exception() is None:
            await self.ready()
            assert self._nursery is not None
            self.send(self._nursery.cancel_scope.cancel)
        cancelled = await _wait_out(self._ended) or cancelled
        # The run has ended and said so as its thread's last act: this join is at once.
        self._thread.join()
        if cancelled:
            raise asyncio.CancelledError

    def _spawn(self, task: _Task[Any], context: contextvars.Context) -> None:
        assert self._nursery is not None
        # Started inside the caller's context, so the task runs with a copy of it.
        context.run(self._nursery.start_soon, task.run)

    def _thread_main(self) -> None:
        ended = outcome.capture(trio.run, self._serve)
        self._post(self._finish, ended)

    async def _serve(self) -> None:
        async with trio.open_nursery() as nursery:
            self._post(_settle, self._started, (trio.lowlevel.current_trio_token(), nursery))
            await trio.sleep_forever()

    def _finish(self, ended: outcome.Outcome[None]) -> None:
        self._failure = ended.error if isinstance(ended, outcome.Error) else None
        # New calls go to a new run.
        self.stopping = True
        if _bridges.get(self.loop) is self:
            del _bridges[self.loop]
        if not self._started.done():
            self._started.set_exception(
                RuntimeError(f"the trio run did not start: {self._failure!r}")
            )
        for done in self._running:
            _settle(done, outcome.Error(self._ended_under_a_call()))
        self._ended.set_result(None)

    def _ended_under_a_call(self) -> RuntimeError:
        error = RuntimeError(f"the trio run ended under the call: {self._failure!r}")
        error.__cause__ = self._failure
        return error

    def _post(self, fn: Callable[..., object], *args: object) -> None:
        _post(self.loop, fn, *args)


class _Task(Generic[_R]):
    """One call, as a trio task: its result goes back to the event loop as an outcome."""

    def __init__(
        self,
        call: Callable[[], Awaitable[_R]],
        done: asyncio.Future[outcome.Outcome[_R]],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._call = call
        self._done = done
        self._loop = loop
        self._scope: trio.CancelScope | None = None
        self._cancelled = False

    async def run(self) -> None:
        with trio.CancelScope() as self._scope:
            if self._cancelled:
                self._scope.cancel()
            result = await outcome.acapture(self._call)
        _post(self._loop, _settle, self._done, result)

    def cancel(self) -> None:
        # Asked for before the task had started: it starts cancelled.
        self._cancelled = True
        if self._scope is not None:
            self._scope.cancel()


def _post(loop: asyncio.AbstractEventLoop, fn: Callable[..., object], *args: object) -> None:
    """Call `fn(*args)` on the event loop's thread, soon: from the trio run's thread."""
    # A closed event loop refuses: nothing is waiting for the answer any more.
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(fn, *args)


def _settle(future: asyncio.Future[_T], value: _T) -> None:
    if not future.done():
        future.set_result(value)


async def _wait_out(future: asyncio.Future[Any]) -> bool:
    """Wait until `future` is done, whatever cancels the waiting; whether anything tried."""
    cancelled = False
    while not future.done():
        try:
            await asyncio.wait({future})
        except asyncio.CancelledError:
            cancelled = True
    return cancelled


def _only_cancelled(error: BaseException) -> bool:
    if isinstance(error, BaseExceptionGroup):
        return error.split(trio.Cancelled)[1] is None
    return isinstance(error, trio.Cancelled)
