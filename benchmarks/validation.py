"""Validation throughput: typed decoding against jsonschema and against the bare parse.

    python3 dev.py bench

For each set of documents it measures, in one run and interleaved so that
machine noise hits all three alike, the documents per second of:

- typed: `plancontracts.runtime.decode`, the public path (strict parse,
  duplicate-key check, conversion into the generated types);
- jsonschema: `json.loads` plus `Draft202012Validator.is_valid` with a
  validator built once;
- parse floor: untyped `msgspec.json.decode`, which validates nothing;
- strict parse: the first step of typed, the parse floor plus the check for
  duplicate keys (shown so that the cost of each step is visible).

It prints the ratios and whether they meet the targets: typed at least 50x
faster than jsonschema, and at most 2x the time of the parse floor. Each
figure is the best of several rounds; absolute numbers vary with the
machine, the ratios much less.
"""

from __future__ import annotations

import copy
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import msgspec
from jsonschema import Draft202012Validator

from plancontracts import contract_schema, decode
from plancontracts.runtime.core.jsontext import parse
from plancontracts.runtime.planning_blocks.mechanics import coordination_dc

ROUNDS = 7
MIN_ROUND_SECONDS = 0.2
TARGET_SPEEDUP = 50.0
TARGET_FLOOR_MULTIPLE = 2.0


def plan(tools: int) -> dict[str, Any]:
    """A plan of `tools` calls, each depending on up to two earlier ones."""
    skills = [
        "dice-roller",
        "torch-lighter",
        "door-examiner",
        "memory",
        "reputation",
        "storyteller",
    ]
    return {
        "requestId": str(uuid.UUID(int=tools)),
        "narrative": "You steady your breath and look around the vaulted chamber.",
        "tools": [
            {
                "toolId": f"t{i}",
                "toolPath": f"skills/{skills[i % len(skills)]}/run.py",
                "input": {"target": f"object_{i}", "formula": "2d6+3", "seed": i, "note": "a: b"},
                "dependencies": [f"t{j}" for j in range(max(1, i - 2), i)],
                "required": i % 3 != 0,
                "async": i % 2 == 0,
                "retryPolicy": {"maxRetries": 2, "backoffMs": 50},
            }
            for i in range(1, tools + 1)
        ],
        "parallel": True,
        "disabledSkills": ["torch-lighter"],
        "metadata": {"generationAttempt": 2, "parentPlanId": str(uuid.UUID(int=7))},
    }


def planning_block(choices: int) -> dict[str, Any]:
    """The schema's Think-mode example with `choices` situational choices."""
    block = copy.deepcopy(contract_schema("planning-block")["examples"][0])
    template = block["choices"]["wade_ford"]
    situational = {f"option_{i}": {**template, "text": f"Option {i}"} for i in range(choices)}
    parallel = block["choices"]["parallel_crossing"]
    analysis = parallel["analysis"]
    analysis["coordination_dc"] = coordination_dc(analysis["base_dc"], choices)
    block["choices"] = {**situational, "parallel_plan": parallel}
    block["analysis"]["recommended_approach"] = "option_0"
    return block


def story_package(locations: int) -> dict[str, Any]:
    """The schema's story package example, its act grown to `locations` locations.

    They stand in a ring, each connected to the next, so that the package
    keeps its rules beyond the schema: every location reachable, every key
    resolving (each shows a background and plays music of the example).
    """
    package = copy.deepcopy(contract_schema("story-package")["examples"][0])
    act = package["plot"]["acts"][0]
    base = act["sandboxLocations"]
    act["sandboxLocations"] = [
        {**base[i % len(base)], "id": f"loc_{i}", "connections": [f"loc_{(i + 1) % locations}"]}
        for i in range(locations)
    ]
    return package


DOCUMENT_SETS: list[tuple[str, str, dict[str, Any]]] = [
    ("plan, 5 tools", "plan", plan(5)),
    ("plan, 20 tools", "plan", plan(20)),
    ("plan, 50 tools", "plan", plan(50)),
    ("planning block, 3 choices", "planning-block", planning_block(3)),
    ("planning block, 10 choices", "planning-block", planning_block(10)),
    ("story package, 2 locations", "story-package", story_package(2)),
    ("story package, 12 locations", "story-package", story_package(12)),
]


def per_second(action: Callable[[], object]) -> float:
    """Calls per second of `action`, timed over at least MIN_ROUND_SECONDS."""
    calls = 1
    while True:
        start = time.perf_counter()
        for _ in range(calls):
            action()
        elapsed = time.perf_counter() - start
        if elapsed >= MIN_ROUND_SECONDS:
            return calls / elapsed
        calls *= 2


def measure(contract: str, document: dict[str, Any]) -> dict[str, float]:
    data = json.dumps(document).encode()
    validator = Draft202012Validator(contract_schema(contract))
    decode(contract, data)  # warm caches; it also proves the document is valid
    assert validator.is_valid(json.loads(data))
    actions: dict[str, Callable[[], object]] = {
        "typed": lambda: decode(contract, data),
        "jsonschema": lambda: validator.is_valid(json.loads(data)),
        "floor": lambda: msgspec.json.decode(data),
        "strict": lambda: parse(data),
    }
    best = dict.fromkeys(actions, 0.0)
    for _ in range(ROUNDS):  # interleaved rounds; keep each method's best
        for name, action in actions.items():
            best[name] = max(best[name], per_second(action))
    return best


def main() -> int:
    header = f"{'documents':<28} {'bytes':>6} {'typed/s':>8} {'jsonschema/s':>12} {'floor/s':>8}"
    print(header + f" {'strict parse/s':>14} {'speedup':>8} {'x floor':>8}")
    worst_speedup, worst_multiple = float("inf"), 0.0
    for label, contract, document in DOCUMENT_SETS:
        rates = measure(contract, document)
        speedup = rates["typed"] / rates["jsonschema"]
        multiple = rates["floor"] / rates["typed"]
        worst_speedup = min(worst_speedup, speedup)
        worst_multiple = max(worst_multiple, multiple)
        size = len(json.dumps(document))
        print(
            f"{label:<28} {size:>6} {rates['typed']:>8,.0f} {rates['jsonschema']:>12,.0f}"
            f" {rates['floor']:>8,.0f} {rates['strict']:>14,.0f} {speedup:>7.1f}x {multiple:>7.2f}x"
        )
    met_speedup = worst_speedup >= TARGET_SPEEDUP
    met_multiple = worst_multiple <= TARGET_FLOOR_MULTIPLE
    print()
    print(
        f"typed vs jsonschema: at least {worst_speedup:.1f}x faster "
        f"(target {TARGET_SPEEDUP:.0f}x): {'met' if met_speedup else 'NOT met'}"
    )
    print(
        f"typed vs parse floor: at most {worst_multiple:.2f}x the time "
        f"(target {TARGET_FLOOR_MULTIPLE:.0f}x): {'met' if met_multiple else 'NOT met'}"
    )
    return 0 if met_speedup and met_multiple else 1


if __name__ == "__main__":
    raise SystemExit(main())
