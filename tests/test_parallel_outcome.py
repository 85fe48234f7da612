"""The parallel option's outcome: a coordination check resolved into success, partial or breakdown.

Property tests hold `parallel_outcome` to the protocol's tiers for every roll;
example tests pin the documented rule (one task lost per 2 points short,
delayed while Incomplete, failed once Muddled, a breakdown when Confused or
when nothing is left) and its reading of a block; `choose` is run in process.
"""

from __future__ import annotations

import json
import random
from fractions import Fraction
from typing import Any

import pytest
from commands import cli
from hypothesis import given
from hypothesis import strategies as st

from plancontracts import decode
from plancontracts.generated.planning_blocks import Complexity, PlanningBlock
from plancontracts.runtime.planning_blocks import (
    ParallelOutcome,
    TaskStatus,
    coordination_check_dc,
    parallel_outcome,
    parallel_tasks,
    parallel_time_factor,
    roll_parallel,
)
from plancontracts.runtime.planning_blocks.mechanics import (
    COMPLEXITY_DC,
    COORDINATION_PER_TASK,
    MAX_DC,
    MIN_DC,
    PARALLEL_REWARD,
    check_outcome,
)

TASKS = st.lists(
    st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True), min_size=2, max_size=8, unique=True
)
ROLLS = st.integers(min_value=-10, max_value=60)
DCS = st.integers(min_value=1, max_value=40)
COMPLEXITIES = st.sampled_from(sorted(COMPLEXITY_DC))


def _succeeded(outcome: ParallelOutcome) -> int:
    return len(outcome.having("succeeded"))


@given(roll=ROLLS, dc=DCS, tasks=TASKS, complexity=COMPLEXITIES)
def test_every_roll_maps_to_exactly_one_outcome_that_holds_every_task_once(
    roll: int, dc: int, tasks: list[str], complexity: Complexity
) -> None:
    outcome = parallel_outcome(roll, dc, tasks, complexity)
    assert outcome.result in ("success", "partial", "breakdown")
    assert [task for task, _ in outcome.tasks] == tasks
    statuses = {status for _, status in outcome.tasks}
    if outcome.result == "success":
        assert statuses == {"succeeded"}
        assert outcome.xp_multiplier == PARALLEL_REWARD == Fraction(6, 5)
    elif outcome.result == "breakdown":
        assert statuses == {"failed"}
        assert outcome.xp_multiplier == 1
    else:  # some succeeded, the rest all delayed or all failed
        assert "succeeded" in statuses
        assert len(statuses) == 2
        assert outcome.xp_multiplier == 1
    # Success is reaching the DC, as for every check.
    assert (outcome.result == "success") == (roll >= dc)
    assert outcome.check == check_outcome(roll, dc)
    # The attempt takes the protocol's time, whatever came of it.
    assert outcome.time_factor == parallel_time_factor(len(tasks), complexity)
    assert "\n" not in outcome.describe()


@given(roll=ROLLS, better=st.integers(min_value=1, max_value=30), dc=DCS, tasks=TASKS)
def test_a_better_roll_never_keeps_fewer_tasks_nor_loses_a_kept_one(
    roll: int, better: int, dc: int, tasks: list[str]
) -> None:
    worse_outcome = parallel_outcome(roll, dc, tasks)
    better_outcome = parallel_outcome(roll + better, dc, tasks)
    assert set(worse_outcome.having("succeeded")) <= set(better_outcome.having("succeeded"))
    rank = {"breakdown": 0, "partial": 1, "success": 2}
    assert rank[worse_outcome.result] <= rank[better_outcome.result]
    # Delayed (Incomplete) is nearer success than failed (Muddled): never the other way.
    if worse_outcome.result == better_outcome.result == "partial":
        assert not (worse_outcome.having("delayed") and better_outcome.having("failed"))


@given(short=st.integers(min_value=1, max_value=30), tasks=TASKS)
def test_each_2_points_short_cost_the_last_task_in_priority(short: int, tasks: list[str]) -> None:
    outcome = parallel_outcome(20 - short, 20, tasks)
    lost = -(-short // COORDINATION_PER_TASK)
    if short >= 10 or lost >= len(tasks):  # Confused, or nothing left to keep
        assert outcome.result == "breakdown"
    else:
        assert outcome.result == "partial"
        assert outcome.having("succeeded") == tuple(tasks[: len(tasks) - lost])
        missed: TaskStatus = "delayed" if short <= 4 else "failed"  # Incomplete, then Muddled
        assert outcome.having(missed) == tuple(tasks[len(tasks) - lost :])


@pytest.mark.parametrize(
    ("roll", "result", "succeeded", "missed"),
    [
        (14, "success", ("a", "b", "c", "d", "e", "f"), ("delayed", ())),
        (13, "partial", ("a", "b", "c", "d", "e"), ("delayed", ("f",))),
        (12, "partial", ("a", "b", "c", "d", "e"), ("delayed", ("f",))),
        (11, "partial", ("a", "b", "c", "d"), ("delayed", ("e", "f"))),
        (10, "partial", ("a", "b", "c", "d"), ("delayed", ("e", "f"))),
        (9, "partial", ("a", "b", "c"), ("failed", ("d", "e", "f"))),
        (5, "partial", ("a",), ("failed", ("b", "c", "d", "e", "f"))),
        (4, "breakdown", (), ("failed", ("a", "b", "c", "d", "e", "f"))),
    ],
)
def test_the_tiers_of_six_tasks_against_dc_14(
    roll: int,
    result: str,
    succeeded: tuple[str, ...],
    missed: tuple[TaskStatus, tuple[str, ...]],
) -> None:
    outcome = parallel_outcome(roll, 14, list("abcdef"))
    assert outcome.result == result
    assert outcome.having("succeeded") == succeeded
    status, tasks = missed
    assert outcome.having(status) == tasks


def test_two_tasks_break_down_once_3_points_short() -> None:
    assert parallel_outcome(12, 14, ["a", "b"]).result == "partial"
    assert parallel_outcome(11, 14, ["a", "b"]).result == "breakdown"


def test_the_seeds_time_table_on_success() -> None:
    assert parallel_outcome(20, 14, ["a", "b"]).time_factor == Fraction(5, 4)
    assert parallel_outcome(20, 14, ["a", "b"], "complex").time_factor == Fraction(3, 2)
    assert parallel_outcome(20, 14, ["a", "b", "c"]).time_factor == Fraction(3, 2)
    assert parallel_outcome(20, 14, list("abcd"), "complex").time_factor == 2
    assert parallel_outcome(20, 14, list("abcdefg"), "complex").time_factor == Fraction(5, 2)


def test_an_outcome_describes_itself_in_one_line() -> None:
    assert parallel_outcome(13, 14, ["scout", "bribe", "climb"]).describe() == (
        "partial success: scout, bribe succeeded; climb delayed "
        "(time x1.5 of the longest task, XP x1)"
    )
    assert parallel_outcome(14, 14, ["scout", "bribe"]).describe() == (
        "full success: every task succeeded (time x1.25 of the longest task, XP x1.2)"
    )
    assert parallel_outcome(1, 14, ["scout", "bribe"]).describe() == (
        "coordination breakdown: the tasks interfere and none succeeds "
        "(time x1.25 of the longest task)"
    )


@pytest.mark.parametrize(
    ("tasks", "complexity", "why"),
    [
        (["a"], "simple", "2 or more tasks"),
        (["a", "a"], "simple", "each task once"),
        (["a", "b"], "baroque", "not a complexity"),
    ],
)
def test_parallel_outcome_refuses_what_is_not_a_parallel_option(
    tasks: list[str], complexity: Any, why: str
) -> None:
    with pytest.raises(ValueError, match=why):
        parallel_outcome(10, 10, tasks, complexity)


def _block(
    parallel: dict[str, Any] | None = None, recommended: str = "climb_wall"
) -> PlanningBlock:
    option = {"text": "Both at once", "description": "A friend bribes while you climb."}
    option.update(parallel or {"analysis": {"base_dc": 12, "coordination_dc": 14}})
    document = {
        "choices": {
            "bribe_guard": {
                "text": "Bribe",
                "description": "Slip him silver.",
                "risk_level": "low",
            },
            "climb_wall": {
                "text": "Climb",
                "description": "Over by the oak.",
                "risk_level": "high",
            },
            "parallel_gate": option,
        },
        "analysis": {"recommended_approach": recommended},
    }
    block: PlanningBlock = decode("planning-block", json.dumps(document))
    return block


def test_the_recommended_approach_is_kept_first() -> None:
    assert parallel_tasks(_block()) == ["climb_wall", "bribe_guard"]
    assert parallel_tasks(_block(recommended="parallel_gate")) == ["bribe_guard", "climb_wall"]


def test_the_coordination_dc_comes_from_the_base_dc_and_the_plans_modifiers() -> None:
    assert coordination_check_dc(_block(), "parallel_gate").dc == 14  # 12 + 2 for a second task
    assert coordination_check_dc(_block(), "parallel_gate", base_dc=15).dc == 17
    risky = _block({"risk_level": "high", "confidence": "low", "analysis": {"coordination_dc": 14}})
    adjusted = coordination_check_dc(risky, "parallel_gate")
    assert (adjusted.base_dc, adjusted.dc) == (14, 17)  # high risk +2, low confidence +1
    # Recommending the parallel option itself lowers its DC, as for any choice.
    assert coordination_check_dc(_block(recommended="parallel_gate"), "parallel_gate").dc == 12


def test_a_parallel_option_without_a_dc_needs_the_base_dc() -> None:
    bare = _block({"analysis": {"complexity": "moderate"}})
    with pytest.raises(ValueError, match="base DC is needed"):
        coordination_check_dc(bare, "parallel_gate")
    assert coordination_check_dc(bare, "parallel_gate", base_dc=10).dc == 10 + 2 + 1
    with pytest.raises(ValueError, match="not the parallel option"):
        coordination_check_dc(bare, "climb_wall", base_dc=10)


@given(seed=st.integers(min_value=0, max_value=2**32), score=st.integers(1, 30))
def test_roll_parallel_resolves_the_roll_it_made(seed: int, score: int) -> None:
    rolled = roll_parallel(
        _block(), "parallel_gate", stat_used="Wisdom", stat_value=score, rng=random.Random(seed)
    )
    assert rolled.check.dc == rolled.dc.dc == 14
    assert rolled.outcome == parallel_outcome(
        rolled.check.roll_result, 14, ["climb_wall", "bribe_guard"]
    )
    assert rolled.describe().startswith("parallel_gate: coordination (Wisdom) d20 ")


# The command -------------------------------------------------------------------------


def _write(tmp_path: Any, block: dict[str, Any] | None = None) -> str:
    document = block or json.loads(json.dumps(_document()))
    path = tmp_path / "block.json"
    path.write_text(json.dumps(document))
    return str(path)


def _document() -> dict[str, Any]:
    return {
        "choices": {
            "bribe_guard": {
                "text": "Bribe",
                "description": "Slip him silver.",
                "risk_level": "low",
            },
            "climb_wall": {
                "text": "Climb",
                "description": "Over by the oak.",
                "risk_level": "high",
            },
            "parallel_gate": {
                "text": "Both at once",
                "description": "A friend bribes while you climb.",
                "analysis": {"base_dc": 12, "coordination_dc": 14},
            },
        },
        "analysis": {"recommended_approach": "climb_wall"},
    }


def test_choose_rolls_the_parallel_option_and_prints_its_outcome(tmp_path: Any) -> None:
    path = _write(tmp_path)
    seen = set()
    for seed in range(40):
        done = cli("choose", path, "parallel_gate", "--seed", str(seed), "--json")
        assert done.returncode == 0, done.stderr
        record = json.loads(done.stdout)
        expected = parallel_outcome(record["roll_result"], 14, ["climb_wall", "bribe_guard"])
        assert record["result"] == expected.result
        assert record["tasks"] == dict(expected.tasks)
        assert record["dc"] == 14
        assert record["time_factor"] == 1.25
        seen.add(record["result"])
        text = cli("choose", path, "parallel_gate", "--seed", str(seed))
        assert text.stdout == "parallel_gate: " + text.stdout.split(": ", 1)[1]
        assert expected.describe() in text.stdout
        assert text.stdout.count("\n") == 1
    assert seen == {"success", "partial", "breakdown"}  # forty seeds reach every outcome


@pytest.mark.parametrize(
    ("given", "analysis", "base_dc", "coordination_dc"),
    [
        (["--base-dc", "12"], None, 12, 14),  # 12 + 2 for the second task
        (["--base-dc", "29"], None, 29, 31),
        (["--base-dc", "40"], None, 40, 40),  # 42, held at the highest DC
        ([], None, 12, 14),  # the option's own base_dc
        ([], {"coordination_dc": 16}, None, 16),  # only the coordination DC stated
    ],
)
def test_choose_json_says_the_base_dc_it_was_given_and_the_coordination_dc_apart(
    tmp_path: Any,
    given: list[str],
    analysis: dict[str, Any] | None,
    base_dc: int | None,
    coordination_dc: int,
) -> None:
    # `base_dc` was the coordination DC: 14 for a --base-dc of 12.
    document = _document()
    if analysis is not None:
        document["choices"]["parallel_gate"]["analysis"] = analysis
    path = _write(tmp_path, document)
    done = cli("choose", path, "parallel_gate", *given, "--seed", "3", "--json")
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert (record["base_dc"], record["coordination_dc"]) == (base_dc, coordination_dc)
    moved = sum(modifier["change"] for modifier in record["modifiers"])
    assert record["dc"] == max(MIN_DC, min(MAX_DC, coordination_dc + moved))


def test_choose_rolls_with_the_better_planning_ability(tmp_path: Any) -> None:
    path = _write(tmp_path)
    done = cli("choose", path, "parallel_gate", "--wisdom", "18", "--seed", "1", "--json")
    record = json.loads(done.stdout)
    assert (record["stat_used"], record["modifier"]) == ("Wisdom", "+4")
    assert record["roll_result"] == record["d20"] + 4


def test_the_same_seed_resolves_the_same_way(tmp_path: Any) -> None:
    path = _write(tmp_path)
    runs = {cli("choose", path, "parallel_gate", "--seed", "9").stdout for _ in range(3)}
    assert len(runs) == 1


def test_choose_of_another_choice_prints_its_execution_dc(tmp_path: Any) -> None:
    done = cli("choose", _write(tmp_path), "climb_wall", "--base-dc", "15")
    assert done.returncode == 0
    assert done.stdout == (
        "climb_wall: execution DC 15 (base 15, recommended approach -2, high risk +2)\n"
    )


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["climb_wall"], "climb_wall is not the parallel option: give --base-dc N"),
        (["nope"], "offers no choice 'nope': bribe_guard, climb_wall, parallel_gate"),
        (["parallel_gate", "--base-dc", "41"], "--base-dc: must be 1 to 40: 41"),
        (["parallel_gate", "--base-dc", "0"], "--base-dc: must be 1 to 40: 0"),
        (["parallel_gate", "--wisdom", "31"], "--wisdom: must be 1 to 30: 31"),
    ],
)
def test_choose_refuses_a_bad_argument_in_one_line(
    tmp_path: Any, arguments: list[str], said: str
) -> None:
    done = cli("choose", _write(tmp_path), *arguments)
    assert done.returncode == 2
    assert said in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_choose_of_a_parallel_option_stating_no_dc_asks_for_it(tmp_path: Any) -> None:
    document = _document()
    document["choices"]["parallel_gate"]["analysis"] = {}
    done = cli("choose", _write(tmp_path, document), "parallel_gate")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "plancontracts: error: parallel_gate: parallel_gate states no base_dc or "
        "coordination_dc: the base DC is needed"
    ]
    assert (
        cli("choose", _write(tmp_path, document), "parallel_gate", "--base-dc", "9").returncode == 0
    )


@pytest.mark.parametrize(
    "text",
    ["{", "[]", '{"choices": {"a": {"text": "A"}}}', "x" * 200],
)
def test_choose_of_something_that_is_not_a_block_is_one_line_exit_1(text: str) -> None:
    done = cli("choose", "-", "parallel_gate", stdin=text)
    assert done.returncode == 1
    assert len(done.stderr.strip().splitlines()) == 1
    assert "not a valid planning block" in done.stderr


def test_choose_refuses_a_block_larger_than_max_bytes() -> None:
    done = cli("choose", "-", "k", "--max-bytes", "10", stdin=json.dumps(_document()))
    assert done.returncode == 1
    assert done.stderr.strip() == "plancontracts: <stdin>: larger than 10 bytes (see --max-bytes)"
