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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import msgspec

from ...generated import Contract
from .errors import ContractError, ToolValidationError, Violation
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
    (the plan, the draft) and keeping or saving it in `adopt`.
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

    def call(self, tool: str, arguments: Any) -> CallResult[State]:
        """Call the tool named `tool` with `arguments`, a parsed JSON value (normally a dict).

        Never raises for a bad call: an unknown tool, arguments that break its
        contract, a state that forbids the call and a state that cannot be
        kept (`adopt`) are all a result whose `error` says why.
        """
        latest = self._state
        try:
            handled = self._handlers.handle(tool, latest, arguments, self._context)
            state = self.adopt(tool, handled)
        except ToolValidationError as error:
            return self.refuse(tool, error)
        self._state = state
        return CallResult(tool, handled.result, None, handled.message, state)

    def refuse(self, tool: str, error: ToolValidationError) -> CallResult[State]:
        """A call refused, before or by its tool: the state stays as it was."""
        return CallResult(tool, None, error, str(error), self._state)

    def adopt(self, tool: str, handled: Handled[State]) -> State:
        """The state to go on with after a call of `tool` did `handled`.

        The default keeps `handled.state`. A family overrides it to save the
        state first, or to record it; raising `ToolValidationError` refuses
        the call, and the state stays as it was.
        """
        return handled.state


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
