"""Every answer a model writes is a GenAI `chat` span under its `write` span, content kept out.

Read through OpenTelemetry's SDK in memory (`traces.traced`): the spans'
names, parents and attributes, and the metrics, as a team's backend gets them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from local_servers import Reply, model_server
from opentelemetry.trace import SpanKind, StatusCode
from test_write import GOOD, RECIPE, ScriptedWriter, text
from tiers import examples_at_most
from traces import Traced, all_text, attributes

from plancontracts import Budget, ContractSet, WriteFailed, load_contracts, write
from plancontracts.runtime.core.telemetry import CONTENT_VARIABLE
from plancontracts.runtime.model.local import LocalModel
from plancontracts.runtime.model.resolution import ServerSettings
from plancontracts.runtime.model.served import ServedModel

PROMPT = "A soup for four, with leeks from the garden"


@pytest.fixture
def recipes(tmp_path: Path) -> ContractSet:
    path = tmp_path / "recipe.schema.json"
    path.write_text(json.dumps(RECIPE))
    return load_contracts(path)


def written(recipes: ContractSet, writer: Any, prompt: str = PROMPT, **options: Any) -> Any:
    async def run() -> Any:
        return await write(recipes["recipe"], prompt, writer=writer, **options)

    return trio.run(run)


def test_a_refused_answer_and_its_reask_are_two_chat_spans_under_one_write(
    recipes: ContractSet, traced: Traced
) -> None:
    bad = {**GOOD, "serves": 40, "steps": ["boil water"]}
    assert written(recipes, ScriptedWriter([text(bad), text(GOOD)])) == GOOD
    (writing,) = traced.named("write recipe")
    assert writing.parent is None
    assert attributes(writing)["plancontracts.outcome"] == "accepted"
    assert attributes(writing)["plancontracts.attempts.used"] == 2
    first, second = traced.children(writing)
    for number, call in enumerate((first, second), start=1):
        assert call.name == "chat ScriptedWriter"
        assert call.kind is SpanKind.CLIENT
        assert attributes(call)["gen_ai.operation.name"] == "chat"
        assert attributes(call)["gen_ai.output.type"] == "json"
        assert attributes(call)["plancontracts.attempt"] == number
        assert attributes(call)["gen_ai.usage.output_tokens"] > 0
    assert attributes(first)["plancontracts.outcome"] == "refused"
    assert attributes(first)["plancontracts.violations.count"] == 2
    assert attributes(first)["error.type"] == "plancontracts.refused"
    assert first.status.status_code is StatusCode.ERROR
    assert attributes(second)["plancontracts.outcome"] == "accepted"
    assert second.status.status_code is StatusCode.UNSET
    assert (
        traced.counted("plancontracts.write.attempts", **{"plancontracts.contract": "recipe"}) == 2
    )
    assert traced.counted("plancontracts.write.refusals") == 1
    assert (
        traced.counted("plancontracts.write.attempts", **{"plancontracts.outcome": "refused"}) == 1
    )
    outputs = [
        point
        for point in traced.metric_points("gen_ai.client.token.usage")
        if attributes(point)["gen_ai.token.type"] == "output"
    ]
    assert sum(point.count for point in outputs) == 2


def test_a_spent_budget_fails_the_write_span_with_its_type_not_its_message(
    recipes: ContractSet, traced: Traced
) -> None:
    bad = text({**GOOD, "serves": 40})
    with pytest.raises(WriteFailed):
        written(recipes, ScriptedWriter([bad, bad]), budget=Budget(attempts=2))
    (writing,) = traced.named("write recipe")
    assert attributes(writing)["plancontracts.outcome"] == "attempts spent"
    assert attributes(writing)["error.type"] == "plancontracts.runtime.core.errors.WriteFailed"
    assert writing.status.status_code is StatusCode.ERROR
    assert "serves" not in (writing.status.description or "")
    assert len(traced.children(writing)) == 2


def test_a_writer_that_fails_is_a_chat_span_with_no_answer(
    recipes: ContractSet, traced: Traced
) -> None:
    from plancontracts import GenerationFailed

    written(recipes, ScriptedWriter([GenerationFailed("the context is full"), text(GOOD)]))
    first, _second = traced.children(traced.named("write recipe")[0])
    assert attributes(first)["error.type"] == "plancontracts.no_answer"


@settings(
    suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=examples_at_most(200)
)
@given(
    # Apart from what is drawn, spans hold ASCII only and no word of these letters.
    prompt=st.text(min_size=12, max_size=60).filter(lambda each: not each.isascii()),
    name=st.text("qxzjkvw", min_size=12, max_size=30),
)
def test_no_span_holds_the_prompt_or_the_answer_without_content_capture(
    recipes: ContractSet, traced: Traced, monkeypatch: pytest.MonkeyPatch, prompt: str, name: str
) -> None:
    """For any prompt and answer: kept out of every span unless capture is on."""
    monkeypatch.delenv(CONTENT_VARIABLE, raising=False)
    traced.clear()
    answer = {**GOOD, "name": name}
    refused = {**answer, "serves": 40}
    written(recipes, ScriptedWriter([text(refused), text(answer)]), prompt)
    seen = all_text(traced.spans)
    assert len(traced.spans) == 3
    assert prompt not in seen
    assert name not in seen


def test_content_capture_puts_the_conversation_and_the_answer_on_the_chat_span(
    recipes: ContractSet, traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CONTENT_VARIABLE, "true")
    bad = {**GOOD, "serves": 40}
    written(recipes, ScriptedWriter([text(bad), text(GOOD)]))
    first, second = traced.children(traced.named("write recipe")[0])
    asked = json.loads(str(attributes(first)["gen_ai.input.messages"]))
    assert asked[-1] == {"role": "user", "parts": [{"type": "text", "content": PROMPT}]}
    answered = json.loads(str(attributes(first)["gen_ai.output.messages"]))
    assert json.loads(answered[0]["parts"][0]["content"]) == bad
    assert any("/serves" in line for line in attributes(first)["plancontracts.violations"])
    # The re-ask holds the refused answer and what was wrong with it.
    reasked = json.loads(str(attributes(second)["gen_ai.input.messages"]))
    assert [message["role"] for message in reasked[-2:]] == ["assistant", "user"]


def test_a_server_is_named_by_host_and_port_never_by_its_password_or_key(
    recipes: ContractSet, traced: Traced
) -> None:
    replies = [
        Reply(content=text({**GOOD, "serves": 40}), prompt_tokens=57),
        Reply(content=text(GOOD), prompt_tokens=88),
    ]
    with model_server(lambda number, body: replies[number]) as server:
        host_and_port = server.url.removeprefix("http://")
        url = f"http://reader:s3cret-password@{host_and_port}"
        served = ServedModel.connect(
            ServerSettings(url), environ={"PLANCONTRACTS_API_KEY": "sk-the-key"}, say=print
        )
        assert written(recipes, served) == GOOD
    first, second = traced.children(traced.named("write recipe")[0])
    assert first.name == "chat stub-model"
    host, port = host_and_port.split(":")
    assert attributes(first)["server.address"] == host
    assert attributes(first)["server.port"] == int(port)
    assert attributes(first)["gen_ai.provider.name"] == "openai_compatible"
    assert attributes(first)["gen_ai.request.model"] == "stub-model"
    assert attributes(first)["gen_ai.usage.input_tokens"] == 57
    assert attributes(second)["gen_ai.usage.input_tokens"] == 88
    seen = all_text(traced.spans)
    assert "s3cret" not in seen
    assert "sk-the-key" not in seen
    inputs = [
        point
        for point in traced.metric_points("gen_ai.client.token.usage")
        if attributes(point)["gen_ai.token.type"] == "input"
    ]
    assert sum(point.sum for point in inputs) == 57 + 88
    assert all("server.address" not in point.attributes for point in inputs)


@pytest.mark.model
def test_the_local_model_reports_the_tokens_it_read_and_wrote(
    tmp_path: Path, traced: Traced, packaged_model: LocalModel
) -> None:
    small = {"title": "Count", "type": "object", "required": ["n"],
             "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}}}  # fmt: skip
    (tmp_path / "count.schema.json").write_text(json.dumps(small))
    contract = load_contracts(tmp_path / "count.schema.json")["count"]

    async def run() -> Any:
        return await write(contract, "Count to one", writer=packaged_model, attempts=1, seed=1)

    trio.run(run)
    (call,) = traced.children(traced.named("write count")[0])
    assert attributes(call)["gen_ai.provider.name"] == "llama.cpp"
    assert attributes(call)["gen_ai.request.model"] == packaged_model.path.stem
    assert attributes(call)["gen_ai.usage.input_tokens"] > 20  # the system message and prompt
    assert attributes(call)["gen_ai.usage.output_tokens"] > 0


def test_the_docs_list_every_metric_as_the_code_declares_it() -> None:
    from plancontracts.runtime.core.telemetry import INSTRUMENTS

    page = (Path(__file__).resolve().parent.parent / "docs" / "observability.md").read_text()
    for name, (kind, unit, description, _buckets) in INSTRUMENTS.items():
        assert f"| `{name}` | {kind} | `{unit}` | {description} |" in page, name


def test_a_huge_captured_prompt_is_cut_on_the_span_so_its_batch_still_exports(
    recipes: ContractSet, traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    from plancontracts.runtime.core.telemetry import CONTENT_LIMIT

    monkeypatch.setenv(CONTENT_VARIABLE, "true")
    written(recipes, ScriptedWriter([text(GOOD)]), "leeks " * 200_000)
    (call,) = traced.children(traced.named("write recipe")[0])
    asked = attributes(call)["gen_ai.input.messages"]
    assert len(asked) == CONTENT_LIMIT + len("...")
    assert asked.endswith("...")


def test_a_group_of_one_kind_of_exception_names_the_span_by_that_kind(traced: Traced) -> None:
    from plancontracts.runtime.core.telemetry import span

    cancelled = BaseExceptionGroup("a nursery's", [KeyboardInterrupt(), KeyboardInterrupt()])
    with pytest.raises(BaseExceptionGroup), span("stopped"):
        raise cancelled
    with pytest.raises(ExceptionGroup), span("mixed"):
        raise ExceptionGroup("two kinds", [ValueError(), KeyError()])
    assert attributes(traced.named("stopped")[0])["error.type"] == "KeyboardInterrupt"
    assert attributes(traced.named("mixed")[0])["error.type"] == "ExceptionGroup"


def test_text_that_is_no_valid_unicode_still_exports_over_otlp(
    recipes: ContractSet, traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lone surrogate (a JSON escape, a file's name) would fail its whole batch's encoding."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from plancontracts.runtime.core.telemetry import span

    monkeypatch.setenv(CONTENT_VARIABLE, "true")
    written(recipes, ScriptedWriter([text(GOOD)]), "a soup \ud800 for four")
    with span("write \udcff", {"plancontracts.contract": "\udcff"}) as told:
        told.event("said \ud800", {"plancontracts.violations": ["\ud800"]})
    encoded = encode_spans(traced.spans).SerializeToString()
    assert b"a soup \\ud800 for four" in encoded  # in JSON text, escaped
    assert b"write ?" in encoded


@pytest.mark.process
def test_spans_are_made_only_once_a_provider_is_set_up_whatever_was_imported_first() -> None:
    """The API imported and no provider: every span would be a no-op, so none is made."""
    import subprocess
    import sys

    program = (
        "from plancontracts.runtime.core.telemetry import tracing\n"
        "assert not tracing()\n"
        "from opentelemetry import trace\n"
        "assert not tracing()  # the API alone, as when another library imported it\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "trace.set_tracer_provider(TracerProvider())\n"
        "assert tracing()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
