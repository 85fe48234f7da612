"""Peak memory and time of `plancontracts validate` on hostile documents.

    .venv/bin/python benchmarks/hostile_documents.py [MEGABYTES]   # default 16

Each shape is a document of at most MEGABYTES megabytes (the default is the
`--max-bytes` limit) built to make validation expensive: millions of
violations, a million keys, millions of small arrays or objects, one huge
string, values nested as deep as the parser allows. Each is validated by
`plancontracts validate plan FILE` in a fresh process, which reports its own
peak resident memory (VmHWM, Linux only). The table shows, per shape, the
exit status, the lines printed, the wall time, and the peak above that of a
tiny document, as a multiple of the document's size. Target: below 20x.
Exits 1 when a target is missed.

tests/test_hostile_documents.py checks the same shapes at a smaller size.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TARGET_MULTIPLE = 20.0
UUID = "5b0e2c9a-1f3d-4e6a-8b7c-9d0e1f2a3b4c"
TOOL = {"toolId": "roll", "toolPath": "skills/dice-roller/roll.py"}

# The parser's nesting limit is what msgspec accepts at the call depth of the
# command, less a margin that keeps every shape on the accepted side.
DEEP = 900


def _plan(size: int, member: bytes, **fields: Any) -> bytes:
    """A plan whose `tools` repeats `member` to about `size` bytes."""
    head = json.dumps({"requestId": UUID, **fields})[:-1].encode() + b', "tools": ['
    count = max(1, (size - len(head) - 2) // (len(member) + 1))
    return head + b",".join([member] * count) + b"]}"


def _many_keys(size: int) -> bytes:
    head = json.dumps({"requestId": UUID, "tools": [TOOL]})[:-1].encode()
    count = max(1, (size - len(head) - 1) // len(b', "k1000000": 1'))
    return head + b"".join(b', "k%d": 1' % index for index in range(count)) + b"}"


def _long_string(size: int) -> bytes:
    head = json.dumps({"requestId": UUID, "tools": [TOOL], "narrative": ""})
    return head.replace('""', '"' + "x" * (size - len(head)) + '"').encode()


def _free_form(size: int, member: bytes) -> bytes:
    """A valid plan: one tool whose free-form `input` holds `member` repeated."""
    head = json.dumps({"requestId": UUID, "tools": [{**TOOL, "input": {"x": []}}]})
    before, after = head.split("[]", 1)
    count = max(1, (size - len(head)) // (len(member) + 1))
    return before.encode() + b"[" + b",".join([member] * count) + b"]" + after.encode()


SHAPES: dict[str, Callable[[int], bytes]] = {
    "tools: [1,1,...]": lambda size: _plan(size, b"1"),
    "tools: [[],[],...]": lambda size: _plan(size, b"[]"),
    "tools: [{},{},...]": lambda size: _plan(size, b"{}"),
    "tools: [deep,deep,...]": lambda size: _plan(size, b"[" * DEEP + b"]" * DEEP),
    "10^6-key object": _many_keys,
    "one long string": _long_string,
    "input: [{},{},...] (valid)": lambda size: _free_form(size, b"{}"),
    "input: [[],[],...] (valid)": lambda size: _free_form(size, b"[]"),
    "input: [deep,...] (valid)": lambda size: _free_form(size, b"[" * DEEP + b"]" * DEEP),
    'input: [{"a":1},...] (valid)': lambda size: _free_form(size, b'{"a":1}'),
    'input: [{"x":1,"y":2},...] (valid)': lambda size: _free_form(size, b'{"x":1,"y":2}'),
    'input: ["ab","ab",...] (valid)': lambda size: _free_form(size, b'"ab"'),
    "input: [1.5,1.5,...] (valid)": lambda size: _free_form(size, b"1.5"),
    "input: [[1],[1],...] (valid)": lambda size: _free_form(size, b"[1]"),
}

# Runs the command in-process and prints its peak memory (KiB) to stderr. VmHWM
# starts afresh with the process image; ru_maxrss would carry over the parent's peak.
CHILD_PEAK = """
import re, sys
from pathlib import Path
from plancontracts.runtime.cli.main import main
status = main(sys.argv[1:])
sys.stdout.flush()
status_text = Path("/proc/self/status").read_text()
print(re.search(r"VmHWM:\\s+(\\d+) kB", status_text).group(1), file=sys.stderr)
raise SystemExit(status)
"""


def validate(path: Path, *, timeout: float = 900) -> tuple[int, str, int, float]:
    """Exit status, standard output, peak KiB and seconds of `validate plan PATH`."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", CHILD_PEAK, "validate", "plan", str(path)],
        capture_output=True,
        check=False,
        timeout=timeout,
    )
    elapsed = time.perf_counter() - start
    peak = re.search(rb"(\d+)\s*$", done.stderr)
    if peak is None:
        raise RuntimeError(f"no peak memory reported: {done.stderr[-2000:]!r}")
    return done.returncode, done.stdout.decode(), int(peak.group(1)), elapsed


def main() -> int:
    size = int(float(sys.argv[1]) * 1024 * 1024) if len(sys.argv) > 1 else 16 * 1024 * 1024
    with tempfile.TemporaryDirectory() as folder:
        tiny = Path(folder) / "tiny.json"
        tiny.write_bytes(_plan(0, json.dumps(TOOL).encode()))
        base = validate(tiny)[2]
        print(f"peak of a tiny document: {base / 1024:.0f} MiB; documents of {size:,} bytes")
        columns = f"{'exit':>4} {'lines':>6} {'seconds':>8} {'peak MiB':>9} {'x size':>7}"
        print(f"{'shape':<36} {columns}")
        worst = 0.0
        for name, build in SHAPES.items():
            path = Path(folder) / "document.json"
            data = build(size)
            path.write_bytes(data)
            status, output, peak, seconds = validate(path)
            lines = output.count("\n")
            multiple = (peak - base) * 1024 / len(data)
            worst = max(worst, multiple)
            print(
                f"{name:<36} {status:>4} {lines:>6} {seconds:>8.1f} {peak / 1024:>9.0f} "
                f"{multiple:>7.1f}"
            )
    met = worst < TARGET_MULTIPLE
    print(
        f"\nworst peak above a tiny document's: {worst:.1f}x the document's size (target below "
        f"{TARGET_MULTIPLE:.0f}x): {'met' if met else 'NOT met'}"
    )
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
