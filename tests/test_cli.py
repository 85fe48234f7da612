"""The `plancontracts` command: real files, exit codes, and each command run as a process.

Most tests run the command in this process (`commands.cli`); those whose
subject is the process (the console script, a fresh process's peak memory, a
reader that goes away, what a fresh interpreter imports) start one, and so
does one smoke test per command, as a user runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from commands import COMMAND_TIMEOUT, cli, cli_bytes, plancontracts
from jsonschema import Draft202012Validator
from local_servers import conforming, model_server
from user_schemas import BROKEN, COMMON, RECIPE, SOUP, write_user_schemas

from plancontracts import __version__, contract_names, contract_schema
from plancontracts.runtime.story_packages import DraftSession, DraftStore

PLAN = contract_schema("plan")["examples"][0]
EVENTS = contract_schema("tool-event")["examples"]


def run(
    *args: str, stdin: bytes = b"", cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    done = cli_bytes(*args, stdin=stdin, cwd=cwd)
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


@pytest.mark.process
def test_the_console_script_and_python_m_are_the_same_command() -> None:
    script = Path(sys.executable).with_name("plancontracts")
    direct = subprocess.run([script, "contracts"], capture_output=True, text=True, check=True)
    assert direct.stdout == plancontracts("contracts").stdout


def test_the_version_says_whether_the_native_fast_path_is_on() -> None:
    # .venv has it: `python3 dev.py setup` installs native/ with the project. Without
    # it (tests/test_packaging.py installs the core alone) the line names the extra.
    assert cli("--version").stdout == f"plancontracts {__version__} (native fast path: on)\n"


@pytest.mark.process
@pytest.mark.parametrize("switch", ["0", "off", "False"])
def test_the_version_says_the_fast_path_was_turned_off(switch: str) -> None:
    done = plancontracts("--version", env={"PLANCONTRACTS_NATIVE": switch})
    off = f"off: PLANCONTRACTS_NATIVE={switch}"
    assert done.stdout == f"plancontracts {__version__} (native fast path: {off})\n"


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


@pytest.mark.process  # the peak memory of a fresh process
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
    done = cli("validate", "--ndjson", "--max-bytes", "1000", "tool-event", "/dev/zero", str(good))
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


@pytest.mark.process  # the peak memory of a fresh process
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
        done = cli_bytes(command, "--json", contract, str(name))
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


def test_a_directory_or_missing_file_is_one_line_each_and_exit_status_2(files: Path) -> None:
    # Every file is still reported, in order; the status is the highest of them.
    folder, missing = files / "folder", files / "nope.json"
    folder.mkdir()
    names = [files / "good.json", folder, files / "broken.json", missing]
    done = run("validate", "plan", *map(str, names))
    assert (done.returncode, done.stderr) == (2, "")
    lines = done.stdout.splitlines()
    assert lines[0] == f"{files}/good.json: valid"
    assert lines[1] == f"{folder}: is a directory, not a JSON file"
    assert lines[2].startswith(f"{files}/broken.json: invalid (")
    assert lines[-2:] == [
        f"{missing}: no such file",
        "2 documents checked: 1 valid, 1 invalid; 2 files could not be read",
    ]
    records = [json.loads(line) for line in run("validate", "--json", "plan", *map(str, names))
               .stdout.splitlines()]  # fmt: skip
    assert records[1] == {
        "file": str(folder),
        "valid": False,
        "errors": [{"pointer": "", "message": "is a directory, not a JSON file"}],
    }
    assert records[3]["errors"] == [{"pointer": "", "message": "no such file"}]
    events = str(files / "events.ndjson")
    ndjson = run("validate", "--ndjson", "plan", str(missing), events)
    assert ndjson.returncode == 2
    assert ndjson.stdout.splitlines()[0] == f"{missing}: no such file"
    assert f"{missing}: 0 documents" not in ndjson.stdout


@pytest.mark.parametrize(
    ("names", "status"),
    [
        (["good.json"], 0),
        (["good.json", "broken.json"], 1),
        (["good.json", "nope.json"], 2),
        (["nope.json", "broken.json"], 2),
    ],
)
@pytest.mark.parametrize("as_json", [False, True])
def test_a_batch_exits_with_the_highest_status_of_its_files(
    files: Path, names: list[str], status: int, as_json: bool
) -> None:
    json_option = ["--json"] if as_json else []
    done = run("validate", *json_option, "plan", *(str(files / name) for name in names))
    assert done.returncode == status


def _commands_reading_a_file() -> set[str]:
    """Every command (as `story graph`) whose positional argument names a file, from the parser."""
    from plancontracts.runtime.cli.main import _parser

    found: set[str] = set()

    def walk(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*words, name))
            elif not action.option_strings and "file" in (action.help or ""):
                found.add(" ".join(words))

    walk(_parser(), ())
    return found


# A missing FILE of each, with the arguments it needs besides (none reaches a model).
_MISSING_FILE = {
    "validate": ["validate", "plan", "{file}"],
    "normalize": ["normalize", "planning-block", "{file}"],
    "choose": ["choose", "{file}", "parallel_crossing"],
    "migrate": ["migrate", "plan", "{file}"],
    "execute": ["execute", "{file}"],
    "goals simulate": ["goals", "simulate", "{file}"],
    "goals stats": ["goals", "stats", "{file}"],
    "session run": ["session", "run", "{file}"],
    "story graph": ["story", "graph", "{file}"],
    "story play": ["story", "play", "{file}"],
    "story run": ["story", "run", "--db", "{tmp}/stories.db", "--out", "{tmp}", "{file}"],
}


# Commands whose paths may be files or folders: their own tests hold a missing or
# unusable path to one line and exit status 2.
_FILES_OR_FOLDERS = {"diff": "tests/test_diff.py"}


def test_every_command_reading_a_file_is_in_the_missing_file_test() -> None:
    assert _commands_reading_a_file() == set(_MISSING_FILE) | set(_FILES_OR_FOLDERS)


_CANNOT_BE_READ = {
    "missing": "no such file",
    "a directory": "is a directory, not a JSON file",
    "a socket": "cannot read: no such device or address",  # not a regular file: even root
}


@pytest.mark.parametrize("command", sorted(_MISSING_FILE))
@pytest.mark.parametrize("kind", sorted(_CANNOT_BE_READ))
def test_a_file_that_cannot_be_read_is_exit_status_2_in_one_line(command: str, kind: str) -> None:
    # A short folder: a socket's path must fit in 108 bytes.
    with tempfile.TemporaryDirectory(dir="/tmp") as folder, socket.socket(socket.AF_UNIX) as unix:
        tmp_path = Path(folder)
        target = tmp_path / {"missing": "nope.json", "a directory": "folder"}.get(kind, "sock")
        if kind == "a directory":
            target.mkdir()
        elif kind == "a socket":
            unix.bind(str(target))
        arguments = [a.format(file=target, tmp=tmp_path) for a in _MISSING_FILE[command]]
        done = run(*arguments)
    why = _CANNOT_BE_READ[kind]
    assert done.returncode == 2
    said = (done.stdout + done.stderr).splitlines()
    assert [line for line in said if str(target) in line] == [
        f"{target}: {why}" if command == "validate" else f"plancontracts: error: {target}: {why}"
    ]
    # validate's report ends with its count of documents and of files not read.
    assert len(said) == (2 if command == "validate" else 1)


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


@pytest.mark.process  # a broken pipe
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


# validate --schemas: a user's own schema folder ------------------------------------


def test_validate_schemas_judges_by_a_users_schema_folder(tmp_path: Path) -> None:
    # The documentation's example, as written.
    write_user_schemas(tmp_path / "my-schemas")
    (tmp_path / "soup.json").write_text(SOUP)
    (tmp_path / "broken.json").write_text(BROKEN)
    command = ("validate", "--schemas", "my-schemas", "recipe", "soup.json", "broken.json")
    done = run(*command, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "soup.json: valid",
        "broken.json: invalid (3 violations)",
        "  /name: is 0 characters long; needs at least 1",
        "  /servings: 0 is less than the minimum 1",
        '  /spicy: unknown field "spicy"',
        "2 documents checked: 1 valid, 1 invalid",
    ]
    assert done.stderr == ""
    assert run(*command[:-1], cwd=tmp_path).returncode == 0


def test_validate_schemas_says_what_the_bundled_contracts_say(files: Path, tmp_path: Path) -> None:
    # A copy of schemas/ as a user's folder: judged by the schemas alone, every
    # message, pointer, cap and exit status is the one the typed path gives.
    copy = shutil.copytree(Path(__file__).resolve().parent.parent / "schemas", tmp_path / "copy")
    (files / "many.json").write_text(json.dumps({**PLAN, "tools": [1] * 5000}))
    (files / "malformed.json").write_bytes(b'{"tools": [], "tools": []}')
    (files / "integral.json").write_text(
        json.dumps({**PLAN, "metadata": {"generationAttempt": 1.0}})
    )
    names = [str(files / name) for name in ("good.json", "broken.json", "many.json")]
    names += [str(files / "malformed.json"), str(files / "integral.json"), str(files / "nope")]
    for contract, options, documents in [
        ("plan", (), names),
        ("plan", ("--json",), names),
        ("tool-event", ("--ndjson",), [str(files / "events.ndjson")]),
    ]:
        bundled = run("validate", *options, contract, *documents)
        theirs = run("validate", "--schemas", str(copy), *options, contract, *documents)
        assert (theirs.returncode, theirs.stdout, theirs.stderr) == (
            bundled.returncode,
            bundled.stdout,
            bundled.stderr,
        )
        # A file that cannot be read (nope) is exit status 2; else an invalid one is 1.
        assert bundled.returncode == (2 if str(files / "nope") in documents else 1)
        if not options:  # what the comparison covered
            for seen in ("more than 100 violations", "duplicate key", "integral.json: valid"):
                assert seen in bundled.stdout
            assert "did you mean" in bundled.stdout


@pytest.mark.process  # what a fresh interpreter imports
def test_validate_schemas_needs_neither_the_model_generator_nor_ruff(tmp_path: Path) -> None:
    write_user_schemas(tmp_path / "my-schemas")
    (tmp_path / "soup.json").write_text(SOUP)
    code = (
        "import sys\n"
        "from plancontracts.runtime.cli.main import main\n"
        "status = main(['validate', '--schemas', 'my-schemas', 'recipe', 'soup.json'])\n"
        "loaded = [name for name in ('datamodel_code_generator', 'ruff', "
        "'plancontracts.codegen.models', 'plancontracts.codegen.generate') "
        "if name in sys.modules]\n"
        "print(status, loaded)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.stdout.splitlines()[-1] == "0 []", done.stderr


@pytest.mark.parametrize(
    ("files", "message"),
    [
        (None, "--schemas my-schemas: no such folder"),
        ({"": "a file"}, "--schemas my-schemas: is not a folder"),
        ({"recipes/recipe.json": RECIPE[:-5]},
         "--schemas my-schemas: recipes/recipe.json: cannot read as JSON: "),
        ({"recipes/recipe.json": RECIPE.replace("Quantity", "Quantities")},
         "--schemas my-schemas: common.json#/$defs/Quantities: no such definition"),
        ({"recipes/recipe.json": RECIPE.replace("../common.json", "../nowhere.json")},
         "--schemas my-schemas: recipes/recipe.json: `$ref` '../nowhere.json#/$defs/Quantity' "
         "names no schema file"),
        ({"menus/recipe.json": RECIPE.replace("recipes/recipe", "menus/recipe")},
         "--schemas my-schemas: recipes/recipe.json: contract name 'recipe' is used twice, "
         "by menus/recipe.json too"),
        ({"recipes/recipe.json": RECIPE.replace('"minLength": 1', '"minLength": "one"')},
         "--schemas my-schemas: recipes/recipe.json#/properties/name/minLength: "
         "not a valid JSON Schema: 'one' is not of type 'integer'"),
        ({"common.json": COMMON.replace('"integer"', '"int"')},
         "--schemas my-schemas: common.json#/$defs/Quantity/type: "
         "not a valid JSON Schema: 'int' is not valid under any of the given schemas"),
        ({"recipes/recipe.json": "", "common.json": "[]"},
         "--schemas my-schemas: common.json: a schema file holds a JSON object or a boolean"),
    ],
    ids=[
        "missing", "a file", "broken JSON", "no such definition", "no such file", "name clash",
        "bad bound", "bad type", "not an object",
    ],
)  # fmt: skip
def test_a_schema_folder_validate_cannot_use_is_one_line_and_exit_2(
    tmp_path: Path, files: dict[str, str] | None, message: str
) -> None:
    folder = tmp_path / "my-schemas"
    if files is not None and "" in files:
        folder.write_text(files[""])
    elif files is not None:
        write_user_schemas(folder)
        for relative, text in files.items():
            (folder / relative).parent.mkdir(parents=True, exist_ok=True)
            (folder / relative).write_text(text)
    (tmp_path / "soup.json").write_text(SOUP)
    done = run("validate", "--schemas", "my-schemas", "recipe", "soup.json", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith(f"plancontracts: error: {message}")
    assert len(done.stderr.splitlines()) == 1
    assert "Traceback" not in done.stderr


def test_validate_schemas_knows_only_the_folders_contracts_and_no_family_rules(
    tmp_path: Path,
) -> None:
    write_user_schemas(tmp_path / "my-schemas")
    (tmp_path / "soup.json").write_text(SOUP)
    unknown = run("validate", "--schemas", "my-schemas", "plan", "soup.json", cwd=tmp_path)
    assert (unknown.returncode, unknown.stdout) == (2, "")
    assert unknown.stderr == (
        'plancontracts: error: unknown contract "plan"; the contracts are: recipe\n'
    )
    copy = shutil.copytree(Path(__file__).resolve().parent.parent / "schemas", tmp_path / "copy")
    block = tmp_path / "block.json"
    block.write_text(json.dumps(contract_schema("planning-block")["examples"][0]))
    mode = run("validate", "--schemas", str(copy), "--mode", "think", "planning-block", str(block))
    assert (mode.returncode, mode.stdout) == (2, "")
    assert mode.stderr == (
        "plancontracts: error: Think mode's rules judge plancontracts' own planning-block, "
        "not one of --schemas\n"
    )


def test_a_schema_that_refers_to_itself_judges_deep_documents_or_refuses_them(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "trees"
    (folder / "trees").mkdir(parents=True)
    node = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://example.org/trees/node.json",
        "type": "object",
        "additionalProperties": False,
        "patternProperties": {"^x-": {}},
        "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}},
    }
    (folder / "trees" / "node.json").write_text(json.dumps(node))
    shallow, deep = tmp_path / "shallow.json", tmp_path / "deep.json"
    shallow.write_text('{"x-note": 1, "kids": [{"kids": [{"leaf": true}]}]}')
    # 400 objects in 400 arrays: within the parser's limit, past what the validator follows.
    deep.write_text('{"kids": [' * 400 + "{}" + "]}" * 400)
    done = run("validate", "--schemas", str(folder), "node", str(shallow), str(deep))
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        f"{shallow}: invalid (1 violation)",
        '  /kids/0/kids/0/leaf: unknown field "leaf"',
        f"{deep}: invalid (1 violation)",
        "  (document): nests too deeply to be judged by a schema that refers to itself "
        "(the limit is Python's recursion limit: 150 to 250 levels)",
        "2 documents checked: 0 valid, 2 invalid",
    ]
    assert done.stderr == ""


# Every command as a process ---------------------------------------------------------
# The tests above and those of each family run the command in the test's process
# (commands.cli). These start each command once as a user does, `python -m
# plancontracts`, each doing its work: the commands that write with a model ask a
# stub model server, which answers each request with the simplest document its
# schema allows, so no model is loaded.

BLOCK = contract_schema("planning-block")["examples"][0]
PREMISE = "A lighthouse keeper finds a map in a bottle."
SETUP_CALL = {
    "tool": "planning_setup_plan",
    "arguments": {"objective": "Ship", "initial_steps": [{"title": "Build"}]},
}
STORY_CALL = {
    "tool": "proposeStoryPremise",
    "arguments": contract_schema("story-premise")["examples"][0],
}
GOAL = {"event": "goal", "description": "Have food", "horizon": "short"}
STORY_SESSION = "3f1c2a9e-0000-4000-8000-000000000001"


def _a_saved_story_draft(folder: Path) -> None:
    """`folder/stories.db` holding a new draft saved as STORY_SESSION, for `story clear`."""
    draft = msgspec.structs.replace(DraftSession().draft, package_id=STORY_SESSION)
    with DraftStore(folder / "stories.db") as store:
        store.save_draft(draft)


def _a_story_package(folder: Path) -> None:
    """`folder/story.json`: the story-package contract's example, for `story play`."""
    (folder / "story.json").write_text(json.dumps(contract_schema("story-package")["examples"][0]))


def _a_saved_simulation(folder: Path) -> None:
    """`folder/person.json`: a new simulation's state, for `goals prompt`."""
    (folder / "person.json").write_text('{"goals": [], "plans": []}')


# What a command needs in {tmp} before it runs, besides the user's schemas.
_BEFORE: dict[str, Callable[[Path], None]] = {
    "story clear": _a_saved_story_draft,
    "story play": _a_story_package,
    "goals prompt": _a_saved_simulation,
}

# Each command's arguments, standard input, and a line its output holds. In the
# arguments, {tmp} is the test's folder and {server} the stub server's address.
EVERY_COMMAND: dict[str, tuple[list[str], str, str]] = {
    "contracts": (["contracts"], "", "Execution result"),
    "schema": (["schema", "plan"], "", '"$schema"'),
    "validate": (["validate", "plan", "-"], json.dumps(PLAN), "<stdin>: valid"),
    "examples": (["examples"], "", "all valid."),
    "generate": (
        ["generate", "--schemas", "{tmp}/my-schemas", "--out", "{tmp}/kitchen"],
        "",
        "3 files changed",
    ),
    "execute": (["execute", "-", "--data", "{tmp}/data"], json.dumps(PLAN), " succeeded in "),
    "plan": (["plan", "--server", "{server}", "I roll a die"], "", '"requestId"'),
    "play": (["play", "--server", "{server}", "--data", "{tmp}/data"], "I roll a die\n\n", "> "),
    "think": (["think", "--server", "{server}", "THINK: the guard blocks the bridge"], "", "{"),
    "normalize": (["normalize", "planning-block", "-"], json.dumps(BLOCK), '"choices"'),
    "choose": (["choose", "-", "parallel_crossing"], json.dumps(BLOCK), "coordination"),
    "migrate": (["migrate", "plan", "-"], json.dumps(PLAN), '"requestId"'),
    "diff": (["diff", "{tmp}/my-schemas", "{tmp}/my-schemas"], "", ""),
    "session run": (["session", "run", "-"], json.dumps(SETUP_CALL) + "\n", '"ok":true'),
    "session drive": (
        ["session", "drive", "--server", "{server}", "--max-calls", "1", "Ship it"],
        "",
        '"plan"',
    ),
    "session section": (["session", "section"], "", "planning_setup_plan"),
    "session tools": (["session", "tools"], "", "planning_setup_plan"),
    "story run": (["story", "run", "-"], json.dumps(STORY_CALL) + "\n", '"ok":true'),
    "story build": (["story", "build", "--server", "{server}", PREMISE], "", '"meta"'),
    "story graph": (
        ["story", "graph", "-"],
        json.dumps(contract_schema("story-package")["examples"][0]),
        "flowchart",
    ),
    "story drive": (
        ["story", "drive", "--server", "{server}", "--max-calls", "1", PREMISE],
        "",
        '"tool":"proposeStoryPremise"',
    ),
    "story tools": (["story", "tools"], "", "proposeStoryPremise"),
    "story play": (["story", "play", "{tmp}/story.json"], '{"choose": 1}\n', '"saw_future_entry"'),
    "story clear": (
        ["story", "clear", "--db", "{tmp}/stories.db", "--session", STORY_SESSION],
        "",
        "cleared the draft",
    ),
    "goals simulate": (["goals", "simulate", "-", "--fallback"], json.dumps(GOAL) + "\n", '"ok"'),
    "goals plan": (["goals", "plan", "--server", "{server}", "Have food"], "", '"steps"'),
    "goals stats": (["goals", "stats", "-"], '{"goals": [], "plans": []}', '"total_plans":0'),
    "goals prompt": (["goals", "prompt", "--state", "{tmp}/person.json"], "", '"role":"user"'),
}


@pytest.mark.process  # the command as a user runs it
@pytest.mark.parametrize("command", list(EVERY_COMMAND))
def test_every_command_runs_as_a_process(command: str, tmp_path: Path) -> None:
    arguments, stdin, shown = EVERY_COMMAND[command]
    write_user_schemas(tmp_path / "my-schemas")
    if command in _BEFORE:
        _BEFORE[command](tmp_path)
    with model_server(conforming) as server:
        given = [part.format(tmp=tmp_path, server=server.url) for part in arguments]
        done = plancontracts(*given, stdin=stdin, timeout=COMMAND_TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert shown in done.stdout, done.stdout
    assert "Traceback" not in done.stderr


# Bytes that are not UTF-8 reach Python as lone surrogates (surrogateescape).
_NOT_UTF8 = b"Fix \xff".decode("utf-8", "surrogateescape")


@pytest.mark.parametrize(
    "arguments",
    [
        ("goals", "plan", "--needs", _NOT_UTF8, "x"),
        ("goals", "plan", _NOT_UTF8),
        ("session", "drive", _NOT_UTF8),
        ("story", "build", _NOT_UTF8),
        ("story", "drive", _NOT_UTF8),
        ("think", _NOT_UTF8),
        ("think", "--topic", _NOT_UTF8, "a situation"),
        ("plan", _NOT_UTF8),
    ],
)
def test_text_that_is_not_utf8_is_refused_before_any_model(arguments: tuple[str, ...]) -> None:
    # The server named cannot answer: a command that went on to load a model would
    # say so instead of refusing the text at parsing.
    result = cli(*arguments, env={"PLANCONTRACTS_SERVER": "http://127.0.0.1:9"})
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1].endswith(
        "is not UTF-8 text (byte 5 of the argument as Python read it)"
    )


def test_a_file_name_that_is_not_utf8_is_still_a_file_name(tmp_path: Path) -> None:
    name = tmp_path / b"plan-\xff.json".decode("utf-8", "surrogateescape")
    name.write_text("{}", encoding="utf-8")
    result = cli("validate", "plan", str(name))
    assert "not UTF-8 text" not in result.stderr
    assert result.returncode == 1  # read, and refused as a plan
