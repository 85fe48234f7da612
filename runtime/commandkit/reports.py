"""Verdicts on documents: as text, one JSON object per document, GitHub workflow commands or SARIF.

`report_for` chooses the report of a `--format`; each takes the outcomes of
a command's documents one at a time (`add`), hears where each file ends
(`end_file`) and gives the command's exit status (`finish`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any
from urllib.parse import quote

from ..core.errors import Violation, Violations, printable
from ..core.jsontext import locate, positions
from .base import EXIT_INVALID, EXIT_OK, EXIT_USAGE, Output, json_name, label

__all__ = [
    "FORMATS",
    "Finding",
    "GithubReport",
    "JsonReport",
    "Outcome",
    "Report",
    "SarifReport",
    "TextReport",
    "findings",
    "report_for",
    "violations_as_json",
]

FORMATS = ("text", "json", "github", "sarif")
"The reports a command that validates documents can print (`--format`)."


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
    text: bytes | None = None
    "The document's text as read, for the reports that give each violation's line and column."
    malformed: bool = False
    "The text is no JSON document (its one violation says why), or could not be taken as one."
    failed_at: int | None = None
    "Where in `text` a malformed document stops being JSON (a byte offset), when the parser knows."

    @property
    def valid(self) -> bool:
        return not self.violations


def _status(invalid: int, unreadable: int) -> int:
    """The highest status of a batch: a file not read, else a document invalid, else none."""
    if unreadable:
        return EXIT_USAGE
    return EXIT_INVALID if invalid else EXIT_OK


def _summary(valid: int, invalid: int, unreadable: int) -> str:
    """The last line of a text report: how many documents, valid and invalid, and files not read."""
    total = valid + invalid
    not_read = (
        f"; {unreadable} file{'s' if unreadable != 1 else ''} could not be read"
        if unreadable
        else ""
    )
    return (
        f"{total} document{'s' if total != 1 else ''} checked: "
        f"{valid} valid, {invalid} invalid{not_read}\n"
    )


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
        self.out.write(_summary(self.valid, self.invalid, self.unreadable))
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


# Where each violation is --------------------------------------------------------------

# The keywords whose violation names an object's key, not its value: the
# place to show is the key (an unknown field, a key the schema's
# propertyNames refuse).
_KEY_KEYWORDS = frozenset({"additionalProperties", "propertyNames"})
RULE = "rule"
"The rule id of a violation of a rule beyond the schema (no JSON Schema keyword)."
NOT_JSON = "json"
"The rule id of text that is no JSON document, or could not be taken as one."


@dataclass(frozen=True)
class Finding:
    """One violation, with its rule and where it is in the file: line and column from 1.

    `rule` is the JSON Schema keyword it breaks, `RULE` for a rule beyond
    the schema, `NOT_JSON` for text that is no JSON document. `line` is the
    file's (with --ndjson, the document's line in the file) and `column`
    counts characters; either is None where the text does not tell.
    """

    violation: Violation
    rule: str
    line: int | None
    column: int | None


def findings(outcome: Outcome) -> Iterator[Finding]:
    """Each violation of a document that was read, with its rule and place in the text.

    A malformed document's one violation is where the parser stopped; any
    other violation is where its JSON Pointer's value begins (for a missing
    field, the object that lacks it; for an unknown key, the key). All the
    violations of a document are located in one pass over its text.
    """
    text = outcome.text
    offsets: list[int | None]
    if outcome.malformed:
        rules = [NOT_JSON] * len(outcome.violations)
        offsets = [outcome.failed_at] * len(outcome.violations)
    else:
        rules = [v.keyword or RULE for v in outcome.violations]
        # A pointer is "" or starts with "/"; a rule that wrote another gets no place.
        pointers = [v.pointer for v in outcome.violations if v.pointer[:1] in ("", "/")]
        places = locate(text, pointers) if text is not None else {}
        offsets = []
        for violation in outcome.violations:
            place = places.get(violation.pointer)
            if place is None:
                offsets.append(None)
            elif violation.keyword in _KEY_KEYWORDS and place.key is not None:
                offsets.append(place.key)
            else:
                offsets.append(place.value)
    known = positions(text, [o for o in offsets if o is not None]) if text is not None else {}
    first = outcome.line or 1  # an NDJSON document's first line is its line in the file
    for violation, rule, offset in zip(outcome.violations, rules, offsets, strict=True):
        if offset is None or offset not in known:
            yield Finding(violation, rule, outcome.line, None)
        else:
            line, column = known[offset]
            yield Finding(violation, rule, first + line - 1, column)


# GitHub Actions workflow commands ---------------------------------------------------------


def escape_data(text: str) -> str:
    """A workflow command's message, escaped as GitHub's runner reads it back.

    `%`, carriage return and line feed are written `%25`, `%0D`, `%0A` (the
    `%` first), so no message can end its line and start another command.
    Every other character that is not printable is shown as `\\uXXXX`.
    """
    escaped = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return printable(escaped)


def escape_property(text: str) -> str:
    """A workflow command's property value (a file, a title), escaped as GitHub reads it back.

    As `escape_data`, and `:` and `,` as `%3A` and `%2C`: they end a property.
    """
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


class GithubReport:
    """A GitHub Actions `::error` workflow command per violation, then the text report's last line.

    `::error file=F,line=L,col=C,title=POINTER::MESSAGE`: GitHub shows each
    as an annotation on the file's line. Standard input has no `file`; a
    place the text does not tell has no `line` or `col`. A file that cannot
    be read is one command naming the file and why.
    """

    def __init__(self, out: Output) -> None:
        self.out = out
        self.valid = self.invalid = self.unreadable = 0

    def add(self, outcome: Outcome) -> None:
        if outcome.unreadable:
            self.unreadable += 1
            self._command(outcome.file, None, None, "cannot be read", outcome.violations[0].message)
        elif outcome.valid:
            self.valid += 1
            return
        else:
            self.invalid += 1
            for found in findings(outcome):
                where = found.violation.pointer or "(document)"
                self._command(
                    outcome.file, found.line, found.column, where, found.violation.message
                )
        self.out.flush()

    def _command(
        self, file: str, line: int | None, column: int | None, title: str, message: str
    ) -> None:
        properties = [] if file == "-" else [f"file={escape_property(json_name(file))}"]
        if line is not None:
            properties.append(f"line={line}")
        if column is not None:
            properties.append(f"col={column}")
        properties.append(f"title={escape_property(title)}")
        self.out.write(f"::error {','.join(properties)}::{escape_data(message)}\n")

    def end_file(self, name: str) -> None:
        return None

    def finish(self) -> int:
        self.out.write(_summary(self.valid, self.invalid, self.unreadable))
        return _status(self.invalid, self.unreadable)


# SARIF -------------------------------------------------------------------------------------

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/os/schemas/sarif-schema-2.1.0.json"
_RULE_TEXTS = {
    RULE: "breaks a rule of the contract that its schema cannot state",
    NOT_JSON: "is no JSON document (malformed, too large, or an empty line of NDJSON)",
}


def artifact_uri(name: str) -> str:
    """A file named on the command line as a SARIF artifact's URI reference.

    A relative name stays relative (to the folder the command ran in, as a
    repository's root is for GitHub code scanning), an absolute one is a
    `file://` URI; every byte outside a path's plain characters is
    percent-encoded, the name's own bytes where they are not UTF-8. Standard
    input is `-`.
    """
    if name == "-":
        return "-"
    path = quote(os.fsencode(name), safe="/")
    return f"file://{path}" if name.startswith("/") else path


def _tool_version() -> str:
    try:
        return version("plancontracts")
    except PackageNotFoundError:  # run from a checkout that is not installed
        return "unknown"


class SarifReport:
    """One SARIF 2.1.0 log for the whole command: a result per violation, written as found.

    Each result has its rule (`Finding.rule`), level `error`, the message
    with its JSON Pointer, and the file with the line and column where the
    text tells (columns in Unicode code points, which the run declares). A
    file that cannot be read is a tool execution notification, and the
    invocation is then not successful. Results are written as they come:
    memory holds the rules seen, never the results.
    """

    def __init__(self, out: Output) -> None:
        self.out = out
        self.rules: dict[str, None] = {}
        self.notifications: list[dict[str, Any]] = []
        self.invalid = self.results = 0
        self.out.write(
            f'{{"version": "2.1.0", "$schema": "{SARIF_SCHEMA}", "runs": [{{\n'
            f'"columnKind": "unicodeCodePoints",\n"results": [\n'
        )

    def add(self, outcome: Outcome) -> None:
        if outcome.unreadable:
            notification = {
                "level": "error",
                "message": {"text": printable(outcome.violations[0].message)},
                "locations": [_location(outcome.file, None, None)],
            }
            self.notifications.append(notification)
            return
        if outcome.valid:
            return
        self.invalid += 1
        for found in findings(outcome):
            self.rules.setdefault(found.rule)
            pointer = found.violation.pointer or "(document)"
            result = {
                "ruleId": found.rule,
                "level": "error",
                "message": {"text": printable(f"{pointer}: {found.violation.message}")},
                "locations": [_location(outcome.file, found.line, found.column)],
            }
            separator = ",\n" if self.results else ""
            self.out.write(separator + json.dumps(result, ensure_ascii=False))
            self.results += 1
        self.out.flush()

    def end_file(self, name: str) -> None:
        return None

    def finish(self) -> int:
        rules = [
            {"id": rule, "shortDescription": {"text": _rule_text(rule)}} for rule in self.rules
        ]
        driver = {
            "name": "plancontracts",
            "version": _tool_version(),
            "rules": rules,
        }
        invocation = {
            "executionSuccessful": not self.notifications,
            "toolExecutionNotifications": self.notifications,
        }
        rest = {"tool": {"driver": driver}, "invocations": [invocation]}
        # The run's other members follow its results: JSON objects are unordered.
        self.out.write("\n],\n" + json.dumps(rest, ensure_ascii=False)[1:] + "]}\n")
        return _status(self.invalid, len(self.notifications))


def _rule_text(rule: str) -> str:
    return _RULE_TEXTS.get(rule, f"breaks the JSON Schema keyword {rule}")


def _location(file: str, line: int | None, column: int | None) -> dict[str, Any]:
    artifact: dict[str, Any] = {"uri": artifact_uri(file)}
    if file == "-":
        artifact["description"] = {"text": "standard input"}
    physical: dict[str, Any] = {"artifactLocation": artifact}
    if line is not None:
        region = {"startLine": line}
        if column is not None:
            region["startColumn"] = column
        physical["region"] = region
    return {"physicalLocation": physical}


Report = TextReport | JsonReport | GithubReport | SarifReport


def report_for(format: str, out: Output, *, ndjson: bool) -> Report:
    """The report of `format` (one of `FORMATS`), writing to `out`."""
    if format == "json":
        return JsonReport(out)
    if format == "github":
        return GithubReport(out)
    if format == "sarif":
        return SarifReport(out)
    if format == "text":
        return TextReport(out, ndjson=ndjson)
    raise ValueError(f"no report format {format!r}; the formats are {', '.join(FORMATS)}")


def violations_as_json(violations: Violations) -> dict[str, Any]:
    """The `errors` of a JSON report, and `more_errors: true` when the list is cut."""
    errors = [{"pointer": v.pointer, "message": v.message} for v in violations]
    return {"errors": errors} if violations.complete else {"errors": errors, "more_errors": True}
