"""Any contract, written by any model: asked, judged, and asked again with what was wrong.

    recipe = await write(contracts["recipe"], "A soup for four", writer=writer)
    plan = write_sync(PLAN, messages, writer=writer, budget=Budget(attempts=5, seconds=60))
    async for partial in write(RECIPE, "A soup", writer=writer, stream=True):
        print(partial.value)                     # the longest complete prefix, as it grows

The model writes under the contract's decoding profile (`contract_profile`:
valid by construction on a local model; the same profile is a server's
structured-output constraint). Every answer is then judged by the contract
itself, its rules beyond the schema included, and by the caller's own
`check`; an answer refused is asked again, the refused answer and its
violations (each with its JSON Pointer) added to the conversation, until one
is accepted or the budget (attempts, tokens, seconds) is spent. The family
generators write through the same loop (`write_checked`) with their own
profiles and judges.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, aclosing, asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from itertools import islice
from typing import Any, Generic, Literal, Protocol, TypeVar, overload

import msgspec
import trio
from trio.abc import ReceiveChannel

from ...generated import Contract
from ..core.contracts import AnyContract, contract_name, contract_schema
from ..core.errors import (
    Attempt,
    ContractError,
    GenerationFailed,
    MalformedJSON,
    UnusableSchema,
    Violation,
    Violations,
    WriteFailed,
)
from ..core.profiles import Bounds, contract_profile
from ..core.telemetry import (
    AttributeValue,
    Told,
    capturing_content,
    content_json,
    count,
    measure,
    span,
    tracing,
)
from ..core.validation import decode
from .chat import Message
from .writer import Writer

__all__ = [
    "FAMILY_ATTEMPTS",
    "KEPT_REFUSALS",
    "PROFILE_BOUNDS",
    "ROLES",
    "SHOWN_ANSWER",
    "SHOWN_VIOLATIONS",
    "AttemptWatcher",
    "Budget",
    "Check",
    "Partial",
    "decoding_schema",
    "first_messages",
    "profile_violations",
    "refusal_message",
    "watching_attempts",
    "write",
    "write_checked",
    "write_sync",
    "write_under_profile",
]

_T = TypeVar("_T")

SHOWN_ANSWER = 4000
"Characters of a refused answer kept in its `Attempt` and shown back to the model."
SHOWN_VIOLATIONS = 20
"Violations of a refused answer shown back to the model; the rest are counted."
ROLES = ("system", "user", "assistant")
"The roles a message may have."
KEPT_REFUSALS = 2
"Refused answers kept in the conversation, each with its violations: the most recent ones."

PROFILE_BOUNDS = Bounds()
"The decoding profile's bounds where a contract sets none, unless `write` is given others."

Check = Callable[[Any], Iterable[Violation]]
"A caller's own check of an answer the contract accepted: its violations, none when it passes."


@dataclass(frozen=True)
class Budget:
    """What `write` may spend before it gives up: attempts, tokens, seconds.

    `tokens` and `seconds` count every attempt together; None sets no limit.
    """

    attempts: int = 3
    tokens: int | None = None
    seconds: float | None = None

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"a budget allows at least 1 attempt, not {self.attempts}")
        if self.tokens is not None and self.tokens < 1:
            raise ValueError(f"a token budget is at least 1, not {self.tokens}")
        if self.seconds is not None and not self.seconds > 0:
            raise ValueError(f"a time budget is more than 0 seconds, not {self.seconds}")


@dataclass(frozen=True)
class Partial(Generic[_T]):
    """One step of a streamed `write`: the answer so far, and at the end the accepted document.

    `value` is the JSON value of the longest complete prefix of the answer
    (strings once closed, numbers once finished); it is a fresh value each
    time, never changed afterwards. `attempt` counts from 1: when an answer
    is refused, the next partials are those of the next attempt and start
    again from nothing. The last partial has `done` True and `document`
    the contract's typed value.
    """

    value: Any
    attempt: int
    tokens: int
    done: bool = False
    document: _T | None = None


def decoding_schema(contract: AnyContract, bounds: Bounds = PROFILE_BOUNDS) -> dict[str, Any]:
    """The schema a model writes `contract` under: its decoding profile, else its own schema.

    A user's contract in keywords the profile deriver does not read
    (`allOf`, a list of types, another draft...) is written under its own
    self-contained schema, which the local model's grammar compiler or the
    server reads as far as it can; every answer is judged by the contract
    either way.
    """
    try:
        return contract_profile(contract, bounds, whole=True)
    except UnusableSchema:
        return contract_schema(contract)


def first_messages(contract: AnyContract, messages: str | Sequence[Message]) -> list[Message]:
    """The conversation `write` starts with: `messages`, after a system message if none has one.

    A string is one user message. The system message added names the
    contract and shows its schema text (`schema_text`), which is what a
    model reads of the contract beside the constraint.
    """
    from ..core.schema_text import schema_text

    given = [{"role": "user", "content": messages}] if isinstance(messages, str) else list(messages)
    for message in given:
        if not isinstance(message, dict) or not {"role", "content"} <= message.keys():
            raise TypeError("each message is a dict with a role and a content")
        if message["role"] not in ROLES or not isinstance(message["content"], str):
            raise ValueError(
                f"a message's role is one of {', '.join(ROLES)} and its content a string, "
                f"not {message['role']!r}"
            )
    if any(message["role"] == "system" for message in given):
        return given
    name = contract_name(contract)
    system = (
        f"Answer with one JSON document of the contract `{name}`, and nothing else.\n\n"
        f"{schema_text(contract)}"
    )
    return [{"role": "system", "content": system}, *given]


def refusal_message(violations: Violations) -> str:
    """What a model reads after an answer of its was refused: each violation with its pointer."""
    shown = [f"- {violation}" for violation in violations[:SHOWN_VIOLATIONS]]
    more = len(violations) - len(shown)
    if more > 0 or not violations.complete:
        shown.append(f"- and {'more than ' if not violations.complete else ''}{more} more")
    listed = "\n".join(shown)
    return (
        f"That answer was refused ({violations.summary()}):\n{listed}\n"
        "Write the whole document again, corrected."
    )


class AttemptWatcher(Protocol):
    """Told of each answer `write_checked` asks for, as the model starts and stops writing it."""

    def started(self, number: int, attempts: int, answer: str) -> None:
        """Answer `number` of at most `attempts`, named `answer` (`Plan JSON`), is being written."""
        ...

    def ended(self) -> None:
        """The answer last started is written, failed or was cancelled; it is judged next."""
        ...


_attempt_watchers: ContextVar[tuple[AttemptWatcher, ...]] = ContextVar(
    "plancontracts_attempt_watchers", default=()
)


@contextmanager
def watching_attempts(watcher: AttemptWatcher) -> Iterator[None]:
    """Within the block, `watcher` is told as each answer of `write_checked` starts and ends.

    What a progress display reads (`commandkit.progress`), beside the tokens
    `watching_tokens` counts. Context-local, as `watching_tokens` is; the
    watcher runs in the caller's trio thread and must not block.
    """
    token = _attempt_watchers.set((*_attempt_watchers.get(), watcher))
    try:
        yield
    finally:
        _attempt_watchers.reset(token)


Judge = Callable[[str], Awaitable[_T | Violations]]
"Reads an answer's text: the accepted value, or why it is refused (never empty)."


async def write_checked(
    writer: Writer,
    messages: Sequence[Message],
    schema: dict[str, Any],
    judge: Judge[_T],
    *,
    budget: Budget = Budget(),
    answer: str = "JSON",
    max_tokens: int = 0,
    seed: int | None = None,
    on_attempt: Callable[[Attempt], None] | None = None,
    on_text: Callable[[str, int, int], Awaitable[None]] | None = None,
    what: str = "JSON",
) -> _T:
    """Ask `writer` under `schema` until `judge` accepts an answer or `budget` is spent.

    Each refused answer is added to the conversation with its violations
    (`refusal_message`) and asked again. `max_tokens` bounds one answer (0:
    what the context or server leaves), and the token budget what is left
    of it. `on_attempt` hears of every attempt as it ends, accepted or not;
    `on_text` is awaited with each piece of an answer as it arrives, the
    tokens so far and the attempt's number (a new attempt starts again from
    nothing). A writer's
    failure (no answer at all: GenerationFailed, ServerFailed) is an
    attempt refused with one violation at the document's root. Raises
    WriteFailed, with every attempt, when the budget is spent.

    Traced (`core.telemetry`) as a span `write WHAT` (`what`: the contract,
    or the command writing) holding one GenAI `chat` span per answer, with
    its tokens and, refused, its violations' count.
    """
    conversation = list(messages)
    attempts: list[Attempt] = []
    spent = 0
    model = _model_attributes(writer)
    named = str(model.get("gen_ai.request.model", ""))[:200]  # a span name, a server's to say
    deadline = math.inf if budget.seconds is None else trio.current_time() + budget.seconds
    with span(
        f"write {what}",
        {
            "plancontracts.contract": what,
            "plancontracts.attempts.budget": budget.attempts,
            "gen_ai.request.model": named or None,
            "gen_ai.output.type": "json",
        },
    ) as writing:
        with trio.move_on_at(deadline) as timer:
            for number in range(1, budget.attempts + 1):
                limit = max_tokens
                if budget.tokens is not None:
                    left = budget.tokens - spent
                    limit = left if limit <= 0 else min(limit, left)
                writing.set("plancontracts.attempts.used", number)
                with span(
                    f"chat {named}".strip(),
                    {
                        **model,
                        "gen_ai.operation.name": "chat",
                        "gen_ai.output.type": "json",
                        "gen_ai.request.max_tokens": limit if limit > 0 else None,
                        "gen_ai.request.seed": seed,
                        "plancontracts.attempt": number,
                    },
                    kind="client",
                ) as call:
                    if call.recording and capturing_content():
                        call.set("gen_ai.input.messages", _messages_attribute(conversation))
                    started = trio.current_time()
                    pieces: list[str] = []
                    tokens = 0
                    read = 0
                    refused: Violations | None = None
                    watchers = _attempt_watchers.get()
                    for watcher in watchers:
                        watcher.started(number, budget.attempts, answer)
                    stream = writer.stream_chat(
                        conversation, schema, answer=answer, max_tokens=limit, seed=seed
                    )
                    try:
                        # Closed here however the loop ends, not when the generator is collected:
                        # the model stops writing, the server's connection is closed, at once.
                        async with aclosing(stream):
                            async for piece in stream:
                                pieces.append(piece.text)
                                tokens += piece.tokens
                                read += piece.prompt_tokens
                                if budget.tokens is not None and spent + tokens > budget.tokens:
                                    # A server may write past the `max_tokens` it was sent: the
                                    # answer is cut here, where the budget ends.
                                    refused = Violations([Violation("", _past_the_token_budget)])
                                    break
                                if on_text is not None:
                                    await on_text(piece.text, tokens, number)
                    except GenerationFailed as failure:
                        refused = Violations([Violation("", f"no answer: {failure}")])
                    finally:
                        for watcher in watchers:
                            watcher.ended()
                        _told_usage(call, model, read, tokens, trio.current_time() - started)
                    spent += tokens
                    text = "".join(pieces)
                    judged: _T | Violations = refused if refused is not None else await judge(text)
                    seconds = trio.current_time() - started
                    shown = text if len(text) <= SHOWN_ANSWER else text[:SHOWN_ANSWER] + "..."
                    if call.recording and capturing_content():
                        call.set("gen_ai.output.messages", _answer_attribute(text))
                    outcome = {"plancontracts.contract": what, **_metric_model(model)}
                    if not isinstance(judged, Violations):
                        call.set("plancontracts.outcome", "accepted")
                        writing.set("plancontracts.outcome", "accepted")
                        count(
                            "plancontracts.write.attempts",
                            1,
                            {**outcome, "plancontracts.outcome": "accepted"},
                        )
                        if on_attempt is not None:
                            on_attempt(Attempt(number, tokens, seconds, Violations(), shown))
                        return judged
                    _told_refusal(call, judged, refused is None)
                    count(
                        "plancontracts.write.attempts",
                        1,
                        {**outcome, "plancontracts.outcome": "refused"},
                    )
                    count("plancontracts.write.refusals", 1, outcome)
                    if refused is None:  # an answer, refused: a server's client counts it
                        writer.refused()
                    attempt = Attempt(number, tokens, seconds, judged, shown)
                    attempts.append(attempt)
                    if on_attempt is not None:
                        on_attempt(attempt)
                if budget.tokens is not None and spent >= budget.tokens:
                    writing.set("plancontracts.outcome", "token budget spent")
                    raise WriteFailed(
                        f"the token budget ({budget.tokens}) was spent in {_count(attempts)} and "
                        f"no answer was accepted: {_last_reason(attempts)}",
                        attempts,
                    )
                if refused is None:
                    # The last refusals only: a long run of them would make every request
                    # longer than the one before, up to what the model's context holds.
                    kept = conversation[len(messages) :][-2 * (KEPT_REFUSALS - 1) :]
                    conversation = [
                        *messages,
                        *kept,
                        {"role": "assistant", "content": shown},
                        {"role": "user", "content": refusal_message(judged)},
                    ]
        if timer.cancelled_caught:
            writing.set("plancontracts.outcome", "time budget spent")
            raise WriteFailed(
                f"the time budget ({budget.seconds:g} s) was spent in {_count(attempts, True)} "
                f"and no answer was accepted" + (f": {_last_reason(attempts)}" if attempts else ""),
                attempts,
            )
        writing.set("plancontracts.outcome", "attempts spent")
        raise WriteFailed(
            f"no answer was accepted in {_count(attempts)}: {_last_reason(attempts)}", attempts
        )


def _model_attributes(writer: Writer) -> dict[str, AttributeValue]:
    """What a model call's span says of `writer`: its own `otel_attributes`, or its type."""
    described = getattr(writer, "otel_attributes", None)
    if isinstance(described, dict):
        return dict(described)
    return {"gen_ai.request.model": type(writer).__name__}


def _metric_model(model: dict[str, AttributeValue]) -> dict[str, AttributeValue]:
    """The attributes of a model a metric keeps: the model and provider, never its address."""
    return {
        key: model[key] for key in ("gen_ai.provider.name", "gen_ai.request.model") if key in model
    }


def _told_usage(
    call: Told, model: dict[str, AttributeValue], read: int, written: int, seconds: float
) -> None:
    """An answer's tokens and time, on its span and in the GenAI conventions' metrics."""
    call.update({"gen_ai.usage.input_tokens": read or None, "gen_ai.usage.output_tokens": written})
    if not call.recording and not tracing():
        return
    about = {"gen_ai.operation.name": "chat", **_metric_model(model)}
    measure("gen_ai.client.operation.duration", seconds, about)
    if read:
        measure("gen_ai.client.token.usage", read, {**about, "gen_ai.token.type": "input"})
    measure("gen_ai.client.token.usage", written, {**about, "gen_ai.token.type": "output"})


def _told_refusal(call: Told, violations: Violations, answered: bool) -> None:
    """A refused answer on its span: failed, how many violations, and their lines if captured."""
    call.set("plancontracts.outcome", "refused")
    call.set("plancontracts.violations.count", len(violations))
    if capturing_content():
        call.set("plancontracts.violations", [str(violation) for violation in violations])
    call.fail(
        "plancontracts.refused" if answered else "plancontracts.no_answer",
        violations.summary() if answered else str(violations[0]),
    )


def _messages_attribute(conversation: Sequence[Message]) -> str:
    """The conversation as the GenAI conventions' `gen_ai.input.messages` (JSON text)."""
    return content_json(
        [
            {"role": message["role"], "parts": [{"type": "text", "content": message["content"]}]}
            for message in conversation
        ]
    )


def _answer_attribute(text: str) -> str:
    """An answer as the GenAI conventions' `gen_ai.output.messages` (JSON text)."""
    return content_json([{"role": "assistant", "parts": [{"type": "text", "content": text}]}])


_past_the_token_budget = "the answer went past the token budget, and was cut there"


FAMILY_ATTEMPTS = 2
"Answers a family's generator asks for before it falls back: the first, and one re-ask."


async def write_under_profile(
    writer: Writer,
    messages: Sequence[Message],
    schema: dict[str, Any],
    *,
    answer: str,
    max_tokens: int,
    seed: int | None,
    accept: Callable[[dict[str, Any]], _T],
    say: Callable[[str], None],
    who: str,
    attempts: int = FAMILY_ATTEMPTS,
    on_text: Callable[[str, int, int], Awaitable[None]] | None = None,
    explain: Callable[[Any, Violations], Violations] | None = None,
) -> _T:
    """How the families' generators write: under their own profile, re-asked when refused.

    An answer is refused when it is not a JSON object `schema` accepts (a
    server that does not hold the profile: llama-cpp-python's drops patterns
    and `prefixItems`), or when `accept` (the family's conversion, which
    judges it by its contract) raises ContractError or ProfileBug. Each
    refusal is said in one line, starting with `who` (`think`). Raises
    WriteFailed, a GenerationFailed, when `attempts` answers were refused:
    the generator then falls back as it did before there was a re-ask.
    `on_text` hears each piece as `write_checked` says. `explain`, given
    an answer the profile refused and why, may say it in the contract's
    words (a pattern says only that it does not match).
    """
    from ..core.errors import ProfileBug
    from ..core.jsontext import parse

    async def judge(text: str) -> _T | Violations:
        try:
            document = parse(text.encode())
        except MalformedJSON as error:
            return Violations([Violation(error.pointer, error.message)])
        refused = profile_violations(document, schema)
        if refused:
            return refused if explain is None else explain(document, refused)
        try:
            return accept(document)
        except ContractError as error:
            return error.violations
        except ProfileBug as bug:
            return Violations([Violation("", str(bug))])

    def said(attempt: Attempt) -> None:
        if attempt.violations:
            again = "; asking again" if attempt.number < attempts else ""
            first = attempt.violations[0]
            more = len(attempt.violations) - 1
            also = f" (and {more} more)" if more else ""
            say(f"{who}: answer {attempt.number} of {attempts} refused: {first}{also}{again}")

    return await write_checked(
        writer,
        messages,
        schema,
        judge,
        budget=Budget(attempts),
        answer=answer,
        max_tokens=max_tokens,
        seed=seed,
        on_attempt=said,
        on_text=on_text,
        what=who,
    )


def profile_violations(document: Any, schema: dict[str, Any]) -> Violations:
    """Why `schema` (a decoding profile) refuses `document`: none when it is an object it accepts.

    Patterns are matched whole, as the grammar holds them (`core.patterns`).
    """
    from jsonschema.exceptions import best_match

    from ..core.errors import MAX_VIOLATIONS
    from ..core.jsontext import pointer
    from ..core.patterns import pattern_validator

    if not isinstance(document, dict):
        return Violations([Violation("", "the answer is not a JSON object")])
    errors = list(islice(pattern_validator()(schema).iter_errors(document), MAX_VIOLATIONS + 1))
    if not errors:
        return Violations()
    # The most telling first: inside `anyOf` the branch the answer came nearest to, not
    # "is not valid under any of the given schemas" (jsonschema's own ranking).
    best = best_match(errors)
    found = [best, *(error for error in errors if error is not best)]
    shown = [
        Violation(pointer(error.absolute_path), _cut(error.message), str(error.validator))
        for error in found[:MAX_VIOLATIONS]
    ]
    return Violations(shown, complete=len(errors) <= MAX_VIOLATIONS)


def _cut(message: str) -> str:
    return message if len(message) <= 300 else message[:300] + "..."


def _count(attempts: list[Attempt], running: bool = False) -> str:
    done = len(attempts) + running
    return f"{done} attempt{'s' if done != 1 else ''}"


def _last_reason(attempts: list[Attempt]) -> str:
    last = attempts[-1].violations
    first = str(last[0]) if last else "refused"
    return f"the last one: {first}" + (f" (and {len(last) - 1} more)" if len(last) > 1 else "")


def contract_judge(contract: AnyContract, check: Check | None) -> Judge[Any]:
    """The judge `write` uses: the contract's strict decode, then the caller's `check`."""

    async def judge(text: str) -> Any:
        try:
            value = decode(contract, text)
        except ContractError as error:
            return error.violations
        except MalformedJSON as error:
            return Violations([Violation("", str(error))])
        if check is not None:
            # In a thread: a slow check is stopped by the time budget (abandoned,
            # its answer never used) and never holds the other tasks back.
            found = await trio.to_thread.run_sync(_checked, check, value, abandon_on_cancel=True)
            if found:
                return found
        return value

    return judge


def _checked(check: Check, value: Any) -> Violations:
    """What `check` says of `value`: at most MAX_VIOLATIONS + 1 violations are read.

    Raises TypeError, naming the check, when it returns something other than
    an iterable of Violation (None is no violation).
    """
    from ..core.errors import MAX_VIOLATIONS

    said = check(value)
    if said is None:
        return Violations()
    name = getattr(check, "__name__", "check")
    try:
        found = list(islice(iter(said), MAX_VIOLATIONS + 1))
    except TypeError:
        raise TypeError(
            f"the check {name} returned {type(said).__name__}, not an iterable of Violation"
        ) from None
    for item in found:
        if not isinstance(item, Violation):
            raise TypeError(
                f"the check {name} returned a {type(item).__name__} among its violations: "
                "return Violation(pointer, message) for each"
            )
    return Violations(found[:MAX_VIOLATIONS], complete=len(found) <= MAX_VIOLATIONS)


@overload
def write(
    contract: Contract[_T],
    messages: str | Sequence[Message],
    *,
    writer: Writer,
    attempts: int | None = None,
    budget: Budget = Budget(),
    check: Check | None = None,
    stream: Literal[False] = False,
    max_tokens: int = 0,
    seed: int | None = None,
    bounds: Bounds = PROFILE_BOUNDS,
    on_attempt: Callable[[Attempt], None] | None = None,
) -> Awaitable[_T]: ...
@overload
def write(
    contract: str,
    messages: str | Sequence[Message],
    *,
    writer: Writer,
    attempts: int | None = None,
    budget: Budget = Budget(),
    check: Check | None = None,
    stream: Literal[False] = False,
    max_tokens: int = 0,
    seed: int | None = None,
    bounds: Bounds = PROFILE_BOUNDS,
    on_attempt: Callable[[Attempt], None] | None = None,
) -> Awaitable[Any]: ...
@overload
def write(
    contract: Contract[_T],
    messages: str | Sequence[Message],
    *,
    writer: Writer,
    attempts: int | None = None,
    budget: Budget = Budget(),
    check: Check | None = None,
    stream: Literal[True],
    max_tokens: int = 0,
    seed: int | None = None,
    bounds: Bounds = PROFILE_BOUNDS,
    on_attempt: Callable[[Attempt], None] | None = None,
) -> AbstractAsyncContextManager[ReceiveChannel[Partial[_T]]]: ...
@overload
def write(
    contract: str,
    messages: str | Sequence[Message],
    *,
    writer: Writer,
    attempts: int | None = None,
    budget: Budget = Budget(),
    check: Check | None = None,
    stream: Literal[True],
    max_tokens: int = 0,
    seed: int | None = None,
    bounds: Bounds = PROFILE_BOUNDS,
    on_attempt: Callable[[Attempt], None] | None = None,
) -> AbstractAsyncContextManager[ReceiveChannel[Partial[Any]]]: ...
def write(
    contract: AnyContract,
    messages: str | Sequence[Message],
    *,
    writer: Writer,
    attempts: int | None = None,
    budget: Budget = Budget(),
    check: Check | None = None,
    stream: bool = False,
    max_tokens: int = 0,
    seed: int | None = None,
    bounds: Bounds = PROFILE_BOUNDS,
    on_attempt: Callable[[Attempt], None] | None = None,
) -> Awaitable[Any] | AbstractAsyncContextManager[ReceiveChannel[Partial[Any]]]:
    """A document of `contract` written by `writer`, accepted by the contract and by `check`.

    `contract` is a bundled handle (`PLAN`), a name, or a user's contract
    (`load_contracts(...)["recipe"]`, or a handle of a generated package);
    `messages` a prompt or chat messages (`first_messages` adds the system
    message). `writer` is a loaded model or a server (`load_writer`).
    `attempts` overrides `budget.attempts`; `max_tokens` bounds one answer
    (0: what the model's context or the server leaves); `bounds` are the
    decoding profile's where the contract sets none (`decoding_schema`);
    `on_attempt` hears of each attempt as it ends.

    Awaited, it returns the contract's typed value. With `stream=True` it is
    an async context manager giving a channel of `Partial`s, the last one
    holding the document (a context, not a bare iterator, so that the
    writing stops when the block ends however it ends: PEP 789):

        async with write(RECIPE, "A soup", writer=writer, stream=True) as partials:
            async for partial in partials:
                ...

    Raises WriteFailed (every attempt's violations in `.attempts`) when the
    budget is spent, UnknownContractError for an unknown name, TypeError for
    a message that is not a dict with a role and a content or a writer that
    is none, ValueError for another role or `max_tokens` below 0; a `check`
    that raises raises through `write`.
    """
    if attempts is not None:
        budget = Budget(attempts, budget.tokens, budget.seconds)
    if max_tokens < 0:
        raise ValueError(f"max_tokens is 0 (no limit) or more, not {max_tokens}")
    if not callable(getattr(writer, "stream_chat", None)):
        raise TypeError(
            f"writer is a loaded model or server (load_writer), not {type(writer).__name__}"
        )
    conversation = first_messages(contract, messages)
    schema = decoding_schema(contract, bounds)
    judge = contract_judge(contract, check)
    if stream:
        return _streamed(
            writer, conversation, schema, judge, contract, budget, max_tokens, seed, on_attempt
        )
    return write_checked(
        writer,
        conversation,
        schema,
        judge,
        budget=budget,
        max_tokens=max_tokens,
        seed=seed,
        on_attempt=on_attempt,
        what=contract_name(contract),
    )


@asynccontextmanager
async def _streamed(
    writer: Writer,
    conversation: list[Message],
    schema: dict[str, Any],
    judge: Judge[Any],
    contract: AnyContract,
    budget: Budget,
    max_tokens: int,
    seed: int | None,
    on_attempt: Callable[[Attempt], None] | None,
) -> AsyncIterator[ReceiveChannel[Partial[Any]]]:
    """`write_checked` in a task of its own, its partial values handed out as they grow.

    A partial is made only when the reader waits for one (each is the whole
    value so far, so a later one says all an earlier one would): a slow
    reader never holds the model back, nor piles up copies.
    """
    from ..core.partial import MISSING, PartialJSON, prefix_violations

    send, receive = trio.open_memory_channel[Partial[Any]](0)
    state = _StreamState()

    def attempt_ended(attempt: Attempt) -> None:
        state.parser = None
        state.tokens = attempt.tokens
        if on_attempt is not None:
            on_attempt(attempt)

    async def on_text(text: str, tokens: int, attempt: int) -> None:
        if state.parser is None:  # the first piece of an attempt
            state.parser, state.attempt, state.held = PartialJSON(), state.attempt + 1, False
            state.sent = b""
        if state.held:
            return
        try:
            grew = state.parser.feed(text)
        except MalformedJSON:
            state.held = True  # the whole answer is judged, and refused, at its end
            return
        value = state.parser.value
        if not grew or value is MISSING or not receive.statistics().tasks_waiting_receive:
            return
        encoded = msgspec.json.encode(value)
        if encoded == state.sent:  # a container closed: the same value again
            return
        if prefix_violations(contract, value):
            state.held = True  # refused whatever came next: no partial of it is handed out
            return
        state.sent = encoded
        # Decoded from its encoding: a copy of its own, never changed by what is read next.
        send.send_nowait(Partial(msgspec.json.decode(encoded), state.attempt, tokens))

    async def run() -> None:
        async with send:
            document = await write_checked(
                writer,
                conversation,
                schema,
                judge,
                budget=budget,
                max_tokens=max_tokens,
                seed=seed,
                on_attempt=attempt_ended,
                on_text=on_text,
                what=contract_name(contract),
            )
            value = msgspec.to_builtins(document)
            await send.send(Partial(value, max(state.attempt, 1), state.tokens, True, document))

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            async with receive:
                yield receive
            nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # The nursery is a detail: one failure (WriteFailed, a writer's error) is itself.
        if len(group.exceptions) == 1 and not isinstance(group.exceptions[0], BaseExceptionGroup):
            raise group.exceptions[0] from None
        raise


@dataclass
class _StreamState:
    parser: Any = None
    "The current attempt's PartialJSON; None between attempts."
    attempt: int = 0
    tokens: int = 0
    held: bool = False
    "Whether this attempt's partials are held back: its answer is refused whatever comes."
    sent: bytes = b""
    "The encoding of the last partial handed out in this attempt."


def write_sync(
    contract: AnyContract,
    messages: str | Sequence[Message],
    *,
    writer: Writer,
    attempts: int | None = None,
    budget: Budget = Budget(),
    check: Check | None = None,
    max_tokens: int = 0,
    seed: int | None = None,
    bounds: Bounds = PROFILE_BOUNDS,
    on_attempt: Callable[[Attempt], None] | None = None,
) -> Any:
    """`write`, awaited in a trio run of its own: for programs that are not async.

    Call it outside any event loop (from asyncio, see docs/asyncio.md).
    """

    async def written() -> Any:
        return await write(
            contract,
            messages,
            writer=writer,
            attempts=attempts,
            budget=budget,
            check=check,
            max_tokens=max_tokens,
            seed=seed,
            bounds=bounds,
            on_attempt=on_attempt,
        )

    try:
        trio.lowlevel.current_trio_token()
    except RuntimeError:
        return trio.run(written)
    raise RuntimeError("write_sync starts a trio run of its own: inside one, await write(...)")
