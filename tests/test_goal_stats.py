"""`planning_stats` and `goals stats`: a planning system counted, as jenbina's get_planning_stats.

The upstream's own report, recorded after its lifecycle trace, is matched
field by field from the state it serialized; the counts beyond it are
checked on a simulation whose history is known: plans completed, replanned
and abandoned, goals achieved and given up.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import trio
from commands import cli

from plancontracts import GOAL_EVENT, GOAL_PLANNING_SYSTEM, convert, decode
from plancontracts.runtime.goal_plans import (
    MAX_REPLANS,
    GoalPlanner,
    Person,
    PlanningSystem,
    planning_stats,
)
from plancontracts.runtime.goal_plans.session import OVERRIDES_TO_REPLAN


def events(person: Person, *lines: dict[str, Any]) -> None:
    for line in lines:
        trio.run(person.run_event, convert(GOAL_EVENT, line))


def cycles(action: str, count: int) -> list[dict[str, Any]]:
    return [{"event": "cycle", "action": action, "satisfaction_delta": 1}] * count


def test_the_upstreams_report_is_matched_from_the_state_it_serialized(upstream: Path) -> None:
    folder = upstream / "jenbina"
    done = cli("goals", "stats", str(folder / "planning_system_to_dict.json"))
    assert done.returncode == 0, done.stderr
    ours = json.loads(done.stdout)
    theirs = json.loads((folder / "planning_stats.json").read_text())
    for name in ("total_plans", "active_plans", "completed_plans", "failed_plans", "completed"):
        assert ours[name] == theirs[name], name
    # The active plans, as the upstream had them: without the horizon it did not store.
    assert [{k: v for k, v in p.items() if k != "horizon"} for p in ours["plans"]] == theirs[
        "plans"
    ]
    assert "version 0 -> 2" in done.stderr  # upgraded in memory, and said


def test_every_count_follows_from_what_the_simulation_did() -> None:
    person = Person(PlanningSystem(clock=lambda: 0.0), GoalPlanner())
    # Goal 0 is planned by the fallback: look around (1 cycle), then work at it (3).
    events(person, {"event": "goal", "description": "Eat", "horizon": "short", "progress": 0.8})
    events(person, *cycles("look around", 1), *cycles("work at eat", 1))  # achieved
    events(person, {"event": "goal", "description": "Sail", "horizon": "mid", "confidence": 0.2})
    # Each plan for goal 1 is overridden until it is abandoned, which gives it up.
    events(person, *cycles("sleep", OVERRIDES_TO_REPLAN * (MAX_REPLANS + 1)))
    events(person, {"event": "goal", "description": "Rest", "horizon": "long"})
    events(person, {"event": "goal", "description": "Read", "horizon": "long"})

    state = person.to_contract()
    stats = planning_stats(state)
    assert (stats.total_plans, stats.active_plans) == (1 + MAX_REPLANS + 1 + 1, 1)
    assert (stats.completed_plans, stats.failed_plans) == (1, 1)
    assert stats.replanned_plans == MAX_REPLANS
    assert stats.success_rate == 0.5
    assert stats.goals == 4
    assert stats.goals_by_horizon == {"short": 1, "mid": 1, "long": 2}
    assert stats.goals_by_standing == {"planned": 1, "waiting": 1, "achieved": 1, "given_up": 1}
    every_step = [step for plan in state.plans for step in plan.steps]
    assert stats.steps["total"] == len(every_step)
    assert stats.steps["completed"] == 2
    assert stats.steps["failed"] == MAX_REPLANS + 1
    assert stats.steps["active"] == 1
    assert stats.cycles == 2 + OVERRIDES_TO_REPLAN * (MAX_REPLANS + 1)
    assert [plan.goal_description for plan in stats.plans] == ["Rest"]
    assert [plan.goal_description for plan in stats.completed] == ["Eat"]


def test_the_command_counts_a_saved_simulation(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    script = [
        {"event": "goal", "description": "Eat", "horizon": "short"},
        *cycles("look around", 2),
    ]
    lines = "".join(json.dumps(line) + "\n" for line in script)
    done = cli("goals", "simulate", "-", "--fallback", "--state", str(state), stdin=lines)
    assert done.returncode == 0, done.stderr
    counted = cli("goals", "stats", "--state", str(state))
    assert counted.returncode == 0, counted.stderr
    expected = planning_stats(decode(GOAL_PLANNING_SYSTEM, state.read_bytes()))
    assert json.loads(counted.stdout) == msgspec.to_builtins(expected)
    assert counted.stdout.count("\n") == 1  # one JSON object, on one line
    assert cli("goals", "stats", "-", stdin=state.read_text()).stdout == counted.stdout


def test_the_command_refuses_in_one_line(tmp_path: Path) -> None:
    for arguments, status, said in [
        ((), 2, "give one FILE, or --state FILE"),
        (("x.json", "--state", "y.json"), 2, "give one FILE, or --state FILE"),
        (("--state", str(tmp_path / "none.json")), 2, "no such file"),
        ((str(tmp_path / "none.json"),), 2, "no such file"),
        (("--state", str(tmp_path)), 2, "not a regular file"),
    ]:
        done = cli("goals", "stats", *arguments)
        assert (done.returncode, done.stdout) == (status, ""), arguments
        assert len(done.stderr.splitlines()) == 1
        assert said in done.stderr
    for text, said in [
        ("{", "not a goal-planning-system"),
        ('{"goals": []}', 'missing required field "plans"'),
        ('{"plans": [{"goal_description": "g", "goal_id": -1}]}', "not an index"),
    ]:
        done = cli("goals", "stats", "-", stdin=text)
        assert (done.returncode, done.stdout) == (1, "")
        assert len(done.stderr.splitlines()) == 1, done.stderr
        assert said in done.stderr


def test_an_old_state_is_counted_without_being_written(tmp_path: Path) -> None:
    plan = {
        "goal_description": "Eat",
        "goal_id": 0,
        "steps": [
            {"description": "a", "action_hint": "a", "expected_outcome": "a", "status": "active"},
            {"description": "b", "action_hint": "b", "expected_outcome": "b"},
        ],
        "current_step_index": 0,
        "status": "active",
        "times_replanned": 0,
        "created_at": 0,
    }
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"plans": [plan]}))
    before = state.read_bytes()
    done = cli("goals", "stats", "--state", str(state), "--horizon", "long")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["goals_by_horizon"] == {"short": 0, "mid": 0, "long": 1}
    assert state.read_bytes() == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["state.json"]


def test_an_old_state_with_a_plan_of_one_step_is_counted(tmp_path: Path) -> None:
    # jenbina kept plans of one step: the upgrade adds the confirming step and says so.
    step = {"description": "a", "action_hint": "a", "expected_outcome": "a", "status": "active"}
    plan = {
        "goal_description": "Eat",
        "goal_id": 0,
        "steps": [step],
        "current_step_index": 0,
        "status": "active",
        "times_replanned": 0,
        "created_at": 0,
    }
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"plans": [plan]}))
    for arguments in [(str(old),), ("--state", str(old))]:
        done = cli("goals", "stats", *arguments)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["steps"]["total"] == 2
        assert "/plans/0/steps/-: a plan has at least 2 steps" in done.stderr


def _old(folder: Path) -> Path:
    """A state jenbina's to_dict wrote: one goal, so one horizon."""
    step = {"description": "a", "action_hint": "a", "expected_outcome": "a", "status": "active"}
    plan = {
        "goal_description": "Eat",
        "goal_id": 0,
        "steps": [step, {**step, "status": "pending"}],
        "current_step_index": 0,
        "status": "active",
        "times_replanned": 0,
        "created_at": 0,
    }
    old = folder / "old.json"
    old.write_text(json.dumps({"plans": [plan]}))
    return old


def test_a_bad_horizon_is_a_usage_error_every_time_before_anything_is_read(
    tmp_path: Path,
) -> None:
    current = tmp_path / "current.json"
    current.write_text(json.dumps({"goals": [], "plans": []}))
    old = _old(tmp_path)
    missing = tmp_path / "missing.json"
    for file in (current, old, missing):
        for arguments in [
            ("goals", "stats", str(file)),
            ("goals", "stats", "--state", str(file)),
            ("goals", "simulate", "-", "--fallback", "--state", str(file)),
            ("goals", "prompt", "--state", str(file)),
        ]:
            done = cli(*arguments, "--horizon", "bogus", stdin="")
            assert (done.returncode, done.stdout) == (2, ""), (arguments, done.stderr)
            assert done.stderr == (
                "plancontracts: error: --horizon: 'bogus' is not a horizon (short, mid, long)\n"
            )
    # Horizons the old file has not as many goals for: the option's fault, so exit 2 too.
    for arguments in [
        ("goals", "stats", str(old)),
        ("goals", "stats", "--state", str(old)),
        ("goals", "simulate", "-", "--fallback", "--state", str(old)),
    ]:
        done = cli(*arguments, "--horizon", "short,mid", stdin="")
        assert (done.returncode, done.stdout) == (2, ""), (arguments, done.stderr)
        assert "option horizon: 2 horizons given for 1 goal (give one" in done.stderr
    assert not missing.exists()
