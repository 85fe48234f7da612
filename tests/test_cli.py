"""The `plancontracts` command, run as a user runs it: a real process, real files, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from plancontracts import contract_names, contract_schema

PLAN = contract_schema("plan")["examples"][0]
EVENTS = contract_schema("tool-event")["examples"]


def run(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "plancontracts", *args],
        input=stdin,
        capture_output=True,
        check=False,
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "good.json").write_text(json.dumps(PLAN))
    broken = json.loads(json.dumps(PLAN))
    broken["tools"][0]["dependancies"] = []
    broken["parallel"] = "yes"
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    lines = [json.dumps(event) for event in EVENTS]
    lines[2] = '{"version": "0", "type": "asset"}'
    (tmp_path / "events.ndjson").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_the_console_script_and_python_m_are_the_same_command() -> None:
    script = Path(sys.executable).with_name("plancontracts")
    direct = subprocess.run([script, "contracts"], capture_output=True, text=True, check=True)
    assert direct.stdout == run("contracts").stdout


def test_contracts_lists_every_contract_with_its_title() -> None:
    done = run("contracts")
    assert done.returncode == 0
    names = [line.split()[0] for line in done.stdout.splitlines()]
    assert names == list(contract_names())
    assert "plan" in names
    assert "Execution result" in done.stdout


def test_schema_prints_a_self_contained_schema_any_tool_can_use() -> None:
    done = run("schema", "story-package")
    assert done.returncode == 0
    schema = json.loads(done.stdout)
    Draft202012Validator.check_schema(schema)
    references = list(_values(schema, "$ref"))
    assert references
    assert all(ref.startswith("#/$defs/") for ref in references)
    # Plain jsonschema, with no registry of the other files, validates with it.
    assert Draft202012Validator(schema).is_valid(schema["examples"][0])


def test_schema_text_prints_what_a_model_reads() -> None:
    done = run("schema", "plan", "--text")
    assert done.returncode == 0
    assert done.stdout.startswith("# Plan (`plan`)")


def test_validate_exits_0_when_all_documents_are_valid(files: Path) -> None:
    done = run("validate", "plan", str(files / "good.json"))
    assert done.returncode == 0
    assert done.stdout.splitlines() == [
        f"{files / 'good.json'}: valid",
        "1 document checked: 1 valid, 0 invalid",
    ]


def test_validate_exits_1_and_prints_every_violation_with_its_pointer(files: Path) -> None:
    done = run("validate", "plan", str(files / "good.json"), str(files / "broken.json"))
    assert done.returncode == 1
    assert f"{files / 'broken.json'}: invalid (2 violations)" in done.stdout
    assert '  /parallel: expected true or false, got the string "yes"' in done.stdout
    assert (
        '  /tools/0/dependancies: unknown field "dependancies"; did you mean "dependencies"?'
        in done.stdout
    )
    assert done.stdout.endswith("2 documents checked: 1 valid, 1 invalid\n")


def test_validate_json_prints_one_object_per_document(files: Path) -> None:
    done = run("validate", "--json", "plan", str(files / "good.json"), str(files / "broken.json"))
    assert done.returncode == 1
    good, broken = (json.loads(line) for line in done.stdout.splitlines())
    assert good == {"file": str(files / "good.json"), "valid": True, "errors": []}
    assert broken["valid"] is False
    assert {
        "pointer": "/parallel",
        "message": 'expected true or false, got the string "yes"',
    } in broken["errors"]


def test_validate_ndjson_judges_each_line(files: Path) -> None:
    done = run("validate", "--ndjson", "--json", "tool-event", str(files / "events.ndjson"))
    assert done.returncode == 1
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert [record["line"] for record in records] == list(range(1, len(EVENTS) + 1))
    assert [record["valid"] for record in records] == [True, True, False, True, True, True]
    assert records[2]["errors"] == [
        {"pointer": "", "message": 'missing required fields "assetId", "kind", "mediaType", "path"'}
    ]


def test_validate_reads_stdin_for_a_dash() -> None:
    done = run(
        "validate",
        "--ndjson",
        "tool-event",
        "-",
        stdin=b'{"version": "0", "type": "done", "ok": true}\n',
    )
    assert done.returncode == 0
    assert "<stdin>: 1 document, 0 invalid" in done.stdout


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty document: expected a JSON value"),
        (b"\xef\xbb\xbf{}", "starts with a UTF-8 byte order mark"),
        (b'{"requestId": NaN}', "NaN and Infinity are not JSON numbers"),
        (b'{"tools": [], "tools": []}', "duplicate key"),
        (b"[" * 100_000 + b"]" * 100_000, "nest too deeply"),
        (b'{"a": "\xff"}', "not valid UTF-8"),
    ],
    ids=["empty", "bom", "nan", "duplicate", "deep", "utf8"],
)
def test_bad_input_gets_one_line_and_exit_1(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    done = run("validate", "plan", str(path))
    assert done.returncode == 1
    assert done.stderr == ""
    invalid, detail, summary = done.stdout.splitlines()
    assert invalid == f"{path}: invalid (1 violation)"
    assert message in detail
    assert summary == "1 document checked: 0 valid, 1 invalid"


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads Linux's /proc")
def test_a_document_over_the_size_limit_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "huge.json"
    with path.open("wb") as stream:
        stream.write(b'{"narrative": "')
        stream.write(b"x" * (50 * 1024 * 1024))
        stream.write(b'"}')
    done = subprocess.run(
        [sys.executable, "-c", CHILD_PEAK, "validate", "plan", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert "larger than 16777216 bytes (see --max-bytes)" in done.stdout
    peak_kib = int(done.stderr.strip().splitlines()[-1])
    assert peak_kib < 150 * 1024, f"peak memory {peak_kib} KiB"


# Runs the command in-process and prints its peak memory (KiB) to stderr. VmHWM
# starts afresh with the process image; ru_maxrss would carry over the parent's peak.
CHILD_PEAK = """
import re, sys
from pathlib import Path
from plancontracts.runtime.cli.main import main
status = main(sys.argv[1:])
status_text = Path("/proc/self/status").read_text()
print(re.search(r"VmHWM:\\s+(\\d+) kB", status_text).group(1), file=sys.stderr)
raise SystemExit(status)
"""


def test_an_overlong_ndjson_line_is_reported_and_the_stream_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "events.ndjson"
    done_event = json.dumps({"version": "0", "type": "done", "ok": True})
    long_event = json.dumps({"version": "0", "type": "log", "level": "info", "message": "x" * 1500})
    path.write_text(f"{long_event}\n{done_event}\n")
    done = run("validate", "--ndjson", "--max-bytes", "1000", "tool-event", str(path))
    assert done.returncode == 1
    assert "events.ndjson:1: invalid" in done.stdout
    assert "  (document): line longer than 1000 bytes (see --max-bytes)\n" in done.stdout
    assert "events.ndjson: 2 documents, 1 invalid" in done.stdout


def test_a_line_without_end_stops_the_reading_of_its_file_at_once(tmp_path: Path) -> None:
    # /dev/zero is one endless line: it is refused after twice --max-bytes, not read forever.
    good = tmp_path / "good.ndjson"
    good.write_text(json.dumps({"version": "0", "type": "done", "ok": True}) + "\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "plancontracts",
            "validate",
            "--ndjson",
            "--max-bytes",
            "1000",
            "tool-event",
            "/dev/zero",
            str(good),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "/dev/zero:1: invalid (1 violation)",
        "  (document): line longer than 1000 bytes (see --max-bytes), and it does not end "
        "within 1000 bytes more: the rest is not read",
        "/dev/zero: 1 document, 1 invalid",
        f"{good}: 1 document, 0 invalid",
        "2 documents checked: 1 valid, 1 invalid",
    ]


@pytest.mark.parametrize("limit", ["30000000000", "100000000000000000000", "1073741825"])
def test_max_bytes_is_at_most_one_gibibyte(limit: str) -> None:
    for command in ("validate", "normalize"):
        contract = "planning-block" if command == "normalize" else "plan"
        done = run(command, "--max-bytes", limit, contract, "-")
        assert done.returncode == 2
        assert f"must be 1 to 1073741824: {limit}" in done.stderr
        assert "Traceback" not in done.stderr


def test_the_largest_max_bytes_reads_only_what_is_there(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(PLAN))
    for source in (str(path), "-"):
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                CHILD_PEAK,
                "validate",
                "--max-bytes",
                "1073741824",
                "plan",
                source,
            ],
            input=json.dumps(PLAN).encode(),
            capture_output=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        peak_kib = int(done.stderr.strip().splitlines()[-1])
        assert peak_kib < 150 * 1024, f"peak memory {peak_kib} KiB"


def test_a_file_name_that_is_not_utf8_is_escaped_in_json_reports(tmp_path: Path) -> None:
    path = tmp_path / os.fsdecode(b"plan-\xff.json")
    path.write_text(json.dumps(PLAN))
    block = tmp_path / os.fsdecode(b"block-\xfe.json")
    block.write_text(json.dumps(contract_schema("planning-block")["examples"][0]))
    for command, contract, name, shown in [
        ("validate", "plan", path, f"{tmp_path}/plan-\\udcff.json"),
        ("normalize", "planning-block", block, f"{tmp_path}/block-\\udcfe.json"),
    ]:
        done = subprocess.run(
            [sys.executable, "-m", "plancontracts", command, "--json", contract, str(name)],
            capture_output=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout.decode("utf-8"))["file"] == shown  # strictly UTF-8
    text = run("validate", "plan", str(path))  # as text mode writes it
    assert f"{tmp_path}/plan-\\udcff.json: valid" in text.stdout


def test_a_document_with_too_many_violations_says_the_list_is_cut(tmp_path: Path) -> None:
    path = tmp_path / "many.json"
    path.write_text(json.dumps({**PLAN, "tools": [1] * 5000}))
    done = run("validate", "plan", str(path))
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[0] == (
        f"{path}: invalid (more than 100 violations; the first 100 found are listed)"
    )
    assert len(lines) == 1 + 100 + 1
    record = json.loads(run("validate", "--json", "plan", str(path)).stdout)
    assert len(record["errors"]) == 100
    assert record["more_errors"] is True
    complete = run("validate", "--json", "plan", "-", stdin=b"{}")
    assert "more_errors" not in json.loads(complete.stdout)


def test_a_directory_or_missing_file_is_an_invalid_document_not_a_crash(tmp_path: Path) -> None:
    done = run("validate", "plan", str(tmp_path), str(tmp_path / "nope.json"))
    assert done.returncode == 1
    assert (
        f"{tmp_path}: invalid (1 violation)\n  (document): is a directory, not a JSON file"
        in done.stdout
    )
    assert "(document): no such file" in done.stdout


def test_hostile_file_names_stay_on_one_line(tmp_path: Path) -> None:
    path = tmp_path / "a\nb\u202e.json"
    path.write_text("{}")
    done = run("validate", "plan", str(path))
    assert done.returncode == 1
    assert "a\\u000ab\\u202e.json: invalid" in done.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("validate", "no-such-contract", "x.json"),
        ("validate", "plan"),
        ("validate", "plan", "-", "-"),
        ("validate", "--max-bytes", "0", "plan", "x.json"),
        ("schema", "nope"),
        ("frobnicate",),
        (),
    ],
    ids=[
        "unknown contract",
        "no file",
        "stdin twice",
        "bad limit",
        "unknown schema",
        "unknown command",
        "no command",
    ],
)
def test_usage_errors_exit_2_with_a_message_and_no_traceback(args: tuple[str, ...]) -> None:
    done = run(*args)
    assert done.returncode == 2
    assert "error" in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_examples_validates_every_contracts_bundled_examples() -> None:
    done = run("examples")
    assert done.returncode == 0, done.stdout
    for name in contract_names():
        assert f"  {name} " in done.stdout
    assert done.stdout.rstrip().endswith("all valid.")


def _values(node: object, key: str) -> list[str]:
    if isinstance(node, dict):
        found = [node[key]] if key in node else []
        return found + [v for child in node.values() for v in _values(child, key)]
    if isinstance(node, list):
        return [v for child in node for v in _values(child, key)]
    return []


def test_a_reader_that_goes_away_ends_the_command_without_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "many.ndjson"
    path.write_text('{"version": "0"}\n' * 20_000)
    command = [
        sys.executable,
        "-m",
        "plancontracts",
        "validate",
        "--ndjson",
        "tool-event",
        str(path),
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None
    assert process.stderr is not None
    first = process.stdout.readline()
    process.stdout.close()
    status = process.wait(timeout=300)
    assert b"many.ndjson:1: invalid" in first
    assert status == 1
    assert process.stderr.read() == b""
