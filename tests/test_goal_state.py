"""A goal simulation saved and resumed: `Person.to_contract`, `goals simulate --state FILE`.

A simulation run in two pieces, saved between them, is the one run: the
property test splits random scripts anywhere and compares the two. The
command's state file is written whole after every event, under a lock that
makes two runs take turns as wholes, and an old file (jenbina's `to_dict`)
is upgraded on open with its backup kept; a file that cannot be used is one
line and exit status 2.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
from commands import cli
from conftest import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples_at_most

from plancontracts import GOAL_EVENT, GOAL_PLANNING_SYSTEM, ContractError, convert, decode
from plancontracts.generated.goal_plans import GoalPlanOutput, StepProposal
from plancontracts.runtime.core.files import replace_file
from plancontracts.runtime.goal_plans import (
    HORIZONS,
    MAX_NEEDS,
    MAX_SCRIPTED,
    GoalPlanner,
    Person,
    PlanningSystem,
    TooManyGoals,
    action_messages,
)
from plancontracts.runtime.goal_plans import commands as goal_commands

NOW = 1770000000.0
HANG = 120
NEEDS = ["hunger", "sleep", "safety"]
ACTIONS = ["sleep", "eat", "work", "look around", "walk"]


def answer(*hints: str, cycles: int = 1) -> dict[str, Any]:
    """A `model_output` event: one step per hint, each estimated at `cycles` cycles."""
    steps = [
        {
            "description": f"Do: {hint}",
            "action_hint": hint,
            "expected_outcome": f"{hint} done",
            "estimated_cycles": cycles,
        }
        for hint in hints
    ]
    return {"event": "model_output", "output": {"steps": steps}}


def ndjson(*lines: Any) -> str:
    return "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)


def timeless(value: Any) -> Any:
    """`value` without the plans' `created_at`: the time each run made them."""
    if isinstance(value, dict):
        return {key: timeless(item) for key, item in value.items() if key != "created_at"}
    if isinstance(value, list):
        return [timeless(item) for item in value]
    return value


# Saved and resumed is the one run -----------------------------------------------------------

needs = st.dictionaries(st.sampled_from(NEEDS), st.sampled_from([10.0, 45.0, 80.0]), max_size=2)
event = st.one_of(
    st.fixed_dictionaries(
        {
            "event": st.just("goal"),
            "description": st.sampled_from(["Have food", "Save money", "Rest"]),
            "horizon": st.sampled_from(HORIZONS),
            "source_needs": st.lists(st.sampled_from(NEEDS), max_size=2, unique=True),
        }
    ),
    st.fixed_dictionaries(
        {"event": st.just("context"), "needs": needs},
        optional={
            "emotions": st.dictionaries(st.sampled_from(["joy", "fear"]), st.integers(0, 100)),
            "world": st.dictionaries(st.just("location"), st.sampled_from(["home", "market"])),
            "lessons": st.lists(
                st.fixed_dictionaries({"lesson": st.just("Work pays"), "confidence": st.just(0.5)}),
                max_size=1,
            ),
        },
    ),
    st.fixed_dictionaries(
        {
            "event": st.just("cycle"),
            "action": st.sampled_from(ACTIONS),
            "satisfaction_delta": st.sampled_from([-3.0, 0.0, 2.0]),
        },
        optional={"needs": needs},
    ),
    st.builds(
        lambda hints, cycles: answer(*hints, cycles=cycles),
        st.lists(st.sampled_from(ACTIONS), min_size=2, max_size=4),
        st.integers(1, 3),
    ),
)


def run(person: Person, script: list[dict[str, Any]]) -> list[Any]:
    """Run `script` through `person`: what each event did, or that it was refused."""
    done: list[Any] = []
    for line in script:
        try:
            done.append(trio.run(person.run_event, convert(GOAL_EVENT, line)))
        except (ContractError, TooManyGoals) as refused:
            done.append(type(refused).__name__)
    return done


def new_person() -> Person:
    return Person(PlanningSystem(clock=lambda: NOW), GoalPlanner())


@settings(max_examples=examples_at_most(80), deadline=None)
@given(st.lists(event, max_size=40), st.data())
def test_a_simulation_saved_and_resumed_is_the_one_run(
    script: list[dict[str, Any]], data: st.DataObject
) -> None:
    split = data.draw(st.integers(0, len(script)))
    whole = new_person()
    expected = run(whole, script)

    first = new_person()
    done = run(first, script[:split])
    saved = msgspec.json.encode(first.to_contract())
    # What is saved is a valid planning system, its rules included.
    state = decode(GOAL_PLANNING_SYSTEM, saved)
    second = Person.from_contract(state, GoalPlanner(), clock=lambda: NOW)
    done += run(second, script[split:])

    assert done == expected
    assert msgspec.json.encode(second.to_contract()) == msgspec.json.encode(whole.to_contract())


def test_scripted_answers_saved_go_before_those_the_planner_holds() -> None:
    first = new_person()
    run(first, [answer("a", "b"), answer("c", "d")])
    planner = GoalPlanner()
    planner.script(convert(GOAL_EVENT, answer("e", "f")).output)  # type: ignore[union-attr]
    resumed = Person.from_contract(first.to_contract(), planner)
    hints = [output.steps[0].action_hint for output in resumed.planner.scripted]
    assert hints == ["a", "c", "e"]


def test_the_needs_a_person_knows_and_the_answers_waiting_are_bounded() -> None:
    person = new_person()
    known = {f"need_{n}": 50.0 for n in range(MAX_NEEDS - 1)}
    run(person, [{"event": "context", "needs": known}])
    two_more = {"hunger": 10.0, "sleep": 10.0}
    for line in (
        {"event": "context", "needs": two_more},
        {"event": "cycle", "action": "eat", "satisfaction_delta": 0, "needs": two_more},
    ):
        with pytest.raises(ContractError, match=f"more than the {MAX_NEEDS} a person") as refused:
            trio.run(person.run_event, convert(GOAL_EVENT, line))
        assert [v.pointer for v in refused.value.violations] == ["/needs"]
    assert person.to_contract().context.needs == known  # type: ignore[union-attr]
    run(person, [{"event": "context", "needs": {"hunger": 10.0, "need_0": 5.0}}])  # one new
    assert len(person.context.needs) == MAX_NEEDS
    waiting = [answer("a", "b")] * MAX_SCRIPTED
    assert run(person, waiting) == [[]] * MAX_SCRIPTED
    assert run(person, [answer("a", "b")]) == ["ContractError"]
    steps = [
        StepProposal(description="d", action_hint="h", expected_outcome="o", estimated_cycles=1)
    ] * 2
    with pytest.raises(ValueError, match=f"{MAX_SCRIPTED} scripted answers"):
        person.planner.script(GoalPlanOutput(steps=steps))
    # At the bounds, the state is still a valid document.
    decode(GOAL_PLANNING_SYSTEM, msgspec.json.encode(person.to_contract()))


# The command ---------------------------------------------------------------------------------

FIRST = [
    {"event": "context", "needs": {"hunger": 30, "sleep": 70}, "world": {"location": "home"}},
    answer("look for work", "work", cycles=2),
    answer("beg", "eat"),
    {"event": "goal", "description": "Have food", "horizon": "short"},
    {"event": "cycle", "action": "look for work", "satisfaction_delta": 1},
]
SECOND = [
    # Ready at once only because the first piece's context said hunger is at 30.
    {"event": "goal", "description": "Save money", "horizon": "mid", "source_needs": ["hunger"]},
    {"event": "cycle", "action": "sleep", "satisfaction_delta": 1},
    {"event": "cycle", "action": "sleep", "satisfaction_delta": 1},
    {"event": "cycle", "action": "sleep", "satisfaction_delta": 1},
]


def simulate(*arguments: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return cli("goals", "simulate", *arguments, "--fallback", stdin=stdin)


def printed(done: subprocess.CompletedProcess[str]) -> list[Any]:
    return [timeless(json.loads(line)) for line in done.stdout.splitlines()]


def test_a_second_run_goes_on_from_the_state_the_first_saved(tmp_path: Path) -> None:
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    whole = simulate("-", "--state", str(one), stdin=ndjson(*FIRST, *SECOND))
    assert whole.returncode == 0, whole.stderr
    first = simulate("-", "--state", str(two), stdin=ndjson(*FIRST))
    second = simulate("-", "--state", str(two), stdin=ndjson(*SECOND))
    assert (first.returncode, second.returncode) == (0, 0)
    assert timeless(json.loads(two.read_text())) == timeless(json.loads(one.read_text()))
    resumed = printed(first) + printed(second)
    for record in resumed[len(FIRST) :]:
        record["line"] += len(FIRST)  # each run numbers its own script's lines
    assert resumed == printed(whole)
    # The second run planned the mid-term goal with the answer the first left waiting,
    # ready by the need the first was told of.
    happened = printed(second)[0]["happened"]
    assert happened == [{"what": "planned", "goal_id": 1, "by": "script"}]
    state = json.loads(two.read_text())
    assert state["context"]["world"] == {"location": "home"}
    assert state["scripted"] == []
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        ".one.json.lock",
        ".two.json.lock",
        "one.json",
        "two.json",
    ]


def test_the_state_is_written_whole_after_every_event_that_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state.json"
    written: list[bytes] = []

    def recording(path: Path, data: bytes) -> None:
        written.append(data)
        replace_file(path, data)

    monkeypatch.setattr(goal_commands, "replace_file", recording)  # as the command calls it
    script = ndjson(FIRST[0], {"event": "cycle", "action": "x"}, *FIRST[1:])
    done = simulate("-", "--state", str(state), stdin=script)
    assert done.returncode == 1  # the line without satisfaction_delta is refused
    records = json.loads("[" + ",".join(done.stdout.splitlines()) + "]")
    assert [record["ok"] for record in records] == [True, False, True, True, True, True]
    assert len(written) == 5  # the refused line changed nothing, and wrote nothing
    goals = [len(decode(GOAL_PLANNING_SYSTEM, data).goals) for data in written]
    assert goals == [0, 0, 0, 1, 1]
    assert state.read_bytes() == written[-1]


def test_an_old_state_is_upgraded_on_open_and_its_backup_kept(tmp_path: Path) -> None:
    # jenbina's to_dict: the plans alone, without their horizon.
    steps = [
        {"description": "Ask a neighbor for a loan", "action_hint": "talk to neighbor",
         "expected_outcome": "some cash", "estimated_cycles": 1, "actual_cycles": 0,
         "status": "active", "failure_reason": ""},
        {"description": "Buy groceries", "action_hint": "buy food",
         "expected_outcome": "have food at home", "estimated_cycles": 5, "actual_cycles": 0,
         "status": "pending", "failure_reason": ""},
    ]  # fmt: skip
    plan = {
        "goal_description": "Have enough food for the week",
        "goal_id": 0,
        "steps": steps,
        "current_step_index": 0,
        "status": "active",
        "times_replanned": 1,
        "created_at": NOW,
        "consecutive_overrides": 0,
    }
    state = tmp_path / "state.json"
    old = json.dumps({"plans": [plan]})
    state.write_text(old)
    cycle = {"event": "cycle", "action": "talk to neighbor", "satisfaction_delta": 1}
    done = simulate("-", "--state", str(state), "--horizon", "mid", stdin=ndjson(cycle))
    assert done.returncode == 0, done.stderr
    assert "upgraded to goal-planning-system's current version" in done.stderr
    assert "Traceback" not in done.stderr
    assert (tmp_path / "state.json.v0.bak").read_text() == old
    (record,) = json.loads("[" + done.stdout.strip() + "]")
    assert record["outcome"] == "step_completed"
    assert "Step 2 of 2: Buy groceries" in record["directive"]
    saved = decode(GOAL_PLANNING_SYSTEM, state.read_bytes())
    assert [(goal.description, goal.horizon) for goal in saved.goals] == [
        ("Have enough food for the week", "mid")
    ]
    # Opened again, it is current: nothing is upgraded twice.
    again = simulate("-", "--state", str(state), stdin="")
    assert (again.returncode, again.stderr) == (0, "")


def test_jenbinas_own_state_goes_on(upstream: Path, tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_bytes((upstream / "jenbina" / "planning_system_to_dict.json").read_bytes())
    cycle = {"event": "cycle", "action": "talk to neighbor", "satisfaction_delta": 1}
    done = simulate("-", "--state", str(state), stdin=ndjson(cycle))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outcome"] == "step_completed"
    assert len(decode(GOAL_PLANNING_SYSTEM, state.read_bytes()).plans) == 2


def _fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda tmp: tmp, "not a regular file"),
        (_fifo, "not a regular file"),
        (lambda tmp: (tmp / "s.json", (tmp / "s.json").write_text("{"))[0], "s.json: "),
        (
            lambda tmp: (tmp / "s.json", (tmp / "s.json").write_text('{"goals": 5}'))[0],
            "not a goal-planning-system: ",
        ),
        (
            lambda tmp: (tmp / "s.json", (tmp / "s.json").write_text('{"plans": [{}]}'))[0],
            "s.json: ",
        ),
        (lambda tmp: tmp / "no" / "s.json", "cannot write in"),
    ],
    ids=["folder", "fifo", "malformed", "invalid", "old-but-broken", "no-folder"],
)
def test_a_state_that_cannot_be_used_is_one_line_and_exit_2(
    tmp_path: Path, make: Any, said: str
) -> None:
    state = make(tmp_path)
    done = simulate("-", "--state", str(state), stdin=ndjson(FIRST[0]))
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert said in done.stderr


def test_horizon_is_for_a_saved_simulation_and_a_bad_one_is_one_line(tmp_path: Path) -> None:
    done = simulate("-", "--horizon", "mid")
    assert done.returncode == 2
    assert "--horizon applies to a saved simulation" in done.stderr
    state = tmp_path / "s.json"
    old = {"plans": [{"goal_description": "g", "goal_id": 0, "steps": []}]}
    state.write_text(json.dumps(old))
    done = simulate("-", "--state", str(state), "--horizon", "soon")
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1
    assert "'soon' is not a horizon" in done.stderr
    assert json.loads(state.read_text()) == old  # left as it was, no backup made
    assert not (tmp_path / "s.json.v0.bak").exists()


@pytest.mark.process
def test_two_runs_on_one_state_take_turns_and_lose_no_event(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    command = [sys.executable, "-m", "plancontracts", "goals", "simulate", "-", "--fallback"]
    command += ["--state", str(state)]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
    goals = [
        {"event": "goal", "description": f"Goal {n}", "horizon": "long", "source_needs": ["x"]}
        for n in range(4)
    ]
    first = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert first.stdin is not None
    assert first.stdout is not None
    first.stdin.write(ndjson(goals[0]).encode())
    first.stdin.flush()
    first.stdout.readline()  # the first event ran and is saved: the first run holds the lock
    second = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert second.stderr is not None
    waiting = second.stderr.readline().decode()
    assert "another run is simulating with it; waiting for it" in waiting
    assert second.stdin is not None
    second.stdin.write(ndjson(goals[2], goals[3]).encode())
    second.stdin.close()  # its script is all there; it waits for the lock, not for lines
    rest, _ = first.communicate(ndjson(goals[1]).encode(), timeout=HANG)
    assert first.returncode == 0
    assert len(rest.splitlines()) == 1
    assert second.stdout is not None
    out, err = second.stdout.read(), second.stderr.read()  # both end when the run does
    assert second.wait(timeout=HANG) == 0, err
    assert [json.loads(line)["ok"] for line in out.splitlines()] == [True, True]
    saved = decode(GOAL_PLANNING_SYSTEM, state.read_bytes())
    # The second run went on from the first's state: every goal, in turn.
    assert [goal.description for goal in saved.goals] == [f"Goal {n}" for n in range(4)]


def test_the_action_prompt_of_a_saved_simulation(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    assert simulate("-", "--state", str(state), stdin=ndjson(*FIRST)).returncode == 0
    done = cli("goals", "prompt", "--state", str(state))
    assert done.returncode == 0, done.stderr
    messages = json.loads(done.stdout)
    person = Person.from_contract(decode(GOAL_PLANNING_SYSTEM, state.read_bytes()), GoalPlanner())
    assert messages == action_messages(person.system, person.context)
    lines = messages[1]["content"].splitlines()
    assert "- hunger: 30% satisfied" in lines  # what the saved context holds
    directive = person.system.directive()
    assert directive is not None
    assert "Step 2 of 2" in directive
    assert lines.index("- location: home") < lines.index(directive) < lines.index("Goals:")
    missing = cli("goals", "prompt", "--state", str(tmp_path / "none.json"))
    assert (missing.returncode, missing.stdout) == (2, "")
    assert "none.json: no such file" in missing.stderr
