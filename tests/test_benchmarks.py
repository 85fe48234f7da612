"""The benchmarks' fixed inputs stay valid as the contracts change.

The benchmarks run by hand (`python3 dev.py bench`), not in the suite, so a
contract change that made their documents invalid would go unnoticed until
someone timed the machine.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from collections import deque
from itertools import pairwise
from pathlib import Path
from types import ModuleType

import pytest
from jsonschema import Draft202012Validator

from plancontracts import decode
from plancontracts.runtime.planning_blocks import mode_of

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs, as an import would: dataclasses look their module up there.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_validation_benchmark_measures_valid_documents() -> None:
    for label, contract, document in load("validation").DOCUMENT_SETS:
        assert decode(contract, json.dumps(document)), label


def test_the_thinking_benchmark_has_thirty_distinct_plain_situations() -> None:
    situations = load("thinking").SITUATIONS
    assert len(set(situations)) == len(situations) >= 30
    assert all(mode_of(situation) == ("story", situation) for situation in situations)


def test_the_skills_benchmark_expects_only_bundled_skills_and_scores_a_planner() -> None:
    from plancontracts.runtime.engine.skills import bundled_skills

    skills = load("skills")
    cases = skills.cases()
    callable_skills = set(bundled_skills().skills) - {"storyteller"}
    assert len({text for _, text, _ in cases}) == len(cases) >= 60
    assert all(expected <= callable_skills for _, _, expected in cases)
    # The patterns run in this process in moments: each input gets the skills its plan calls.
    result = skills.run_planner("patterns")
    assert len(result["chosen"]) == len(result["seconds"]) == len(cases)
    first = cases.index(("tuning", "I light the torch", frozenset({"torch-lighter"})))
    assert result["chosen"][first] == ["torch-lighter"]


def _reachable(schema: dict[str, object]) -> set[str]:
    """The names of the `$defs` a schema's root reaches through its references."""
    seen: set[str] = set()
    pending: deque[object] = deque([{key: v for key, v in schema.items() if key != "$defs"}])
    definitions = schema["$defs"]
    assert isinstance(definitions, dict)
    while pending:
        node = pending.popleft()
        if isinstance(node, dict):
            reference = node.get("$ref")
            if isinstance(reference, str):
                name = reference.rsplit("/", 1)[1]
                if name not in seen:
                    seen.add(name)
                    pending.append(definitions[name])
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return seen


def test_the_big_schema_is_two_megabytes_of_real_world_shapes_all_reached_from_its_root() -> None:
    big_schema = load("big_schema")
    text = big_schema.text()
    schema = json.loads(text)
    assert 1_900_000 < len(text) < 2_600_000
    definitions = schema["$defs"]
    assert len(definitions) == 1000
    assert _reachable(schema) == set(definitions)
    # A chain of 62 definitions, each referring to the next.
    chain = sorted(name for name in definitions if re.fullmatch("Stage[0-9]{3}", name))
    assert len(chain) == 62
    assert all(
        definitions[name]["properties"]["next"]["$ref"] == f"#/$defs/{after}"
        for name, after in pairwise(chain)
    )
    # A node that refers to itself, and two definitions that refer to each other.
    assert definitions["TreeNode"]["properties"]["children"]["items"]["$ref"] == "#/$defs/TreeNode"
    assert definitions["Selector"]["properties"]["terms"]["items"]["$ref"] == "#/$defs/SelectorTerm"
    assert definitions["SelectorTerm"]["properties"]["nested"]["$ref"] == "#/$defs/Selector"
    objects = [node for node in definitions.values() if "properties" in node]
    closed = [node for node in objects if node.get("additionalProperties") is False]
    assert 0 < len(objects) - len(closed) < len(closed)
    assert all("description" in node for node in definitions.values())
    # The same bytes every time, and the closed form closes every object with properties.
    assert big_schema.text() == text
    closed_form = json.loads(big_schema.text(open_objects=False))["$defs"]
    assert all(
        node.get("additionalProperties") is False
        for node in closed_form.values()
        if "properties" in node
    )


@pytest.mark.parametrize("size", [1024, 20 * 1024])
def test_the_big_schemas_documents_hold_exactly_the_violations_planted(size: int) -> None:
    big_schema = load("big_schema")
    schema = big_schema.schema(30)
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    valid = big_schema.document(30, size)
    assert abs(len(valid) - size) < size // 5 + 200
    assert list(validator.iter_errors(json.loads(valid))) == []
    invalid = json.loads(big_schema.document(30, size, invalid=5))
    assert len(list(validator.iter_errors(invalid))) == 5
    assert big_schema.document(30, size, invalid=5) == big_schema.document(30, size, invalid=5)


@pytest.mark.process
@pytest.mark.slow
def test_the_user_schema_benchmark_runs_every_step_on_a_small_schema(tmp_path: Path) -> None:
    # About 50 kB of schema from the same generator, and its 1 kB documents.
    measurement = load("user_schema").measure(30, tmp_path, sizes={"1 kB": 1024}, repeats=2)
    assert 40_000 < measurement.schema_bytes < 60_000
    rows = measurement.rows
    failed = [(row.step, row.what, row.result) for row in rows if not (row.ok or row.refused)]
    assert failed == []
    documents = ["1 kB", "1 kB, 5 violations"]
    generated = [row.what for row in rows if row.step == "generate" and row.ok]
    assert [(row.step, row.what) for row in rows if row.step != "generate"] == [
        ("load", ""),
        *[("validate (CLI)", name) for name in documents],
        *[("decode (API)", name) for name in documents],
        ("import", "first (compiles)"),
        ("import", "later (from __pycache__)"),
        *[("decode (types)", name) for name in documents],
    ]
    assert len(generated) == 1
    assert all(row.peak_kib > 0 and row.seconds > 0 for row in rows)


def test_the_streaming_benchmark_reads_its_document_whole_every_way() -> None:
    # A 20 kB document, each way once: `measure` checks each reads back the document written.
    rows = load("streaming").measure(sizes=(0.02,), repeats=1)
    assert [row.way for row in rows] == ["msgspec", "1 char", "16 chars"]
    assert all(15_000 < row.characters < 25_000 and row.peak > 0 for row in rows)


def test_the_streamed_plans_benchmark_has_skills_that_take_time_and_cues_its_inputs_call() -> None:
    from plancontracts.runtime.engine.skills import discover_skills
    from plancontracts.runtime.tool_plans.choosing import choose_by_cues

    streamed = load("streamed_plans")
    skills = discover_skills([streamed.SKILLS])
    assert not skills.problems
    chosen = [len(choose_by_cues(text, skills, []).chosen) for text in streamed.INPUTS]
    assert sum(count >= 3 for count in chosen) >= 5  # plans of three or more tools to compare


TIMES_TRACING = """
import importlib.util, json, sys
from pathlib import Path
import trio
spec = importlib.util.spec_from_file_location("benchmark_executor", sys.argv[1])
executor = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = executor
spec.loader.exec_module(executor)
hidden = executor.tracing_overhead.HIDDEN
before = [name for name in hidden if name in sys.modules]


async def main():
    (comparison,) = await executor.tracing(Path(sys.argv[2]), tools=20, rounds=2, scripts=False)
    return comparison


comparison = trio.run(main)
from opentelemetry import trace
from opentelemetry.metrics import _internal as metrics
print(json.dumps({
    "before": before,
    "after": [name for name in hidden if name in sys.modules],
    "providers": [trace._TRACER_PROVIDER, metrics._METER_PROVIDER],
    "rounds": {mode: len(seconds) for mode, seconds in comparison.seconds.items()},
    "spans": comparison.spans_per_run,
    "names": sum(comparison.span_names.values()),
    "metrics": sorted(comparison.metrics),
    "report": comparison.report("20 tools", per=(20, "tool")),
}))
"""


@pytest.mark.process  # OpenTelemetry set up in a fresh interpreter: this one runs without it
def test_the_executor_benchmark_times_tracing_off_idle_and_on_and_counts_what_was_exported(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", TIMES_TRACING, str(BENCHMARKS / "executor.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    measured = json.loads(done.stdout)
    # No OpenTelemetry until the comparison imported it, and afterwards the API as it
    # was: present, no provider set (each mode's were set and taken back).
    assert measured["before"] == []
    assert measured["after"] == [
        "opentelemetry.trace",
        "opentelemetry.metrics",
        "opentelemetry.metrics._internal",
    ]
    assert measured["providers"] == [None, None]
    assert measured["rounds"] == {"off": 2, "no-op": 2, "on": 2}
    # Whatever spans the executor makes, each run with tracing on exported the same,
    # and off and idle none (the comparison fails otherwise).
    first = measured["spans"][0]
    assert first > 0
    assert measured["spans"] == [first, first]
    assert measured["names"] == first
    assert measured["metrics"] != []
    report = measured["report"]
    assert [line.split(":")[0].strip() for line in report[1:4]] == ["off", "no-op", "on"]
    assert f"spans exported a run with tracing on: {first} (" in report[4]
