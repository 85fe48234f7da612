"""A planning session between turns: failed Think-mode checks freeze their topic, time thaws it.

The session's functions are pure: these tests give them thoughts made by hand.
`think --state FILE` keeps a session in a file between invocations: run here
(in this process) with the packaged model, as a player would.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from commands import cli
from hypothesis import given, settings
from hypothesis import strategies as st
from local_servers import conforming, model_server
from tiers import examples_at_most

from plancontracts import PLANNING_SESSION, contract_schema, decode, violations
from plancontracts.generated.planning_blocks import PlanningSession
from plancontracts.runtime.commandkit import DEFAULT_MAX_BYTES
from plancontracts.runtime.planning_blocks import Thought, after_thought, may_think, new_session
from plancontracts.runtime.planning_blocks.mechanics import (
    HOUR,
    RolledCheck,
    check_outcome,
    freeze_hours,
)
from plancontracts.runtime.planning_blocks.session import MINUTE

BLOCK = decode(
    "planning-block",
    '{"choices": {"wait": {"text": "Wait", "description": "Let the patrol pass."}}}',
)


def thought(*, roll: int | None = None, dc: int = 14) -> Thought:
    """A Think-mode thought whose check rolled `roll` against `dc`, or a Story-mode one."""
    if roll is None:
        return Thought(BLOCK, "story", None, "the patrol passes")
    check = RolledCheck("Wisdom", 10, "+0", roll, roll, dc, check_outcome(roll, dc))
    return Thought(BLOCK, "think", check, "how to cross the bridge")


def test_a_failed_check_freezes_its_topic_from_when_it_was_rolled() -> None:
    start = PlanningSession(time=5 * HOUR, turn=3, frozen_plans={})
    session, frozen = after_thought(start, thought(roll=9, dc=14), "bridge")
    assert frozen is not None
    assert (frozen.failed_at, frozen.freeze_hours, frozen.original_dc) == (5 * HOUR, 4, 14)
    assert frozen.freeze_until == 9 * HOUR
    assert frozen.description == "planning how to cross the bridge"
    # Think mode: one microsecond, the same turn.
    assert (session.time, session.turn) == (5 * HOUR + 1, 3)
    assert session.frozen_plans == {"bridge": frozen}


def test_a_successful_check_freezes_nothing() -> None:
    session, frozen = after_thought(new_session(), thought(roll=15, dc=14), "bridge")
    assert frozen is None
    assert session.frozen_plans == {}


def test_a_frozen_topic_is_refused_with_the_time_left_and_other_topics_are_not() -> None:
    session, _ = after_thought(new_session(), thought(roll=1, dc=20), "bridge")
    verdict, _ = may_think(session, "bridge")
    assert not verdict.allowed
    assert verdict.describe() == "this topic is frozen for another 8 h 00 min of game time"
    assert may_think(session, "tunnel")[0].allowed


def test_story_turns_let_the_freeze_end_and_an_early_break_lifts_it() -> None:
    session, _ = after_thought(new_session(), thought(roll=1, dc=12), "bridge")  # 2 hours
    later, _ = after_thought(session, thought(), "bridge", elapsed=90 * MINUTE)
    assert (later.turn, "bridge" in later.frozen_plans) == (1, True)
    assert not may_think(later, "bridge")[0].allowed
    lifted, kept = may_think(later, "bridge", breaks=["new_information"])
    assert lifted.allowed
    assert kept.frozen_plans == {}
    thawed, _ = after_thought(later, thought(), "bridge", elapsed=30 * MINUTE)
    assert thawed.frozen_plans == {}  # ended: dropped when the clock passed it
    assert may_think(thawed, "bridge")[0].allowed


def test_story_mode_needs_its_elapsed_time_and_think_mode_takes_none() -> None:
    with pytest.raises(ValueError, match="elapsed must be 1 or more"):
        after_thought(new_session(), thought(), "bridge")
    with pytest.raises(ValueError, match="takes no elapsed time"):
        after_thought(new_session(), thought(roll=3), "bridge", elapsed=MINUTE)


@settings(max_examples=examples_at_most(60), deadline=None)
@given(
    turns=st.lists(
        st.one_of(
            st.tuples(st.integers(1, 25), st.integers(2, 40)),  # a Think-mode roll and its DC
            st.integers(1, 48 * 60),  # a Story-mode turn of so many minutes
        ),
        max_size=30,
    ),
    topics=st.lists(st.sampled_from(["bridge", "tunnel", "vault_heist"]), min_size=30),
)
def test_every_session_a_game_can_reach_is_valid(
    turns: list[tuple[int, int] | int], topics: list[str]
) -> None:
    session = new_session()
    for turn, topic in zip(turns, topics, strict=False):
        if isinstance(turn, tuple):
            verdict, session = may_think(session, topic)
            if not verdict.allowed:
                continue
            roll, dc = turn
            before = session.time
            session, frozen = after_thought(session, thought(roll=roll, dc=dc), topic)
            if frozen is not None:
                assert frozen.freeze_until == before + freeze_hours(dc) * HOUR
        else:
            session, _ = after_thought(session, thought(), topic, elapsed=turn * MINUTE)
        document = msgspec.to_builtins(session)
        assert violations(PLANNING_SESSION, document) == ()
        assert all(entry.freeze_until > session.time for entry in session.frozen_plans.values())


def test_the_example_session_is_valid_and_a_future_failure_is_not() -> None:
    (example,) = contract_schema(PLANNING_SESSION)["examples"]
    assert violations(PLANNING_SESSION, example) == ()
    example["time"] = 0
    found = violations(PLANNING_SESSION, example)
    assert [v.pointer for v in found] == [
        "/frozen_plans/bridge_crossing/failed_at",
        "/frozen_plans/vault_heist/failed_at",
    ]
    assert "a plan cannot fail in the future" in found[0].message
    example = contract_schema(PLANNING_SESSION)["examples"][0]
    example["frozen_plans"]["vault_heist"]["freeze_hours"] = 4
    assert [v.pointer for v in violations(PLANNING_SESSION, example)] == [
        "/frozen_plans/vault_heist/freeze_hours",
        "/frozen_plans/vault_heist/freeze_until",
    ]


# think --state ------------------------------------------------------------------------
# The session file's life is the subject: a stub server answers the blocks (the packaged
# model's own writing of them is tests/test_thinking.py's), and the roll is the code's.


@pytest.mark.slow  # three runs of think, each rolling and writing a session
def test_think_keeps_the_session_in_its_state_file(tmp_path: Path) -> None:
    state = tmp_path / "session.json"
    with model_server(conforming) as server:
        # Scores of 1 (modifier -5) fail this seed's check, whatever DC the block sets.
        think = ("think", "THINK: how to cross the guarded bridge", "--state", str(state))
        low = ("--intelligence", "1", "--wisdom", "1", "--seed", "1", "--server", server.url)
        first = cli(*think, "--topic", "bridge crossing", *low)
        assert first.returncode == 0, first.stderr
        session = decode(PLANNING_SESSION, state.read_bytes())
        (frozen,) = session.frozen_plans.values()
        assert list(session.frozen_plans) == ["bridge_crossing"]
        assert (session.time, session.turn, frozen.failed_at) == (1, 0, 0)
        assert f"think: bridge_crossing is frozen for {frozen.freeze_hours} h" in first.stderr

        asked = len(server.requests)
        again = cli(*think, "--topic", "bridge crossing", *low)
        assert again.returncode == 1
        assert again.stdout == ""
        assert "d20" not in again.stderr  # refused before any roll
        hours = frozen.freeze_hours
        assert (
            f"not thinking about bridge_crossing again yet: this topic is frozen for another "
            f"{hours} h 00 min of game time" in again.stderr
        )
        assert len(server.requests) == asked  # nor was the model asked for nothing

        # One invocation: a Story turn as long as the freeze, then the topic again.
        minutes = str(hours * 60)
        story = "The guard dozes"
        thawed = cli(
            think[0], story, *think[1:], "--minutes", minutes, "--topic", "bridge crossing", *low
        )
    assert thawed.returncode == 0, thawed.stderr
    assert len(thawed.stdout.splitlines()) == 2  # a block for each
    assert "check: d20" in thawed.stderr
    session = decode(PLANNING_SESSION, state.read_bytes())
    # The Story turn took the hours; the check came one microsecond after it ended.
    assert (session.time, session.turn) == (hours * HOUR + 2, 1)
    assert all(entry.failed_at == hours * HOUR + 1 for entry in session.frozen_plans.values())


@pytest.mark.parametrize(
    ("written", "said"),
    [
        ('{"time": 1}', "not a planning session: (document): missing required fields"),
        ("[1, 2", "not a planning session: (document): "),
    ],
)
def test_a_state_file_that_is_no_session_is_refused_before_the_model_loads(
    tmp_path: Path, written: str, said: str
) -> None:
    state = tmp_path / "session.json"
    state.write_text(written)
    done = cli("think", "THINK: the bridge", "--state", str(state), "--no-download")
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert said in line
    assert state.read_text() == written  # left as it was


def test_a_state_file_too_large_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    state = tmp_path / "session.json"
    state.write_bytes(b" " * (DEFAULT_MAX_BYTES + 1))
    done = cli("think", "THINK: the bridge", "--state", str(state), "--no-download")
    assert done.returncode == 2
    # think has no --max-bytes to point to: the bound is said as it is.
    assert done.stderr.endswith(f"{state}: larger than {DEFAULT_MAX_BYTES} bytes\n")


def test_topic_and_lift_need_a_state_file() -> None:
    done = cli("think", "THINK: the bridge", "--lift", "gm_override")
    assert done.returncode == 2
    assert "give --state FILE" in done.stderr
    assert "model:" not in done.stderr


def test_the_state_file_example_in_the_schema_round_trips() -> None:
    (example,) = contract_schema(PLANNING_SESSION)["examples"]
    session = decode(PLANNING_SESSION, json.dumps(example))
    assert msgspec.to_builtins(session) == example
