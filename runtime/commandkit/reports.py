"""Verdicts on documents, as text or as one JSON object per document."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..core.errors import Violations
from .base import EXIT_INVALID, EXIT_OK, EXIT_USAGE, Output, json_name, label

__all__ = ["JsonReport", "Outcome", "Report", "TextReport", "violations_as_json"]


@dataclass(frozen=True)
class Outcome:
    """The verdict on one document: a file, or a line of one.

    `unreadable` marks a file that could not be opened or read (missing, a
    directory, no permission): its one violation says why, and the command
    ends with the usage status, as every command does for such a file
    (docs/contracts.md#a-file-that-cannot-be-read).
    """

    file: str
    line: int | None
    violations: Violations
    unreadable: bool = False

    @property
    def valid(self) -> bool:
        return not self.violations


def _status(invalid: int, unreadable: int) -> int:
    """The highest status of a batch: a file not read, else a document invalid, else none."""
    if unreadable:
        return EXIT_USAGE
    return EXIT_INVALID if invalid else EXIT_OK


class TextReport:
    """One line per document (per invalid one with --ndjson), its violations below it.

    A file that cannot be read is one line, `NAME: why`, and no document.
    """

    def __init__(self, out: Output, *, ndjson: bool) -> None:
        self.out = out
        self.ndjson = ndjson
        self.valid = self.invalid = self.unreadable = 0
        self.file_valid = self.file_invalid = 0
        self.file_unreadable = False

    def add(self, outcome: Outcome) -> None:
        where = label(outcome.file) + (f":{outcome.line}" if outcome.line else "")
        if outcome.unreadable:
            self.unreadable += 1
            self.file_unreadable = True
            self.out.write(f"{where}: {label(outcome.violations[0].message)}\n")
            self.out.flush()
            return
        if outcome.valid:
            self.valid += 1
            self.file_valid += 1
            if not self.ndjson:
                self.out.write(f"{where}: valid\n")
            return
        self.invalid += 1
        self.file_invalid += 1
        self.out.write(f"{where}: invalid ({outcome.violations.summary()})\n")
        for violation in outcome.violations:
            self.out.write(f"  {label(str(violation))}\n")
        self.out.flush()

    def end_file(self, name: str) -> None:
        # A file that could not be read has had its one line already.
        if self.ndjson and not self.file_unreadable:
            total = self.file_valid + self.file_invalid
            self.out.write(
                f"{label(name)}: {total} document{'s' if total != 1 else ''}, "
                f"{self.file_invalid} invalid\n"
            )
        self.file_valid = self.file_invalid = 0
        self.file_unreadable = False

    def finish(self) -> int:
        total = self.valid + self.invalid
        not_read = (
            f"; {self.unreadable} file{'s' if self.unreadable != 1 else ''} could not be read"
            if self.unreadable
            else ""
        )
        self.out.write(
            f"{total} document{'s' if total != 1 else ''} checked: "
            f"{self.valid} valid, {self.invalid} invalid{not_read}\n"
        )
        return _status(self.invalid, self.unreadable)


class JsonReport:
    """One JSON object per document: `file`, `line` (with --ndjson), `valid`, `errors`.

    A file that cannot be read is one object of the same shape, not valid,
    its one error at the document (pointer "") saying why.
    """

    def __init__(self, out: Output) -> None:
        self.out = out
        self.invalid = self.unreadable = 0

    def add(self, outcome: Outcome) -> None:
        record: dict[str, object] = {"file": json_name(outcome.file), "valid": outcome.valid}
        if outcome.line is not None:
            record["line"] = outcome.line
        record.update(violations_as_json(outcome.violations))
        self.out.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.out.flush()
        self.unreadable += outcome.unreadable
        self.invalid += not outcome.valid and not outcome.unreadable

    def end_file(self, name: str) -> None:
        return None

    def finish(self) -> int:
        return _status(self.invalid, self.unreadable)


Report = TextReport | JsonReport


def violations_as_json(violations: Violations) -> dict[str, Any]:
    """The `errors` of a JSON report, and `more_errors: true` when the list is cut."""
    errors = [{"pointer": v.pointer, "message": v.message} for v in violations]
    return {"errors": errors} if violations.complete else {"errors": errors, "more_errors": True}
