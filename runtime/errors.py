"""The errors validation raises, and the violations they carry."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Violation:
    """One way a document breaks its contract.

    `pointer` is an RFC 6901 JSON Pointer to the offending value (or, for a
    missing field, to the object that lacks it); the empty string means the
    document as a whole. `message` is one line of plain text.
    """

    pointer: str
    message: str

    def __str__(self) -> str:
        return f"{self.pointer or '(document)'}: {self.message}"


class ContractError(ValueError):
    """A document is not a valid instance of its contract.

    `contract` names the contract; `violations` lists every problem found,
    never empty. Malformed JSON is reported the same way, as one violation
    at the document's root.
    """

    def __init__(self, contract: str, violations: tuple[Violation, ...]) -> None:
        if not violations:
            raise ValueError("a ContractError needs at least one violation")
        self.contract = contract
        self.violations = violations
        count = len(violations)
        noun = "violation" if count == 1 else "violations"
        lines = [f"not a valid {contract} document ({count} {noun}):"]
        lines += [f"  {violation}" for violation in violations]
        super().__init__("\n".join(lines))


def printable(text: str) -> str:
    """`text` with every non-printable character (newlines, bidi controls...) as a `\\uXXXX` escape.

    Messages and pointers can quote hostile input; this keeps each on one
    honest terminal line.
    """
    return "".join(ch if ch.isprintable() else f"\\u{ord(ch):04x}" for ch in text)


def shown(value: Any, limit: int = 60) -> str:
    """A short, printable, one-line rendering of a JSON value, cut at `limit` characters."""
    text = printable(json.dumps(value, ensure_ascii=False))
    return text if len(text) <= limit else text[: limit - 1] + "…"


class UnknownContractError(LookupError):
    """No contract has the given name."""

    def __init__(self, name: str, known: tuple[str, ...]) -> None:
        self.name = name
        super().__init__(f"unknown contract {name!r}; the contracts are: {', '.join(known)}")
