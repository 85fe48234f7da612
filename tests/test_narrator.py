"""The narrator's turn: replans after failures, disables failed skills, falls back at the end."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
from commands import without_a_model

from plancontracts import PLAN_ATTEMPT, contract_schema, convert, decode, violations
from plancontracts.generated.tool_plans import Plan, PlanAttempt, PlanMetadata, ToolInvocation
from plancontracts.pytest_plugin import PromptSnapshot
from plancontracts.runtime.engine.limits import Limits
from plancontracts.runtime.engine.skills import SkillSet, discover_skills
from plancontracts.runtime.tool_plans import Planner, Turn, play_turn
from plancontracts.runtime.tool_plans.narrator import fallback_narration
from plancontracts.skills import BUNDLED_SKILLS

FAULTS = Path(__file__).parent / "fault_skills"
FAILING = (
    '{"version": "0", "type": "error", "errorCode": "wet", "errorMessage": "the torch is wet"}'
)


def play(text: str, planner: Any, tmp_path: Path, **options: Any) -> Turn:
    return trio.run(
        partial(
            play_turn,
            text,
            planner,
            data_root=tmp_path / "data",
            limits=Limits(shutdown_grace=1.0, plan_timeout=120),
            **options,
        )
    )


@pytest.fixture
def wet_torch(tmp_path: Path) -> SkillSet:
    """The bundled skills, but with a torch lighter whose script always fails."""
    folder = tmp_path / "override" / "torch-lighter"
    folder.mkdir(parents=True)
    manifest = {
        "name": "torch-lighter",
        "version": "1.0.0",
        "description": "A torch that never catches.",
        "scripts": [{"name": "light", "path": "light.py"}],
    }
    (folder / "skill.json").write_text(json.dumps(manifest))
    (folder / "light.py").write_text(
        f"import sys\nsys.stdin.read()\nprint({FAILING!r})\n"
        'print(\'{"version": "0", "type": "done", "ok": false}\')\n'
    )
    skills = discover_skills([tmp_path / "override", BUNDLED_SKILLS])
    assert len(skills.problems) == 1  # the bundled torch lighter, shadowed
    assert skills.skills["torch-lighter"].folder == folder.resolve()
    return skills


def test_a_plan_that_works_is_narrated_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="plancontracts.narrator")
    turn = play("I light the torch", Planner(None, discover_skills([BUNDLED_SKILLS])), tmp_path)
    assert not turn.fell_back
    assert len(turn.attempts) == 1
    assert turn.narration.startswith("You bring a flame to the torch. The torch is lit.")
    assert turn.state["torch"] == {"lit": True}
    (record,) = caplog.records
    details = vars(record)["plancontracts"]  # logging's `extra` lands in the record's __dict__
    assert details["outcome"] == "success"
    assert details["generation"] == 1
    assert details["skills"] == ["storyteller", "torch-lighter"]
    assert details["planId"] == turn.attempts[0].plan.request_id


def test_a_failed_skill_is_disabled_in_the_next_generation(
    tmp_path: Path, wet_torch: SkillSet, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="plancontracts.narrator")
    turn = play("I light the torch and roll 2d6", Planner(None, wet_torch), tmp_path)
    first, second = turn.attempts
    assert not first.result.success
    assert first.result.failed_tools == ["t1"]
    assert second.plan.disabled_skills == ["torch-lighter"]
    assert isinstance(second.plan.metadata, PlanMetadata)
    assert second.plan.metadata.generation_attempt == 2
    assert second.plan.metadata.parent_plan_id == first.plan.request_id
    assert [call.tool_path for call in second.plan.tools] == [
        "skills/dice-roller/roll.py",
        "skills/storyteller/narrate.py",
    ]
    assert second.result.success
    assert "2d6 rolled" in turn.narration
    assert [vars(r)["plancontracts"]["outcome"] for r in caplog.records] == ["failed", "success"]


class Recording:
    """A planner that notes what each generation was told went wrong, then plans as `inner`."""

    def __init__(self, inner: Planner) -> None:
        self.inner = inner
        self.skills = inner.skills
        self.told: list[list[str]] = []

    async def plan(self, player_input: str, **options: Any) -> Plan:
        self.told.append(list(options.get("failures", ())))
        return await self.inner.plan(player_input, **options)


def test_a_replan_is_told_what_went_wrong(tmp_path: Path, wet_torch: SkillSet) -> None:
    planner = Recording(Planner(None, wet_torch))
    turn = play("I light the torch and roll 2d6", planner, tmp_path)
    assert turn.attempts[1].result.success
    retries = turn.attempts[0].result.tool_results[0].retry_count
    assert planner.told == [
        [],
        [
            f"`t1` (skills/torch-lighter/light.py) failed after {retries} retries: "
            "tool_failure wet: the torch is wet"
        ],
    ]


def test_each_attempt_is_recorded_as_a_plan_attempt(tmp_path: Path, wet_torch: SkillSet) -> None:
    records: list[PlanAttempt] = []
    turn = play("I light the torch", Planner(None, wet_torch), tmp_path, on_attempt=records.append)
    failed, succeeded = records
    # The record is a contract's document: what a log line holds passes it.
    assert convert(PLAN_ATTEMPT, msgspec.to_builtins(failed)) == failed
    assert (failed.outcome, failed.generation, succeeded.outcome) == ("failed", 1, "success")
    assert failed.plan == turn.attempts[0].plan
    (failure,) = failed.failures
    trace = turn.attempts[0].result.tool_results[0]
    assert (failure.tool_id, failure.tool_path, failure.state) == (
        "t1",
        "skills/torch-lighter/light.py",
        "failed",
    )
    assert failure.retry_count == trace.retry_count > 0
    assert (failure.error.code, failure.error.message) == ("wet", "the torch is wet")
    assert failed.disabled_skills == ["torch-lighter"]
    assert succeeded.failures == []
    assert failed.timestamp <= succeeded.timestamp
    assert failed.timestamp.endswith("Z")


class StubbornPlanner:
    """A planner that keeps calling a failing script, whatever is disabled."""

    skills = discover_skills([FAULTS])

    async def plan(
        self,
        player_input: str,
        *,
        disabled: Iterable[str] = (),
        state: Mapping[str, Any] | None = None,
        generation: int = 1,
        parent_plan_id: str | None = None,
        seed: int | None = None,
        failures: Sequence[str] = (),
    ) -> Plan:
        return Plan(
            request_id=f"00000000-0000-4000-8000-00000000000{generation}",
            tools=[ToolInvocation(tool_id="t1", tool_path="skills/faults/fails.py")],
            disabled_skills=sorted(disabled),
            metadata=PlanMetadata(generation_attempt=generation, parent_plan_id=parent_plan_id),
        )


def test_after_five_failed_generations_the_template_narrates(tmp_path: Path) -> None:
    turn = play("I sing to the door.", StubbornPlanner(), tmp_path)
    assert turn.fell_back
    assert len(turn.attempts) == 5
    first, *later = turn.attempts
    assert first.result.failed_tools == ["t1"]
    # The executor refuses a plan that uses a disabled skill, before running it.
    assert all(attempt.result.error is not None for attempt in later)
    assert turn.narration == fallback_narration("I sing to the door.")
    assert turn.state == {}
    assert turn.why_it_fell_back is not None
    assert turn.why_it_fell_back.startswith(
        "5 plans failed; the last: the plan was rejected before it ran: "
        "invalid_plan unusable_script: "
    )


def test_skills_turned_off_before_the_turn_stay_off_from_its_first_plan(tmp_path: Path) -> None:
    planner = Planner(None, discover_skills([BUNDLED_SKILLS]))
    turn = play("I light the torch", planner, tmp_path, disabled=["torch-lighter"])
    (attempt,) = turn.attempts
    assert attempt.plan.disabled_skills == ["torch-lighter"]
    # The pattern planner's torch plan without its torch: narration alone.
    assert attempt.plan.tools == []
    assert turn.why_it_fell_back is None


def test_a_rejected_attempt_records_the_reason(tmp_path: Path) -> None:
    records: list[PlanAttempt] = []
    play("I sing to the door.", StubbornPlanner(), tmp_path, on_attempt=records.append)
    assert [record.outcome for record in records] == ["failed"] + ["rejected"] * 4
    rejected = records[1]
    assert rejected.rejection
    assert rejected.rejection.code == "unusable_script"  # its skill is disabled
    assert rejected.failures == []
    assert convert(PLAN_ATTEMPT, msgspec.to_builtins(rejected)) == rejected


def test_plan_execute_appends_each_attempt_to_the_log(tmp_path: Path) -> None:
    log = tmp_path / "attempts.ndjson"
    for _ in range(2):
        done = without_a_model(
            "plan", "--execute", "I light the torch", "--data", str(tmp_path), "--log", str(log)
        )
        assert done.returncode == 0, done.stderr
    lines = log.read_bytes().splitlines()
    assert len(lines) == 2
    assert [decode(PLAN_ATTEMPT, line).outcome for line in lines] == ["success", "success"]


@pytest.mark.parametrize(
    ("arguments", "status", "said"),
    [
        (["--log", "{tmp}/attempts"], 2, "--log records executed plans: give --execute too"),
        (
            ["--execute", "--log", "{tmp}/missing/attempts"],
            2,
            "cannot open the log {tmp}/missing/attempts: no such file or directory",
        ),
        (
            ["--execute", "--log", "/dev/full"],
            1,
            "cannot write to the log /dev/full: no space left on device",
        ),
    ],
)
def test_a_log_that_cannot_be_written_is_one_line(
    tmp_path: Path, arguments: list[str], status: int, said: str
) -> None:
    given = [argument.format(tmp=tmp_path) for argument in arguments]
    done = without_a_model("plan", "I light the torch", "--data", str(tmp_path), *given)
    assert done.returncode == status
    (error,) = [line for line in done.stderr.splitlines() if line.startswith("plancontracts: ")]
    assert error.endswith(said.format(tmp=tmp_path))
    assert "Traceback" not in done.stderr


def test_the_fallback_narration(prompt_snapshot: PromptSnapshot) -> None:
    assert fallback_narration("I  open the  vault door!") == prompt_snapshot.with_tokenizer(None)


def test_plan_execute_narrates_and_traces(tmp_path: Path) -> None:
    done = without_a_model("plan", "--execute", "I light the torch", "--data", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("You bring a flame to the torch. The torch is lit.")
    assert "planner: no model; planning with patterns" in done.stderr
    assert " succeeded in " in done.stderr


def test_play_offers_narrative_choices_as_numbers(tmp_path: Path) -> None:
    done = without_a_model("play", "--data", str(tmp_path), stdin="I examine the iron door\n2\n\n")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "  2. Knock on the iron door" in lines
    assert "> (Knock on the iron door)" in lines
    assert "You knock on the iron door. The world waits." in lines


def test_a_digit_that_is_not_a_number_is_played_as_text(tmp_path: Path) -> None:
    done = without_a_model("play", "--data", str(tmp_path), stdin="I examine the iron door\n²\n\n")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "> (" not in done.stdout  # no choice was picked


@pytest.mark.parametrize("text", ["", "   "])
def test_an_empty_player_input_is_refused_before_any_model_loads(text: str) -> None:
    done = without_a_model("plan", text)
    assert done.returncode == 2
    assert "an empty player input" in done.stderr
    assert "model:" not in done.stderr


def test_an_overlong_input_line_is_skipped_in_bounded_memory() -> None:
    stdin = "I light the torch\n" + "a" * 70_000 + "\nI roll 2d6\n"
    done = without_a_model("plan", "-", stdin=stdin)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 2  # the two lines that fit
    assert "line 2 of standard input is longer than 65536 characters: skipped" in done.stderr


def test_standard_input_that_never_ends_a_line_is_read_no_further() -> None:
    done = without_a_model("plan", "-", stdin="a" * 200_000)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert "does not end within 65536 more: the rest is not read" in done.stderr


def test_a_record_says_why_exactly_when_its_plan_was_rejected() -> None:
    (example,) = contract_schema(PLAN_ATTEMPT)["examples"]
    why = {"category": "circular_dependency", "code": "cycle", "message": "t1 -> t2 -> t1"}
    assert not violations(PLAN_ATTEMPT, example)
    found = {
        "failed, with a reason": violations(PLAN_ATTEMPT, {**example, "rejection": why}),
        "rejected, no reason": violations(PLAN_ATTEMPT, {**example, "outcome": "rejected"}),
        "rejected": violations(
            PLAN_ATTEMPT, {**example, "outcome": "rejected", "failures": [], "rejection": why}
        ),
    }
    assert [str(v) for v in found["failed, with a reason"]] == [
        "/rejection: only a rejected plan's record says why it was rejected; "
        'this one\'s outcome is "failed"'
    ]
    assert [str(v) for v in found["rejected, no reason"]] == [
        '(document): missing "rejection", which a rejected plan\'s record holds',
        "/failures: a rejected plan ran nothing, so no tool of it failed",
    ]
    assert not found["rejected"]


def play_wet(tmp_path: Path, stdin: str, *options: str) -> list[str]:
    """`play` with the wet torch (the `wet_torch` fixture's folder) and one plan an input."""
    skills = ("--skills", str(tmp_path / "override"), "--skills", str(BUNDLED_SKILLS))
    done = without_a_model(
        "play", *skills, "--plans", "1", "--data", str(tmp_path / "data"), *options, stdin=stdin
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout.splitlines()


WHY = (
    "1 plan failed; the last: `t1` (skills/torch-lighter/light.py) "
    "failed after 3 retries: tool_failure wet: the torch is wet"
)
GAVE_UP = f"(the narrator gave up: {WHY})"
ASKED = "Skills off for this session: {}. Type retry, skip, enable SKILL, or your next action."


def test_play_says_why_it_gave_up_and_a_retry_leaves_the_failed_skill_off(
    tmp_path: Path, wet_torch: SkillSet
) -> None:
    lines = play_wet(tmp_path, "I light the torch\nretry\n\n")
    assert lines[1:4] == [
        "> " + fallback_narration("I light the torch"),
        GAVE_UP,
        ASKED.format("torch-lighter"),
    ]
    # The retry plans without the torch lighter: the storyteller alone narrates.
    assert lines[4] == "? You light the torch. The world waits."
    assert lines[5:] == ["> "]


def test_play_can_turn_a_skill_back_on_or_skip(tmp_path: Path, wet_torch: SkillSet) -> None:
    stdin = "I light the torch\nenable dice-roller\nenable torch-lighter\nskip\nI wait\n\n"
    lines = play_wet(tmp_path, stdin)
    assert lines[3:9] == [
        ASKED.format("torch-lighter"),
        "? no skill named 'dice-roller' is off",
        ASKED.format("torch-lighter"),
        # Back on, the torch lighter is tried again, and fails again.
        "? " + fallback_narration("I light the torch"),
        GAVE_UP,
        ASKED.format("torch-lighter"),
    ]
    assert lines[9] == "? > You wait. The world waits."


def test_after_giving_up_a_line_that_is_no_answer_is_the_next_action(
    tmp_path: Path, wet_torch: SkillSet
) -> None:
    lines = play_wet(tmp_path, "I light the torch\nI wait\n")
    assert lines[4:] == ["? You wait. The world waits.", "> "]


def test_plan_execute_says_why_it_gave_up_on_stderr(tmp_path: Path, wet_torch: SkillSet) -> None:
    skills = ("--skills", str(tmp_path / "override"), "--skills", str(BUNDLED_SKILLS))
    done = without_a_model(
        "plan", "--execute", "I light the torch", *skills, "--plans", "1",
        "--data", str(tmp_path / "data"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == fallback_narration("I light the torch") + "\n"
    assert f"plancontracts: the narrator gave up: {WHY}" in done.stderr.splitlines()


class SilentPlanner(StubbornPlanner):
    """A planner whose plan calls nothing and says nothing: a weak model's narration-only plan."""

    async def plan(self, player_input: str, **options: Any) -> Plan:
        return Plan(request_id="00000000-0000-4000-8000-000000000001", tools=[], narrative=" ")


def test_a_plan_that_calls_and_says_nothing_still_tells_the_player_something(
    tmp_path: Path,
) -> None:
    turn = play("I sing to the horse", SilentPlanner(), tmp_path)
    assert not turn.fell_back
    assert turn.narration == "You sing to the horse. The world waits."
