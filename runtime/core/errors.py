"""The package's errors, the violations they carry, and how values are quoted in them.

Every error plancontracts raises on purpose derives from `PlanContractsError`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
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


class UnknownContractError(PlanContractsError, LookupError):
    """No contract has the given name."""

    def __init__(self, name: str, known: tuple[str, ...]) -> None:
        self.name = name
        super().__init__(f"unknown contract {name!r}; the contracts are: {', '.join(known)}")
