"""Planning blocks: judging them in a mode, and the one explicit step that repairs them.

    violations = check_block(value, mode="think")   # schema + protocol rules, () when valid
    block = decode_block(text, mode="think")        # a typed PlanningBlock, or ContractError
    result = normalize_block(value)                 # repaired copy, every repair, what is left

Judging never changes anything. `normalize_block` repairs only what the
protocol says is repairable and reports each repair with its pointer, the
value before and the value after:

- `margin`, `success` and `quality_tier` of `plan_quality`, recomputed from
  `roll_result` and `dc` (filled in when missing);
- the parallel option, moved to the last position of `choices`;
- HTML markup in any text, removed (see `runtime.plain_text`).

Everything else stays as it was and is reported as a violation: an unknown
`risk_level`, a PascalCase or numeric choice key, a choice without
`description`, a `choices` list where an object is expected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from plancontracts.generated.planning_blocks import PlanningBlock
from plancontracts.runtime.errors import ContractError, Violation, shown
from plancontracts.runtime.jsontext import escape_token
from plancontracts.runtime.plain_text import has_markup, neutralise
from plancontracts.runtime.planning_mechanics import Mode, check_outcome, is_parallel
from plancontracts.runtime.protocol_rules import as_integer
from plancontracts.runtime.validation import convert, parse_document, violations

__all__ = ["ABSENT", "Normalized", "Repair", "check_block", "decode_block", "normalize_block"]

PLANNING_BLOCK = "planning-block"


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()
"The `before` of a repair that filled in a missing field."


@dataclass(frozen=True)
class Repair:
    """One change `normalize_block` made: where, what was there, what is there now, and why."""

    pointer: str
    before: Any
    "The value before, or ABSENT for a field that was missing."
    after: Any
    reason: str

    def __str__(self) -> str:
        before = "(absent)" if self.before is ABSENT else shown(self.before)
        return f"{self.pointer or '(document)'}: {before} -> {shown(self.after)} ({self.reason})"


@dataclass(frozen=True)
class Normalized:
    """What `normalize_block` made of a value."""

    block: Any
    "The repaired value (a new object; the input is not changed)."
    repairs: tuple[Repair, ...]
    violations: tuple[Violation, ...]
    "What is still wrong after the repairs, in the mode asked for."

    @property
    def valid(self) -> bool:
        return not self.violations


def check_block(value: Any, mode: Mode = "story") -> tuple[Violation, ...]:
    """Every violation of the planning-block contract by the parsed JSON `value` in `mode`.

    Story mode is the contract's own judgement (`violations("planning-block",
    ...)`); Think mode adds the fields it requires and the mandatory parallel
    option. Raises ValueError for an unknown mode.
    """
    if mode not in ("think", "story"):
        raise ValueError(f"not a mode: {mode!r}; one of think, story")
    return violations(PLANNING_BLOCK, value, mode=mode)


def decode_block(data: bytes | str, mode: Mode = "story") -> PlanningBlock:
    """Decode a planning block's JSON text, judged in `mode`.

    Returns the typed block. Raises ContractError listing every violation
    (malformed JSON included), ValueError for an unknown mode.
    """
    value = parse_document(PLANNING_BLOCK, data)
    problems = check_block(value, mode)
    if problems:
        raise ContractError(PLANNING_BLOCK, problems)
    block: PlanningBlock = convert(PLANNING_BLOCK, value)
    return block


def normalize_block(value: Any, mode: Mode = "story") -> Normalized:
    """Repair what the protocol allows in the parsed JSON `value`, then judge it in `mode`.

    Returns the repaired copy, each repair made, and the violations left.
    Never raises for any JSON value; ValueError for an unknown mode.
    """
    if not isinstance(value, dict):
        return Normalized(value, (), check_block(value, mode))  # not a block: nothing to repair
    repairs: list[Repair] = []
    block = _without_markup(value, repairs)
    _recompute_check(block.get("plan_quality"), repairs)
    _parallel_last(block.get("choices"), repairs)
    return Normalized(block, tuple(repairs), check_block(block, mode))


def _without_markup(value: Any, repairs: list[Repair]) -> Any:
    """A copy of `value` with markup removed from every string, each removal recorded."""
    root: list[Any] = [None]
    # A loop, not recursion: documents may nest about 1,000 levels deep.
    stack: list[tuple[Any, Any, str, Any]] = [(root, 0, "", value)]
    while stack:
        parent, slot, pointer, node = stack.pop()
        if isinstance(node, dict):
            copy: Any = {}
            stack += [
                (copy, key, f"{pointer}/{escape_token(key)}", child)
                for key, child in reversed(node.items())
            ]
        elif isinstance(node, list):
            copy = [None] * len(node)
            stack += [
                (copy, index, f"{pointer}/{index}", child)
                for index, child in reversed(list(enumerate(node)))
            ]
        elif isinstance(node, str) and has_markup(node):
            copy = neutralise(node)
            repairs.append(Repair(pointer, node, copy, "markup removed: text is plain text"))
        else:
            copy = node
        parent[slot] = copy
    return root[0]


def _recompute_check(quality: Any, repairs: list[Repair]) -> None:
    if not isinstance(quality, dict):
        return
    roll, dc = as_integer(quality.get("roll_result")), as_integer(quality.get("dc"))
    if roll is None or dc is None:
        return
    outcome = check_outcome(roll, dc)
    right = {
        "margin": outcome.margin,
        "success": outcome.success,
        "quality_tier": outcome.quality_tier,
    }
    for field, after in right.items():
        before = quality.get(field, ABSENT)
        if before is ABSENT or type(before) is not type(after) or before != after:
            quality[field] = after
            reason = f"follows from roll_result {roll} and dc {dc}"
            repairs.append(Repair(f"/plan_quality/{field}", before, after, reason))


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
