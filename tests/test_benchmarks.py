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
