"""`validate` on hostile documents: peak memory bounded by a multiple of the document's size.

The shapes are those of benchmarks/hostile_documents.py, at 2 MiB so that the
suite stays fast. Each runs in a fresh process, which reports its own peak
resident memory; the peak of a tiny document is subtracted, and what is left
must stay below a multiple of the document's size plus ALLOCATOR_SLACK, the
documented constant (the allocator keeps freed memory in arenas, and imports
differ a little between runs). No time is asserted.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
SIZE = 2 * 1024 * 1024
ALLOCATOR_SLACK = 8 * 1024 * 1024

# Python objects of a parsed value cost more than their JSON text: an empty
# list is 56 bytes for the 3 of `[],`, a list of one 64 bytes for the 2 of
# `[`...`]`. The documents made of millions of tiny arrays or objects are
# refused or accepted on a value parsed that way, so they are held to what
# that costs; every other shape to 20x.
WITHIN_20X = ["tools: [1,1,...]", "10^6-key object", "one long string"]
MULTIPLE = {"tools: [deep,deep,...]": 60, "input: [deep,...] (valid)": 60}


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("hostile", BENCHMARKS / "hostile_documents.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HOSTILE = load()


@pytest.fixture(scope="module")
def baseline_kib(tmp_path_factory: pytest.TempPathFactory) -> int:
    tiny = tmp_path_factory.mktemp("tiny") / "tiny.json"
    tiny.write_text(json.dumps({"requestId": HOSTILE.UUID, "tools": [HOSTILE.TOOL]}))
    status, _, peak, _ = HOSTILE.validate(tiny, timeout=120)
    assert status == 0
    return int(peak)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads Linux's /proc")
@pytest.mark.parametrize("shape", list(HOSTILE.SHAPES))
def test_validate_holds_memory_to_a_multiple_of_the_document(
    shape: str, baseline_kib: int, tmp_path: Path
) -> None:
    path = tmp_path / "document.json"
    data = HOSTILE.SHAPES[shape](SIZE)
    path.write_bytes(data)
    status, lines, peak_kib, _ = HOSTILE.validate(path, timeout=300)
    valid = shape.endswith("(valid)")
    assert status == (0 if valid else 1)
    assert lines <= 1 + 100 + 1  # a verdict, at most 100 violations, the summary
    multiple = 20 if shape in WITHIN_20X else MULTIPLE.get(shape, 30)
    above = (peak_kib - baseline_kib) * 1024
    assert above < multiple * len(data) + ALLOCATOR_SLACK, f"{above / len(data):.1f}x"
