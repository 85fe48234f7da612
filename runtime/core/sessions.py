"""A session of tool calls: one state, changed only by calls of a family's tools.

Session plans keep a to-do plan this way, story packages a draft. Each
family brings its state, its tools (`tools.ToolSet`) and a handler per tool;
this module is the rest, written once:

    HANDLERS: Handlers[SessionPlan | None, None] = Handlers(TOOLS)

    @HANDLERS.handles(SESSION_ADD_STEP)
    def _add(tool: Tool, plan: SessionPlan | None, value: Any, context: None) -> Handled[...]:
        arguments = arguments_of(tool, value)       # the first violation refuses the call
        ...
        return Handled(arguments, new_plan, "Added S003, pending.")

    session = ToolSession(HANDLERS, None, None)    # a family subclasses it
    done = session.call("planning_add_step", {...})  # a CallResult, never an exception

A handler checks the call and returns what it did (`Handled`), or raises
`ToolValidationError`, whose text is what the model that made the call reads
back. It changes nothing it was given: a refused call leaves the session's
state as it was, the very same object.

Each call (`call`, `refuse`) is one OpenTelemetry span, `execute_tool
{tool}`, as the GenAI conventions name a tool's execution
(`core.telemetry`), whatever family the session is of: a family changes how
a call is made (`perform`, `adopt`), never how it is told.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import msgspec

from ...generated import Contract
from .errors import ContractError, ToolValidationError, Violation
from .telemetry import Told, capturing_content, content_json, count, measure, span, tracing
from .tools import Tool, ToolSet
from .validation import convert

__all__ = [
    "CallResult",
    "Handled",
    "Handler",
    "Handlers",
    "ToolCall",
    "ToolSession",
    "arguments_of",
]

State = TypeVar("State")
Context = TypeVar("Context")


@dataclass(frozen=True)
class Handled(Generic[State]):
    """What a call that succeeded did."""

    result: msgspec.Struct
    "What the tool returns: a document of the tool's result contract."
    state: State
    "The state after the call."
    message: str
    "One line saying what the call did."
    changed: bool = True
    "Whether the call made a new state: False for reading it."


Handler = Callable[[Tool, State, Any, Context], Handled[State]]
"A tool's handler: given its tool, the latest state, the call's arguments and the context."


@dataclass(frozen=True)
class CallResult(Generic[State]):
    """What one tool call did: its result, or the error that refused it, and the state after it."""

    tool: str
    "The name of the tool called, as the call gave it."
    result: msgspec.Struct | None
    "What the tool returned, or None if the call was refused."
    error: ToolValidationError | None
    "Why the call was refused, or None if it succeeded."
    message: str
    "One line for the model: what the call did, or the error's text."
    state: State
    "The state after the call: the very same object as before it when the call was refused."

    @property
    def ok(self) -> bool:
        """Whether the call succeeded."""
        return self.error is None


@dataclass(frozen=True)
class ToolCall(Generic[State]):
    """One call a model made, and what it did."""

    tool: str
    "The tool's name."
    arguments: dict[str, Any]
    "The arguments as the call gave them (what the model wrote, with what code filled in)."
    result: CallResult[State]
    "What the call did: `result.ok`, `result.message` (what the model read back)."


class Handlers(Generic[State, Context]):
    """Each tool of a set and its handler, registered by the contract of the tool's arguments."""

    def __init__(self, tools: ToolSet) -> None:
        self.tools = tools
        self._by_name: dict[str, Handler[State, Context]] = {}

    def handles(
        self, parameters: Contract[Any]
    ) -> Callable[[Handler[State, Context]], Handler[State, Context]]:
        """Register the decorated function as the handler of the tool taking `parameters`."""

        def register(handler: Handler[State, Context]) -> Handler[State, Context]:
            self._by_name[self.tools.taking(parameters).name] = handler
            return handler

        return register

    def handle(self, tool: str, state: State, arguments: Any, context: Context) -> Handled[State]:
        """Call the handler of the tool named `tool`. Raises `ToolValidationError` to refuse it.

        An unknown tool is refused with an `UnknownToolError` naming the tools.
        """
        found = self.tools.named(tool)
        try:
            handler = self._by_name[found.name]
        except KeyError:
            raise LookupError(f"the {found.name} tool has no handler") from None
        return handler(found, state, arguments, context)


class ToolSession(Generic[State, Context]):
    """One state, changed only by calls of the tools of `handlers`; `context` goes to each.

    A family subclasses it, naming the state as its documents call it
    (the plan, the draft), keeping or saving it in `adopt`, and making a
    call its own way in `perform` (inside a transaction, say); `call` and
    `refuse` stay as they are, so that every call is traced alike.
    """

    def __init__(self, handlers: Handlers[State, Context], state: State, context: Context) -> None:
        self._handlers = handlers
        self._state = state
        self._context = context

    @property
    def tools(self) -> ToolSet:
        """The tools the session takes calls of."""
        return self._handlers.tools

    @property
    def state(self) -> State:
        """The state now."""
        return self._state

    @property
    def conversation_id(self) -> str | None:
        """The id a family gives the session (a plan session's id, a draft's package id).

        The `gen_ai.conversation.id` of its calls' spans; None (the default)
        where the family names none.
        """
        return None

    def call(self, tool: str, arguments: Any) -> CallResult[State]:
        """Call the tool named `tool` with `arguments`, a parsed JSON value (normally a dict).

        Never raises for a bad call: an unknown tool, arguments that break its
        contract, a state that forbids the call and a state that cannot be
        kept (`adopt`) are all a result whose `error` says why. The call is
        one `execute_tool` span (`_traced`), refused or not.
        """
        if not tracing():  # the common case: not even the clock is read
            return self.perform(tool, arguments)
        return self._traced(tool, arguments, lambda: self.perform(tool, arguments))

    def refuse(self, tool: str, error: ToolValidationError) -> CallResult[State]:
        """A call of `tool` refused before any tool ran (a line that is no call): one span too.

        The state stays as it was. Within `perform`, `refused` says the same
        without a span of its own: the call's span tells it.
        """
        if not tracing():
            return self.refused(tool, error)
        return self._traced(tool, None, lambda: self.refused(tool, error))

    def perform(self, tool: str, arguments: Any) -> CallResult[State]:
        """Make the call `call` is asked for: the tool's handler, then `adopt`. Never raises.

        A family overrides it to make the call inside something of its own
        (a store's transaction), calling this one within; it refuses with
        `refused`.
        """
        latest = self._state
        try:
            handled = self._handlers.handle(tool, latest, arguments, self._context)
            state = self.adopt(tool, handled)
        except ToolValidationError as error:
            return self.refused(tool, error)
        self._state = state
        return CallResult(tool, handled.result, None, handled.message, state)

    def refused(self, tool: str, error: ToolValidationError) -> CallResult[State]:
        """The result of a call refused, before or by its tool: the state stays as it was."""
        return CallResult(tool, None, error, str(error), self._state)

    def adopt(self, tool: str, handled: Handled[State]) -> State:
        """The state to go on with after a call of `tool` did `handled`.

        The default keeps `handled.state`. A family overrides it to save the
        state first, or to record it; raising `ToolValidationError` refuses
        the call, and the state stays as it was.
        """
        return handled.state

    def _traced(
        self, tool: str, arguments: Any, make: Callable[[], CallResult[State]]
    ) -> CallResult[State]:
        """What `make()` returns, made inside the `execute_tool` span of a call of `tool`.

        The span names the tool only when the session has one of that name:
        a name a model made up is what it wrote, content. `arguments` (None:
        the call had none to show) and the result are kept only where content
        is captured. A refused call fails the span (`plancontracts.refused`)
        and counts in `plancontracts.tool.failures`.
        """
        name = tool if any(each.name == tool for each in self.tools) else None
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.type": "function",
            "gen_ai.conversation.id": self.conversation_id,
        }
        started = time.monotonic()
        with span("execute_tool" if name is None else f"execute_tool {name}", attributes) as told:
            done = make()
            state = "ok" if done.error is None else "refused"
            told.set("plancontracts.tool.state", state)
            if done.error is not None:
                # Every refusal is at least the one problem its message says.
                told.set("plancontracts.violations.count", len(done.error.violations) or 1)
                told.fail("plancontracts.refused", done.message)
            if told.recording and capturing_content():
                _captured(told, arguments, done)
        measured: dict[str, str] = {"plancontracts.tool.state": state}
        if name is not None:
            measured["gen_ai.tool.name"] = name
        measure("plancontracts.tool.duration", time.monotonic() - started, measured)
        if done.error is not None:
            count("plancontracts.tool.failures", 1, measured)
        return done


def _captured(told: Told, arguments: Any, done: CallResult[Any]) -> None:
    """Put a call's arguments and what it returned on its span, as JSON text (content capture).

    A refused call returned the message its caller read back.
    """
    if arguments is not None:
        told.set("gen_ai.tool.call.arguments", content_json(arguments))
    if done.result is not None:
        told.set("gen_ai.tool.call.result", content_json(done.result))
    else:
        told.set("gen_ai.tool.call.result", done.message)


def arguments_of(tool: Tool, value: Any, explain: Callable[[Violation], str] | None = None) -> Any:
    """`value` converted to the type of `tool`'s arguments; the first violation refuses the call.

    One problem, at one field, is what a model can act on; the next call
    shows the next one. The first is the first in document order, except
    that a text too long is told its length before any character it holds:
    shortening it may drop the character too. `explain` may say the
    violation more clearly than its message. Raises `ToolValidationError`.
    """
    try:
        return convert(tool.parameters, value)
    except ContractError as error:
        first = error.violations[0]
        first = next(
            (
                violation
                for violation in error.violations
                if violation.pointer == first.pointer and violation.keyword == "maxLength"
            ),
            first,
        )
        message = explain(first) if explain is not None else first.message
        raise ToolValidationError(tool.name, first.pointer, message) from None
