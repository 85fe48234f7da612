"""Reading a document as it is written: `PartialJSON`'s time and memory against its size.

    python3 dev.py bench streaming
    .venv/bin/python benchmarks/streaming.py [MEGABYTES...]   # default 0.25 0.5 1

The document is plan-like: a plan's fields and a list of tool entries, each
with text (escapes, accented letters and emoji among it), integers, floats,
booleans, null and nested objects and arrays, grown to the size asked for.
For each size, in one run:

- msgspec: `msgspec.json.decode` of the whole text at once, the floor;
- 1 char: `PartialJSON` fed one character at a time, as a model's tokens
  could come at worst, then `finish()`;
- 16 chars: fed in pieces of 16 characters, about what a token stream gives;

each as seconds (the least of REPEATS runs), characters per second, and
times msgspec's time. The peak
memory of one parse is measured apart, under tracemalloc (which slows it):
the most memory the parse held at once, and that over the text's size (the
parsed value itself is most of it). The last lines give, for each way of
feeding, the time per MB of each size over that of the smallest (1.00
throughout: linear; growing with the size: worse than linear), and the
process's peak RSS. No target: the numbers are for the docs.
"""

from __future__ import annotations

import gc
import resource
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

import msgspec

from plancontracts.runtime.core.partial import PartialJSON

REPEATS = 5
SIZES = (0.25, 0.5, 1.0)
WAYS = {"1 char": 1, "16 chars": 16}


def tool(index: int) -> dict[str, Any]:
    """One tool entry of a plan-like document: about 600 characters of mixed values."""
    return {
        "toolId": f"t{index}",
        "toolPath": f"skills/skill-{index % 7}/run.py",
        "input": {
            "target": f'the "north" door, {index} paces away\nthen left',
            "formula": "2d6+3",
            "seed": index,
            "weight": index / 7,
            "notes": ["café crème", "naïve façade", "emoji \U0001f600 and \U0001f3f0"],
            "nested": {"depth": [[index, index + 1.5], {"ok": index % 2 == 0}], "none": None},
        },
        "dependencies": [f"t{j}" for j in range(max(0, index - 2), index)],
        "required": index % 3 != 0,
        "retryPolicy": {"maxRetries": 2, "backoffMs": 50, "factor": 1.5e-3},
        "description": "Lights the torch by the door and checks the hinges for traps. " * 3,
    }


def document(megabytes: float) -> str:
    """The plan-like document's text, as msgspec writes it, of about `megabytes` MB."""
    wanted = int(megabytes * 1_000_000)
    entry = len(msgspec.json.encode(tool(1)))
    value = {
        "requestId": "8f14e45f-ceea-467a-9af1-6d2e6f0c4a11",
        "narrative": "You steady your breath and look around the vaulted chamber.",
        "tools": [tool(index) for index in range(max(1, wanted // (entry + 1)))],
        "parallel": True,
    }
    return msgspec.json.encode(value).decode()


def fed(text: str, size: int) -> Any:
    """`text` read by `PartialJSON` in pieces of `size` characters; the whole document."""
    parser = PartialJSON()
    feed = parser.feed
    for start in range(0, len(text), size):
        feed(text[start : start + size])
    return parser.finish()


def seconds(work: Callable[[], Any], repeats: int) -> float:
    """The least time of `repeats` calls of `work`, each after a garbage collection.

    The least, not the median: on a machine shared with other work, that
    work only ever adds time, and the ratios between sizes are what count.
    """
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def peak_memory(work: Callable[[], Any]) -> int:
    """The most memory `work` held at once, in bytes, by tracemalloc."""
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@dataclass(frozen=True)
class Row:
    """One way of reading one document: its time, rate, and memory."""

    megabytes: float
    way: str
    characters: int
    seconds: float
    floor: float  # msgspec's seconds on the same text
    peak: int  # bytes, by tracemalloc

    @property
    def rate(self) -> float:
        return self.characters / self.seconds

    @property
    def per_megabyte(self) -> float:
        return self.seconds / (self.characters / 1_000_000)


def measure(sizes: Iterable[float] = SIZES, repeats: int = REPEATS) -> list[Row]:
    """Every way of reading the document of each size, checked to read it whole."""
    rows = []
    for megabytes in sizes:
        text = document(megabytes)
        expected = msgspec.json.decode(text)
        floor = seconds(partial(msgspec.json.decode, text), repeats)
        peak = peak_memory(partial(msgspec.json.decode, text))
        rows.append(Row(megabytes, "msgspec", len(text), floor, floor, peak))
        for way, size in WAYS.items():
            if fed(text, size) != expected:
                raise AssertionError(f"{way}: the document read is not the one written")
            took = seconds(partial(fed, text, size), repeats)
            peak = peak_memory(partial(fed, text, size))
            rows.append(Row(megabytes, way, len(text), took, floor, peak))
    return rows


def main(arguments: list[str]) -> int:
    sizes = [float(argument) for argument in arguments] or SIZES
    rows = measure(sizes)
    header = f"{'MB':>5} {'way':<9} {'characters':>10} {'seconds':>8} {'chars/s':>11}"
    print(f"{header} {'x msgspec':>9} {'peak MiB':>8} {'peak/text':>9}")
    for row in rows:
        print(
            f"{row.megabytes:>5} {row.way:<9} {row.characters:>10,} {row.seconds:>8.3f} "
            f"{row.rate:>11,.0f} {row.seconds / row.floor:>9.1f} "
            f"{row.peak / 2**20:>8.1f} {row.peak / row.characters:>9.1f}"
        )
    print()
    print("time per MB over that of the smallest document (1.00: linear):")
    for way in ("msgspec", *WAYS):
        mine = [row for row in rows if row.way == way]
        ratios = "  ".join(
            f"{row.megabytes} MB: {row.per_megabyte / mine[0].per_megabyte:.2f}" for row in mine
        )
        print(f"  {way:<9} {ratios}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
