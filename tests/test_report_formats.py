"""`validate --format text|json|github|sarif`, and the line and column of each violation.

GitHub workflow commands are read back here as GitHub's runner reads them
(`::name k=v,k=v::data`, then its unescaping), so a test sees what a workflow
would: one annotation per violation, whatever a key or file name holds. The
SARIF log is checked for what SARIF 2.1.0 requires of each object the report
writes and what GitHub code scanning reads (no schema is fetched: tests run
offline). The locator's bounds are counted in bytes read and passes made,
never timed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote_to_bytes

import pytest
from commands import cli_bytes

from plancontracts import contract_schema
from plancontracts.runtime.commandkit import reports
from plancontracts.runtime.commandkit.reports import (
    NOT_JSON,
    RULE,
    Outcome,
    artifact_uri,
    escape_data,
    escape_property,
    findings,
)
from plancontracts.runtime.core import jsontext
from plancontracts.runtime.core.errors import MalformedJSON, Violation, Violations
from plancontracts.runtime.core.jsontext import locate, parse, positions

PLAN = contract_schema("plan")["examples"][0]
EVENTS = contract_schema("tool-event")["examples"]
FORMATS = ("text", "json", "github", "sarif")


def run(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    done = cli_bytes(*args, stdin=stdin)
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


# GitHub's runner, as it reads a workflow command back ------------------------------------


def _unescape_property(text: str) -> str:
    for escaped, raw in (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ",")):
        text = text.replace(escaped, raw)
    return text.replace("%25", "%")


def _unescape_data(text: str) -> str:
    return text.replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")


def github_commands(stdout: str) -> list[tuple[str, dict[str, str], str]]:
    """Each workflow command of `stdout` as the runner reads it: name, properties, data.

    Every line that starts with `::` is one command; any other line is log
    text (the report's last line).
    """
    commands = []
    for line in stdout.splitlines():
        if not line.startswith("::"):
            continue
        head, separator, data = line[2:].partition("::")
        assert separator, f"a command line with no '::' after its properties: {line!r}"
        name, _, listed = head.partition(" ")
        properties = {}
        for pair in filter(None, listed.split(",")):
            key, equals, value = pair.partition("=")
            assert equals, f"a property with no '=': {pair!r} in {line!r}"
            properties[key] = _unescape_property(value)
        commands.append((name, properties, _unescape_data(data)))
    return commands


# What SARIF 2.1.0 requires of each object the report writes, and GitHub code scanning reads


def check_sarif(log: Any) -> list[dict[str, Any]]:
    """Check `log` as SARIF 2.1.0 and GitHub code scanning read it; return its results."""
    assert set(log) == {"version", "$schema", "runs"}
    assert log["version"] == "2.1.0"
    assert log["$schema"].startswith("https://")
    assert "sarif-schema-2.1.0" in log["$schema"]
    [run_] = log["runs"]
    assert set(run_) == {"tool", "results", "columnKind", "invocations"}
    assert run_["columnKind"] == "unicodeCodePoints"
    driver = run_["tool"]["driver"]
    assert set(run_["tool"]) == {"driver"}
    assert driver["name"] == "plancontracts"
    assert isinstance(driver["version"], str)
    assert driver["version"]
    ids = [rule["id"] for rule in driver["rules"]]
    assert len(ids) == len(set(ids)), "rule ids are unique"
    for rule in driver["rules"]:
        assert set(rule) == {"id", "shortDescription"}
        assert isinstance(rule["shortDescription"]["text"], str)
    [invocation] = run_["invocations"]
    assert isinstance(invocation["executionSuccessful"], bool)
    for notification in invocation["toolExecutionNotifications"]:
        assert notification["level"] == "error"
        assert isinstance(notification["message"]["text"], str)
        for location in notification["locations"]:
            _check_location(location)
    for result in run_["results"]:
        assert set(result) == {"ruleId", "level", "message", "locations"}
        assert result["ruleId"] in ids, "every result's rule is described"
        assert result["level"] == "error"
        assert isinstance(result["message"]["text"], str)
        assert result["message"]["text"]
        assert len(result["locations"]) == 1
        _check_location(result["locations"][0])
    results: list[dict[str, Any]] = run_["results"]
    return results


_URI_REFERENCE = re.compile(r"[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+")


def _check_location(location: Any) -> None:
    assert set(location) == {"physicalLocation"}
    physical = location["physicalLocation"]
    assert set(physical) <= {"artifactLocation", "region"}
    artifact = physical["artifactLocation"]
    assert set(artifact) <= {"uri", "description"}
    assert _URI_REFERENCE.fullmatch(artifact["uri"]), artifact["uri"]
    region = physical.get("region", {})
    assert set(region) <= {"startLine", "startColumn"}
    for value in region.values():
        assert isinstance(value, int)
        assert value >= 1


def where(result: dict[str, Any]) -> tuple[str, int | None, int | None]:
    physical = result["locations"][0]["physicalLocation"]
    region = physical.get("region", {})
    return physical["artifactLocation"]["uri"], region.get("startLine"), region.get("startColumn")


# A small document whose violations sit at known places ---------------------------------

# Line 2 holds escapes and non-ASCII before /parallel: its column counts the
# characters as written (`\u00e9` is six, `é` and `«` one each), not bytes.
KNOWN = (
    '{"requestId": "7c1e4a52-3d0f-4b8e-9a61-2f5d8c0b9e13",\n'
    ' "narrative": "caf\\u00e9 «é» \\"q\\"", "parallel": "yes",\n'
    ' "tools": [{"toolId": "a", "toolPath": "skills/x/a.py", "input": {}},\n'
    '           {"toolPath": "skills/x/b.py", "input": {}, "dependencies": ["a", 7]}],\n'
    ' "colour": "blue"}\n'
)
# pointer, rule, line, column: the value, the object that lacks a field, the unknown key.
KNOWN_PLACES = [
    ("/colour", "additionalProperties", 5, 2),
    ("/parallel", "type", 2, 50),
    ("/tools/1", "required", 4, 12),
    ("/tools/1/dependencies/1", "type", 4, 77),
]


def test_the_known_document_places_are_what_an_editor_shows() -> None:
    lines = KNOWN.splitlines()
    for pointer, _, line, column in KNOWN_PLACES:
        shown = lines[line - 1][column - 1 :]
        expected = {
            "/colour": '"colour"',
            "/parallel": '"yes"',
            "/tools/1": '{"toolPath"',
            "/tools/1/dependencies/1": "7]",
        }[pointer]
        assert shown.startswith(expected), (pointer, shown)


def test_github_gives_each_violation_its_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(KNOWN, encoding="utf-8")
    done = run("validate", "--format", "github", "plan", str(path))
    assert done.returncode == 1, done.stderr
    assert done.stderr == ""
    file = str(path).replace(":", "%3A").replace(",", "%2C")
    assert done.stdout.splitlines() == [
        f'::error file={file},line=5,col=2,title=/colour::unknown field "colour"',
        f"::error file={file},line=2,col=50,title=/parallel::"
        'expected true or false, got the string "yes"',
        f'::error file={file},line=4,col=12,title=/tools/1::missing required field "toolId"',
        f"::error file={file},line=4,col=77,title=/tools/1/dependencies/1::"
        "expected a string, got an integer",
        "1 document checked: 0 valid, 1 invalid",
    ]


def test_sarif_gives_each_violation_its_rule_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(KNOWN, encoding="utf-8")
    done = run("validate", "--format", "sarif", "plan", str(path))
    assert done.returncode == 1, done.stderr
    results = check_sarif(json.loads(done.stdout))
    uri = "file://" + str(path)
    assert [(r["ruleId"], *where(r)) for r in results] == [
        (rule, uri, line, column) for _, rule, line, column in KNOWN_PLACES
    ]
    assert [r["message"]["text"].split(":")[0] for r in results] == [p for p, *_ in KNOWN_PLACES]


def test_a_rule_beyond_the_schema_is_rule_and_malformed_text_is_json(tmp_path: Path) -> None:
    block = contract_schema("planning-block")["examples"][0]
    block["plan_quality"]["margin"] = 5  # roll 19 against dc 13 is a margin of 6
    (tmp_path / "block.json").write_text(json.dumps(block, indent=1))
    (tmp_path / "broken.json").write_text('{\n  "tools": [\n    1,\n  ]\n}\n')
    names = [str(tmp_path / "block.json"), str(tmp_path / "broken.json")]
    done = run("validate", "--format", "sarif", "planning-block", *names)
    assert done.returncode == 1, done.stderr
    results = check_sarif(json.loads(done.stdout))
    margin_line = json.dumps(block, indent=1).splitlines().index('  "margin": 5,') + 1
    assert [(r["ruleId"], *where(r)[1:]) for r in results] == [
        (RULE, margin_line, 13),
        (NOT_JSON, 4, 3),  # the parser stops at `]`: a trailing comma
    ]
    log = json.loads(done.stdout)
    assert {rule["id"] for rule in log["runs"][0]["tool"]["driver"]["rules"]} == {RULE, NOT_JSON}


# Every format on every kind of input ------------------------------------------------------


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    (tmp_path / "good.json").write_text(json.dumps(PLAN))
    (tmp_path / "bad.json").write_text(json.dumps({**PLAN, "parallel": "yes"}))
    (tmp_path / "malformed.json").write_text('{"tools": [1,]}')
    lines = [json.dumps(event) for event in EVENTS]
    lines[1] = '{"version": "0", "type": "asset"}'
    lines.append("")
    lines.append("{nope")
    (tmp_path / "events.ndjson").write_text("\n".join(lines) + "\n")
    return tmp_path


# Each kind of input: the options, the files and the exit status.
CASES: dict[str, tuple[tuple[str, ...], list[str], int]] = {
    "valid": ((), ["good.json"], 0),
    "invalid": ((), ["bad.json"], 1),
    "malformed": ((), ["malformed.json"], 1),
    "unreadable": ((), ["missing.json", "good.json"], 2),
    "ndjson": (("--ndjson",), ["events.ndjson"], 1),
}


@pytest.mark.parametrize("output", FORMATS)
@pytest.mark.parametrize("case", CASES)
def test_every_format_on_every_input_keeps_the_exit_status(
    inputs: Path, output: str, case: str
) -> None:
    options, names, status = CASES[case]
    contract = "tool-event" if case == "ndjson" else "plan"
    files = [str(inputs / name) for name in names]
    done = run("validate", *options, "--format", output, contract, *files)
    assert done.returncode == status, done.stdout + done.stderr
    assert done.stderr == ""
    if output == "json":
        records = [json.loads(line) for line in done.stdout.splitlines()]
        assert all(set(r) >= {"file", "valid", "errors"} for r in records)
        assert any(not r["valid"] for r in records) == (status != 0)
    elif output == "github":
        commands = github_commands(done.stdout)
        assert all(name == "error" for name, _, _ in commands)
        assert bool(commands) == (status != 0)
        assert done.stdout.splitlines()[-1].endswith(("invalid", "could not be read"))
        if case == "unreadable":
            [(_, properties, data)] = commands
            assert properties == {"file": files[0], "title": "cannot be read"}
            assert data == "no such file"
    elif output == "sarif":
        log = json.loads(done.stdout)
        results = check_sarif(log)
        assert bool(results) == (status == 1)
        invocation = log["runs"][0]["invocations"][0]
        assert invocation["executionSuccessful"] == (case != "unreadable")
        if case == "unreadable":
            [notification] = invocation["toolExecutionNotifications"]
            assert notification["message"]["text"] == "no such file"
            assert where(notification) == ("file://" + files[0], None, None)
    else:
        documents = len(EVENTS) + 2 if case == "ndjson" else 1
        assert done.stdout.splitlines()[-1].startswith(f"{documents} document")


def test_ndjson_lines_are_the_documents_lines_in_the_file(inputs: Path) -> None:
    name = str(inputs / "events.ndjson")
    done = run("validate", "--ndjson", "--format", "sarif", "tool-event", name)
    results = check_sarif(json.loads(done.stdout))
    event = '{"version": "0", "type": "asset"}'
    places = [(r["ruleId"], *where(r)[1:]) for r in results]
    assert places[0] == ("required", 2, 1)  # the object that lacks a field
    assert places[1:] == [
        (NOT_JSON, len(EVENTS) + 1, None),  # an empty line
        (NOT_JSON, len(EVENTS) + 2, 2),  # `{nope`: the parser stops at its second character
    ]
    assert event.startswith("{")


def test_json_is_the_json_option_and_text_the_default(inputs: Path) -> None:
    names = [str(inputs / "good.json"), str(inputs / "bad.json")]
    given, chosen = (
        run("validate", "--json", "plan", *names),
        run("validate", "--format", "json", "plan", *names),
    )
    assert (given.returncode, given.stdout) == (chosen.returncode, chosen.stdout)
    plain = run("validate", "plan", *names)
    assert plain.stdout == run("validate", "--format", "text", "plan", *names).stdout


@pytest.mark.parametrize(
    "options",
    [("--json", "--format", "sarif"), ("--format", "json", "--json"), ("--format", "xml")],
)
def test_a_format_given_twice_or_unknown_is_a_usage_error(
    inputs: Path, options: tuple[str, ...]
) -> None:
    done = run("validate", *options, "plan", str(inputs / "good.json"))
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines()[-1].startswith("plancontracts validate: error: argument")


def test_standard_input_has_no_file_for_github_and_is_dash_for_sarif() -> None:
    data = json.dumps({**PLAN, "parallel": "yes"}).encode()
    github = run("validate", "--format", "github", "plan", "-", stdin=data)
    [(_, properties, _)] = github_commands(github.stdout)
    assert "file" not in properties
    assert properties["line"] == "1"
    sarif = run("validate", "--format", "sarif", "plan", "-", stdin=data)
    [result] = check_sarif(json.loads(sarif.stdout))
    artifact = result["locations"][0]["physicalLocation"]["artifactLocation"]
    assert artifact == {"uri": "-", "description": {"text": "standard input"}}


# Hostile keys and file names -----------------------------------------------------------

HOSTILE = "x\n::warning::pwned%0A::error file=evil,line=1::fake\r, :: %25"


def test_no_key_or_file_name_can_write_a_second_workflow_command(tmp_path: Path) -> None:
    folder = tmp_path / "a,b:c%0A::d"
    folder.mkdir()
    path = folder / f"{HOSTILE.replace(os.sep, '_')}.json"
    path.write_text(json.dumps({**PLAN, HOSTILE: 1, "parallel": HOSTILE}))
    done = run("validate", "--format", "github", "plan", str(path))
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    # Two violations: two lines, each one command; the report's last line; nothing else.
    assert len(lines) == 3
    assert all(line.startswith("::error file=") for line in lines[:2])
    commands = github_commands(done.stdout)
    assert [name for name, _, _ in commands] == ["error", "error"]
    for _, properties, data in commands:
        assert set(properties) == {"file", "line", "col", "title"}
        assert properties["file"] == str(path)  # as the runner reads it back: the real name
        assert "\n" not in data
        assert "\r" not in data
    titles = {properties["title"] for _, properties, _ in commands}
    assert titles == {"/" + HOSTILE.replace("~", "~0").replace("/", "~1"), "/parallel"}


def test_escaping_follows_githubs_rules() -> None:
    assert escape_data("50% done\r\nnext: a, b") == "50%25 done%0D%0Anext: a, b"
    assert escape_property("50% done\r\nnext: a, b") == "50%25 done%0D%0Anext%3A a%2C b"
    assert escape_data("%0A") == "%250A"  # read back as the text %0A, not a line break
    # Anything else not printable is shown, never written raw.
    assert escape_data("bell\x07 and \u202e") == "bell\\u0007 and \\u202e"


def test_artifact_uris_are_uri_references_that_give_back_the_name() -> None:
    names = ["plan.json", "my plan.json", "a:b.json", "dir/ü?#.json", "/abs/x y.json", "a\nb%0A"]
    for name in names:
        uri = artifact_uri(name)
        assert _URI_REFERENCE.fullmatch(uri), uri
        assert ":" not in uri.removeprefix("file://"), "no relative name reads as a scheme"
        assert unquote_to_bytes(uri.removeprefix("file://")) == os.fsencode(name)
    raw = os.fsdecode(b"plan-\xff.json")  # bytes that are not UTF-8 stay themselves
    assert artifact_uri(raw) == "plan-%FF.json"
    assert artifact_uri("-") == "-"


# The locator ------------------------------------------------------------------------------


def test_locate_finds_values_keys_and_the_nearest_place_of_what_is_missing() -> None:
    text = KNOWN.encode()
    found = locate(text, ["", "/tools/0/input", "/colour", "/tools/5", "/tools/1/nope/2"])
    assert found[""] == jsontext.Located(0, None, True)
    assert text[found["/tools/0/input"].value :].startswith(b"{}")
    assert text[found["/tools/0/input"].key or 0 :].startswith(b'"input"')
    assert found["/tools/5"] == jsontext.Located(text.index(b"[{"), None, False)
    assert text[found["/tools/1/nope/2"].value :].startswith(b'{"toolPath"')
    with pytest.raises(ValueError, match="not a JSON Pointer"):
        locate(text, ["tools"])


def test_a_violation_whose_pointer_is_not_one_gets_no_place() -> None:
    # Rules beyond the schema write their own pointers: a wrong one costs its place only.
    text = b'{"a": 1}'
    violations = Violations([Violation("a", "no pointer"), Violation("/a", "is 1")])
    found = list(findings(Outcome("x.json", None, violations, text=text)))
    assert [(f.rule, f.line, f.column) for f in found] == [(RULE, None, None), (RULE, 1, 7)]


def test_keys_with_escapes_and_pointer_escapes_are_found() -> None:
    text = b'{"a/b": {"m~n": [0, {"\\u00e9\\"": true}]}}'
    found = locate(text, ['/a~1b/m~0n/1/\u00e9"'])
    assert text[found['/a~1b/m~0n/1/\u00e9"'].value :].startswith(b"true")


def test_columns_count_characters_not_bytes() -> None:
    text = "é«»\U0001f600x\n\\u00e9y".encode()
    assert positions(text, [text.index(b"x"), text.index(b"y")]) == {
        text.index(b"x"): (1, 5),
        text.index(b"y"): (2, 7),
    }


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        (b'{"a": 1,\n "a": 2}', 2, 2),  # the second of duplicate keys
        (b"\xef\xbb\xbf{}", 1, 1),  # a byte order mark
        (b'{"a":\n  NaN}', 2, 3),
        (b'["\xc3\xa9", "\xff"]', 1, 8),  # the byte that is not UTF-8
        (b'{"a": [1, 2', 1, 12),  # the text ends inside a value
        (b"  \n ", 2, 2),  # nothing but space: where a value was expected, the end
    ],
)
def test_malformed_json_knows_where_it_stops_being_json(
    text: bytes, line: int, column: int
) -> None:
    with pytest.raises(MalformedJSON) as raised:
        parse(text)
    assert raised.value.offset is not None
    assert positions(text, [raised.value.offset])[raised.value.offset] == (line, column)


def test_a_document_100000_levels_deep_is_located_without_recursion() -> None:
    depth = 100_000
    text = b'{"a": ' * depth + b"[1, 2]" + b"}" * depth
    pointer = "/a" * depth + "/1"
    found = locate(text, [pointer, "/a" * (depth // 2)])
    assert text[found[pointer].value :].startswith(b"2]")
    assert found[pointer].exact
    at = found[pointer].value
    assert positions(text, [at])[at] == (1, at + 1)


class Tallied(bytes):
    """Bytes that count how many of themselves are read through slices, count and rfind."""

    read = 0

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            start, stop, _ = key.indices(len(self))
            Tallied.read += max(0, stop - start)
        return super().__getitem__(key)

    def count(self, sub: Any, start: Any = None, end: Any = None) -> int:
        Tallied.read += self._span(start, end)
        return super().count(sub, start, end)

    def rfind(self, sub: Any, start: Any = None, end: Any = None) -> int:
        Tallied.read += self._span(start, end)
        return super().rfind(sub, start, end)

    def _span(self, start: Any, end: Any) -> int:
        first, stop, _ = slice(start, end).indices(len(self))
        return max(0, stop - first)


def sixteen_mb_with_violations(count: int) -> tuple[bytes, list[str]]:
    """A 16 MB document on one line (the hardest for columns) and `count` pointers across it."""
    item = b'{"id": %d, "note": "' + b"\xc3\xa9" * 500 + b'", "bad": true}'
    items = (16 << 20) // len(item)
    text = b'{"items": [' + b", ".join(item % n for n in range(items)) + b"]}"
    step = items // count
    return text, [f"/items/{n * step + step - 1}/bad" for n in range(count)]


def test_a_16_mb_document_with_100_violations_is_read_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text, pointers = sixteen_mb_with_violations(100)
    assert len(text) >= 16_000_000
    passes = 0
    tokens = jsontext._TOKENS

    class Counted:
        def finditer(self, data: bytes) -> Iterator[re.Match[bytes]]:
            nonlocal passes
            passes += 1
            return tokens.finditer(data)

    monkeypatch.setattr(jsontext, "_TOKENS", Counted())
    Tallied.read = 0
    tallied = Tallied(text)
    violations = Violations(Violation(pointer, "is true", "const") for pointer in pointers)
    outcome = Outcome("big.json", None, violations, text=tallied)
    found = list(findings(outcome))
    assert passes == 1, "one pass over the text for every pointer"
    # Keys of the path decoded, plus the text up to the last value once for lines and columns.
    # The keys on the pointers' paths, and the text up to the last value twice: once for
    # its lines, once for its characters. A pass per pointer would read some 50 times it.
    assert Tallied.read < 3 * len(text), f"read {Tallied.read:,} bytes of {len(text):,}"
    assert [f.line for f in found] == [1] * 100
    last = int(pointers[-1].split("/")[2])
    value = text.index(b'"bad": ', text.index(b'{"id": %d, ' % last)) + len(b'"bad": ')
    assert found[-1].column == len(text[:value].decode()) + 1


def test_each_document_is_located_in_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = jsontext.locate

    def counted(data: bytes, pointers: Any) -> Any:
        listed = list(pointers)
        calls.append(len(listed))
        return real(data, listed)

    monkeypatch.setattr(reports, "locate", counted)
    text, pointers = sixteen_mb_with_violations(100)
    violations = Violations(Violation(pointer, "is true", "const") for pointer in pointers)
    list(findings(Outcome("big.json", None, violations, text=text)))
    assert calls == [100]
