"""The upstream's tolerance of model answers, as explicit repairs that are each reported.

    result = normalize_output(value)        # repaired copy, every repair, what is left
    result.value, result.repairs, result.violations

jenbina took whatever its model wrote and made a plan of it without a word:
a bare list for the steps, items that were no step skipped, estimates
clamped into range (2 when missing), plans cut to their most steps and
plans of one step kept. The model of this project writes under the
`goal-plan-output` profile and cannot write such answers; an answer from
elsewhere (a recorded one, another model's) is judged by the contract and
refused. `normalize_output` offers the upstream's repairs as one explicit
step instead, each reported with its JSON Pointer, the value before and
after, and why:

- a bare list of steps becomes the document's `steps`;
- fields of the document other than `steps` are dropped, and so are fields
  of a step other than a step proposal's;
- an item that is no step (not an object, or without one of the texts a
  step needs) is dropped;
- a missing estimate becomes the step's default, a fractional one is
  rounded down, and one out of range is clamped into it;
- steps past the most a plan holds are dropped;
- a plan of one step gets a second that confirms the first's outcome with
  the same action, since a plan has at least two: doing the one step twice
  completes it.

Every bound, default and field list is read from the contract. Pointers
name places in the document as given (a bare list's items as `/steps/N`,
after the first repair), so a step keeps the index it had when an item
before it is dropped; the step added to a plan of one is `/steps/-`, past
the end, as JSON Patch names an item appended.
Everything else (texts too long or empty, no step at all, a document that
is no plan) is left as it is and reported as a violation. The result of a
repair is never repaired again: normalizing it changes nothing.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec

from ...generated import GOAL_PLAN_OUTPUT
from ...generated.goal_plans import GoalPlanOutput, GoalStep, StepProposal
from ..core.contracts import field_bound
from ..core.jsontext import copy_json, escape_token
from ..core.plain_text import one_line
from ..core.repairs import ABSENT, Normalized, Normalizer, Repair
from ..core.rules import Rules
from ..core.validation import violations

__all__ = ["NORMALIZERS", "confirming", "normalize_output"]


_FIELDS = [field.encode_name for field in msgspec.structs.fields(StepProposal)]
_TEXTS = [
    field.encode_name
    for field in msgspec.structs.fields(StepProposal)
    if field.encode_name != "estimated_cycles"
]
_DEFAULT_CYCLES = next(
    field.default for field in msgspec.structs.fields(GoalStep) if field.name == "estimated_cycles"
)
_LEAST_CYCLES = field_bound(StepProposal, "estimated_cycles", "ge")
_MOST_CYCLES = field_bound(StepProposal, "estimated_cycles", "le")
_LEAST_STEPS = field_bound(GoalPlanOutput, "steps", "min_length")
_MOST_STEPS = field_bound(GoalPlanOutput, "steps", "max_length")
_DESCRIPTION = field_bound(StepProposal, "description", "max_length")
_CONFIRM = "Confirm: "


def normalize_output(value: Any, rules: Rules | None = None) -> Normalized:
    """Repair what the upstream tolerated in the parsed JSON `value`, then judge it.

    Returns the repaired copy, each repair made, and the violations of
    `goal-plan-output` left, by `rules` (the contract's own when None).
    Takes any value a JSON parser returns and never changes it; raises
    ValueError only for `rules` of another contract.
    """
    repairs: list[Repair] = []
    if isinstance(value, list):
        # Before the copy's other repairs: their pointers then name the list's items.
        reason = "a bare list of steps is taken for the plan's steps, as the upstream took it"
        repairs.append(Repair("", _count(value), "an object with steps", reason))
        output: Any = {"steps": copy_json(value)}
    elif isinstance(value, dict) and isinstance(value.get("steps"), list):
        output = copy_json(value)
    else:  # no steps to repair: the contract says what it should have been
        return Normalized(value, (), violations(GOAL_PLAN_OUTPUT, value, rules=rules))
    for key in [key for key in output if key != "steps"]:
        reason = "not a field of a plan: dropped, as the upstream read only its steps"
        repairs.append(Repair(f"/{escape_token(key)}", output.pop(key), ABSENT, reason))
    kept: list[tuple[int, dict[str, Any]]] = []
    for index, item in enumerate(output["steps"]):
        missing = _not_a_step(item)
        if missing is None:
            kept.append((index, item))
            continue
        reason = f"not a step ({missing}): skipped, as the upstream skipped it"
        repairs.append(Repair(f"/steps/{index}", item, ABSENT, reason))
    if len(kept) > _MOST_STEPS:
        reason = f"a plan has at most {_MOST_STEPS} steps: the later dropped, as the upstream cut"
        repairs.append(Repair("/steps", _count(kept), _count(kept[:_MOST_STEPS]), reason))
        kept = kept[:_MOST_STEPS]
    for index, step in kept:
        _repair_step(f"/steps/{index}", step, repairs)
    steps = [step for _, step in kept]
    if len(steps) == 1 < _LEAST_STEPS:
        repairs.append(confirming(steps))
    output["steps"] = steps
    return Normalized(output, tuple(repairs), violations(GOAL_PLAN_OUTPUT, output, rules=rules))


def _count(steps: list[Any]) -> str:
    return f"{len(steps)} step{'s' if len(steps) != 1 else ''}"


def _not_a_step(item: Any) -> str | None:
    """What makes `item` no step at all (no object, a text missing), or None for a step."""
    if not isinstance(item, dict):
        return "not an object"
    for name in _TEXTS:
        if not isinstance(item.get(name), str):
            return f"no {name} text"
    return None


def _repair_step(at: str, step: dict[str, Any], repairs: list[Repair]) -> None:
    for key in [key for key in step if key not in _FIELDS]:
        reason = "not a field of a step proposal: dropped, as the upstream read only its fields"
        repairs.append(Repair(f"{at}/{escape_token(key)}", step.pop(key), ABSENT, reason))
    pointer = f"{at}/estimated_cycles"
    cycles = step.get("estimated_cycles", ABSENT)
    if cycles is ABSENT:
        reason = f"no estimate: the default, {_DEFAULT_CYCLES} cycles, as the upstream set it"
        step["estimated_cycles"] = _DEFAULT_CYCLES
        repairs.append(Repair(pointer, ABSENT, _DEFAULT_CYCLES, reason))
        return
    if isinstance(cycles, bool) or not isinstance(cycles, int | float) or not math.isfinite(cycles):
        return  # not a number: the contract says so
    whole = math.floor(cycles)
    clamped = min(_MOST_CYCLES, max(_LEAST_CYCLES, whole))
    if clamped == cycles:  # 3.0 is 3, as the contract reads it
        return
    if whole != cycles:
        reason = f"rounded down to whole cycles, clamped to {_LEAST_CYCLES}..{_MOST_CYCLES}"
    else:
        reason = f"clamped to {_LEAST_CYCLES}..{_MOST_CYCLES} cycles, as the upstream clamped it"
    step["estimated_cycles"] = clamped
    repairs.append(Repair(pointer, cycles, clamped, reason))


def confirming(steps: list[dict[str, Any]]) -> Repair:
    """A second step for a plan of one: the first's action again, confirming its outcome.

    `steps` holds one step proposal (its texts at least); the second is
    appended to it, and the repair that says so returned. The upgrade of a
    stored plan of one (`migrations`) makes the same repair.
    """
    (first,) = steps
    outcome = first["expected_outcome"]
    second = {
        "description": one_line(_CONFIRM + outcome, _DESCRIPTION),
        "action_hint": first["action_hint"],
        "expected_outcome": outcome,
        "estimated_cycles": _LEAST_CYCLES,
    }
    steps.append(second)
    reason = (
        f"a plan has at least {_LEAST_STEPS} steps and the upstream kept plans of one: "
        "a step confirming its outcome with the same action added"
    )
    return Repair("/steps/-", ABSENT, second, reason)  # `-`: past the end, as JSON Patch says


NORMALIZERS = {GOAL_PLAN_OUTPUT.name: Normalizer(normalize_output, field="output")}
"""`plancontracts normalize goal-plan-output`: its `--json` record holds the answer as `output`."""
