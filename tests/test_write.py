"""`plancontracts.write`: any contract written by a model, judged, and asked again if refused.

The loop is tried here with a scripted writer (a `Writer` whose answers the
test gives, piece by piece), so that each rule of the loop is seen alone:
the re-ask with the violations in the conversation, the budget of attempts,
tokens and seconds, the caller's check, the stream of partial values.
tests/test_write_models.py runs the same loop against the stub model server
and the packaged model.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Sequence
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from plancontracts import (
    Attempt,
    Budget,
    Contract,
    ContractSet,
    GenerationFailed,
    Violation,
    WriteFailed,
    load_contracts,
    write,
    write_sync,
)
from plancontracts.pytest_plugin import PromptSnapshot
from plancontracts.runtime.model.chat import Message, render_chat
from plancontracts.runtime.model.writer import Piece
from plancontracts.runtime.model.writing import (
    SHOWN_VIOLATIONS,
    decoding_schema,
    first_messages,
    refusal_message,
)

RECIPE = {
    "title": "Recipe",
    "type": "object",
    "required": ["name", "serves", "steps"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 40},
        "serves": {"type": "integer", "minimum": 1, "maximum": 12},
        "steps": {
            "type": "array",
            "minItems": 1,
            "maxItems": 4,
            "items": {"type": "string", "pattern": "^[A-Z][a-z ]*$"},
        },
    },
}
GOOD = {"name": "Soup", "serves": 4, "steps": ["Boil water", "Add leeks"]}


class ScriptedWriter:
    """A writer whose answers are given: each one sent a few characters at a time.

    A `GenerationFailed` in `answers` is raised instead of an answer. What it
    was asked (every conversation, every limit) is kept.
    """

    def __init__(self, answers: Sequence[str | GenerationFailed], piece: int = 3) -> None:
        self.answers = list(answers)
        self.piece = piece
        self.asked: list[list[Message]] = []
        self.limits: list[int] = []
        self.schemas: list[dict[str, Any]] = []
        self.closed = 0
        self.refusals = 0

    async def write_chat(
        self,
        messages: list[Message],
        schema: dict[str, Any],
        *,
        answer: str,
        max_tokens: int,
        seed: int | None,
    ) -> dict[str, Any]:
        raise AssertionError("write streams its answers")

    def refused(self) -> None:
        self.refusals += 1

    async def stream_chat(
        self,
        messages: list[Message],
        schema: dict[str, Any],
        *,
        answer: str,
        max_tokens: int,
        seed: int | None,
    ) -> AsyncGenerator[Piece, None]:
        self.asked.append([dict(message) for message in messages])
        self.limits.append(max_tokens)
        self.schemas.append(schema)
        answer_now = self.answers.pop(0)
        if isinstance(answer_now, GenerationFailed):
            raise answer_now
        try:
            for start in range(0, len(answer_now), self.piece):
                if 0 < max_tokens <= start // self.piece:
                    return  # cut at the token limit, as a model is
                await trio.lowlevel.checkpoint()
                yield Piece(answer_now[start : start + self.piece], 1)
        finally:
            self.closed += 1  # as a model stops writing, a server's connection closes


@pytest.fixture
def recipes(tmp_path: Path) -> ContractSet:
    path = tmp_path / "recipe.schema.json"
    path.write_text(json.dumps(RECIPE))
    return load_contracts(path)


def text(document: Any) -> str:
    return json.dumps(document)


def run(contract: Contract[Any], writer: ScriptedWriter, **options: Any) -> Any:
    async def written() -> Any:
        return await write(contract, "A soup for four", writer=writer, **options)

    return trio.run(written)


# Accepted, refused, asked again ------------------------------------------------------------


def test_an_answer_the_contract_accepts_is_returned_at_once(recipes: ContractSet) -> None:
    writer = ScriptedWriter([text(GOOD)])
    assert run(recipes["recipe"], writer) == GOOD
    assert len(writer.asked) == 1


def test_a_bundled_contract_is_written_as_its_typed_value() -> None:
    from plancontracts import PLAN, contract_schema, decode
    from plancontracts.generated.tool_plans import Plan

    example = contract_schema(PLAN)["examples"][0]
    writer = ScriptedWriter([text(example)])
    plan = run(PLAN, writer)
    assert isinstance(plan, Plan)
    assert plan == decode(PLAN, text(example))


def test_a_refused_answer_is_asked_again_with_its_violations(recipes: ContractSet) -> None:
    bad = {**GOOD, "serves": 40, "steps": ["boil water"]}
    writer = ScriptedWriter([text(bad), text(GOOD)])
    seen: list[Attempt] = []
    assert run(recipes["recipe"], writer, on_attempt=seen.append) == GOOD
    assert [attempt.number for attempt in seen] == [1, 2]
    assert writer.refusals == 1
    assert {v.pointer for v in seen[0].violations} == {"/serves", "/steps/0"}
    assert not seen[1].violations
    second = writer.asked[1]
    assert second[:-2] == writer.asked[0]  # the first conversation, then the refusal
    assert second[-2] == {"role": "assistant", "content": text(bad)}
    assert second[-1]["role"] == "user"
    assert "/serves" in second[-1]["content"]
    assert "/steps/0" in second[-1]["content"]


def test_text_that_is_not_json_is_refused_and_asked_again(recipes: ContractSet) -> None:
    writer = ScriptedWriter(['{"name": "So', text(GOOD)])
    seen: list[Attempt] = []
    assert run(recipes["recipe"], writer, on_attempt=seen.append) == GOOD
    assert len(seen[0].violations) == 1
    assert seen[0].violations[0].pointer == ""


def test_the_callers_check_refuses_an_answer_the_contract_accepts(
    recipes: ContractSet,
) -> None:
    small = {**GOOD, "serves": 2}

    def for_four(recipe: Any) -> list[Violation]:
        if recipe["serves"] != 4:
            return [Violation("/serves", "the soup is for four")]
        return []

    writer = ScriptedWriter([text(small), text(GOOD)])
    assert run(recipes["recipe"], writer, check=for_four) == GOOD
    assert "/serves: the soup is for four" in writer.asked[1][-1]["content"]


def test_a_writer_that_fails_is_a_refused_attempt_and_not_shown_back(
    recipes: ContractSet,
) -> None:
    writer = ScriptedWriter([GenerationFailed("the server gave no answer"), text(GOOD)])
    seen: list[Attempt] = []
    assert run(recipes["recipe"], writer, on_attempt=seen.append) == GOOD
    assert "the server gave no answer" in seen[0].violations[0].message
    assert writer.asked[1] == writer.asked[0]  # nothing to show back: asked the same again


# The budget ---------------------------------------------------------------------------------


def test_the_attempts_spent_raise_with_every_attempts_violations(recipes: ContractSet) -> None:
    bad = [text({**GOOD, "serves": n}) for n in (0, 13, 40)]
    writer = ScriptedWriter(bad)
    with pytest.raises(WriteFailed, match="in 3 attempts") as raised:
        run(recipes["recipe"], writer)
    assert [a.number for a in raised.value.attempts] == [1, 2, 3]
    for attempt in raised.value.attempts:
        assert [v.pointer for v in attempt.violations] == ["/serves"]
    assert len(writer.asked) == 3
    assert "\n" not in str(raised.value)


def test_attempts_overrides_the_budgets_attempts(recipes: ContractSet) -> None:
    writer = ScriptedWriter([text({**GOOD, "serves": 0})] * 5)
    with pytest.raises(WriteFailed) as raised:
        run(recipes["recipe"], writer, attempts=1, budget=Budget(attempts=5))
    assert len(raised.value.attempts) == 1


def test_the_token_budget_bounds_each_answer_and_all_of_them(recipes: ContractSet) -> None:
    answer = text({**GOOD, "serves": 0})  # 3 characters a token: about 25 tokens
    writer = ScriptedWriter([answer] * 5)
    with pytest.raises(WriteFailed, match=r"token budget \(40\)") as raised:
        run(recipes["recipe"], writer, budget=Budget(attempts=5, tokens=40))
    assert writer.limits[0] == 40
    assert writer.limits[1] == 40 - raised.value.attempts[0].tokens
    assert sum(a.tokens for a in raised.value.attempts) == 40


def test_the_time_budget_stops_a_slow_writer(recipes: ContractSet) -> None:
    class Slow(ScriptedWriter):
        async def stream_chat(self, *args: Any, **kwargs: Any) -> AsyncGenerator[Piece, None]:
            await trio.sleep(10)
            yield Piece("{}", 1)

    async def written() -> Any:
        return await write(
            recipes["recipe"], "soup", writer=Slow([]), budget=Budget(attempts=3, seconds=25)
        )

    with pytest.raises(WriteFailed, match=r"time budget \(25 s\)") as raised:
        trio.run(written, clock=trio.testing.MockClock(autojump_threshold=0))
    assert len(raised.value.attempts) == 2  # two refused, the third stopped


@pytest.mark.parametrize(
    "budget", [{"attempts": 0}, {"tokens": 0}, {"seconds": 0}, {"seconds": -1.0}]
)
def test_a_budget_that_allows_nothing_is_refused(budget: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="budget"):
        Budget(**budget)


# What the model reads -----------------------------------------------------------------------


def test_a_prompt_becomes_a_user_message_after_the_contracts_system_message(
    recipes: ContractSet,
) -> None:
    messages = first_messages(recipes["recipe"], "A soup")
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "`recipe`" in messages[0]["content"]
    given = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Soup"}]
    assert first_messages(recipes["recipe"], given) == given


def test_a_message_that_is_not_a_chat_message_is_refused(recipes: ContractSet) -> None:
    with pytest.raises(TypeError, match="role and a content"):
        first_messages(recipes["recipe"], [{"text": "soup"}])


def test_the_write_prompt(recipes: ContractSet, prompt_snapshot: PromptSnapshot) -> None:
    messages = first_messages(recipes["recipe"], "A soup for four")
    assert render_chat(messages, None, answer="JSON") == prompt_snapshot


def test_the_refusal_prompt(recipes: ContractSet, prompt_snapshot: PromptSnapshot) -> None:
    from plancontracts import violations

    refused = violations(recipes["recipe"], {**GOOD, "serves": 40, "steps": ["boil", 3]})
    assert refusal_message(refused) == prompt_snapshot


def test_the_refusal_names_the_first_violations_and_counts_the_rest(
    recipes: ContractSet,
) -> None:
    from plancontracts import Violations

    many = Violations([Violation(f"/steps/{n}", "wrong") for n in range(50)])
    shown = refusal_message(many)
    assert f"/steps/{SHOWN_VIOLATIONS - 1}:" in shown
    assert f"/steps/{SHOWN_VIOLATIONS}:" not in shown
    assert f"and {50 - SHOWN_VIOLATIONS} more" in shown


def test_a_contract_beyond_the_profile_deriver_is_written_under_its_own_schema(
    tmp_path: Path,
) -> None:
    path = tmp_path / "pair.schema.json"
    schema = {"type": "object", "allOf": [{"required": ["a"]}], "properties": {"a": {}}}
    path.write_text(json.dumps(schema))
    pair = load_contracts(path)["pair"]
    assert decoding_schema(pair)["allOf"] == [{"required": ["a"]}]
    writer = ScriptedWriter(['{"b": 1}', '{"a": 1}'])
    assert run(pair, writer) == {"a": 1}


# Streaming ----------------------------------------------------------------------------------


def streamed(contract: Contract[Any], writer: ScriptedWriter, **options: Any) -> list[Any]:
    async def partials() -> list[Any]:
        async with write(contract, "soup", writer=writer, stream=True, **options) as channel:
            return [partial async for partial in channel]

    return trio.run(partials)


def test_a_stream_hands_out_growing_values_then_the_document(recipes: ContractSet) -> None:
    seen = streamed(recipes["recipe"], ScriptedWriter([text(GOOD)], piece=1))
    assert seen[-1].done
    assert seen[-1].document == GOOD
    assert seen[-1].value == GOOD
    growing = [partial.value for partial in seen[:-1]]
    assert growing[0] == {}
    assert {"name": "Soup"} in growing
    assert {"name": "Soup", "serves": 4, "steps": ["Boil water"]} in growing
    assert all(partial.attempt == 1 for partial in seen)


def test_a_streamed_refusal_starts_the_next_attempt_from_nothing(recipes: ContractSet) -> None:
    bad = text({**GOOD, "serves": 40})
    seen = streamed(recipes["recipe"], ScriptedWriter([bad, text(GOOD)], piece=1))
    attempts = [partial.attempt for partial in seen]
    assert attempts == sorted(attempts)
    assert attempts[-1] == 2
    # A value the contract refuses whatever comes next is never handed out.
    assert all(partial.value.get("serves") != 40 for partial in seen)
    assert next(p for p in seen if p.attempt == 2).value == {}


def test_leaving_a_stream_early_stops_the_writing(recipes: ContractSet) -> None:
    writer = ScriptedWriter([text(GOOD)], piece=1)

    async def first() -> Any:
        async with write(recipes["recipe"], "soup", writer=writer, stream=True) as channel:
            first = await channel.receive()
        return first.value, writer.closed  # within the run: closed when the block ended

    assert trio.run(first) == ({}, 1)


def test_a_reader_that_fails_closes_the_writers_stream_at_once(recipes: ContractSet) -> None:
    writer = ScriptedWriter([text(GOOD)], piece=1)

    async def on_text(text: str, tokens: int, attempt: int) -> None:
        raise RuntimeError("the reader failed")

    async def written() -> Any:
        from plancontracts.runtime.model.writing import contract_judge, write_checked

        judge = contract_judge(recipes["recipe"], None)
        with pytest.raises(RuntimeError, match="the reader failed"):
            await write_checked(writer, [], {}, judge, on_text=on_text)
        return writer.closed  # within the run: closed by the loop, not when collected

    assert trio.run(written) == 1


def test_a_stream_that_spends_its_budget_raises_write_failed(recipes: ContractSet) -> None:
    writer = ScriptedWriter([text({**GOOD, "serves": 0})] * 2)
    with pytest.raises(WriteFailed, match="in 2 attempts"):
        streamed(recipes["recipe"], writer, attempts=2)


def test_the_blocking_form_returns_the_document(recipes: ContractSet) -> None:
    writer = ScriptedWriter([text({**GOOD, "serves": 0}), text(GOOD)])
    assert write_sync(recipes["recipe"], "soup", writer=writer) == GOOD


# What a caller may get wrong, and a writer that does not keep to its limits ----------------


def test_a_check_may_say_none_for_no_violation(recipes: ContractSet) -> None:
    assert run(recipes["recipe"], ScriptedWriter([text(GOOD)]), check=lambda value: None) == GOOD


@pytest.mark.parametrize(
    ("returned", "says"),
    [(5, "returned int, not an iterable of Violation"), (["bad"], "returned a str among")],
)
def test_a_check_that_returns_no_violations_is_a_type_error_naming_it(
    recipes: ContractSet, returned: Any, says: str
) -> None:
    def strict(value: Any) -> Any:
        return returned

    with pytest.raises(TypeError, match=f"the check strict {says}"):
        run(recipes["recipe"], ScriptedWriter([text(GOOD)]), check=strict)


def test_a_check_without_end_is_read_as_far_as_the_violations_listed(
    recipes: ContractSet,
) -> None:
    from plancontracts import MAX_VIOLATIONS

    def endless(value: Any) -> Any:
        while True:
            yield Violation("/name", "never good enough")

    with pytest.raises(WriteFailed) as raised:
        run(recipes["recipe"], ScriptedWriter([text(GOOD)]), check=endless, attempts=1)
    (attempt,) = raised.value.attempts
    assert len(attempt.violations) == MAX_VIOLATIONS
    assert not attempt.violations.complete


def test_a_slow_check_is_stopped_by_the_time_budget(recipes: ContractSet) -> None:
    import threading

    released = threading.Event()

    def slow(value: Any) -> list[Violation]:
        released.wait(60)  # a check that takes a minute
        return []

    try:
        with pytest.raises(WriteFailed, match="time budget"):
            run(
                recipes["recipe"],
                ScriptedWriter([text(GOOD)]),
                check=slow,
                budget=Budget(seconds=0.2),
            )
    finally:
        released.set()


def test_a_writer_past_its_token_limit_is_cut_at_the_budget(recipes: ContractSet) -> None:
    class Overrunning(ScriptedWriter):
        async def stream_chat(self, *args: Any, **options: Any) -> AsyncGenerator[Piece, None]:
            async for piece in super().stream_chat(*args, **{**options, "max_tokens": 0}):
                yield piece

    writer = Overrunning([text(GOOD)])
    with pytest.raises(WriteFailed, match=r"token budget \(5\)") as raised:
        run(recipes["recipe"], writer, budget=Budget(tokens=5))
    assert "past the token budget" in raised.value.attempts[0].violations[0].message
    assert writer.closed == 1


def test_the_conversation_keeps_the_last_refusals_only(recipes: ContractSet) -> None:
    from plancontracts.runtime.model.writing import KEPT_REFUSALS

    refused = [text({**GOOD, "serves": 20 + n}) for n in range(5)]
    writer = ScriptedWriter([*refused, text(GOOD)])
    assert run(recipes["recipe"], writer, attempts=6) == GOOD
    first = writer.asked[0]
    last = writer.asked[-1]
    assert last[: len(first)] == first
    assert len(last) == len(first) + 2 * KEPT_REFUSALS
    assert last[-2]["content"] == refused[-1]
    assert last[-4]["content"] == refused[-2]


@pytest.mark.parametrize(
    ("options", "error", "says"),
    [
        ({"max_tokens": -5}, ValueError, "max_tokens"),
        ({"writer": None}, TypeError, "load_writer"),
        ({"messages": [{"role": "robot", "content": "soup"}]}, ValueError, "role"),
    ],
)
def test_arguments_write_cannot_use_are_refused_before_any_writing(
    recipes: ContractSet, options: dict[str, Any], error: type[Exception], says: str
) -> None:
    writer = ScriptedWriter([text(GOOD)])
    given: dict[str, Any] = {"messages": "soup", "writer": writer, **options}

    async def written() -> Any:
        return await write(recipes["recipe"], given.pop("messages"), **given)

    with pytest.raises(error, match=says):
        trio.run(written)
    assert writer.asked == []


def test_the_blocking_form_inside_a_trio_run_says_to_await_write(recipes: ContractSet) -> None:
    async def inside() -> Any:
        return write_sync(recipes["recipe"], "soup", writer=ScriptedWriter([text(GOOD)]))

    with pytest.raises(RuntimeError, match="await write"):
        trio.run(inside)
