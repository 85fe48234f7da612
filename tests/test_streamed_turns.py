"""A turn's tools start while the model still writes the plan (`plan --execute`, `play`).

The writer here streams a plan the profile accepts and, once the first
tool's entry is written whole, waits for that tool to start before it
writes the rest: causality, never a clock, says the tool started before the
plan was whole.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, find, settings
from schema_strategies import valid_documents
from writers import WrittenWhole

from plancontracts import bundled_skills
from plancontracts.runtime.engine import attempts as tool_attempts
from plancontracts.runtime.model.chat import Message
from plancontracts.runtime.model.writer import Piece
from plancontracts.runtime.tool_plans import Planner
from plancontracts.runtime.tool_plans.narrator import play_turn
from plancontracts.runtime.tool_plans.profiles import plan_profile

PATIENCE = 120.0
"Seconds the writer waits for the first tool to start: only a hang reaches it."


def a_plan_of(tools: int) -> dict[str, Any]:
    """A document of the whole-plan profile with `tools` tools, none depending on another."""
    schema = plan_profile(bundled_skills()).schema

    def fits(document: dict[str, Any]) -> bool:
        calls = document["tools"]
        return len(calls) == tools and not any(call["dependencies"] for call in calls)

    found: dict[str, Any] = find(
        valid_documents(schema),
        fits,
        settings=settings(
            database=None, max_examples=2000, suppress_health_check=list(HealthCheck)
        ),
    )
    return found


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The id of each tool, in the order the executor starts them, during the test."""
    began: list[str] = []
    run_tool = tool_attempts.ToolAttempts.run_tool

    async def watched(self: Any, run: Any) -> None:
        began.append(run.call.tool_id)
        await run_tool(self, run)

    monkeypatch.setattr(tool_attempts.ToolAttempts, "run_tool", watched)
    return began


class WaitingForTheFirstTool(WrittenWhole):
    """Writes `document`, pausing after its first tool's entry until a tool has started."""

    def __init__(self, document: dict[str, Any], started: list[str]) -> None:
        self.document = document
        self.started = started
        self.started_before_the_end: bool | None = None

    async def stream_chat(
        self,
        messages: list[Message],
        schema: dict[str, Any],
        *,
        answer: str,
        max_tokens: int,
        seed: int | None,
    ) -> AsyncGenerator[Piece, None]:
        first = json.dumps(self.document["tools"][0])
        text = json.dumps(self.document)
        cut = text.index(first) + len(first)
        yield Piece(text[:cut], 1)
        with trio.move_on_after(PATIENCE):
            while not self.started:
                await trio.sleep(0.01)
        self.started_before_the_end = bool(self.started)
        yield Piece(text[cut:], 1)


@pytest.mark.process  # the tools are scripts
def test_a_tool_starts_before_the_model_has_written_the_whole_plan(started: list[str]) -> None:
    document = a_plan_of(2)
    writer = WaitingForTheFirstTool(document, started)
    planner = Planner(writer, bundled_skills(), say=lambda line: None, choosing="plan")
    turn = trio.run(play_turn, "I act", planner)
    assert writer.started_before_the_end is True
    (attempt,) = turn.attempts
    assert [tool.tool_id for tool in attempt.plan.tools] == ["t1", "t2"]
    assert [trace.tool_id for trace in attempt.result.tool_results] == ["t1", "t2"]
    assert started == ["t1", "t2"]  # each started once: the plan was not run again whole


@pytest.mark.process
def test_a_refused_first_answer_runs_its_replacement_whole(started: list[str]) -> None:
    good = a_plan_of(2)
    bad = {**good, "unasked": 7}  # refused when the answer ends, after its first tool started
    answers = [bad, good]

    class RefusedFirst(WaitingForTheFirstTool):
        async def stream_chat(self, *args: Any, **options: Any) -> AsyncGenerator[Piece, None]:
            self.document = answers.pop(0)
            async for piece in super().stream_chat(*args, **options):
                yield piece

    writer = RefusedFirst(bad, started)
    planner = Planner(writer, bundled_skills(), say=lambda line: None, choosing="plan")
    turn = trio.run(play_turn, "I act", planner)
    (attempt,) = turn.attempts
    assert answers == []  # asked again, and the second answer taken
    assert [trace.tool_id for trace in attempt.result.tool_results] == ["t1", "t2"]
    assert started[0] == "t1"  # the refused answer's first tool, cancelled or done
    assert started[-2:] == ["t1", "t2"]  # then the replacement, whole


class InPieces(WrittenWhole):
    """Writes `document` a few characters at a time, every time it is asked."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.text = json.dumps(document)
        self.asked = 0

    async def stream_chat(
        self,
        messages: list[Message],
        schema: dict[str, Any],
        *,
        answer: str,
        max_tokens: int,
        seed: int | None,
    ) -> AsyncGenerator[Piece, None]:
        self.asked += 1
        for start in range(0, len(self.text), 5):
            await trio.lowlevel.checkpoint()
            yield Piece(self.text[start : start + 5], 1)


@pytest.mark.process
def test_an_entry_the_executor_refuses_as_it_arrives_ends_in_the_patterns_plan() -> None:
    # A server that ignored the profile: the dice roller's formula is not one.
    document = a_plan_of(2)
    document["tools"][0] = {
        **document["tools"][0],
        "toolPath": "skills/dice-roller/roll.py",
        "input": {"formula": "a hundred sides"},
    }
    writer = InPieces(document)
    said: list[str] = []
    planner = Planner(writer, bundled_skills(), say=said.append, choosing="plan")
    turn = trio.run(play_turn, "I roll", planner)
    assert writer.asked == 2  # refused, asked again, refused: then the patterns
    assert "planning with patterns" in said[-1]
    (attempt,) = turn.attempts
    assert "roll.py" in attempt.plan.tools[0].tool_path  # the patterns' plan, run whole
