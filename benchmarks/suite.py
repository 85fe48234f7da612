"""The JSON-Schema-Test-Suite's table: how many cases each path of a user's gets right.

    python3 dev.py bench suite

Runs what tests/test_json_schema_suite.py runs (the required keyword files of
draft 2020-12 on both paths, those of drafts 2019-09 and 7 on the validate
path; tests/json_schema_suite.py says how) and prints, in Markdown, the table
docs/contracts.md shows: per path, the cases that agree with the suite on
every test, those with a wrong verdict, those refused in one line, those that
crashed; then every case that did not agree, with its one-line reason; then
the time it took.
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

# The harness is the tests' own, so that the table and the test count alike.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from json_schema_suite import SETUP_HINT, SuiteRun, suite_folder, suite_version, table


def main() -> int:
    folder = suite_folder()
    if folder is None:
        print(SETUP_HINT, file=sys.stderr)
        return 2
    started, cpu = time.perf_counter(), time.process_time()
    with tempfile.TemporaryDirectory(prefix="json-schema-suite-") as scratch:
        text = table(SuiteRun(folder, Path(scratch)))
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    spent = time.process_time() - cpu + children.ru_utime + children.ru_stime
    print(f"JSON-Schema-Test-Suite from jsonschema {suite_version()}'s sources\n")
    print(text)
    print(f"{time.perf_counter() - started:.0f} s, {spent:.0f} s of CPU (code generator included)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
