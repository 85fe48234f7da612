"""Migrations of stored documents: the mechanism, its errors, users' steps, the CLI, seeds, stores.

The seeds' stored shapes are read in place from ../shared/upstream/ (and the
WorldArchitect freeze from seed 000's text); those tests skip where it is absent.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Mapping, Sequence
from contextlib import closing
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
from commands import cli
from conftest import ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plancontracts import (
    GOAL_PLANNING_SYSTEM,
    PLAN,
    PLANNING_SESSION,
    ContractError,
    Migrated,
    MigrationFailed,
    MigrationStep,
    StoreError,
    bundled_skills,
    check_plan,
    contract_schema,
    decode,
    load_contracts,
    migrate,
    violations,
)
from plancontracts.generated.goal_plans import GoalPlanningSystem
from plancontracts.runtime.core import migrations
from plancontracts.runtime.core.files import locked
from plancontracts.runtime.core.stored import current_document
from plancontracts.runtime.goal_plans.repairs import normalize_output
from plancontracts.runtime.planning_blocks.migrations import game_time
from plancontracts.runtime.story_packages import DraftStore
from plancontracts.runtime.story_packages.drafts import new_draft

SEEDS = ROOT.parent / "shared" / "seeds"
HANG = 120
"Seconds after which a process is taken to hang."

# A user's contract at version 3, and the steps that read its versions 1 and 2 ---------------

RECIPE = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "x-version": 3,
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "minutes"],
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "minutes": {"type": "integer", "minimum": 0},
    },
}


def _v1_to_v2(value: Any, options: Mapping[str, str]) -> tuple[Any, Sequence[str]]:
    return {"name": value["title"], "hours": value["hours"]}, ["title renamed name"]


def _v2_to_v3(value: Any, options: Mapping[str, str]) -> tuple[Any, Sequence[str]]:
    minutes = round(value["hours"] * 60)
    return {"name": value["name"], "minutes": minutes}, [f"hours as minutes: {minutes}"]


V1 = MigrationStep(
    "recipe", 1, 2, "recipe titles", lambda v: isinstance(v, dict) and "title" in v, _v1_to_v2
)
V2 = MigrationStep(
    "recipe", 2, 3, "recipe hours", lambda v: isinstance(v, dict) and "hours" in v, _v2_to_v3
)


@pytest.fixture
def recipe(tmp_path: Path) -> Any:
    path = tmp_path / "recipe.json"
    path.write_text(json.dumps(RECIPE))
    return load_contracts(path)["recipe"]


def test_a_users_old_document_goes_through_each_step_to_the_current_version(recipe: Any) -> None:
    done = migrate(recipe, {"title": "Soup", "hours": 1.5}, steps=[V2, V1])
    assert done.value == {"name": "Soup", "minutes": 90}
    assert [(t.step.reads, t.step.writes) for t in done.steps] == [(1, 2), (2, 3)]
    assert done.lines() == [
        "recipe version 1 -> 2 (recipe titles): title renamed name",
        "recipe version 2 -> 3 (recipe hours): hours as minutes: 90",
    ]
    # A document of version 2 starts at the step that recognizes it.
    assert migrate(recipe, {"name": "Soup", "hours": 2}, steps=[V1, V2]).value["minutes"] == 120


def test_a_current_document_is_returned_as_it_is_and_no_step_is_asked(recipe: Any) -> None:
    def never(value: Any) -> bool:
        raise AssertionError("a step was asked about a current document")

    asked = MigrationStep("recipe", 1, 3, "never", never, _v1_to_v2)
    current = {"name": "Soup", "minutes": 5}
    done = migrate(recipe, current, steps=[asked])
    assert done.current
    assert done.value is current
    assert done.lines() == []


def test_a_document_no_step_recognizes_is_a_contract_error_saying_so(recipe: Any) -> None:
    with pytest.raises(ContractError) as caught:
        migrate(recipe, {"colour": "red"}, steps=[V1, V2])
    assert caught.value.violations[-1].message == "no migration of recipe recognizes this document"
    assert "colour" in str(caught.value.violations[0]) or len(caught.value.violations) > 1


def test_steps_of_other_contracts_are_left_out(recipe: Any) -> None:
    other = MigrationStep("menu", 1, 3, "menus", lambda v: True, _v1_to_v2)
    with pytest.raises(ContractError):
        migrate(recipe, {"title": "Soup"}, steps=[other])


@pytest.mark.parametrize(
    ("upgrade", "said"),
    [
        (lambda v, o: (_ for _ in ()).throw(ValueError("no hours\nhere")), "no hours here"),
        (lambda v, o: v["missing"], "failed: KeyError: 'missing'"),
        (lambda v, o: ({"name": ""}, ["emptied"]), "wrote a document recipe refuses: "),
        (lambda v, o: ({"name": object()}, []), "returned what is no JSON document and notes: "),
        (lambda v, o: ({"name": "Soup", "minutes": 1}, [3]), "its notes are not all text"),
        (lambda v, o: {"name": "Soup", "minutes": 1, "x": 1}, "too many values to unpack"),
    ],
)
def test_a_step_that_fails_is_one_error_line_naming_it(
    recipe: Any, upgrade: Any, said: str
) -> None:
    broken = MigrationStep("recipe", 1, 3, "broken step", lambda v: "title" in v, upgrade)
    with pytest.raises(MigrationFailed) as caught:
        migrate(recipe, {"title": "Soup"}, steps=[broken])
    message = str(caught.value)
    assert message.startswith("recipe (broken step): ")
    assert said in message
    assert "\n" not in message
    assert caught.value.step == "broken step"


def test_a_step_that_fails_to_look_is_named_too(recipe: Any) -> None:
    looks = MigrationStep("recipe", 1, 3, "nosy", lambda v: v["nothing"], _v1_to_v2)
    with pytest.raises(MigrationFailed, match=r"^recipe \(nosy\): failed to look: KeyError"):
        migrate(recipe, {"title": "Soup"}, steps=[looks])


def test_a_chain_missing_a_version_says_which(recipe: Any) -> None:
    with pytest.raises(MigrationFailed, match="no step reads version 2 of this document"):
        migrate(recipe, {"title": "Soup", "hours": 1}, steps=[V1])


def test_a_step_writes_a_later_version_than_it_reads() -> None:
    with pytest.raises(ValueError, match="writes a later version"):
        MigrationStep("recipe", 2, 2, "still", lambda v: True, _v1_to_v2)


def test_the_callers_value_is_left_as_it_was(recipe: Any) -> None:
    def mutating(value: Any, options: Mapping[str, str]) -> tuple[Any, Sequence[str]]:
        value["name"] = value.pop("title")
        value["minutes"] = value.pop("hours") * 60
        return value, ["changed in place"]

    step = MigrationStep("recipe", 1, 3, "in place", lambda v: "title" in v, mutating)
    old = {"title": "Soup", "hours": 1}
    assert migrate(recipe, old, steps=[step]).value == {"name": "Soup", "minutes": 60}
    assert old == {"title": "Soup", "hours": 1}


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.sampled_from(["plans", "goal_description", "goal_id", "x"]), inner)
        ),
        max_leaves=12,
    )
)
def test_whatever_is_stored_migrates_to_a_valid_document_or_one_error(value: Any) -> None:
    # jenbina's step reads whatever looks like to_dict, hostile values included.
    outcome: Exception | Migrated
    try:
        outcome = migrate(GOAL_PLANNING_SYSTEM, value)
    except (MigrationFailed, ContractError) as error:
        outcome = error
    if isinstance(outcome, MigrationFailed):
        assert outcome.step == "jenbina PlanningSystem.to_dict"
        assert "\n" not in str(outcome)
    elif isinstance(outcome, ContractError):
        assert "no migration" in outcome.violations[-1].message
    else:
        assert isinstance(outcome, Migrated)
        assert violations(GOAL_PLANNING_SYSTEM, outcome.value) == ()


# decode(migrate=True) -------------------------------------------------------------------------


def test_decode_migrates_only_when_asked(upstream: Path) -> None:
    text = (upstream / "jenbina" / "planning_system_to_dict.json").read_bytes()
    with pytest.raises(ContractError):
        decode(GOAL_PLANNING_SYSTEM, text)
    system = decode(GOAL_PLANNING_SYSTEM, text, migrate=True)
    assert isinstance(system, GoalPlanningSystem)
    assert system.goals[0].horizon == "short"
    current = msgspec.json.encode(system)
    assert decode(GOAL_PLANNING_SYSTEM, current, migrate=True) == system
    with pytest.raises(ContractError) as caught:
        decode(GOAL_PLANNING_SYSTEM, b'{"plans": 3, "other": 1}', migrate=True)
    assert "no migration of goal-planning-system" in caught.value.violations[-1].message


def test_decode_with_migrate_upgrades_a_valid_but_old_plan(upstream: Path) -> None:
    text = (upstream / "narratoria" / "example-plan.json").read_bytes()
    assert decode(PLAN, text).tools[0].tool_path == "tools/torch-lighter"
    assert decode(PLAN, text, migrate=True).tools[0].tool_path == "skills/torch-lighter/light.py"


# The seeds' stored shapes ---------------------------------------------------------------------


def test_jenbinas_to_dict_recovers_goals_and_says_what_it_set(upstream: Path) -> None:
    stored = json.loads((upstream / "jenbina" / "planning_system_to_dict.json").read_text())
    assert violations(GOAL_PLANNING_SYSTEM, stored)  # refused as it is: no goals, no horizon
    done = migrate(GOAL_PLANNING_SYSTEM, stored)
    (taken,) = done.steps
    assert (taken.step.name, taken.step.reads, taken.step.writes) == (
        "jenbina PlanningSystem.to_dict",
        0,
        2,
    )
    assert done.value["goals"] == [
        {
            "description": "Have enough food for the week",
            "horizon": "short",
            "source_needs": [],
            "progress": 0.0,
            "confidence": 0.5,
        }
    ]
    assert all(plan["horizon"] == "short" for plan in done.value["plans"])
    assert taken.notes == (
        "1 goal recovered from the plans' goal_description ('Have enough food for the week')",
        "progress and confidence recovered from each goal's completed and failed plans; "
        "source_needs not in the document: set to []",
        "horizon not in the document: every goal set to short (option horizon)",
        "dropped _source: not part of goal-planning-system",
    )
    given = migrate(GOAL_PLANNING_SYSTEM, stored, options={"horizon": "long"})
    assert given.value["goals"][0]["horizon"] == "long"
    assert given.steps[0].notes[2] == "horizon not in the document: every goal set to long"


def test_jenbinas_to_dict_with_two_goals_and_a_gap(upstream: Path) -> None:
    stored = json.loads((upstream / "jenbina" / "planning_system_to_dict.json").read_text())
    plan = {**stored["plans"][1], "goal_id": 2, "goal_description": "Find a home"}
    two = {"plans": [*stored["plans"], plan]}
    with pytest.raises(MigrationFailed, match="the short-term horizon has an active plan"):
        migrate(GOAL_PLANNING_SYSTEM, two)  # two active plans cannot share a horizon
    done = migrate(GOAL_PLANNING_SYSTEM, two, options={"horizon": "short,long,mid"})
    goals = done.value["goals"]
    assert [goal["horizon"] for goal in goals] == ["short", "long", "mid"]
    assert goals[1]["description"] == "goal 1 (its description was not stored)"
    assert "goal 1: no plan names it, so its description is a placeholder" in done.steps[0].notes
    with pytest.raises(MigrationFailed, match="option horizon: 2 horizons given for 3 goals"):
        migrate(GOAL_PLANNING_SYSTEM, two, options={"horizon": "short,mid"})


@pytest.mark.parametrize("status", ["active", "completed"])
def test_jenbinas_one_step_plan_gets_the_confirming_step_normalize_adds(status: str) -> None:
    # jenbina kept plans of one step; the contract wants two. The upgrade adds the
    # step `normalize goal-plan-output` adds to such an answer, and says so.
    step = {
        "description": "Ask a neighbor for a loan",
        "action_hint": "talk to neighbor",
        "expected_outcome": "some cash",
        "estimated_cycles": 3,
        "actual_cycles": 2 if status == "completed" else 0,
        "status": status,
        "failure_reason": "",
    }
    plan = {
        "goal_description": "Have food",
        "goal_id": 0,
        "steps": [step],
        "current_step_index": 1 if status == "completed" else 0,
        "status": status,
        "times_replanned": 0,
        "created_at": 0,
    }
    stored = {"plans": [plan]}
    done = migrate(GOAL_PLANNING_SYSTEM, stored)
    assert violations(GOAL_PLANNING_SYSTEM, done.value) == ()
    (upgraded,) = done.value["plans"]
    first, second = upgraded["steps"]
    assert first == step
    repair = normalize_output(
        [{k: step[k] for k in ("description", "action_hint", "expected_outcome")}]
    )
    added = repair.value["steps"][1]
    assert {k: second[k] for k in added} == added  # the very step normalize adds
    assert second["status"] == ("completed" if status == "completed" else "pending")
    assert upgraded["current_step_index"] == (2 if status == "completed" else 0)
    (said,) = [note for note in done.steps[0].notes if note.startswith("/plans/0/steps/-: ")]
    assert repair.repairs[-1].reason in said
    assert stored["plans"][0]["steps"] == [step]  # the document given is left alone


def test_jenbinas_other_documents_are_not_taken_for_to_dict(upstream: Path) -> None:
    stats = json.loads((upstream / "jenbina" / "planning_stats.json").read_text())
    with pytest.raises(ContractError, match="no migration of goal-planning-system"):
        migrate(GOAL_PLANNING_SYSTEM, stats)


@pytest.mark.parametrize(
    ("name", "rewritten"),
    [
        (
            "example-plan.json",
            [
                "tool 'light1': toolPath tools/torch-lighter -> skills/torch-lighter/light.py",
                "tool 'examine1': toolPath tools/door-examiner -> skills/door-examiner/examine.py",
            ],
        ),
        (
            "example-plan-replan.json",
            ["tool 'examine2': toolPath tools/door-examiner -> skills/door-examiner/examine.py"],
        ),
    ],
)
def test_narratorias_tools_paths_become_what_the_executor_runs(
    upstream: Path, name: str, rewritten: list[str]
) -> None:
    stored = json.loads((upstream / "narratoria" / name).read_text())
    skills = bundled_skills()
    assert violations(PLAN, stored) == ()  # valid under the contract...
    refused = check_plan(decode(PLAN, json.dumps(stored)), skills=skills)
    assert refused is not None  # ...and refused before it runs
    assert "skills/<skill name>" in refused.message
    done = migrate(PLAN, stored)
    assert list(done.steps[0].notes) == rewritten
    # The paths resolve now. The input stays Narratoria's: its torch-lighter took
    # `light_torch`, which the bundled one's input schema does not list.
    after = check_plan(decode(PLAN, json.dumps(done.value)), skills=skills)
    assert after is None or (after.code == "invalid_input" and "toolPath" not in after.message)
    assert migrate(PLAN, done.value).current


def test_a_tools_path_no_skill_answers_is_one_error_naming_the_step(tmp_path: Path) -> None:
    plan = {
        "requestId": "550e8400-e29b-41d4-a716-446655440000",
        "tools": [{"toolId": "x", "toolPath": "tools/no-such-skill"}],
    }
    with pytest.raises(MigrationFailed) as caught:
        migrate(PLAN, plan, options={"skills": str(tmp_path)})
    assert str(caught.value) == (
        "plan (Narratoria tools/<skill> paths): tools/no-such-skill: no skill named "
        "'no-such-skill' (skills: none); give its folder with the option skills"
    )


def _seed_freeze() -> dict[str, Any]:
    """Seed 000's frozen plan, its placeholders given world times such as WorldArchitect stores."""
    seeds = sorted(SEEDS.glob("000_*.txt"))
    if not seeds:
        pytest.skip(f"seed 000 not found in {SEEDS}")
    text = seeds[0].read_text(encoding="utf-8")
    block = re.search(r'"frozen_plans": (\{.*?\n\})', text, re.S)
    assert block is not None, "seed 000 no longer shows its frozen_plans"
    shown = block.group(1)
    shown = shown.replace('"<plan_topic_key>"', '"warehouse_ambush"')
    shown = shown.replace('"<current_world_time>"', '"1492-03-01T22:15:00"')
    shown = shown.replace('"<world_time + freeze_duration>"', '"1492-03-02T02:15:00"')
    frozen: dict[str, Any] = json.loads(shown)
    return frozen


def test_worldarchitects_world_time_strings_become_microseconds() -> None:
    stored = _seed_freeze()
    with pytest.raises(MigrationFailed) as caught:
        migrate("frozen-plans", stored)
    assert "give the option calendar" in str(caught.value)
    assert str(caught.value).startswith("frozen-plans (WorldArchitect world-time strings): ")
    done = migrate("frozen-plans", stored, options={"calendar": "1492-03-01T08:00:00"})
    hours = 3_600_000_000
    frozen = done.value["warehouse_ambush"]
    assert (frozen["failed_at"], frozen["freeze_until"]) == (14.25 * hours, 18.25 * hours)
    assert frozen["freeze_until"] - frozen["failed_at"] == frozen["freeze_hours"] * hours
    assert done.steps[0].notes[0] == (
        "warehouse_ambush.failed_at: world time '1492-03-01T22:15:00' -> 51300000000 µs "
        "since the campaign's start 1492-03-01T08:00:00"
    )


@pytest.mark.parametrize(
    ("world", "start", "said"),
    [
        ("1492-03-01T07:00:00", "1492-03-01T08:00:00", "is before the campaign's start"),
        ("the third bell", "1492-03-01T08:00:00", "is not an ISO 8601 date and time"),
        ("1492-03-01T09:00:00+01:00", "1492-03-01T08:00:00", "has a time zone"),
    ],
)
def test_a_world_time_the_calendar_cannot_read_is_one_line(
    world: str, start: str, said: str
) -> None:
    with pytest.raises(ValueError, match=said):
        game_time(world, start)
    assert game_time("1492-03-01T08:00:00.000001", start) == 1


# plancontracts migrate ---------------------------------------------------------------------------


def test_the_command_prints_each_upgraded_document_and_each_step(upstream: Path) -> None:
    stored = upstream / "narratoria" / "example-plan.json"
    done = cli("migrate", "plan", str(stored))
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    assert json.loads(line)["tools"][0]["toolPath"] == "skills/torch-lighter/light.py"
    assert done.stderr.splitlines() == [
        f"plancontracts: {stored}: plan version 0 -> 1 (Narratoria tools/<skill> paths): "
        "tool 'light1': toolPath tools/torch-lighter -> skills/torch-lighter/light.py; "
        "tool 'examine1': toolPath tools/door-examiner -> skills/door-examiner/examine.py"
    ]


def test_the_command_says_a_file_is_current_and_refuses_one_no_step_reads(tmp_path: Path) -> None:
    current = tmp_path / "current.json"
    current.write_text(json.dumps({"time": 0, "turn": 0, "frozen_plans": {}}))
    other = tmp_path / "other.json"
    other.write_text('{"colour": "red"}')
    done = cli("migrate", "planning-session", str(current), str(other))
    assert done.returncode == 1
    assert json.loads(done.stdout) == {"time": 0, "turn": 0, "frozen_plans": {}}
    lines = done.stderr.splitlines()
    assert (
        lines[0] == f"plancontracts: {current}: planning-session version 1, current: nothing to do"
    )
    assert lines[1].startswith(
        f"plancontracts: error: {other}: not a planning-session document, and no migration "
        "recognizes it: "
    )
    assert len(lines) == 2


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["no-such-contract", "x.json"], 'unknown contract "no-such-contract"'),
        (["plan", "-", "--in-place"], "--in-place writes files back"),
        (["plan"], "the following arguments are required: FILE"),
        (["plan", "missing.json"], "missing.json: no such file"),
    ],
)
def test_usage_errors_exit_2_in_one_line(tmp_path: Path, arguments: list[str], said: str) -> None:
    done = cli("migrate", *arguments, cwd=tmp_path)
    assert done.returncode == 2
    assert said in done.stderr
    assert done.stdout == ""
    assert len([line for line in done.stderr.splitlines() if "error" in line]) == 1


def test_in_place_replaces_the_file_whole_and_leaves_a_current_one_alone(tmp_path: Path) -> None:
    stored = tmp_path / "frozen.json"
    old = json.dumps(_seed_freeze())
    stored.write_text(old)
    other_name = tmp_path / "link.json"
    os.link(stored, other_name)  # a second name of the old file: a rename leaves it as it was
    missing = cli("migrate", "frozen-plans", str(stored), "--in-place")
    assert missing.returncode == 1
    assert "give the option calendar" in missing.stderr
    assert stored.read_text() == old
    done = cli(
        "migrate", "frozen-plans", str(stored), "--in-place", "--calendar", "1492-03-01T08:00:00"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert decode("frozen-plans", stored.read_bytes())["warehouse_ambush"].failed_at == 51300000000
    assert other_name.read_text() == old  # replaced by a rename, never written over
    assert done.stderr.splitlines()[-1] == f"plancontracts: {stored}: written in place"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".frozen.json.lock",
        "frozen.json",
        "link.json",
    ]
    before = os.stat(stored)
    again = cli("migrate", "frozen-plans", str(stored), "--in-place")
    assert again.returncode == 0
    assert "current: nothing to do" in again.stderr
    after = os.stat(stored)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


# Stores migrate on open ---------------------------------------------------------------------------


def _old_session(now_hours: float = 15) -> dict[str, Any]:
    return {"time": int(now_hours * 3_600_000_000), "turn": 4, "frozen_plans": _seed_freeze()}


def test_think_state_upgrades_an_old_session_on_open_and_keeps_the_old(tmp_path: Path) -> None:
    state = tmp_path / "session.json"
    old = json.dumps(_old_session())
    state.write_text(old)
    arguments = ["think", "THINK: the ambush", "--state", str(state), "--topic", "warehouse ambush"]
    refused = cli(*arguments, "--no-download", timeout=60)
    assert refused.returncode == 2
    assert state.read_text() == old
    assert "give the option calendar" in refused.stderr
    # The topic is frozen in the upgraded session: refused before any model loads.
    done = cli(*arguments, "--calendar", "1492-03-01T08:00:00", "--no-download", timeout=60)
    assert done.returncode == 1, done.stderr
    backup = tmp_path / "session.json.v0.bak"
    assert backup.read_text() == old
    assert decode(PLANNING_SESSION, state.read_bytes()).frozen_plans[
        "warehouse_ambush"
    ].failed_at == (51300000000)
    lines = done.stderr.splitlines()
    assert lines[0].startswith(f"plancontracts: {state}: planning-session version 0 -> 1 (")
    assert lines[1] == (
        f"plancontracts: {state}: upgraded to planning-session's current version; "
        f"the old document kept as {backup}"
    )
    assert "not thinking about warehouse_ambush again yet" in lines[2]


def test_a_current_store_is_not_written_and_a_second_backup_never_replaces_the_first(
    tmp_path: Path,
) -> None:
    state = tmp_path / "session.json"
    current = b'{"time":0,"turn":0,"frozen_plans":{}}\n'
    state.write_bytes(current)
    said: list[str] = []
    assert current_document(PLANNING_SESSION, state, current, say=said.append) is current
    assert said == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["session.json"]
    old = json.dumps(_old_session()).encode()
    options = {"calendar": "1492-03-01T08:00:00"}
    for _ in range(2):
        state.write_bytes(old)
        current_document(PLANNING_SESSION, state, old, say=said.append, options=options)
    assert (tmp_path / "session.json.v0.bak").read_bytes() == old
    assert (tmp_path / "session.json.v0.1.bak").read_bytes() == old


def test_a_stop_while_a_store_is_upgraded_loses_no_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "session.json"
    old = json.dumps(_old_session()).encode()
    state.write_bytes(old)

    def stopped(path: Path, data: bytes) -> None:
        raise KeyboardInterrupt  # as Ctrl-C between keeping the backup and the replace

    monkeypatch.setattr(migrations, "replace_file", stopped)
    with pytest.raises(KeyboardInterrupt):
        current_document(
            PLANNING_SESSION, state, old, say=print, options={"calendar": "1492-03-01T08:00:00"}
        )
    assert state.read_bytes() == old
    assert (tmp_path / "session.json.v0.bak").read_bytes() == old
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")] == []


def three_at_once(program: str, *arguments: str) -> str:
    """Run the Python `program` in three processes at once; their standard errors, joined.

    Each must end with status 0. The tests' helpers are importable in them.
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", program, *arguments], stderr=subprocess.PIPE, text=True, env=env
        )
        for _ in range(3)
    ]
    said = ""
    for run in runs:
        _, stderr = run.communicate(timeout=HANG)
        assert run.returncode == 0, stderr
        said += stderr
    return said


_OPEN = """
import sys
from pathlib import Path
from plancontracts.runtime.planning_blocks.commands import _read_session, _turn

with _turn(sys.argv[1]):  # as think opens its state
    _read_session(sys.argv[1], upgrade=True, calendar="1492-03-01T08:00:00")
"""


@pytest.mark.process
def test_runs_opening_one_old_session_at_once_upgrade_it_once(tmp_path: Path) -> None:
    state = tmp_path / "session.json"
    old = json.dumps(_old_session())
    state.write_text(old)
    said = three_at_once(_OPEN, str(state))
    assert said.count("upgraded to planning-session's current version") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".session.json.lock",
        "session.json",
        "session.json.v0.bak",
    ]
    assert (tmp_path / "session.json.v0.bak").read_text() == old
    assert decode(PLANNING_SESSION, state.read_bytes()).turn == 4


def test_the_lock_a_store_takes_is_the_one_migrate_in_place_takes(tmp_path: Path) -> None:
    # `plancontracts migrate --in-place` and `think --state` take one lock: never both at once.
    state = tmp_path / "session.json"
    state.write_text(json.dumps(_old_session()))
    with locked(state):
        assert (tmp_path / ".session.json.lock").exists()


def test_migrated_is_the_public_result_type() -> None:
    assert isinstance(
        migrate(PLANNING_SESSION, {"time": 0, "turn": 0, "frozen_plans": {}}), Migrated
    )


# The story-draft database ---------------------------------------------------------------------


def _renamed_locale(value: Any, options: Mapping[str, str]) -> tuple[Any, Sequence[str]]:
    upgraded = {key: item for key, item in value.items() if key != "language"}
    return {**upgraded, "locale": value["language"]}, ["language renamed locale"]


OLD_DRAFTS = MigrationStep(
    "story-draft",
    0,
    1,
    "drafts with a language",
    lambda value: isinstance(value, dict) and "language" in value,
    _renamed_locale,
)
"A step as a story family would declare after renaming a field (the family declares none yet)."


@pytest.fixture
def draft_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    declared = migrations._declared

    def with_drafts(family: str) -> Mapping[str, tuple[MigrationStep, ...]]:
        found = dict(declared(family))
        return {**found, "story-draft": (OLD_DRAFTS,)} if family == "story_packages" else found

    monkeypatch.setattr(migrations, "_declared", with_drafts)


def _old_database(path: Path) -> tuple[str, str]:
    draft = msgspec.to_builtins(new_draft("en"))
    draft["language"] = draft.pop("locale")
    old = json.dumps(draft)
    with closing(sqlite3.connect(path)) as connection, connection:
        connection.execute("CREATE TABLE drafts (id TEXT PRIMARY KEY, draft TEXT NOT NULL)")
        connection.execute("INSERT INTO drafts VALUES (?, ?)", (draft["packageId"], old))
    return draft["packageId"], old


def _stored(path: Path, key: str) -> str:
    with closing(sqlite3.connect(path)) as connection:
        row = connection.execute("SELECT draft FROM drafts WHERE id = ?", (key,)).fetchone()
    text: str = row[0]
    return text


@pytest.mark.usefixtures("draft_steps")
def test_a_story_database_upgrades_old_drafts_on_open_and_keeps_the_old_one(
    tmp_path: Path,
) -> None:
    db = tmp_path / "stories.db"
    key, old = _old_database(db)
    said: list[str] = []
    with DraftStore(db, say=said.append) as store:
        assert store.load_draft(key).locale == "en"
    assert said == [
        f'{db}: the draft "{key}": story-draft version 0 -> 1 (drafts with a language): '
        "language renamed locale",
        f"{db}: upgraded; the old database kept as {db}.v0.bak",
    ]
    assert _stored(tmp_path / "stories.db.v0.bak", key) == old
    assert json.loads(_stored(db, key))["locale"] == "en"
    said.clear()
    with DraftStore(db, say=said.append):  # current now: nothing said, nothing written
        pass
    assert said == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stories.db", "stories.db.v0.bak"]


@pytest.mark.usefixtures("draft_steps")
def test_a_stop_while_a_story_database_is_upgraded_keeps_every_old_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "stories.db"
    key, old = _old_database(db)

    def stopped(*arguments: Any) -> None:
        raise KeyboardInterrupt  # as Ctrl-C after the backup, before the commit

    monkeypatch.setattr(DraftStore, "commit", stopped)
    with pytest.raises(KeyboardInterrupt):
        DraftStore(db, say=print)
    assert _stored(db, key) == old


def test_a_story_database_whose_contracts_have_no_steps_is_opened_as_before(
    tmp_path: Path,
) -> None:
    db = tmp_path / "stories.db"
    key, old = _old_database(db)
    said: list[str] = []
    with DraftStore(db, say=said.append) as store, pytest.raises(StoreError):
        store.load_draft(key)  # no step reads it: refused as it always was
    assert said == []
    assert _stored(db, key) == old


_OPEN_DATABASE = """
import sys
from pathlib import Path
from plancontracts.runtime.core import migrations
from plancontracts.runtime.story_packages import DraftStore
from test_migrations import OLD_DRAFTS

declared = migrations._declared
migrations._declared = lambda family: (
    {**declared(family), "story-draft": (OLD_DRAFTS,)} if family == "story_packages"
    else declared(family)
)
with DraftStore(Path(sys.argv[1])) as store:
    assert store.load_draft(sys.argv[2]).locale == "en"
"""


@pytest.mark.process
def test_runs_opening_one_old_database_at_once_upgrade_it_once(tmp_path: Path) -> None:
    db = tmp_path / "stories.db"
    key, old = _old_database(db)
    said = three_at_once(_OPEN_DATABASE, str(db), key)
    assert said.count("upgraded; the old database kept as") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stories.db", "stories.db.v0.bak"]
    assert _stored(tmp_path / "stories.db.v0.bak", key) == old


def test_think_refuses_a_calendar_without_a_session() -> None:
    done = cli("think", "THINK: the ambush", "--calendar", "1492-03-01T08:00:00", timeout=60)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "plancontracts: error: --topic, --lift and --calendar apply to a planning session: "
        "give --state FILE"
    ]


@settings(max_examples=150)
@given(
    st.dictionaries(
        st.sampled_from(["failed_at", "freeze_until", "original_dc", "freeze_hours", "x"]),
        st.datetimes(min_value=datetime(1400, 1, 1)).map(datetime.isoformat)
        | st.text(max_size=12)
        | st.integers(min_value=-1, max_value=30),
        min_size=1,
    ),
    st.datetimes(min_value=datetime(1400, 1, 1)).map(datetime.isoformat),
)
def test_any_world_time_freeze_migrates_to_a_valid_document_or_one_error_naming_the_step(
    frozen: dict[str, Any], start: str
) -> None:
    outcome: Exception | Migrated
    try:
        outcome = migrate("frozen-plans", {"topic": frozen}, options={"calendar": start})
    except (MigrationFailed, ContractError) as error:
        outcome = error
    if isinstance(outcome, MigrationFailed):
        assert outcome.step == "WorldArchitect world-time strings"
        assert "\n" not in str(outcome)
    elif isinstance(outcome, ContractError):  # no string time: not the step's shape
        assert not any(isinstance(frozen.get(key), str) for key in ("failed_at", "freeze_until"))
    else:
        assert isinstance(outcome, Migrated)
        assert violations("frozen-plans", outcome.value) == ()


def test_decode_with_migrate_asks_no_step_about_a_current_document(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def never(value: Any) -> bool:
        raise AssertionError("a step was asked about a current document")

    asking = MigrationStep("goal-planning-system", 0, 1, "never", never, _v1_to_v2)
    monkeypatch.setattr(migrations, "_declared", lambda family: {asking.contract: (asking,)})
    current = json.dumps(contract_schema(GOAL_PLANNING_SYSTEM)["examples"][0])
    assert decode(GOAL_PLANNING_SYSTEM, current, migrate=True) == decode(
        GOAL_PLANNING_SYSTEM, current
    )


def test_in_place_keeps_a_private_file_private_and_upgrades_through_a_link(tmp_path: Path) -> None:
    frozen = {
        "bridge": {
            "failed_at": "1492-03-03T00:00:00",
            "freeze_until": "1492-03-03T04:00:00",
            "original_dc": 14,
            "freeze_hours": 4,
            "description": "the crossing",
        }
    }
    real = tmp_path / "real.json"
    real.write_text(json.dumps(frozen), encoding="utf-8")
    real.chmod(0o600)
    link = tmp_path / "link.json"
    link.symlink_to(real.name)
    done = cli(
        "migrate", "frozen-plans", str(link), "--in-place", "--calendar", "1492-03-01T00:00:00"
    )
    assert done.returncode == 0, done.stderr
    assert link.is_symlink()  # the link kept, the file it names upgraded
    assert json.loads(real.read_text())["bridge"]["failed_at"] == 172_800_000_000
    assert stat.S_IMODE(real.stat().st_mode) == 0o600
