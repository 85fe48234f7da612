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

# The peak memory of a fresh process is what each test measures.
pytestmark = pytest.mark.process
SIZE = 2 * 1024 * 1024
ALLOCATOR_SLACK = 8 * 1024 * 1024

MULTIPLE = 20
"The bound: peak memory stays below 20 times the document's size, plus a constant."
# What the parser refuses unread: over 1 MiB, these would take more than 19
# times their size once parsed (an empty list is 56 bytes of Python for the 3
# of `[],`). Everything else is judged, valid or not.
TOO_DENSE = {
    "tools: [[],[],...]",
    "tools: [{},{},...]",
    "tools: [deep,deep,...]",
    "input: [{},{},...] (valid)",
    "input: [[],[],...] (valid)",
    "input: [deep,...] (valid)",
    'input: [{"a":1},...] (valid)',
    'input: [{"x":1,"y":2},...] (valid)',
    "input: [[1],[1],...] (valid)",
}


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
    status, output, peak_kib, _ = HOSTILE.validate(path, timeout=300)
    lines = output.splitlines()
    if shape in TOO_DENSE:
        assert status == 1
        assert "holds too many small values to judge in bounded memory" in lines[1]
        assert len(lines) == 3  # the verdict, its one violation, the summary
    else:
        assert status == (0 if shape.endswith("(valid)") else 1)
        assert len(lines) <= 1 + 100 + 1  # a verdict, at most 100 violations, the summary
    above = (peak_kib - baseline_kib) * 1024
    assert above < MULTIPLE * len(data) + ALLOCATOR_SLACK, f"{above / len(data):.1f}x"
