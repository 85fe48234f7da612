"""Rolls one dice formula such as 2d6+3 and records each die and the total.

Input: {"formula": "2d6+3", "seed": 7}. A formula is NdM, NdM+K or NdM-K, or
dM for a single die, with N from 1 to 100, M from 2 to 1000 and K from 0 to
1000. The roll is random unless a seed is given; the same formula and seed
always roll the same. State: {"dice": {"last": {"formula", "rolls",
"modifier", "total"}}}, with the formula written in full (`d20` as `1d20`).
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import NamedTuple

from plancontracts.generated.tool_plans import ToolRequest
from plancontracts.runtime.engine.script_io import Reply, ScriptFailure, run_script

# The ranges live in the expression itself so that it can be the input
# schema's pattern word for word: the schema and this parser cannot disagree.
# `\Z` rather than `$`, which would also accept a trailing newline.
FORMULA_BODY = (
    r"(100|[1-9][0-9]?)?d(1000|[1-9][0-9]{2}|[1-9][0-9]|[2-9])([+-](1000|[1-9][0-9]{0,2}|0))?"
)
FORMULA = re.compile(rf"\A{FORMULA_BODY}\Z")
HOW_TO_WRITE = (
    "a formula looks like 2d6+3: N dice (1 to 100, 1 when left out, as in d20) "
    "of M sides (2 to 1000), then optionally + or - K (0 to 1000)"
)


class Formula(NamedTuple):
    dice: int
    sides: int
    modifier: int

    def __str__(self) -> str:
        modifier = f"{self.modifier:+d}" if self.modifier else ""
        return f"{self.dice}d{self.sides}{modifier}"


def parse(text: str) -> Formula:
    """The formula `text` describes; ScriptFailure `bad_formula` when it describes none."""
    match = FORMULA.match(text)
    if match is None:
        shown = text if len(text) <= 40 else text[:40] + "..."
        raise ScriptFailure(
            "bad_formula", f"cannot read {shown!r}: {HOW_TO_WRITE}", {"formula": shown}
        )
    dice, sides, modifier, _ = match.groups()
    return Formula(int(dice or 1), int(sides), int(modifier or 0))


def roll(formula: Formula, rng: random.Random) -> list[int]:
    return [rng.randint(1, formula.sides) for _ in range(formula.dice)]


def main(request: ToolRequest, reply: Reply) -> str:
    # The input schema holds the formula to the parser's own expression, so
    # parsing only turns it into numbers.
    formula, seed = parse(request.input["formula"]), request.input.get("seed")
    reply.log(f"rolling {formula}" + ("" if seed is None else f" with seed {seed}"))
    rolls = roll(formula, random.Random(seed))
    total = sum(rolls) + formula.modifier
    reply.patch_state(
        {
            "dice": {
                "last": {
                    "formula": str(formula),
                    "rolls": rolls,
                    "modifier": formula.modifier,
                    "total": total,
                }
            }
        }
    )
    detail = " + ".join(map(str, rolls))
    if formula.modifier:
        detail += f" {'+' if formula.modifier > 0 else '-'} {abs(formula.modifier)}"
    return f"{formula} rolled {total} ({detail})"


if __name__ == "__main__":
    run_script(main, input_schema=Path(__file__).with_name("roll.input.json"))
