"""Validation throughput: `decode` against its peers and against the bare parse.

    python3 dev.py bench validation

For each set of documents it measures, in one run, documents per second of:

- decode: `plancontracts.decode`, the public path, every check on (strict
  parse with duplicate keys and `1e400` refused, the generated types, the
  schema's patterns and the contract's rules beyond the schema), with the
  native fast path (the `fast` extra) when it is installed;
- without fast: the same `decode` with the native fast path turned off
  (`runtime.core.native.turned_off`), as a core install runs it;
- jsonschema: `json.loads` plus `Draft202012Validator.is_valid`, built once;
- fastjsonschema: `json.loads` plus a validator compiled once (it knows
  drafts up to 7, so the schema is given without its `$schema`);
- jsonschema-rs: the value parsed by `msgspec.json.decode`, then the Rust
  validator's `is_valid`, built once;
- pydantic: `model_validate_json` of a pydantic v2 model that
  datamodel-code-generator makes from the same bundled schema;
- parse floor: untyped `msgspec.json.decode`, which validates nothing.

Rounds are interleaved (ROUNDS of them) so that machine noise hits every
validator alike; each cell is the median over the rounds of a peer's rate
divided by decode's in the same round: below 1, decode is faster. Peers are
not all as strict (only decode refuses duplicate keys and checks the rules
beyond the schemas; pydantic takes uuids without hyphens and null for
optional fields), but a user picking a validator sees these numbers. A
second table gives decode's time with and without the fast path as a
multiple of the floor's.

Targets: with the fast path, decode ahead of jsonschema-rs and pydantic on
the TARGETS documents (a 20-tool plan, a planning block, the upstream story
package where ../shared/upstream is beside the checkout, a `done` event);
and at least 50x jsonschema everywhere. Peak RSS is printed with the tables.
"""

from __future__ import annotations

import copy
import json
import math
import re
import resource
import statistics
import sys
import time
import uuid
import warnings
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec
from jsonschema import Draft202012Validator

from plancontracts import contract_schema, decode
from plancontracts.runtime.core.native import native, turned_off
from plancontracts.runtime.planning_blocks.mechanics import coordination_dc

ROUNDS = 15
MIN_ROUND_SECONDS = 0.05
TARGET_JSONSCHEMA = 50.0


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

    They stand in a ring, each connected to the next, their encounters renamed
    apart, so that the package keeps its rules beyond the schema: every
    location reachable, every id unique, every key resolving (each shows a
    background and plays music of the example).
    """
    package = copy.deepcopy(contract_schema("story-package")["examples"][0])
    act = package["plot"]["acts"][0]
    base = act["sandboxLocations"]
    act["sandboxLocations"] = [
        {
            **base[i % len(base)],
            "id": f"loc_{i}",
            "connections": [f"loc_{(i + 1) % locations}"],
            # Encounter ids are unique in a package: each copy's get the location's number.
            "encounters": [
                {**encounter, "id": f"{encounter['id']}_{i}"}
                for encounter in base[i % len(base)]["encounters"]
            ],
        }
        for i in range(locations)
    ]
    return package


def done_event() -> dict[str, Any]:
    """The tool event a script ends every run with: the schema's `done` example."""
    examples = contract_schema("tool-event")["examples"]
    return dict(next(event for event in examples if event["type"] == "done"))


def log_event() -> dict[str, Any]:
    """A log line, the commonest event: the schema's `log` example."""
    examples = contract_schema("tool-event")["examples"]
    return dict(next(event for event in examples if event["type"] == "log"))


def upstream_story_package() -> list[tuple[str, str, dict[str, Any]]]:
    """The upstream's full story package, read in place; nothing where the folder is absent."""
    path = UPSTREAM / "vn" / "synthetic_full_package.json"
    if not path.is_file():
        return []
    return [("story package, upstream", "story-package", json.loads(path.read_bytes()))]


UPSTREAM = Path(__file__).resolve().parent.parent.parent / "shared" / "upstream"
DOCUMENT_SETS: list[tuple[str, str, dict[str, Any]]] = [
    ("plan, 5 tools", "plan", plan(5)),
    ("plan, 20 tools", "plan", plan(20)),
    ("plan, 50 tools", "plan", plan(50)),
    ("planning block, 3 choices", "planning-block", planning_block(3)),
    ("planning block, 10 choices", "planning-block", planning_block(10)),
    ("story package, 2 locations", "story-package", story_package(2)),
    ("story package, 12 locations", "story-package", story_package(12)),
    *upstream_story_package(),
    ("tool event, done", "tool-event", done_event()),
    ("tool event, log", "tool-event", log_event()),
]
PEERS = ("jsonschema", "fastjsonschema", "jsonschema-rs", "pydantic")
TARGETS = (
    "plan, 20 tools",
    "planning block, 3 choices",
    "story package, upstream",
    "tool event, done",
)
"The documents the fast path must be ahead of jsonschema-rs and pydantic on."
AHEAD_OF = ("jsonschema-rs", "pydantic")


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


def pydantic_model(contract: str) -> Any:
    """The pydantic v2 model datamodel-code-generator makes from the contract's bundled schema."""
    import datamodel_code_generator as generator

    schema = json.dumps(contract_schema(contract))
    with warnings.catch_warnings():  # the generator's notice of its next defaults
        warnings.simplefilter("ignore", FutureWarning)
        source = generator.generate(
            schema,
            input_file_type=generator.InputFileType.JsonSchema,
            output_model_type=generator.DataModelType.PydanticV2BaseModel,
            class_name="Root",
        )
    module = ModuleType(f"pydantic_{contract.replace('-', '_')}")
    sys.modules[module.__name__] = module  # postponed annotations resolve in the module
    exec(compile(str(source), module.__name__, "exec"), module.__dict__)
    root = module.Root
    root.model_rebuild()
    return root


def validators(contract: str) -> dict[str, Callable[[bytes], bool]]:
    """Each validator, as a function of a document's bytes: True when it accepts them."""
    import fastjsonschema
    import jsonschema_rs

    schema = contract_schema(contract)
    python = Draft202012Validator(schema)
    rust = jsonschema_rs.validator_for(schema)
    model = pydantic_model(contract)
    try:
        compiled = fastjsonschema.compile({k: v for k, v in schema.items() if k != "$schema"})
    except re.error:  # it rewrites `$` in patterns to `\Z`, even inside a character class
        compiled = None

    def fast(data: bytes) -> bool:
        if compiled is None:
            raise CannotCompile
        try:
            compiled(json.loads(data))
        except fastjsonschema.JsonSchemaException:
            return False
        return True

    def typed(data: bytes) -> bool:
        return decode(contract, data) is not None

    def pydantic(data: bytes) -> bool:
        model.model_validate_json(data)
        return True

    return {
        "decode": typed,
        "jsonschema": lambda data: python.is_valid(json.loads(data)),
        "fastjsonschema": fast,
        "jsonschema-rs": lambda data: rust.is_valid(msgspec.json.decode(data)),
        "pydantic": pydantic,
        # Timed with the fast path turned off around the whole round (see `measure`).
        "without fast": typed,
        "floor": lambda data: msgspec.json.decode(data) is not None,
    }


class CannotCompile(Exception):
    """A peer could not compile the contract's schema: it has no figure for it."""


def measure(contract: str, document: dict[str, Any]) -> dict[str, float]:
    """Each validator's median rate over the rounds, as a multiple of decode's in each round.

    A peer that cannot compile the schema is left out (NaN).
    """
    data = json.dumps(document).encode()
    judges = validators(contract)
    missing = []
    for name, judge in judges.items():  # every one accepts the document: they all do the work
        try:
            assert judge(data), f"{name} refuses a valid {contract}"
        except CannotCompile:
            missing.append(name)
    judges = {name: judge for name, judge in judges.items() if name not in missing}
    ratios: dict[str, list[float]] = {name: [] for name in judges if name != "decode"}
    for _ in range(ROUNDS):
        rates = {}
        for name, judge in judges.items():
            with turned_off() if name == "without fast" else nullcontext():
                rates[name] = per_second(lambda judge=judge: judge(data))
        for name in ratios:
            ratios[name].append(rates[name] / rates["decode"])
    medians = {name: statistics.median(values) for name, values in ratios.items()}
    return {**medians, **dict.fromkeys(missing, math.nan)}


def shown(ratio: float) -> str:
    """A rate as a multiple of decode's: `0.36`, `1/59` when far below 1, `n/a` for none."""
    if math.isnan(ratio):
        return "n/a"
    return f"1/{1 / ratio:.0f}" if ratio < 0.1 else f"{ratio:.2f}"


def main() -> int:
    fast = native() is not None
    columns = [*PEERS, "without fast", "floor"]
    print(f"{'documents':<28} {'bytes':>6} " + " ".join(f"{name:>14}" for name in columns))
    behind: list[str] = []
    slowest_jsonschema = float("inf")
    floors: list[tuple[str, float, float]] = []
    for label, contract, document in DOCUMENT_SETS:
        ratios = measure(contract, document)
        size = len(json.dumps(document))
        cells = " ".join(f"{shown(ratios[name]):>14}" for name in columns)
        print(f"{label:<28} {size:>6} {cells}", flush=True)
        if label in TARGETS:
            behind += [f"{label}: {peer}" for peer in AHEAD_OF if ratios[peer] >= 1.0]
        slowest_jsonschema = min(slowest_jsonschema, 1 / ratios["jsonschema"])
        # The floor's rate over decode's is decode's time over the floor's.
        floors.append((label, ratios["floor"], ratios["floor"] / ratios["without fast"]))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print()
    print("each cell: the validator's documents per second / decode's, median of the rounds;")
    print("n/a: the peer cannot compile the contract's schema")
    print()
    print(
        f"{'documents':<28} {'with fast':>14} {'without fast':>14}  (decode's time / the floor's)"
    )
    for label, with_fast, without_fast in floors:
        print(f"{label:<28} {with_fast:>14.2f} {without_fast:>14.2f}")
    print()
    print(f"peak RSS {peak:.0f} MiB")
    missing = [label for label in TARGETS if label not in {row[0] for row in floors}]
    if not fast:
        print("the native fast path is not installed (pip install ./native): decode ran without it")
    ahead = fast and not behind and not missing
    print(
        "with the fast path, decode ahead of jsonschema-rs and pydantic on "
        + ", ".join(TARGETS)
        + ": "
        + (
            "met"
            if ahead
            else f"NOT met ({'; '.join(behind + [f'{m}: not measured' for m in missing])})"
        )
    )
    fast_enough = slowest_jsonschema >= TARGET_JSONSCHEMA
    print(
        f"decode vs jsonschema: at least {slowest_jsonschema:.0f}x faster "
        f"(target {TARGET_JSONSCHEMA:.0f}x): {'met' if fast_enough else 'NOT met'}"
    )
    return 0 if ahead and fast_enough else 1


if __name__ == "__main__":
    raise SystemExit(main())
