"""Every error plancontracts raises on purpose, the violations they carry, how values are quoted.

The whole hierarchy lives here, drawn once; every layer and family raises
these, and the public fronts (`plancontracts`, each family's package)
re-export the ones their users catch:

    PlanContractsError                  catch it to catch them all
    ├── ContractError (ValueError)      a document breaks its contract: every violation
    ├── UnknownContractError (LookupError)
    ├── MalformedJSON (ValueError)      text that is not one well-formed JSON document
    ├── ProfileBug (AssertionError)     a document decoded under a profile breaks its contract
    ├── ToolValidationError (ValueError)  a tool call refused; its text is what the model reads
    │   └── UnknownToolError (LookupError)
    ├── UsageError                      the command line is wrong (exit status 2)
    ├── StreamError                     standard input or output, or a log, cannot be used
    ├── NoModel                         no model loads, and the work needs one
    ├── NotAModel                       a model candidate that cannot be used
    ├── GenerationFailed                no document the profile accepts was written
    │   ├── ServerFailed                a model server gave no answer to use
    │   ├── AnswerRefused               a model server's answer the profile refuses
    │   └── WriteFailed                 `write` spent its budget and accepted no answer
    ├── ProtocolViolation               a tool script broke the tool protocol
    ├── ScriptFailure                   a script's function ends its run with ok false
    ├── UnusableScript (LookupError)    a `toolPath` that names no usable script
    ├── UnusableSchema (ValueError)     a schema file or folder that cannot be read as contracts
    ├── TooLarge (ValueError)           a file larger than it may be
    ├── OutOfTime                       a schema's check ran past its deadline
    ├── MigrationFailed (ValueError)    a step upgrading a stored document failed or wrote a bad one
    ├── StoreError                      a story database that cannot be used
    ├── AssetGenerationError            the asset hook could not make an asset
    ├── PlayRefused (ValueError)        a story play choice not offered, or another package's state
    └── TooManyGoals (ValueError)       a goal list that is full

Two exceptions are control flow inside the package and never leave it:
`commandkit.signals.Stopped` (SIGTERM or SIGHUP, raised like Ctrl-C) and
`engine.checks.Rejected` (a plan refused before it runs, which becomes the
result's error). `tests/test_layers.py` holds every other exception class
of `runtime/` to this module.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_VIOLATIONS = 100
"""Violations listed for one document at most.

A hostile document can break its contract millions of times (a 16 MB array
of wrong items), and explaining each costs far more than the document itself,
so validation stops looking once it has found more than this many and says
that the list is cut (`Violations.complete`). Counting the rest exactly would
cost what listing them costs, so the number left is not given.
"""


class PlanContractsError(Exception):
    """The base of every error plancontracts raises on purpose: catch it to catch them all."""


@dataclass(frozen=True, slots=True)
class Violation:
    """One way a document breaks its contract.

    `pointer` is an RFC 6901 JSON Pointer to the offending value (or, for a
    missing field, to the object that lacks it); the empty string means the
    document as a whole. `message` is one line of plain text. `keyword` is
    the JSON Schema keyword the value breaks (`"pattern"`, `"required"`...),
    or None for a rule beyond the schema and for text that is not JSON; it
    tells where a violation comes from and takes no part in equality.
    """

    pointer: str
    message: str
    keyword: str | None = field(default=None, compare=False)

    def __str__(self) -> str:
        return f"{self.pointer or '(document)'}: {self.message}"


class Violations(tuple[Violation, ...]):
    """The violations found in one document, in document order: a tuple that knows if it is cut.

    `complete` is False when validation found more than `MAX_VIOLATIONS` and
    stopped looking: these are the first ones found, and there are more.
    """

    complete: bool

    def __new__(cls, listed: Iterable[Violation] = (), *, complete: bool = True) -> Violations:
        found = super().__new__(cls, listed)
        found.complete = complete
        return found

    def summary(self) -> str:
        """How many violations there are, in words: "1 violation", "more than 100 violations"."""
        count = len(self)
        if not self.complete:
            return f"more than {count} violations; the first {count} found are listed"
        return f"{count} violation{'s' if count != 1 else ''}"


def printable(text: str) -> str:
    """`text` with every non-printable character (newlines, bidi controls...) as a `\\uXXXX` escape.

    Messages and pointers can quote hostile input; this keeps each on one
    honest terminal line.
    """
    return "".join(ch if ch.isprintable() else f"\\u{ord(ch):04x}" for ch in text)


def shown(value: Any, limit: int = 60) -> str:
    """A short, printable, one-line rendering of a JSON value, cut at `limit` characters.

    Only what is shown is rendered, so quoting a value of any size or depth
    costs about `limit` characters of work.
    """
    pieces: list[str] = []
    length = 0
    for piece in _json_pieces(value, longest=limit + 1):
        pieces.append(piece)
        length += len(piece)
        if length > limit:
            break
    text = printable("".join(pieces))
    return text if len(text) <= limit else text[: limit - 1] + "…"


_LONGEST_NAME = 60
"The longest key written as it is, as long as `shown` quotes a value; the contracts' are shorter."


def dotted(pointer: str) -> str:
    """A JSON Pointer into a tool's arguments as a model writes it.

    `/steps/0/title` is `steps[0].title`; the arguments as a whole (`""`) are
    `arguments`. A key that is no plain name, such as an unknown field the
    call named, is quoted and cut short (`steps[0]["due date"]`), so the
    error stays one short line whatever the call held.
    """
    if not pointer:
        return "arguments"
    name = ""
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        plain = token.isascii() and len(token) <= _LONGEST_NAME
        if plain and token.isdigit():
            name += f"[{token}]"
        elif plain and token.isidentifier():
            name += f".{token}"
        else:
            name += f"[{shown(token)}]"
    return name.removeprefix(".")


class _Literal(str):
    """Text already written as JSON: punctuation, or a key with its colon."""


def _json_pieces(value: Any, *, longest: int) -> Iterator[str]:
    """`value` written as `json.dumps` writes it, in pieces, for a caller that wants a start.

    Separators are `", "` and `": "`, and text is not ASCII-escaped. Values
    are walked in a loop, not by recursion, so any depth works; the pieces
    come as they are written, for the caller to stop after `longest`
    characters, so each string is written from its first `longest`
    characters only. Raises TypeError for a value that is not JSON.
    """

    def string(text: str) -> str:
        return json.dumps(text[:longest], ensure_ascii=False)

    def members(node: dict[str, Any]) -> Iterator[Any]:
        for index, (key, child) in enumerate(node.items()):
            yield _Literal(f"{', ' if index else ''}{string(key)}: ")
            yield child
        yield _Literal("}")

    def items(node: list[Any]) -> Iterator[Any]:
        for index, child in enumerate(node):
            if index:
                yield _Literal(", ")
            yield child
        yield _Literal("]")

    stack: list[Iterator[Any]] = [iter((value,))]
    while stack:
        node = next(stack[-1], _END)
        if node is _END:
            stack.pop()
        elif isinstance(node, _Literal):
            yield node
        elif isinstance(node, str):
            yield string(node)
        elif isinstance(node, dict):
            yield "{"
            stack.append(members(node))
        elif isinstance(node, list):
            yield "["
            stack.append(items(node))
        else:
            yield json.dumps(node)


_END = object()


# Contracts and documents ---------------------------------------------------------------------


class ContractError(PlanContractsError, ValueError):
    """A document is not a valid instance of its contract.

    `contract` names the contract; `violations` lists every problem found,
    never empty, as `Violations`: where a document breaks its contract more
    than `MAX_VIOLATIONS` times, the first ones found, with `complete` False.
    Malformed JSON is reported the same way, as one violation at the
    document's root.
    """

    def __init__(self, contract: str, violations: Iterable[Violation]) -> None:
        listed = violations if isinstance(violations, Violations) else Violations(violations)
        if not listed:
            raise ValueError("a ContractError needs at least one violation")
        self.contract = contract
        self.violations = listed
        lines = [f"not a valid {contract} document ({listed.summary()}):"]
        lines += [f"  {violation}" for violation in listed]
        super().__init__("\n".join(lines))


class UnknownContractError(PlanContractsError, LookupError):
    """No contract has the given name."""

    def __init__(self, name: str, known: tuple[str, ...]) -> None:
        self.name = name
        # difflib compares every character: a name past 200 characters is no one's misspelling.
        close = difflib.get_close_matches(name, known, n=1) if len(name) <= 200 else []
        hint = f" (did you mean {shown(close[0], 80)}?)" if close else ""
        listed = ", ".join(known[:_LISTED]) + (
            f" and {len(known) - _LISTED} more" if len(known) > _LISTED else ""
        )
        contracts = f"; the contracts are: {listed}" if known else ""
        super().__init__(printable(f"unknown contract {shown(name, 80)}{hint}{contracts}"))


_LISTED = 40
"Contract names an unknown name's message lists at most."


class MalformedJSON(PlanContractsError, ValueError):
    """The text is not one well-formed JSON document.

    `pointer` locates the problem when it is inside the value (duplicate
    keys); otherwise it is empty and `message` gives line and column.
    `offset` is the byte of the text where it stops being JSON (the second
    of duplicate keys), when the parser knows it, for reports that give a
    line and column apart from the message.
    """

    def __init__(self, message: str, pointer: str = "", offset: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.pointer = pointer
        self.offset = offset


class ProfileBug(PlanContractsError, AssertionError):
    """A document decoded under a profile breaks the contract: the profile is wrong."""


# Tool calls ----------------------------------------------------------------------------------


class ToolValidationError(PlanContractsError, ValueError):
    """A tool call refused: its arguments break the tool's contract, or the state forbids it.

    `tool` is the tool's name. `field` is the JSON Pointer of the argument
    at fault (`/steps/1/title`; `""` for the arguments as a whole), or None
    when the state (the plan, the draft), not an argument, refuses the call.
    `problem` says what is wrong; where a limit is at stake it names the
    limit and the value's length. `violations` lists every problem of a
    document the call would have made (a package refused at finalizing), each
    with its JSON Pointer into that document; it is empty otherwise. The
    error's text, `str(error)`, is what a model sees as the tool's result:
    the field, in the dotted form a model writes it (`steps[1].title`), then
    the problem.
    """

    def __init__(
        self, tool: str, field: str | None, problem: str, violations: Sequence[Violation] = ()
    ) -> None:
        self.tool = tool
        self.field = field
        self.problem = problem
        self.violations = tuple(violations)
        super().__init__(problem if field is None else f"{dotted(field)}: {problem}")


class UnknownToolError(ToolValidationError, LookupError):
    """A call of a tool that does not exist: no tool of the set (`kind`, `known`) has the name."""

    def __init__(self, name: str, kind: str, known: Sequence[str]) -> None:
        super().__init__(
            name, None, f"no {kind} tool is called {shown(name)}; the tools are: {', '.join(known)}"
        )


# The command line ----------------------------------------------------------------------------


class UsageError(PlanContractsError):
    """The command line is wrong; the message says how (exit status 2)."""


class StreamError(PlanContractsError):
    """A stream the command reads or writes (standard input or output, a log) cannot be used."""


# Models --------------------------------------------------------------------------------------


class NoModel(PlanContractsError):
    """No model could be loaded, and what was asked for needs one."""


class NotAModel(PlanContractsError):
    """A candidate that cannot be used; the message says why."""


class GenerationFailed(PlanContractsError):
    """The model produced no document the schema accepts; the message says what it wrote."""


class ServerFailed(GenerationFailed):
    """The server gave no answer to use: unreachable, too slow, or an error status."""


class AnswerRefused(GenerationFailed):
    """The server answered with a document the profile does not accept; it is not used."""


@dataclass(frozen=True)
class Attempt:
    """One answer a model wrote for `write`, and how it was judged.

    `number` counts from 1; `tokens` are those written for it and `seconds`
    the time it took; `violations` are why it was refused (empty for the
    answer accepted). `answer` is the text written, cut to 4,000 characters
    (`runtime.model.writing.SHOWN_ANSWER`).
    """

    number: int
    tokens: int
    seconds: float
    violations: Violations
    answer: str


class WriteFailed(GenerationFailed):
    """`write` spent its budget (attempts, tokens or time) and no answer was accepted.

    `attempts` holds every attempt made, each with the violations it was
    refused for; the message says which budget ran out, in one line.
    """

    def __init__(self, message: str, attempts: Sequence[Attempt]) -> None:
        super().__init__(message)
        self.attempts = tuple(attempts)


# Running plans: the executor, skills and their scripts ---------------------------------------


class ProtocolViolation(PlanContractsError):
    """Output that breaks the tool protocol; raised by the line callback to end the run."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ScriptFailure(PlanContractsError):
    """Raised by a script's function to end its run with `done` ok false.

    The run writes an `error` event with `code`, `message` and `details`, then
    `done` with ok false and the message as summary, and exits 0: the script
    worked, and what it was asked to do failed.
    """

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details


class UnusableScript(PlanContractsError, LookupError):
    """A `toolPath` that names no usable script."""

    def __init__(self, tool_path: str, reason: str) -> None:
        super().__init__(f"{tool_path}: {reason}")
        self.tool_path = tool_path
        self.reason = reason


class UnusableSchema(PlanContractsError, ValueError):
    """A schema file, folder or generated package that cannot be used as contracts.

    The message is one line naming the file (and, inside it, the JSON Pointer)
    and the rule it breaks.
    """


class TooLarge(PlanContractsError, ValueError):
    """A file larger than it may be."""


class OutOfTime(PlanContractsError):
    """A schema's check ran past its deadline (see `runtime.core.patterns.deadline`).

    `pattern` is the pattern being matched when time ran out, if one was.
    """

    def __init__(self, pattern: str | None) -> None:
        super().__init__(pattern)
        self.pattern = pattern


class MigrationFailed(PlanContractsError, ValueError):
    """A step upgrading a stored document to its contract's next version failed.

    It raised, returned a document the contract refuses, or needs an option
    that was not given. `contract` names the contract, `step` the step's
    short name (None when no step could be chosen, such as a version no step
    reads), `reason` the one line that says why; the message names all three.
    """

    def __init__(self, contract: str, step: str | None, reason: str) -> None:
        self.contract = contract
        self.step = step
        self.reason = reason
        where = f"{contract} ({step})" if step else contract
        super().__init__(printable(f"{where}: {reason}"))


# Families ------------------------------------------------------------------------------------


class StoreError(PlanContractsError):
    """A database that cannot be used (not SQLite, unreadable), or lacks what is asked."""


class AssetGenerationError(PlanContractsError):
    """The asset hook could not make an asset: the call that asked for it is refused."""


class PlayRefused(PlanContractsError, ValueError):
    """A story play choice that is not offered now, or a playthrough its package cannot go on with.

    The playthrough is left as it was; the message is one line for the player.
    """


class TooManyGoals(PlanContractsError, ValueError):
    """The goal list is full (`MAX_GOALS`)."""
