"""How the goal-planning-system contract reads what jenbina stored (see `runtime.core.migrations`).

jenbina's `PlanningSystem.to_dict()` (seed 004) keeps the plans alone:
`{"plans": [...]}`, each plan without a `horizon`, and no `goals`, which
the contract holds because completing and abandoning plans change them.
The step recovers what the plans allow and says what it could not:

- each goal's description from its plans' `goal_description` (a `goal_id`
  no plan names has none: a placeholder says so);
- its progress and confidence from its plans, by the contract's own
  `x-planning` numbers (each completed plan adds to progress, each failed
  one takes from confidence, from the schema's defaults);
- its horizon, which jenbina kept nowhere: the option `horizon` gives it,
  one for every goal (`short`) or one per goal in order (`short,mid`);
  `short`, the schema's first, when not given;
- a plan's missing `consecutive_overrides` as 0; a note a fixture added
  beside `plans` (`_source`) is dropped, and named;
- a plan of one step, which jenbina kept and the contract does not, gets
  the second step `normalize goal-plan-output` adds to an answer of one
  (`repairs.confirming`: the first's action again, confirming its
  outcome), pending, or completed in a completed plan; said per plan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from ...generated import GOAL_PLANNING_SYSTEM
from ...generated.goal_plans import Goal, GoalPlan, GoalPlanningSystem, GoalStep
from ..core.contracts import contract_schema, field_bound
from ..core.migrations import MigrationStep
from .repairs import confirming
from .session import HORIZONS

__all__ = ["HORIZON_OPTION", "JENBINA_TO_DICT", "MIGRATIONS", "horizon_choice"]

_PLANNING: dict[str, Any] = contract_schema(GOAL_PLANNING_SYSTEM)["x-planning"]
_DEFAULTS = {field.name: field.default for field in msgspec.structs.fields(Goal)}
_MOST_GOALS = field_bound(GoalPlanningSystem, "goals", "max_length")
_TOP_FIELDS = {field.encode_name for field in msgspec.structs.fields(GoalPlanningSystem)}
_LEAST_STEPS = field_bound(GoalPlan, "steps", "min_length")
_STEP_DEFAULTS = {
    field.encode_name: field.default
    for field in msgspec.structs.fields(GoalStep)
    if field.default is not msgspec.NODEFAULT
}
_STEP_TEXTS = [
    field.encode_name
    for field in msgspec.structs.fields(GoalStep)
    if field.default is msgspec.NODEFAULT
]


def _recognizes(value: Any) -> bool:
    # `to_dict` writes `plans` alone; a key starting with `_` is a note a fixture added
    # (`_source`). Anything else is another document, such as `get_planning_stats`' report.
    if not isinstance(value, dict) or any(
        key != "plans" and not key.startswith("_") for key in value
    ):
        return False
    plans = value.get("plans")
    return isinstance(plans, list) and all(
        isinstance(plan, dict) and "goal_description" in plan and "horizon" not in plan
        for plan in plans
    )


HORIZON_OPTION = "option horizon"
"How a step failure caused by the `horizon` option starts: the option's fault, not the file's."


def horizon_choice(given: str) -> list[str]:
    """The horizons `given` names, one or comma-separated (`short,mid`), in order.

    Raises ValueError, in one line naming the first that is no horizon, so a
    command can refuse its `--horizon` before it reads any file.
    """
    chosen = [part.strip() for part in given.split(",")]
    for part in chosen:
        if part not in HORIZONS:
            raise ValueError(f"{part!r} is not a horizon ({', '.join(HORIZONS)})")
    return chosen


def _horizons(options: Mapping[str, str], count: int) -> tuple[list[str], str]:
    """The horizon of each of `count` goals, and the note saying where it came from."""
    given = options.get("horizon")
    if given is None:
        first = HORIZONS[0]
        note = f"horizon not in the document: every goal set to {first} (option horizon)"
        return [first] * count, note
    try:
        chosen = horizon_choice(given)
    except ValueError as error:
        raise ValueError(
            f"{HORIZON_OPTION}: {error}, give one for every goal or one per goal, comma-separated"
        ) from None
    if len(chosen) == 1:
        return chosen * count, f"horizon not in the document: every goal set to {chosen[0]}"
    if len(chosen) != count:
        raise ValueError(
            f"{HORIZON_OPTION}: {len(chosen)} horizons given for {count} "
            f"goal{'s' if count != 1 else ''} "
            "(give one for every goal, or one per goal)"
        )
    return chosen, f"horizon not in the document: goals set to {', '.join(chosen)} in order"


def _upgrade(value: Any, options: Mapping[str, str]) -> tuple[Any, Sequence[str]]:
    notes: list[str] = []
    plans: list[dict[str, Any]] = value["plans"]
    ids: list[int] = []
    for plan in plans:
        goal_id = plan.get("goal_id")
        if not isinstance(goal_id, int) or isinstance(goal_id, bool) or goal_id < 0:
            raise ValueError(
                f"a plan's goal_id is {goal_id!r}, not an index: the goals cannot be recovered"
            )
        ids.append(goal_id)
    if max(ids, default=0) >= _MOST_GOALS:
        raise ValueError(
            f"a plan's goal_id is {max(ids)}: more goals than the {_MOST_GOALS} a system holds"
        )
    count = max(ids, default=-1) + 1
    horizons, said = _horizons(options, count)
    goals: list[dict[str, Any]] = []
    for goal_id in range(count):
        mine = [plan for plan in plans if plan["goal_id"] == goal_id]
        completed = sum(plan.get("status") == "completed" for plan in mine)
        failed = sum(plan.get("status") == "failed" for plan in mine)
        progress = min(
            1.0, _DEFAULTS["progress"] + completed * _PLANNING["progress_per_completed_plan"]
        )
        confidence = max(
            0.0, _DEFAULTS["confidence"] - failed * _PLANNING["confidence_per_abandoned_plan"]
        )
        if mine:
            description = mine[0]["goal_description"]
        else:
            description = f"goal {goal_id} (its description was not stored)"
            notes.append(f"goal {goal_id}: no plan names it, so its description is a placeholder")
        goals.append(
            {
                "description": description,
                "horizon": horizons[goal_id],
                "source_needs": [],
                "progress": round(progress, 6),
                "confidence": round(confidence, 6),
            }
        )
    notes.append(
        f"{count} goal{'s' if count != 1 else ''} recovered from the plans' goal_description"
        f" ({', '.join(repr(goal['description']) for goal in goals)})"
        if count
        else "no plans: no goals to recover"
    )
    if count:
        notes.append(
            "progress and confidence recovered from each goal's completed and failed plans; "
            "source_needs not in the document: set to []"
        )
        notes.append(said)
    upgraded: list[dict[str, Any]] = []
    defaulted = 0
    for number, plan in enumerate(plans):
        new = {**plan, "horizon": horizons[plan["goal_id"]]}
        if "consecutive_overrides" not in new:
            new["consecutive_overrides"] = 0
            defaulted += 1
        confirmed = _one_step_confirmed(new)
        if confirmed is not None:
            notes.append(f"/plans/{number}/steps/-: {confirmed}")
        upgraded.append(new)
    if defaulted:
        notes.append(f"consecutive_overrides not in {defaulted} plan(s): set to 0")
    dropped = sorted(key for key in value if key not in _TOP_FIELDS)
    if dropped:
        notes.append(f"dropped {', '.join(dropped)}: not part of {GOAL_PLANNING_SYSTEM.name}")
    return {"goals": goals, "plans": upgraded}, notes


def _one_step_confirmed(plan: dict[str, Any]) -> str | None:
    """Give `plan`, if it has one step only, the confirming second step; why, or None.

    The step is the one `repairs.confirming` adds to a plan answer of one,
    with a stored step's other fields at their defaults: pending, or
    completed when the plan is (its index then moves past it, as a
    completed plan's does). A plan whose one step lacks a text is left for
    the contract to refuse.
    """
    steps = plan.get("steps")
    if not (isinstance(steps, list) and len(steps) == 1 < _LEAST_STEPS):
        return None
    (first,) = steps
    if not isinstance(first, dict) or not all(
        isinstance(first.get(name), str) for name in _STEP_TEXTS
    ):
        return None
    repair = confirming([{name: first[name] for name in _STEP_TEXTS}])
    second = {**_STEP_DEFAULTS, **repair.after}
    if plan.get("status") == "completed":
        second["status"] = "completed"
        if plan.get("current_step_index") == 1:
            plan["current_step_index"] = 2
    plan["steps"] = [first, second]
    return repair.reason


JENBINA_TO_DICT = MigrationStep(
    contract=GOAL_PLANNING_SYSTEM.name,
    reads=0,
    # Version 2 added two optional fields (a simulation's context and its
    # scripted answers) that a version-1 program refuses; a version-1 document
    # is valid in version 2 as it is, so this step writes version 2 directly.
    writes=2,
    name="jenbina PlanningSystem.to_dict",
    recognizes=_recognizes,
    upgrade=_upgrade,
    options={
        "horizon": "each goal's horizon, which jenbina did not store: one for every goal "
        "(short, mid or long) or one per goal, comma-separated; short when not given",
    },
)
'jenbina\'s `{"plans": [...]}`: goals recovered from the plans, horizons from an option.'

MIGRATIONS = {GOAL_PLANNING_SYSTEM.name: (JENBINA_TO_DICT,)}
