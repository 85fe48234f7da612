"""The rules of the planning protocol as code: checks, difficulty, rewards, freezes, time.

    outcome = check_outcome(roll_result=18, dc=12)         # margin 6, success, "Sharp"
    dc = choice_dc(block, "sneak_past", base_dc=15).dc     # the execution DC after modifiers
    clock = advance(clock, "think")                        # +1 microsecond, same turn

Everything here is a pure function of its arguments (dice come from the
`random.Random` the caller passes), so a game can replay a session exactly.
Game time is whole microseconds since the start of the campaign, as in the
`frozen-plans` contract.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, get_args

from ...generated.planning_blocks import (
    Analysis,
    Complexity,
    Confidence,
    FrozenPlan,
    FrozenPlans,
    ParallelAnalysis,
    PlanningBlock,
    PlanQuality,
    QualityTier,
    RiskLevel,
)
from ..core.contracts import field_bound
from ..core.keys import snake_case

__all__ = [
    "ABILITIES",
    "AVERAGE_SCORE",
    "COMPLEXITY_DC",
    "HOUR",
    "MAX_DC",
    "MAX_DC_ADJUSTMENT",
    "MIN_DC",
    "CheckOutcome",
    "DcAdjustment",
    "EarlyBreak",
    "GameClock",
    "Loot",
    "Mode",
    "ParallelOutcome",
    "ParallelResult",
    "ParallelRoll",
    "Reattempt",
    "RolledCheck",
    "TaskStatus",
    "advance",
    "check_outcome",
    "choice_dc",
    "coordination_check_dc",
    "coordination_dc",
    "execution_dc",
    "freeze",
    "freeze_hours",
    "is_meta",
    "is_parallel",
    "loot",
    "mode_of",
    "parallel_dc_modifier",
    "parallel_option_time",
    "parallel_outcome",
    "parallel_tasks",
    "parallel_time",
    "parallel_time_factor",
    "reattempt",
    "reward_multiplier",
    "roll_check",
    "roll_parallel",
    "snake_case",
    "thaw",
    "topic_key",
]

Mode = Literal["think", "story"]
"Think mode plans with time frozen; Story mode plays on."
EarlyBreak = Literal["new_information", "different_approach", "assistance", "gm_override"]
"What lifts a freeze before its time: news, a new approach, help, or the game master's word."

HOUR = 3_600_000_000
"One game hour in microseconds."
MIN_DC, MAX_DC = 5, 30
"Execution DCs stay within these: trivial tasks need no roll, impossible is impossible."
MAX_DC_ADJUSTMENT = 4
"The planning modifiers together move an execution DC by at most this much either way."
THINK_PREFIX = "THINK:"
ABILITIES = ("Intelligence", "Wisdom")
"The abilities a character plans with."
AVERAGE_SCORE = 10
"The ability score whose modifier is 0: the default for a character nobody described."
MAX_SCORE = field_bound(PlanQuality, "stat_value", "le")
"The highest ability score (the planning-block contract's bound)."
DC_BOUNDS = (field_bound(PlanQuality, "dc", "ge"), field_bound(PlanQuality, "dc", "le"))
"The lowest and highest DC the planning-block contract allows."
_LAST_GAME_TIME = field_bound(FrozenPlan, "freeze_until", "le")  # exact in every JSON reader

SUCCESS_TIERS: tuple[tuple[int, QualityTier], ...] = (
    (15, "Masterful"),
    (10, "Brilliant"),
    (5, "Sharp"),
    (0, "Competent"),
)
"(lowest margin, tier) of a successful planning check, best first."
FAILURE_TIERS: tuple[tuple[int, QualityTier], ...] = (
    (-10, "Confused"),
    (-5, "Muddled"),
    (-1, "Incomplete"),
)
"(highest margin, tier) of a failed planning check, worst first."
FREEZE_BANDS = ((8, 1), (12, 2), (16, 4), (20, 8), (40, 24))
"(highest DC, hours frozen) of a failed planning check, lowest DCs first."
RISK_REWARD: dict[RiskLevel, Fraction] = {
    "safe": Fraction(1),
    "low": Fraction(1),
    "medium": Fraction(5, 4),
    "high": Fraction(3, 2),
}
TIER_REWARD: dict[QualityTier, Fraction] = {
    "Masterful": Fraction(5, 4),
    "Brilliant": Fraction(11, 10),
}
PARALLEL_REWARD = Fraction(6, 5)
COORDINATION_PER_TASK = 2
"What each task beyond the first adds to a parallel option's coordination DC."
COMPLEXITY_DC: dict[Complexity, int] = {"simple": 0, "moderate": 1, "complex": 2}
"What the complexity of a parallel option's tasks adds to its coordination DC."
PARALLEL_TIME: tuple[tuple[int, Fraction, Fraction], ...] = (
    (2, Fraction(5, 4), Fraction(3, 2)),
    (3, Fraction(3, 2), Fraction(3, 2)),
    (4, Fraction(7, 4), Fraction(2)),
    (5, Fraction(2), Fraction(5, 2)),
)
"""(tasks, least, most) time of a parallel option, as a multiple of its longest task's time.

Five tasks and more share the last row: coordination, not the work, sets the pace.
"""
GOLD_BONUS: dict[RiskLevel, Fraction] = {"medium": Fraction(1, 10), "high": Fraction(1, 4)}
"The share of gold a success at this risk adds; safe and low add none."
BONUS_ITEM_RISKS: frozenset[RiskLevel] = frozenset({"high"})
"The risk levels whose success also yields a bonus item."
ITEM_CHANCE: dict[QualityTier, Literal["rare", "uncommon"]] = {
    "Masterful": "rare",
    "Brilliant": "uncommon",
}
"The item a plan of this tier gives a chance at; other tiers give none."


# The planning check --------------------------------------------------------------


@dataclass(frozen=True)
class CheckOutcome:
    """What a planning check's roll against its DC means."""

    margin: int
    "roll_result minus dc."
    success: bool
    "Whether the roll reached the DC."
    quality_tier: QualityTier


def check_outcome(roll_result: int, dc: int) -> CheckOutcome:
    """The margin, success and quality tier of a roll against a DC.

    Success is reaching the DC. On success a margin of 15 or more is
    Masterful, 10 Brilliant, 5 Sharp, less Competent; on failure -10 or less
    is Confused, -5 Muddled, else Incomplete.
    """
    margin = roll_result - dc
    success = roll_result >= dc
    return CheckOutcome(margin, success, quality_tier(margin, success))


def quality_tier(margin: int, success: bool) -> QualityTier:
    """The tier of a planning check with this margin and outcome."""
    if success:
        return next(tier for lowest, tier in SUCCESS_TIERS if margin >= lowest)
    return next((tier for highest, tier in FAILURE_TIERS if margin <= highest), "Incomplete")


@dataclass(frozen=True)
class RolledCheck:
    """A planning check rolled by code: the fields of `plan_quality` that no model may invent."""

    stat_used: str
    stat_value: int
    modifier: str
    "The ability modifier with its sign, as the contract spells it: `+2`, `-1`."
    d20: int
    "The die itself, before the modifier."
    roll_result: int
    dc: int
    outcome: CheckOutcome

    def describe(self) -> str:
        """One line: `Intelligence check: d20 14 +2 = 16 vs DC 12, success by 4: Competent`."""
        result = "success" if self.outcome.success else "failure"
        return (
            f"{self.stat_used} check: d20 {self.d20} {self.modifier} = {self.roll_result} "
            f"vs DC {self.dc}, {result} by {abs(self.outcome.margin)}: "
            f"{self.outcome.quality_tier}"
        )


def roll_check(stat_used: str, stat_value: int, dc: int, rng: random.Random) -> RolledCheck:
    """Roll d20 plus the ability modifier of `stat_value` ((score - 10) // 2) against `dc`.

    Raises ValueError for a score outside 1..MAX_SCORE or a DC outside the
    contract's bounds.
    """
    if not 1 <= stat_value <= MAX_SCORE:
        raise ValueError(f"an ability score is 1 to {MAX_SCORE}, not {stat_value}")
    low, high = DC_BOUNDS
    if not low <= dc <= high:
        raise ValueError(f"a DC is {low} to {high}, not {dc}")
    modifier = (stat_value - 10) // 2
    d20 = rng.randint(1, 20)
    roll_result = d20 + modifier
    return RolledCheck(
        stat_used,
        stat_value,
        f"{modifier:+d}",
        d20,
        roll_result,
        dc,
        check_outcome(roll_result, dc),
    )


# Choices and the execution DC ------------------------------------------------------


def is_meta(key: str) -> bool:
    """Whether a choice key names a meta choice (`god:...`, `think:...`)."""
    return key.startswith(("god:", "think:"))


def is_parallel(key: str) -> bool:
    """Whether a choice key names the parallel option: `parallel` or `parallel_...`."""
    return key == "parallel" or key.startswith("parallel_")


def situational_keys(keys: Iterable[str]) -> list[str]:
    """The keys of situational choices: neither meta choices nor the parallel option."""
    return [key for key in keys if not is_meta(key) and not is_parallel(key)]


def parallel_dc_modifier(tasks: int, complexity: Complexity = "simple") -> int:
    """What choosing the parallel option adds to the execution DC: +2, +3 or +4.

    +2 for two simple, compatible tasks; +3 for three tasks or moderate
    complexity; +4 for four or more tasks or complex ones. Raises ValueError
    for fewer than two tasks: there is nothing to run in parallel.
    """
    if tasks < 2:
        raise ValueError(f"a parallel option runs 2 or more tasks, not {tasks}")
    by_tasks = min(tasks, 4)
    by_complexity = 2 + COMPLEXITY_DC[complexity]
    return max(by_tasks, by_complexity)


def coordination_dc(base_dc: int, tasks: int, complexity: Complexity = "simple") -> int:
    """The parallel option's coordination DC.

    The base DC, plus 2 for each task beyond the first, plus 0, 1 or 2 for
    simple, moderate or complex tasks. Raises ValueError for fewer than two
    tasks.
    """
    if tasks < 2:
        raise ValueError(f"a parallel option runs 2 or more tasks, not {tasks}")
    return base_dc + COORDINATION_PER_TASK * (tasks - 1) + COMPLEXITY_DC[complexity]


@dataclass(frozen=True)
class Modifier:
    """One planning modifier of an execution DC."""

    reason: str
    change: int


RECOMMENDED = Modifier("recommended approach", -2)
HIGH_RISK = Modifier("high risk", +2)
GOOD_PLAN = Modifier("Brilliant or Masterful plan", -1)
CONFUSED_PLAN = Modifier("Confused plan", +2)
LOW_CONFIDENCE = Modifier("low confidence", +1)
DC_MODIFIERS = (RECOMMENDED, HIGH_RISK, GOOD_PLAN, CONFUSED_PLAN, LOW_CONFIDENCE)
"The modifiers a plan brings to an execution DC, besides the parallel option's own."


@dataclass(frozen=True)
class DcAdjustment:
    """An execution DC and how the plan moved it."""

    base_dc: int
    modifiers: tuple[Modifier, ...]
    "Each modifier that applies, in the order of DC_MODIFIERS, the parallel option's last."
    adjustment: int
    "Their sum, capped at plus or minus MAX_DC_ADJUSTMENT."
    dc: int
    "base_dc plus the adjustment, kept within MIN_DC..MAX_DC."


def execution_dc(
    base_dc: int,
    *,
    recommended: bool = False,
    risk_level: RiskLevel | None = None,
    tier: QualityTier | None = None,
    confidence: Confidence | None = None,
    parallel_modifier: int = 0,
) -> DcAdjustment:
    """The DC of executing a chosen option, from the situation's `base_dc`.

    Recommended approach -2; high risk +2; a Brilliant or Masterful plan -1,
    a Confused one +2; low confidence +1; the parallel option's own modifier
    (see `parallel_dc_modifier`). The sum is capped at plus or minus 4 and
    the result kept within 5..30. Raises ValueError for a base DC outside
    1..40, the contract's bounds.
    """
    if not 1 <= base_dc <= 40:
        raise ValueError(f"a DC is 1 to 40, not {base_dc}")
    applies = {
        RECOMMENDED: recommended,
        HIGH_RISK: risk_level == "high",
        GOOD_PLAN: tier in ("Brilliant", "Masterful"),
        CONFUSED_PLAN: tier == "Confused",
        LOW_CONFIDENCE: confidence == "low",
    }
    modifiers = [modifier for modifier in DC_MODIFIERS if applies[modifier]]
    if parallel_modifier:
        modifiers.append(Modifier("parallel option", parallel_modifier))
    total = sum(modifier.change for modifier in modifiers)
    adjustment = max(-MAX_DC_ADJUSTMENT, min(MAX_DC_ADJUSTMENT, total))
    dc = max(MIN_DC, min(MAX_DC, base_dc + adjustment))
    return DcAdjustment(base_dc, tuple(modifiers), adjustment, dc)


def choice_dc(block: PlanningBlock, key: str, base_dc: int) -> DcAdjustment:
    """`execution_dc` for the choice `key` of a planning block, every modifier read from the block.

    Raises KeyError when the block has no such choice, ValueError for a base
    DC out of bounds or a parallel option with fewer than two situational
    choices to run.
    """
    choice = block.choices[key]
    parallel = 0
    if is_parallel(key):
        complexity: Complexity = "simple"
        if isinstance(choice.analysis, ParallelAnalysis):
            complexity = choice.analysis.complexity
        parallel = parallel_dc_modifier(len(situational_keys(block.choices)), complexity)
    return _with_plan_modifiers(block, key, base_dc, parallel_modifier=parallel)


def _with_plan_modifiers(
    block: PlanningBlock, key: str, base_dc: int, *, parallel_modifier: int = 0
) -> DcAdjustment:
    """`execution_dc` of `base_dc` with the plan's modifiers for choice `key`, read from `block`."""
    choice = block.choices[key]
    analysis, quality = block.analysis, block.plan_quality
    return execution_dc(
        base_dc,
        recommended=isinstance(analysis, Analysis) and analysis.recommended_approach == key,
        risk_level=choice.risk_level if isinstance(choice.risk_level, str) else None,
        tier=quality.quality_tier if isinstance(quality, PlanQuality) else None,
        confidence=choice.confidence if isinstance(choice.confidence, str) else None,
        parallel_modifier=parallel_modifier,
    )


def reward_multiplier(
    risk_level: RiskLevel, tier: QualityTier | None = None, *, parallel: bool = False
) -> Fraction:
    """The XP multiplier of a success, exact: risk x plan tier x parallel option.

    Risk: safe and low x1, medium x1.25, high x1.5. Tier: Masterful x1.25,
    Brilliant x1.1, others x1. The parallel option x1.2. They multiply: a
    high-risk option under a Masterful plan gives 3/2 x 5/4 = 15/8 (1.875).
    """
    multiplier = RISK_REWARD[risk_level]
    if tier is not None:
        multiplier *= TIER_REWARD.get(tier, Fraction(1))
    return multiplier * PARALLEL_REWARD if parallel else multiplier


@dataclass(frozen=True)
class Loot:
    """What a success yields beyond experience, by its risk and its plan's tier."""

    gold_multiplier: Fraction
    "The gold found, as a multiple of the standard: 1, 11/10 (medium risk) or 5/4 (high)."
    bonus_item: bool
    "High risk: a bonus item besides."
    item_chance: Literal["rare", "uncommon"] | None
    "A Masterful plan gives a chance at a rare item, a Brilliant one at an uncommon item."


def loot(risk_level: RiskLevel, tier: QualityTier | None = None) -> Loot:
    """The loot of a success at `risk_level`, under a plan of `tier` (None: no plan).

    Safe and low risk: standard loot; medium: +10% gold; high: +25% gold and
    a bonus item. A Masterful plan adds a rare item chance, a Brilliant one
    an uncommon item chance. How much gold is standard, and which item, the
    game decides: the protocol sets only these differences.
    """
    if risk_level not in RISK_REWARD:
        raise ValueError(f"not a risk level: {risk_level!r}; one of {', '.join(RISK_REWARD)}")
    return Loot(
        gold_multiplier=1 + GOLD_BONUS.get(risk_level, Fraction(0)),
        bonus_item=risk_level in BONUS_ITEM_RISKS,
        item_chance=ITEM_CHANCE.get(tier) if tier is not None else None,
    )


def parallel_time_factor(tasks: int, complexity: Complexity = "simple") -> Fraction:
    """How long a successful parallel option takes, as a multiple of its longest task's time.

    About 1.25 to 1.5 for 2 tasks, 1.5 for 3, 1.75 to 2 for 4 and 2 to 2.5 for
    5 or more: faster than doing them one after another, slower than the
    longest alone. Simple tasks take the least of the range, complex ones
    the most, moderate ones the middle. Raises ValueError for fewer than two
    tasks.
    """
    if tasks < 2:
        raise ValueError(f"a parallel option runs 2 or more tasks, not {tasks}")
    if complexity not in COMPLEXITY_DC:
        raise ValueError(f"not a complexity: {complexity!r}; one of {', '.join(COMPLEXITY_DC)}")
    _, least, most = next(row for row in reversed(PARALLEL_TIME) if row[0] <= tasks)
    return least + (most - least) * COMPLEXITY_DC[complexity] / 2


def parallel_time(durations: Iterable[int], complexity: Complexity = "simple") -> int:
    """The game time a successful parallel option takes, its tasks taking `durations`.

    The longest duration times `parallel_time_factor`, rounded to the
    microsecond (half up). `durations` are whole microseconds of game time,
    one per task, 2 or more, none negative. Raises ValueError otherwise.
    """
    durations = list(durations)
    if any(duration < 0 for duration in durations):
        raise ValueError("a task's duration is 0 or more microseconds")
    factor = parallel_time_factor(len(durations), complexity)
    return int(max(durations) * factor + Fraction(1, 2))


def parallel_option_time(block: PlanningBlock, durations: Mapping[str, int]) -> int:
    """The game time `block`'s parallel option takes, by its analysis' complexity.

    `durations` gives each situational choice's own time, by key, in
    microseconds. Raises ValueError when the block offers no parallel
    option, or when a situational choice has no duration.
    """
    key = next((key for key in block.choices if is_parallel(key)), None)
    if key is None:
        raise ValueError("the block offers no parallel option")
    analysis = block.choices[key].analysis
    complexity = analysis.complexity if isinstance(analysis, ParallelAnalysis) else "simple"
    tasks = situational_keys(block.choices)
    missing = [task for task in tasks if task not in durations]
    if missing:
        raise ValueError(f"no duration for {', '.join(missing)}")
    return parallel_time((durations[task] for task in tasks), complexity)


# The parallel option's outcome -------------------------------------------------------

ParallelResult = Literal["success", "partial", "breakdown"]
"A coordination check's outcome: every task done, some, or a breakdown with none."
TaskStatus = Literal["succeeded", "delayed", "failed"]
"""What became of one task of the parallel option.

Delayed: not done, but not lost either; the game may take it up again on its own.
Failed: lost for now, as any failed task is.
"""


@dataclass(frozen=True)
class ParallelOutcome:
    """What a parallel option's coordination check means for each of its tasks."""

    check: CheckOutcome
    "The coordination roll against its DC: margin, success and tier."
    result: ParallelResult
    tasks: tuple[tuple[str, TaskStatus], ...]
    "Each task and what became of it, in the priority order given."
    time_factor: Fraction
    """The attempt's game time as a multiple of its longest task's time.

    The coordination takes this long whatever its outcome: a breakdown saves no time.
    """
    xp_multiplier: Fraction
    "What the XP of the tasks that succeeded is multiplied by: 6/5 on success, else 1."

    def having(self, status: TaskStatus) -> tuple[str, ...]:
        """The tasks that ended as `status`, in priority order."""
        return tuple(task for task, became in self.tasks if became == status)

    def describe(self) -> str:
        """One line, such as `partial success: scout_ridge succeeded; bribe_guard delayed ...`."""
        if self.result == "success":
            head = "full success: every task succeeded"
        elif self.result == "breakdown":
            head = "coordination breakdown: the tasks interfere and none succeeds"
        else:
            parts = [
                f"{', '.join(tasks)} {status}"
                for status in get_args(TaskStatus)
                if (tasks := self.having(status))
            ]
            head = "partial success: " + "; ".join(parts)
        time = f"time x{_decimal(self.time_factor)} of the longest task"
        if self.result == "breakdown":  # no task succeeded: no XP to multiply
            return f"{head} ({time})"
        return f"{head} ({time}, XP x{_decimal(self.xp_multiplier)})"


def _decimal(value: Fraction) -> str:
    """An exact fraction of the protocol's tables as a decimal: 5/4 is `1.25`, 11/8 `1.375`."""
    return f"{float(value):g}"


def parallel_outcome(
    roll_result: int, dc: int, tasks: Sequence[str], complexity: Complexity = "simple"
) -> ParallelOutcome:
    """Resolve the parallel option's coordination check: full success, partial, breakdown.

    `tasks` are the situational choices the option runs (2 or more, distinct),
    in priority order: the first are kept longest. Reaching the DC is a full
    success: every task succeeds, in `parallel_time_factor` times the longest
    task's time, for x1.2 XP. Falling short costs one task, the last in
    priority, for every COORDINATION_PER_TASK points (or part) of the
    shortfall: the points each further task adds to the coordination DC.
    Those tasks are delayed while the check is Incomplete (short by 1 to 4)
    and failed once it is Muddled (5 to 9). A breakdown, where every task
    fails, is a shortfall that costs every task, or a Confused check (short
    by 10 or more) whatever the number of tasks. The attempt takes its time
    whatever the outcome; only a success earns the XP multiplier.

    Raises ValueError for fewer than two tasks, a task named twice or an
    unknown complexity.
    """
    if len(set(tasks)) != len(tasks):
        raise ValueError("a parallel option runs each task once")
    time_factor = parallel_time_factor(len(tasks), complexity)  # raises for < 2 tasks
    check = check_outcome(roll_result, dc)
    if check.success:
        statuses: list[TaskStatus] = ["succeeded"] * len(tasks)
        result: ParallelResult = "success"
    else:
        lost = -(check.margin // COORDINATION_PER_TASK)  # a part of the points costs a task
        if lost >= len(tasks) or check.quality_tier == "Confused":
            statuses, result = ["failed"] * len(tasks), "breakdown"
        else:
            missed: TaskStatus = "delayed" if check.quality_tier == "Incomplete" else "failed"
            kept: list[TaskStatus] = ["succeeded"] * (len(tasks) - lost)
            statuses = kept + [missed] * lost
            result = "partial"
    return ParallelOutcome(
        check,
        result,
        tuple(zip(tasks, statuses, strict=True)),
        time_factor,
        PARALLEL_REWARD if result == "success" else Fraction(1),
    )


def parallel_tasks(block: PlanningBlock) -> list[str]:
    """The tasks `block`'s parallel option runs, in priority order.

    The recommended approach first, when it is a situational choice (the
    plan's own judgement of what matters most), then the block's order.
    """
    tasks = situational_keys(block.choices)
    analysis = block.analysis
    first = analysis.recommended_approach if isinstance(analysis, Analysis) else None
    return sorted(tasks, key=lambda task: task != first)  # stable: the rest keep their order


def coordination_check_dc(
    block: PlanningBlock, key: str, base_dc: int | None = None
) -> DcAdjustment:
    """The DC of the coordination check of `block`'s parallel option `key`.

    The coordination DC (`coordination_dc` of the primary task's base DC, the
    tasks and their complexity), moved by the plan's modifiers as any chosen
    option is (recommended -2, high risk +2, tier, low confidence; at most 4
    either way, within 5..30). The parallel option's own +2 to +4 is not
    added again: the coordination DC already counts the tasks. The base DC
    is `base_dc` when given, else the option's `analysis.base_dc`; an option
    with neither is taken at the `coordination_dc` it states.

    Raises KeyError for a key the block does not have; ValueError for a key
    that is not the parallel option, fewer than two situational choices, a
    DC outside 1..40, or an option stating neither base nor coordination DC
    when `base_dc` is None.
    """
    choice = block.choices[key]
    if not is_parallel(key):
        raise ValueError(f"{key} is not the parallel option")
    analysis = choice.analysis if isinstance(choice.analysis, ParallelAnalysis) else None
    complexity: Complexity = analysis.complexity if analysis is not None else "simple"
    tasks = len(situational_keys(block.choices))
    if base_dc is None and analysis is not None and isinstance(analysis.base_dc, int):
        base_dc = analysis.base_dc
    low, high = DC_BOUNDS
    if base_dc is not None:
        if not low <= base_dc <= high:
            raise ValueError(f"a DC is {low} to {high}, not {base_dc}")
        stated = coordination_dc(base_dc, tasks, complexity)
    elif analysis is not None and isinstance(analysis.coordination_dc, int):
        parallel_dc_modifier(tasks)  # raises, as coordination_dc does, for fewer than 2 tasks
        stated = analysis.coordination_dc
    else:
        raise ValueError(f"{key} states no base_dc or coordination_dc: the base DC is needed")
    # Past the contract's highest DC the result is MAX_DC all the same (the
    # modifiers move it by 4 at most), so the coordination DC is taken at that bound.
    return _with_plan_modifiers(block, key, min(stated, high))


@dataclass(frozen=True)
class ParallelRoll:
    """A parallel option resolved: the DC, the coordination roll, and what came of each task."""

    key: str
    dc: DcAdjustment
    check: RolledCheck
    outcome: ParallelOutcome

    def describe(self) -> str:
        """One line: the option, the roll against its DC, and the outcome."""
        result = "success" if self.check.outcome.success else "failure"
        return (
            f"{self.key}: coordination ({self.check.stat_used}) d20 {self.check.d20} "
            f"{self.check.modifier} = {self.check.roll_result} vs DC {self.dc.dc}, "
            f"{result} by {abs(self.check.outcome.margin)}: {self.outcome.describe()}"
        )


def roll_parallel(
    block: PlanningBlock,
    key: str,
    *,
    stat_used: str,
    stat_value: int,
    rng: random.Random,
    base_dc: int | None = None,
) -> ParallelRoll:
    """Roll the coordination check of `block`'s parallel option `key` and resolve it.

    The DC is `coordination_check_dc(block, key, base_dc)`; the roll is
    `roll_check(stat_used, stat_value, dc, rng)`; the tasks are
    `parallel_tasks(block)`, resolved by `parallel_outcome` at the option's
    complexity. Raises KeyError and ValueError as those functions do.
    """
    dc = coordination_check_dc(block, key, base_dc)
    analysis = block.choices[key].analysis
    complexity = analysis.complexity if isinstance(analysis, ParallelAnalysis) else "simple"
    check = roll_check(stat_used, stat_value, dc.dc, rng)
    outcome = parallel_outcome(check.roll_result, dc.dc, parallel_tasks(block), complexity)
    return ParallelRoll(key, dc, check, outcome)


# Frozen plans ------------------------------------------------------------------------


def freeze_hours(dc: int) -> int:
    """How many game hours a failed planning check at `dc` freezes its topic.

    DC 8 or less: 1 hour; 9-12: 2; 13-16: 4; 17-20: 8; 21 and above: 24.
    """
    return next((hours for highest, hours in FREEZE_BANDS if dc <= highest), FREEZE_BANDS[-1][1])


def freeze(
    frozen: Mapping[str, FrozenPlan], topic: str, *, dc: int, now: int, description: str
) -> FrozenPlans:
    """`frozen` with `topic` frozen from `now` for the hours its failed check's `dc` sets.

    Returns a new mapping; `frozen` is not changed. Raises ValueError for a
    topic that is not a topic key (see `topic_key`), a DC outside 1..40, or a
    freeze that would end past the contract's last moment of game time.
    """
    if len(topic) > 64 or not _TOPIC.fullmatch(topic):
        raise ValueError(f"not a topic key (snake_case, at most 64 characters): {topic!r}")
    if not 1 <= dc <= 40:
        raise ValueError(f"a DC is 1 to 40, not {dc}")
    hours = freeze_hours(dc)
    if not 0 <= now <= _LAST_GAME_TIME - hours * HOUR:
        raise ValueError(f"a {hours}-hour freeze from {now} would end past 2**53 - 1 microseconds")
    entry = FrozenPlan(
        failed_at=now,
        freeze_until=now + hours * HOUR,
        original_dc=dc,
        freeze_hours=hours,  # type: ignore[arg-type]  # freeze_hours() returns only the contract's values
        description=description,
    )
    return {**frozen, topic: entry}


@dataclass(frozen=True)
class Reattempt:
    """Whether a topic may be planned now, and the frozen plans afterwards."""

    allowed: bool
    remaining: int
    "Microseconds of freeze left; 0 when allowed."
    frozen_plans: FrozenPlans
    "The frozen plans after the check: a lifted or expired freeze is gone."
    lifted_by: EarlyBreak | None = None
    "What broke the freeze early, if something did."

    def describe(self) -> str:
        """One line for the player: allowed, or frozen with the time left."""
        if self.allowed:
            return "planning allowed" + (f" ({self.lifted_by})" if self.lifted_by else "")
        minutes = -(-self.remaining // 60_000_000)
        hours, minutes = divmod(minutes, 60)
        left = f"{hours} h {minutes:02d} min" if hours else f"{minutes} min"
        return f"this topic is frozen for another {left} of game time"


def reattempt(
    frozen: Mapping[str, FrozenPlan],
    topic: str,
    *,
    now: int,
    breaks: Iterable[EarlyBreak] = (),
) -> Reattempt:
    """Whether `topic` may be planned again at `now`; if not, no check is rolled.

    A topic is frozen until its `freeze_until`. Any early break lifts the
    freeze at once: significant new information, a materially different
    approach (which is also why a new topic key is never frozen), relevant
    assistance, or the game master's override.
    """
    breaks = tuple(breaks)
    for lifted in breaks:
        if lifted not in get_args(EarlyBreak):
            raise ValueError(f"not an early break: {lifted!r}; one of {get_args(EarlyBreak)}")
    remaining = dict(frozen)
    entry = remaining.get(topic)
    if entry is None:
        return Reattempt(True, 0, remaining)
    if entry.freeze_until <= now:
        del remaining[topic]
        return Reattempt(True, 0, remaining)
    if breaks:
        del remaining[topic]
        return Reattempt(True, 0, remaining, breaks[0])
    return Reattempt(False, entry.freeze_until - now, remaining)


def thaw(frozen: Mapping[str, FrozenPlan], now: int) -> FrozenPlans:
    """`frozen` without the freezes that have ended by `now`."""
    return {topic: entry for topic, entry in frozen.items() if entry.freeze_until > now}


_TOPIC = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)*\Z")


def topic_key(text: str) -> str:
    """A frozen-plans topic key for a planning topic given in words.

    `"The warehouse ambush"` gives `the_warehouse_ambush`; a text that starts
    with a digit gets `topic_` in front (`topic_2024_raid`). A text without
    Latin letters or digits (`"倉庫の待ち伏せ"`) gets `topic_` and a digest of
    it, so every topic has a stable key.
    """
    key = snake_case(text)
    if key and key[0].isalpha():
        return key
    if key and len(key) <= 64 - len("topic_"):
        return f"topic_{key}"
    return "topic_" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


# Time --------------------------------------------------------------------------------


@dataclass(frozen=True)
class GameClock:
    """Game time and the turn counter."""

    time: int = 0
    "Microseconds since the start of the campaign."
    turn: int = 0


def mode_of(player_input: str, mode: Mode | None = None) -> tuple[Mode, str]:
    """The mode of a player's input, and the input without its `THINK:` prefix.

    A `THINK:` prefix (in any case, after any leading space) or `mode="think"`
    means Think mode; anything else is Story mode. Raises ValueError for a
    mode that is neither.
    """
    if mode not in (None, "think", "story"):
        raise ValueError(f"not a mode: {mode!r}; one of think, story")
    text = player_input.lstrip()
    head = text[: len(THINK_PREFIX)]
    if head.isascii() and head.upper() == THINK_PREFIX:
        return "think", text[len(THINK_PREFIX) :].strip()
    return mode or "story", player_input.strip()


def advance(clock: GameClock, mode: Mode, *, elapsed: int | None = None) -> GameClock:
    """The clock after a turn in `mode`.

    Think mode advances game time by exactly one microsecond and leaves the
    turn counter alone, so planning never costs the world time and frozen
    plans stay frozen. Story mode advances time by `elapsed` microseconds (1
    or more, required) and the turn counter by one. Raises ValueError for a
    missing or non-positive `elapsed` in Story mode, an `elapsed` in Think
    mode, or a time past the contract's last representable moment.
    """
    if mode == "think":
        if elapsed is not None:
            raise ValueError("Think mode freezes time: it takes no elapsed time")
        step, turn = 1, clock.turn
    elif mode == "story":
        if elapsed is None or elapsed < 1:
            raise ValueError(f"Story mode advances time: elapsed must be 1 or more, not {elapsed}")
        step, turn = elapsed, clock.turn + 1
    else:
        raise ValueError(f"not a mode: {mode!r}; one of think, story")
    if clock.time + step > _LAST_GAME_TIME:
        raise ValueError("game time would pass 2**53 - 1 microseconds, the contract's bound")
    return GameClock(clock.time + step, turn)
