"""Planning blocks from the packaged small model: valid and rule-conforming, and how fast.

    python3 dev.py bench thinking

Over 30 fixed situations, alternately in Think and Story mode, on the
packaged Gemma 3 270M model, it measures in one run:

- the fraction of blocks valid against the planning-block contract in their
  mode and already conforming, so that `normalize_block` has nothing to
  repair (target 100%);
- p50 and p95 time to a block, per mode (Think mode makes two generations:
  the planning check, then the block), and the first block's time apart,
  which pays for evaluating the long protocol prompt and compiling the
  constraint.

Exits 1 when the target is missed.
"""

from __future__ import annotations

import statistics
import sys
import time

import msgspec
import trio

from plancontracts import violations
from plancontracts.runtime.core.errors import GenerationFailed, ProfileBug
from plancontracts.runtime.model import PACKAGED_MODEL, ModelChoice, load_writer
from plancontracts.runtime.planning_blocks import normalize_block
from plancontracts.runtime.planning_blocks.agent import Thinker
from plancontracts.runtime.planning_blocks.mechanics import Mode
from plancontracts.runtime.planning_blocks.rules import PLANNING_BLOCK, rules_in

SITUATIONS = [
    "A bored guard watches the only bridge into town at dusk",
    "The ship's hold is flooding and the pumps have jammed",
    "A merchant offers a map to the lost mine at a suspicious price",
    "Two rival guilds both want the party's help with the same heist",
    "The dragon sleeps on its hoard, one eye half open",
    "A child says her brother was taken into the old mill",
    "The duke's vault has a lock no one in the city can pick",
    "Bandits block the mountain pass and demand a toll",
    "The wizard's tower door asks a riddle before it opens",
    "A plague spreads in the lower district and the healers are gone",
    "The party must cross a frozen lake before the storm arrives",
    "A traitor in the camp is sending signals to the enemy at night",
    "The queen's envoy wants an answer by sunrise",
    "An earthquake has opened a crack into the catacombs",
    "The caravan's horses were poisoned overnight",
    "A ghost will not let anyone leave the inn until its killer is named",
    "The siege ladder broke and the wall is half climbed",
    "A rival adventurer challenges the party to a race to the relic",
    "The forest spirits demand a tribute for passage",
    "The prisoner knows where the cult meets but will only talk for freedom",
    "A fire breaks out in the library with the rare books inside",
    "The mercenaries have not been paid and are threatening to leave",
    "The oracle's prophecy names one of the party as the betrayer",
    "A flooded tunnel is the only way into the fortress",
    "The town council will vote on banishing the party tomorrow",
    "A wyvern nests above the only spring in the desert",
    "The smuggler's boat leaves at midnight with or without the party",
    "An ancient golem guards the gate and answers only to a password",
    "The harvest festival hides a plot to poison the lord",
    "The party's cleric has been captured by the inquisition",
]
TARGET_CONFORMING = 1.0


async def main() -> int:
    choice = ModelChoice(PACKAGED_MODEL, download=False)
    thinker = Thinker(load_writer(choice, needs="the benchmark needs one"), say=lambda line: None)
    conforming = 0
    times: dict[Mode, list[float]] = {"think": [], "story": []}
    first = None
    for number, situation in enumerate(SITUATIONS):
        mode: Mode = "think" if number % 2 == 0 else "story"
        started = time.perf_counter()
        try:
            thought = await thinker.think(situation, mode, seed=number)
        except (GenerationFailed, ProfileBug) as failure:
            print(f"  {situation!r} ({mode}): {type(failure).__name__}: {failure}", file=sys.stderr)
            continue
        elapsed = time.perf_counter() - started
        if first is None:
            first = elapsed
        else:
            times[mode].append(elapsed)
        value = msgspec.to_builtins(thought.block)
        problems = violations(PLANNING_BLOCK, value, rules=rules_in(mode))
        repairs = normalize_block(value, mode).repairs
        for problem in [*problems, *repairs]:
            print(f"  {situation!r} ({mode}): {problem}", file=sys.stderr)
        conforming += not problems and not repairs
    fraction = conforming / len(SITUATIONS)
    met = fraction >= TARGET_CONFORMING
    print(
        f"blocks valid in their mode with nothing to repair: {conforming} of {len(SITUATIONS)} "
        f"({fraction:.0%}; target 100%): {'met' if met else 'NOT met'}"
    )
    print(f"first block (evaluates the prompt, compiles the constraint): {first or 0:.1f} s")
    every = [*times["think"], *times["story"]]
    if every:
        print(f"time to a block after the first: p50 {statistics.median(every):.1f} s")
    for mode, spent in times.items():
        if len(spent) >= 2:
            p50, p95 = statistics.median(spent), statistics.quantiles(spent, n=20)[-1]
            print(
                f"time to a block in {mode.capitalize()} mode: p50 {p50:.1f} s, "
                f"p95 {p95:.1f} s ({len(spent)} blocks)"
            )
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(trio.run(main))
