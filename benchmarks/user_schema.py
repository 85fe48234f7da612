"""A user's 2 MB schema: time and peak memory to load, validate, generate, import and decode.

    python3 dev.py bench user_schema
    .venv/bin/python benchmarks/user_schema.py [DEFINITIONS]   # default 1,000: a 2.3 MB schema

The schema is `benchmarks/big_schema.py`'s: one file of DEFINITIONS `$defs`
in the shape of real-world schemas (descriptions everywhere, enums,
patterns, a chain of DEFINITIONS/16 definitions each referring to the next,
a node that refers to itself, two definitions that refer to each other,
open and closed objects). The documents are valid ones of about 1 kB,
100 kB and 1 MB, and each again with 5 violations planted. Every step runs
in a process of its own, which reports its time; its peak resident memory
is the kernel's (`wait4`), that of the process and whatever it waited for:

1. load: `plancontracts.load_contracts(FILE)`, then the first `violations`
   call, which builds the validator (on a 1 kB document);
2. validate through the CLI: `plancontracts validate --schema FILE DOC`, one
   process per document, exit status and violations checked;
3. validate through the Python API: `load_contracts`, then `decode(handle,
   text)` on one document: the first call, then the median of the calls
   after it (steady state);
4. generate: `plancontracts generate --schema FILE --out OUT --package
   bigpkg` (a schema the generator refuses is reported in its one line, and
   the same schema with every object closed is generated instead);
5. import the package: the first import, which compiles it and writes
   `__pycache__`, then a later one, from that cache;
6. decode into the generated types: `plancontracts.decode(BIG, text)` (every
   violation listed) and `msgspec.json.decode(text, type=BIG.type)` (the types
   alone, stopping at the first error), first call and steady state.

Steps 1, 4 and 5 run again on the schema of half as many definitions, and
the last lines give each one's growth as an exponent of the schema's size
(1: linear; 2: quadratic), measured in the same run; and for validation and
decoding, the 1 MB document's time per byte over the 100 kB one's. Exits 1
when a step fails or gives a wrong verdict; times have no target, as a
user's schema has no reference to compare with: the docs read them.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any


def _beside(name: str) -> ModuleType:
    """The module `name` of the file beside this one: benchmarks/ is no package, and putting
    it on the path would let its modules (skills, validation...) shadow others of those names."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


big_schema = _beside("big_schema")

DOCUMENT_SIZES = {"1 kB": 1024, "100 kB": 100 * 1024, "1 MB": 1024 * 1024}
FAULTS = 5
REPEATS = 3
"""Runs of load and import, of which the fastest is shown (generate: one less): the schema's
steps are compared across two sizes, and a shared machine's noise would swamp the ratio."""
TIMEOUT = 1800.0
"Seconds any one step may take: it only catches a hang."
STEADY_SECONDS = 0.5
"How long steady-state calls are repeated for, at least 3 and at most 50 of them."
PLANCONTRACTS = Path(sys.executable).with_name("plancontracts")

# Each child prints one JSON object on its last line: its own timings.
_LOAD = """
import json, sys, time
started = time.perf_counter()
import plancontracts
imported = time.perf_counter()
contracts = plancontracts.load_contracts(sys.argv[1])
loaded = time.perf_counter()
found = plancontracts.violations(contracts["big"], json.loads(open(sys.argv[2], "rb").read()))
checked = time.perf_counter()
print(json.dumps({"import": imported - started, "load": loaded - imported,
                  "first check": checked - loaded, "violations": len(found)}))
"""
_STEADY = """
import statistics, time
def steady(call, data, seconds):
    times = []
    while len(times) < 3 or (sum(times) < seconds and len(times) < 50):
        started = time.perf_counter()
        call(data)
        times.append(time.perf_counter() - started)
    return statistics.median(times)
"""
_API = (
    _STEADY
    + """
import json, sys, time
import plancontracts
data = open(sys.argv[2], "rb").read()
started = time.perf_counter()
handle = plancontracts.load_contracts(sys.argv[1])["big"]
loaded = time.perf_counter()
def judge(data):
    try:
        plancontracts.decode(handle, data)
        return 0
    except plancontracts.ContractError as error:
        return len(error.violations)
found = judge(data)
first = time.perf_counter() - loaded
print(json.dumps({"load": loaded - started, "first": first, "violations": found,
                  "steady": steady(judge, data, float(sys.argv[3]))}))
"""
)
_IMPORT = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
started = time.perf_counter()
import bigpkg
print(json.dumps({"import": time.perf_counter() - started}))
"""
_DECODE = (
    _STEADY
    + """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import msgspec
import plancontracts
from bigpkg import BIG
data = open(sys.argv[2], "rb").read()
def judge(data):
    try:
        plancontracts.decode(BIG, data)
        return 0
    except plancontracts.ContractError as error:
        return len(error.violations)
def types_alone(data):
    try:
        msgspec.json.decode(data, type=BIG.type)
        return 0
    except msgspec.ValidationError:
        return 1
result = {}
for name, call in (("decode", judge), ("msgspec", types_alone)):
    started = time.perf_counter()
    found = call(data)
    result[name] = {"first": time.perf_counter() - started, "violations": found,
                    "steady": steady(call, data, float(sys.argv[3]))}
print(json.dumps(result))
"""
)


@dataclass
class Run:
    """One process: its exit status, output, wall time and peak resident memory."""

    status: int
    stdout: str
    stderr: str
    seconds: float
    peak_kib: int

    def report(self) -> dict[str, Any]:
        """The child's own timings, from its last line of output."""
        return dict(json.loads(self.stdout.strip().splitlines()[-1]))


@dataclass
class Row:
    """One line of the table."""

    step: str
    what: str
    seconds: float
    peak_kib: int
    result: str
    ok: bool
    numbers: dict[str, float] = field(default_factory=dict)
    refused: bool = False
    "A schema the step refused in one line, as it may: not a failure of the benchmark."


def run(command: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> Run:
    """Run `command`, measuring its wall time and, with `wait4`, its peak resident memory."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=err)
        deadline = started + TIMEOUT
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                process.kill()
                pid, status, usage = os.wait4(process.pid, 0)
                break
            time.sleep(0.005)
        seconds = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Run(
            process.returncode,
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
            seconds,
            usage.ru_maxrss,  # KiB on Linux
        )


def python(script: str, *arguments: object, cwd: Path, env: dict[str, str] | None = None) -> Run:
    return run([sys.executable, "-c", script, *map(str, arguments)], cwd=cwd, env=env)


def fastest(times: int, once: Callable[[], Run]) -> Run:
    """The fastest of `times` runs of `once`, with the largest peak of them: on a shared
    machine, the others' load only ever adds time. A failed run is returned at once."""
    best: Run | None = None
    peak = 0
    for _ in range(times):
        result = once()
        if result.status != 0:
            return result
        peak = max(peak, result.peak_kib)
        best = result if best is None or result.seconds < best.seconds else best
    assert best is not None
    best.peak_kib = peak
    return best


def _failed(result: Run) -> str:
    lines = (result.stderr or result.stdout).strip().splitlines()
    return f"exit {result.status}: {lines[-1] if lines else 'no output'}"


def _violations(stdout: str) -> int:
    found = re.search(r"invalid \((\d+) violations?\)", stdout)
    return int(found.group(1)) if found else 0


@dataclass
class Documents:
    """The documents of one schema, written into a folder, with the violations planted."""

    paths: dict[str, Path]
    sizes: dict[str, int]
    expected: dict[str, int]


def write_documents(definitions: int, folder: Path, sizes: dict[str, int]) -> Documents:
    paths: dict[str, Path] = {}
    lengths: dict[str, int] = {}
    expected: dict[str, int] = {}
    for label, size in sizes.items():
        for faults in (0, FAULTS):
            name = label if faults == 0 else f"{label}, {faults} violations"
            data = big_schema.document(definitions, size, invalid=faults)
            path = folder / f"document-{len(paths)}.json"
            path.write_bytes(data)
            paths[name], lengths[name], expected[name] = path, len(data), faults
    return Documents(paths, lengths, expected)


def step_load(schema: Path, document: Path, folder: Path, repeats: int) -> Row:
    result = fastest(repeats, lambda: python(_LOAD, schema, document, cwd=folder))
    if result.status != 0:
        return Row("load", "", result.seconds, result.peak_kib, _failed(result), False)
    times = result.report()
    text = (
        f"import {times['import']:.2f} s, load_contracts {times['load']:.2f} s, "
        f"first violations() {times['first check']:.2f} s"
    )
    return Row("load", "", result.seconds, result.peak_kib, text, True, times)


def step_cli(schema: Path, documents: Documents, folder: Path) -> list[Row]:
    rows = []
    for name, path in documents.paths.items():
        result = run(
            [str(PLANCONTRACTS), "validate", "--schema", str(schema), str(path)], cwd=folder
        )
        found = _violations(result.stdout)
        wanted = documents.expected[name]
        ok = result.status == (1 if wanted else 0) and found == wanted
        text = f"exit {result.status}, {found} violations" if result.status in (0, 1) else ""
        rows.append(
            Row(
                "validate (CLI)", name, result.seconds, result.peak_kib, text or _failed(result), ok
            )
        )
    return rows


def step_api(schema: Path, documents: Documents, folder: Path) -> list[Row]:
    rows = []
    for name, path in documents.paths.items():
        result = python(_API, schema, path, STEADY_SECONDS, cwd=folder)
        if result.status != 0:
            rows.append(
                Row("decode (API)", name, result.seconds, result.peak_kib, _failed(result), False)
            )
            continue
        times = result.report()
        ok = times["violations"] == documents.expected[name]
        text = (
            f"{times['violations']} violations; first {_ms(times['first'])}, "
            f"then {_ms(times['steady'])}"
        )
        rows.append(Row("decode (API)", name, result.seconds, result.peak_kib, text, ok, times))
    return rows


def step_generate(
    schema: Path, definitions: int, folder: Path, repeats: int
) -> tuple[list[Row], Path | None]:
    """Generate the package; if the schema is refused, say so and generate its closed form.

    Returns the rows and the folder the package sits in (None if none was generated).
    """
    rows = []
    for open_objects in (True, False):
        if not open_objects:
            schema = folder / "closed" / "big.json"
            schema.parent.mkdir(exist_ok=True)
            schema.write_bytes(big_schema.text(definitions, open_objects=False))
        out = schema.parent / "bigpkg"
        command = ["generate", "--schema", str(schema), "--out", str(out), "--package", "bigpkg"]
        once = functools.partial(run, [str(PLANCONTRACTS), *command], cwd=folder)
        result = once()
        if result.status == 0 and repeats > 1:  # a refusal needs saying once
            again = fastest(repeats - 1, once)
            if again.status == 0:
                peak = max(result.peak_kib, again.peak_kib)
                result = min(result, again, key=lambda each: each.seconds)
                result.peak_kib = peak
        what = "the schema" if open_objects else "its closed form"
        if result.status == 0:
            module = out / "big.py"
            text = f"{module.stat().st_size:,} bytes of models, {_lines(module):,} lines"
            rows.append(Row("generate", what, result.seconds, result.peak_kib, text, True))
            return rows, out.parent
        refused = open_objects and result.status == 2  # one line saying why, as it should
        text = ("refused, " if refused else "") + _failed(result)
        rows.append(
            Row("generate", what, result.seconds, result.peak_kib, text, False, refused=refused)
        )
    return rows, None


def step_import(package_parent: Path, folder: Path, repeats: int) -> list[Row]:
    # A user's Python writes __pycache__: the first import compiles the models, later ones
    # read them.
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    cache = package_parent / "bigpkg" / "__pycache__"

    def first() -> Run:
        shutil.rmtree(cache, ignore_errors=True)
        return python(_IMPORT, package_parent, cwd=folder, env=env)

    def later() -> Run:
        return python(_IMPORT, package_parent, cwd=folder, env=env)

    rows = []
    for what, once in (("first (compiles)", first), ("later (from __pycache__)", later)):
        result = fastest(repeats, once)
        if result.status != 0:
            rows.append(
                Row("import", what, result.seconds, result.peak_kib, _failed(result), False)
            )
            continue
        times = result.report()
        text = f"import bigpkg {times['import']:.2f} s"
        rows.append(Row("import", what, result.seconds, result.peak_kib, text, True, times))
    return rows


def step_decode(package_parent: Path, documents: Documents, folder: Path) -> list[Row]:
    rows = []
    for name, path in documents.paths.items():
        result = python(_DECODE, package_parent, path, STEADY_SECONDS, cwd=folder)
        if result.status != 0:
            rows.append(
                Row("decode (types)", name, result.seconds, result.peak_kib, _failed(result), False)
            )
            continue
        times = result.report()
        wanted = documents.expected[name]
        ok = times["decode"]["violations"] == wanted and times["msgspec"]["violations"] == min(
            wanted, 1
        )
        text = "; ".join(
            f"{label} first {_ms(times[key]['first'])}, then {_ms(times[key]['steady'])}"
            for key, label in (("decode", "decode"), ("msgspec", "msgspec"))
        )
        text = f"{times['decode']['violations']} violations; {text}"
        numbers = {"steady": times["decode"]["steady"], "msgspec": times["msgspec"]["steady"]}
        rows.append(Row("decode (types)", name, result.seconds, result.peak_kib, text, ok, numbers))
    return rows


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3g} ms"


def _lines(path: Path) -> int:
    with path.open("rb") as file:
        return sum(1 for _ in file)


@dataclass
class Measurement:
    """Everything one run measured for one schema size."""

    definitions: int
    schema_bytes: int
    rows: list[Row]
    documents: Documents | None


def measure(
    definitions: int,
    folder: Path,
    *,
    sizes: dict[str, int] | None = None,
    documents: bool = True,
    repeats: int = REPEATS,
) -> Measurement:
    """Every step for the schema of `definitions`, in `folder`; without documents, only
    the steps whose cost is the schema's (load, generate, import), each the fastest of
    `repeats` runs (generate, of one less)."""
    folder.mkdir(parents=True, exist_ok=True)
    schema = folder / "big.json"
    schema.write_bytes(big_schema.text(definitions))
    written = write_documents(definitions, folder, sizes or DOCUMENT_SIZES) if documents else None
    if written is None:
        (folder / "small").mkdir(exist_ok=True)
    probe = (written or write_documents(definitions, folder / "small", {"1 kB": 1024})).paths[
        "1 kB"
    ]
    rows = [step_load(schema, probe, folder, repeats)]
    if written is not None:
        rows += step_cli(schema, written, folder)
        rows += step_api(schema, written, folder)
    generated, package_parent = step_generate(schema, definitions, folder, max(1, repeats - 1))
    rows += generated
    if package_parent is not None:
        rows += step_import(package_parent, folder, repeats)
        if written is not None:
            rows += step_decode(package_parent, written, folder)
    return Measurement(definitions, schema.stat().st_size, rows, written)


def print_table(measurement: Measurement) -> None:
    print(
        f"schema: {measurement.definitions:,} definitions, {measurement.schema_bytes:,} bytes, "
        "one file"
    )
    if measurement.documents is not None:
        sizes = ", ".join(
            f"{name} = {size:,} bytes" for name, size in measurement.documents.sizes.items()
        )
        print(f"documents: {sizes}")
    print(f"{'step':<15} {'document':<24} {'seconds':>8} {'peak MiB':>9}  result")
    for row in measurement.rows:
        mark = "" if row.ok or row.refused else "  <- FAILED"
        print(
            f"{row.step:<15} {row.what:<24} {row.seconds:>8.2f} {row.peak_kib / 1024:>9.0f}  "
            f"{row.result}{mark}"
        )


def _row(measurement: Measurement, step: str, what: str = "") -> Row | None:
    for row in measurement.rows:
        if row.step == step and row.ok and (not what or row.what.startswith(what)):
            return row
    return None


def print_ratios(full: Measurement, half: Measurement) -> None:
    """Growth with the schema's size, and per-byte cost of a large document against a smaller."""
    print(
        f"\ngrowth with the schema, {half.schema_bytes:,} -> {full.schema_bytes:,} bytes, as an "
        "exponent of its size (1: linear, 2: quadratic):"
    )
    scale = math.log(full.schema_bytes / half.schema_bytes)
    for step, what in (("load", ""), ("generate", ""), ("import", "first"), ("import", "later")):
        big, small = _row(full, step, what), _row(half, step, what)
        if big is None or small is None:
            print(f"  {step} {what}: n/a")
            continue
        time_exponent = math.log(big.seconds / small.seconds) / scale
        print(
            f"  {(step + ' ' + what).strip():<14} time {small.seconds:6.2f} -> "
            f"{big.seconds:6.2f} s "
            f"(exponent {time_exponent:.2f}); peak {small.peak_kib / 1024:.0f} -> "
            f"{big.peak_kib / 1024:.0f} MiB"
        )
    if full.documents is None:
        return
    sizes = full.documents.sizes
    print("\nsteady time per byte, the 1 MB document over the 100 kB one (1: linear):")
    for step, key in (
        ("decode (API)", "steady"),
        ("decode (types)", "steady"),
        ("decode (types)", "msgspec"),
    ):
        big, small = _row(full, step, "1 MB"), _row(full, step, "100 kB")
        if big is None or small is None:
            continue
        per_byte = (big.numbers[key] / sizes["1 MB"]) / (small.numbers[key] / sizes["100 kB"])
        label = f"{step}{', msgspec alone' if key == 'msgspec' else ''}"
        print(f"  {label:<30} {per_byte:.2f}")


def main() -> int:
    definitions = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    with tempfile.TemporaryDirectory() as folder:
        full = measure(definitions, Path(folder) / "full")
        print_table(full)
        print()
        half = measure(definitions // 2, Path(folder) / "half", documents=False)
        print_table(half)
        print_ratios(full, half)
    failed = [row for row in full.rows + half.rows if not (row.ok or row.refused)]
    refused = any(row.refused for row in full.rows)
    if failed:
        print(f"\n{len(failed)} steps failed")
    else:
        closed = " (generate refused the schema; its closed form was generated)" if refused else ""
        print(f"\nevery step succeeded{closed}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
