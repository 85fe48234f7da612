"""Planning blocks: the one explicit step that repairs them.

    result = normalize_block(value)                 # repaired copy, every repair, what is left
    block = decode(PLANNING_BLOCK, text, rules=THINK_MODE)   # judging, in Think mode

Judging never changes anything; it is validation's, with the planning
protocol's rules in Story mode by default and `rules_in("think")` (or
`THINK_MODE`) for Think mode (see `runtime.planning_blocks.rules`).
`normalize_block` repairs only what the protocol says is repairable and
reports each repair with its pointer, the value before and the value after
(a `runtime.core.repairs.Repair`):

- `margin`, `success` and `quality_tier` of `plan_quality`, recomputed from
  `roll_result` and `dc` (filled in when missing);
- the parallel option, moved to the last position of `choices`;
- HTML markup and control characters in any free text, removed (see
  `runtime.core.plain_text`); strings the schema constrains (enums, keys,
  patterns) are never rewritten, only judged.

Everything else stays as it was and is reported as a violation: an unknown
`risk_level`, a PascalCase or numeric choice key, a choice without
`description`, a `choices` list where an object is expected.
"""

from __future__ import annotations

from typing import Any

from ..core.jsontext import copy_json, pointer
from ..core.plain_text import (
    control_characters,
    free_texts,
    has_markup,
    neutralize,
    without_controls,
)
from ..core.repairs import ABSENT, Normalized, Normalizer, Repair
from ..core.rules import Rules, as_integer
from ..core.validation import violations
from .mechanics import Mode, check_outcome, is_parallel
from .rules import PLANNING_BLOCK, check_inputs, rules_in

__all__ = ["NORMALIZERS", "PLANNING_BLOCK", "normalize_block"]


def normalize_block(value: Any, mode: Mode = "story") -> Normalized:
    """Repair what the protocol allows in the parsed JSON `value`, then judge it in `mode`.

    Returns the repaired copy, each repair made, and the violations left.
    Takes any value a JSON parser returns (nesting included) and never changes
    it; raises ValueError for an unknown mode only.
    """
    return _normalized(value, rules_in(mode))


def _normalized(value: Any, rules: Rules | None) -> Normalized:
    """`normalize_block` judging by `rules`, or Story mode's when None."""
    rules = rules or rules_in("story")
    if not isinstance(value, dict):  # not a block: nothing to repair
        return Normalized(value, (), violations(PLANNING_BLOCK, value, rules=rules))
    repairs: list[Repair] = []
    block = copy_json(value)
    _plain_texts(block, repairs)
    _recompute_check(block.get("plan_quality"), repairs)
    _parallel_last(block.get("choices"), repairs)
    return Normalized(block, tuple(repairs), violations(PLANNING_BLOCK, block, rules=rules))


NORMALIZERS = {PLANNING_BLOCK.name: Normalizer(_normalized, field="block")}
"""`plancontracts normalize planning-block`: judged in the mode `--mode` chose, Story by default.

Its `--json` record holds the repaired block as `block`.
"""


def _plain_texts(block: dict[str, Any], repairs: list[Repair]) -> None:
    """Remove markup and control characters from every free text, recording each change."""
    for path, text in list(free_texts(PLANNING_BLOCK, block)):
        plain, removed = _plain(text)
        if plain == text:
            continue
        container: Any = block
        for token in path[:-1]:
            container = container[token]
        container[path[-1]] = plain
        reason = f"{' and '.join(removed)} removed: text is plain text"
        repairs.append(Repair(pointer(path), text, plain, reason))


_ROUNDS = 8
"Removing markup and controls again and again: each round ends one layer of hiding."


def _plain(text: str) -> tuple[str, list[str]]:
    """`text` without markup or control characters, and which of the two it held.

    Removing one can make the other: a control character between `<` and
    `?` hides markup, and markup's character references can spell a control
    character. So both are removed until neither is left, and the result
    needs no repair when normalized again.
    """
    markup = controls = False
    for _ in range(_ROUNDS):
        markup = markup or has_markup(text)
        controls = controls or bool(control_characters(text))
        plain = without_controls(neutralize(text))
        if plain == text:
            break
        text = plain
    names = [
        name for name, found in (("markup", markup), ("control characters", controls)) if found
    ]
    return text, names


def _recompute_check(quality: Any, repairs: list[Repair]) -> None:
    inputs = check_inputs(quality)
    if inputs is None:
        return
    roll, dc = inputs
    outcome = check_outcome(roll, dc)
    right = {
        "margin": outcome.margin,
        "success": outcome.success,
        "quality_tier": outcome.quality_tier,
    }
    for field, after in right.items():
        before = quality.get(field, ABSENT)
        if _same(before, after):
            continue
        quality[field] = after
        reason = f"follows from roll_result {roll} and dc {dc}"
        repairs.append(Repair(f"/plan_quality/{field}", before, after, reason))


def _same(before: Any, after: Any) -> bool:
    """Whether a JSON value already says `after`, as the contract reads it (5.0 is 5)."""
    if isinstance(after, bool) or isinstance(before, bool):
        return before is after
    if isinstance(after, int):
        return as_integer(before) == after
    return bool(before == after)


def _parallel_last(choices: Any, repairs: list[Repair]) -> None:
    if not isinstance(choices, dict):
        return
    keys = list(choices)
    order = [key for key in keys if not is_parallel(key)] + [k for k in keys if is_parallel(k)]
    if order == keys:
        return
    moved = {key: choices.pop(key) for key in keys}
    choices.update((key, moved[key]) for key in order)
    repairs.append(Repair("/choices", keys, order, "the parallel option comes last"))
