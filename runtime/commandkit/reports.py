"""Verdicts on documents, as text or as one JSON object per document."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..core.errors import Violations
from .base import EXIT_INVALID, EXIT_OK, Output, json_name, label

__all__ = ["JsonReport", "Outcome", "Report", "TextReport", "violations_as_json"]


@dataclass(frozen=True)
class Outcome:
    """The verdict on one document: a file, or a line of one."""

    file: str
    line: int | None
    violations: Violations

    @property
    def valid(self) -> bool:
        return not self.violations


class TextReport:
    """One line per document (per invalid one with --ndjson), its violations below it."""

    def __init__(self, out: Output, *, ndjson: bool) -> None:
        self.out = out
        self.ndjson = ndjson
        self.valid = self.invalid = 0
        self.file_valid = self.file_invalid = 0

    def add(self, outcome: Outcome) -> None:
        where = label(outcome.file) + (f":{outcome.line}" if outcome.line else "")
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
        if self.ndjson:
            total = self.file_valid + self.file_invalid
            self.out.write(
                f"{label(name)}: {total} document{'s' if total != 1 else ''}, "
                f"{self.file_invalid} invalid\n"
            )
        self.file_valid = self.file_invalid = 0

    def finish(self) -> int:
        total = self.valid + self.invalid
        self.out.write(
            f"{total} document{'s' if total != 1 else ''} checked: "
            f"{self.valid} valid, {self.invalid} invalid\n"
        )
        return EXIT_INVALID if self.invalid else EXIT_OK


class JsonReport:
    """One JSON object per document: `file`, `line` (with --ndjson), `valid`, `errors`."""

    def __init__(self, out: Output) -> None:
        self.out = out
        self.invalid = 0

    def add(self, outcome: Outcome) -> None:
        record: dict[str, object] = {"file": json_name(outcome.file), "valid": outcome.valid}
        if outcome.line is not None:
            record["line"] = outcome.line
        record.update(violations_as_json(outcome.violations))
        self.out.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.out.flush()
        self.invalid += not outcome.valid

    def end_file(self, name: str) -> None:
        return None

    def finish(self) -> int:
        return EXIT_INVALID if self.invalid else EXIT_OK


Report = TextReport | JsonReport


def violations_as_json(violations: Violations) -> dict[str, Any]:
    """The `errors` of a JSON report, and `more_errors: true` when the list is cut."""
    errors = [{"pointer": v.pointer, "message": v.message} for v in violations]
    return {"errors": errors} if violations.complete else {"errors": errors, "more_errors": True}
