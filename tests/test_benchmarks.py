"""The benchmarks' fixed inputs stay valid as the contracts change.

The benchmarks run by hand (`python3 dev.py bench`), not in the suite, so a
contract change that made their documents invalid would go unnoticed until
someone timed the machine.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

from plancontracts import decode
from plancontracts.runtime.planning_blocks import mode_of

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
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
