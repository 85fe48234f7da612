"""`--otel` end to end: `plancontracts` as a process, exporting to an OTLP/HTTP receiver.

What a collector would get: one trace per command, its spans nested as the
code nests them, the metrics, and nothing of a prompt, a model's text or a
secret unless content capture is on. A receiver that fails, does not answer
or is not there costs a line or two on standard error, never the command's
own output or exit status.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from commands import COMMAND_TIMEOUT
from local_servers import A_PLAN, Reply, model_server
from otlp_receiver import Answer, Receiver, Span, otlp_receiver

pytestmark = pytest.mark.process  # the command is started as a user starts it

RECIPE = {
    "title": "Recipe",
    "type": "object",
    "required": ["name", "serves"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": "^[A-Z][a-z]+$", "maxLength": 20},
        "serves": {"type": "integer", "minimum": 1, "maximum": 12},
    },
}
GOOD = {"name": "Soup", "serves": 4}
BAD = {"name": "soupwort!", "serves": 4}  # the pattern refuses it
PROMPT = "A nettle broth from the quiet valley"
"Words that appear in nothing exported unless content capture is on."

# What the command's process must not inherit from the machine running the tests.
_OTEL_VARIABLES = [name for name in os.environ if name.startswith("OTEL_")]


@pytest.fixture
def recipe(tmp_path: Path) -> Path:
    path = tmp_path / "recipe.json"
    path.write_text(json.dumps(RECIPE))
    return path


def refused_then_good(number: int, body: dict[str, Any]) -> Reply:
    """BAD to a first request, GOOD to one asking again (it holds the refused answer)."""
    again = any(message["role"] == "assistant" for message in body["messages"])
    return Reply(content=json.dumps(GOOD if again else BAD), tokens=7)


def run(
    *arguments: str,
    endpoint: str,
    env: Mapping[str, str] | None = None,
    timeout: float = COMMAND_TIMEOUT,
) -> subprocess.CompletedProcess[str]:
    """`plancontracts ARGUMENTS` as a process exporting to `endpoint`, content capture off."""
    environment = {name: value for name, value in os.environ.items() if name not in _OTEL_VARIABLES}
    environment.update(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "false",
            **(env or {}),
        }
    )
    return subprocess.run(
        [sys.executable, "-m", "plancontracts", *arguments],
        env=environment,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )


def one_trace(receiver: Receiver, command: str) -> Span:
    """The root span `plancontracts COMMAND`: checked to be the only root, of the only trace."""
    roots = [each for each in receiver.spans if each.parent_id is None]
    assert [root.name for root in roots] == [f"plancontracts {command}"]
    assert {each.trace_id for each in receiver.spans} == {roots[0].trace_id}
    return roots[0]


def ancestors(receiver: Receiver, span: Span) -> Iterator[Span]:
    """`span`'s parent, its parent's parent... up to the root."""
    by_id = {each.span_id: each for each in receiver.spans}
    while span.parent_id is not None:
        span = by_id[span.parent_id]
        yield span


def exported(receiver: Receiver) -> bytes:
    """Every byte that reached the receiver: bodies and headers."""
    headers = json.dumps(receiver.headers).encode()
    return b"".join(receiver.bodies) + headers


# One trace per command ---------------------------------------------------------------------


def test_a_write_asked_again_is_one_trace_of_two_chats_without_the_prompt(recipe: Path) -> None:
    with model_server(refused_then_good) as server, otlp_receiver() as receiver:
        arguments = ["write", "--schema", str(recipe), PROMPT, "--server", server.url, "--otel"]
        done = run(*arguments, endpoint=receiver.url)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == GOOD
    assert "--otel" not in done.stderr  # the receiver took everything

    root = one_trace(receiver, "write")
    assert root.kind == "internal"
    assert root.status == "unset"
    assert root.attributes["plancontracts.command"] == "write"
    assert root.resource["service.name"] == "plancontracts"
    assert root.scope == "plancontracts"
    (write,) = receiver.children(root)
    assert write.name == "write recipe"
    assert write.attributes["plancontracts.attempts.used"] == 2
    assert write.attributes["plancontracts.outcome"] == "accepted"
    refused, accepted = sorted(
        receiver.children(write), key=lambda each: each.attributes["plancontracts.attempt"]
    )
    for chat in (refused, accepted):
        assert chat.name == "chat stub-model"
        assert chat.kind == "client"
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.request.model"] == "stub-model"
        assert chat.attributes["gen_ai.usage.output_tokens"] == 7
    assert refused.status == "error"
    assert refused.attributes["error.type"] == "plancontracts.refused"
    assert refused.attributes["plancontracts.outcome"] == "refused"
    assert refused.attributes["plancontracts.violations.count"] == 1
    assert accepted.status == "unset"
    assert "error.type" not in accepted.attributes
    assert accepted.attributes["plancontracts.outcome"] == "accepted"

    # Neither the prompt nor either answer, in any byte sent.
    everything = exported(receiver)
    for secret in (PROMPT, "nettle", "soupwort", '"Soup"'):
        assert secret.encode() not in everything, secret

    assert receiver.total("plancontracts.write.attempts") == 2
    assert receiver.total("plancontracts.write.refusals") == 1
    assert {"gen_ai.client.operation.duration", "gen_ai.client.token.usage"} <= (
        receiver.metric_names()
    )


def test_with_content_capture_the_prompt_and_answers_are_on_the_chat_spans(recipe: Path) -> None:
    with model_server(refused_then_good) as server, otlp_receiver() as receiver:
        arguments = ["write", "--schema", str(recipe), PROMPT, "--server", server.url, "--otel"]
        capture = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}
        done = run(*arguments, endpoint=receiver.url, env=capture)
    assert done.returncode == 0, done.stderr
    one_trace(receiver, "write")
    chats = sorted(
        receiver.named("chat stub-model"), key=lambda each: each.attributes["plancontracts.attempt"]
    )
    assert len(chats) == 2
    assert PROMPT in json.dumps(chats[0].attributes)
    assert "soupwort" in json.dumps(chats[0].attributes)  # the refused answer
    assert "Soup" in json.dumps(chats[1].attributes)  # the accepted one (capitalized)


def test_a_plan_executed_is_one_trace_of_its_writing_and_its_tools(tmp_path: Path) -> None:
    with (
        model_server(lambda number, body: Reply(content=A_PLAN)) as server,
        otlp_receiver() as receiver,
    ):
        arguments = ["plan", "--execute", "I roll a die", "--server", server.url]
        done = run(*arguments, "--data", str(tmp_path), "--otel", endpoint=receiver.url)
    assert done.returncode == 0, done.stderr
    assert "You roll the die." in done.stdout

    root = one_trace(receiver, "plan")
    # Under the root, maybe through the narrator's turn: the plan's writing and execution.
    (write,) = [each for each in receiver.spans if each.name.startswith("write ")]
    assert root in ancestors(receiver, write)
    (chat,) = receiver.children(write)
    assert chat.name == "chat stub-model"
    assert chat.attributes["plancontracts.outcome"] == "accepted"

    plans = receiver.named("execute plan")
    assert all(root in ancestors(receiver, each) for each in plans)
    (plan,) = [each for each in plans if each.attributes["plancontracts.plan.success"]]
    assert plan.attributes["plancontracts.plan.success"] is True
    tools = receiver.children(plan)
    assert tools
    assert plan.attributes["plancontracts.plan.tools"] == len(tools)
    for tool in tools:
        assert tool.name == f"execute_tool {tool.attributes['gen_ai.tool.name']}"
        assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
        assert tool.attributes["gen_ai.tool.type"] == "function"
        assert tool.attributes["plancontracts.tool.state"] == "success"
        assert tool.attributes["gen_ai.tool.call.id"]
    assert "dice-roller" in {tool.attributes["plancontracts.skill"] for tool in tools}
    assert {"plancontracts.plan.duration", "plancontracts.tool.duration"} <= (
        receiver.metric_names()
    )
    # The player's words, the model's narrative and the tools' output stay home.
    everything = exported(receiver)
    for secret in ("I roll a die", "You roll the die", "rolled"):
        assert secret.encode() not in everything, secret


# A receiver that fails ---------------------------------------------------------------------


def closed_port() -> str:
    """An address on 127.0.0.1 where nothing listens: connections are refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


@pytest.mark.parametrize(
    "answer", ["error", "hang", "close", None], ids=["error", "hang", "close", "refused"]
)
def test_a_receiver_that_fails_costs_a_line_or_two_never_the_commands_outcome(
    recipe: Path, answer: Answer | None
) -> None:
    """`answer` None: nothing listens at the endpoint, and connections are refused."""
    arguments = ["write", "--schema", str(recipe), PROMPT]
    # Long enough for the exporter to retry twice (a line each, were each told), short enough
    # for a receiver that hangs.
    quick = {"OTEL_EXPORTER_OTLP_TIMEOUT": "4"}
    with model_server(refused_then_good) as server, otlp_receiver() as receiver:
        plain = run(*arguments, "--server", server.url, endpoint=receiver.url)
        endpoint = closed_port() if answer is None else receiver.url
        receiver.answer = answer or "ok"
        done = run(
            *arguments, "--server", server.url, "--otel", endpoint=endpoint, env=quick, timeout=120
        )
    assert plain.returncode == 0, plain.stderr
    assert (done.returncode, done.stdout) == (plain.returncode, plain.stdout)
    assert "Traceback" not in done.stderr
    added = [line for line in done.stderr.splitlines() if line not in plain.stderr.splitlines()]
    assert added, "the failed export was not told"
    assert all(line.startswith("plancontracts: --otel: ") for line in added), added
    assert len(added) <= 4, added  # spans and metrics: each once, or once and once retried


def test_a_receiver_that_trickles_its_answer_is_given_up_on_after_twice_the_timeout() -> None:
    """Each byte restarts the exporter's read timeout: the command's end waits for no more."""
    with otlp_receiver("trickle") as receiver:
        plain = run("contracts", endpoint=receiver.url)
        done = run(
            "contracts", "--otel", endpoint=receiver.url, env={"OTEL_EXPORTER_OTLP_TIMEOUT": "1"}
        )
    assert (done.returncode, done.stdout) == (0, plain.stdout)
    assert "plancontracts: --otel: the receiver took more than 2 s" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_exporters_complaint_never_shows_a_headers_value() -> None:
    """The SDK quotes a header variable it cannot read; an API key is what it holds."""
    headers = {"OTEL_EXPORTER_OTLP_HEADERS": "Authorization: Bearer sk-the-secret-key"}
    with otlp_receiver() as receiver:
        done = run("contracts", "--otel", endpoint=receiver.url, env=headers)
    assert done.returncode == 0, done.stderr
    assert "plancontracts: --otel: Header format invalid" in done.stderr
    assert "sk-the-secret-key" not in done.stderr
    assert b"sk-the-secret-key" not in exported(receiver)


@pytest.mark.parametrize(
    "setting",
    [
        {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "0"},
        {"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "abc"},
        {"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "-5"},
    ],
    ids=lambda setting: next(iter(setting)),
)
def test_settings_the_sdk_refuses_are_one_line_and_the_command_runs(
    setting: dict[str, str],
) -> None:
    with otlp_receiver() as receiver:
        plain = run("contracts", endpoint=receiver.url)
        done = run("contracts", "--otel", endpoint=receiver.url, env=setting)
    assert (done.returncode, done.stdout) == (0, plain.stdout)
    assert done.stderr.startswith("plancontracts: --otel: OpenTelemetry's settings are unusable")
    assert len(done.stderr.splitlines()) == 1
    assert not receiver.spans


# Stopped on the way ------------------------------------------------------------------------

CTRL_C_AS_A_TERMINAL = (
    "import signal, sys\n"
    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "from plancontracts.runtime.cli.main import main\n"
    "raise SystemExit(main(sys.argv[1:]))\n"
)
"The command, with Ctrl-C as from a terminal (a suite in the background ignores it)."


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=lambda value: value.name)
def test_a_command_stopped_by_a_signal_exports_what_it_recorded(
    recipe: Path, signum: signal.Signals
) -> None:
    def answer(number: int, body: dict[str, Any]) -> Reply:
        reply = refused_then_good(number, body)
        reply.delay = 0 if number == 0 else 300.0  # the second answer never comes in time
        return reply

    with model_server(answer) as server, otlp_receiver() as receiver:
        arguments = ["write", "--schema", str(recipe), PROMPT, "--server", server.url, "--otel"]
        environment = {name: value for name, value in os.environ.items() if name[:5] != "OTEL_"}
        environment["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.url
        command = subprocess.Popen(
            [sys.executable, "-c", CTRL_C_AS_A_TERMINAL, *arguments],
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + COMMAND_TIMEOUT
            while len(server.requests) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)  # until the command waits for its second answer
            assert len(server.requests) == 2
            command.send_signal(signum)
            out, err = command.communicate(timeout=120)
        finally:
            if command.poll() is None:
                command.kill()
                command.communicate()
    assert command.returncode == 128 + signum
    assert out == ""
    assert "Traceback" not in err

    root = one_trace(receiver, "write")
    assert root.status == "error"
    assert root.attributes["error.type"]
    (write,) = receiver.children(root)
    assert write.status == "error"
    refused, waiting = sorted(
        receiver.children(write), key=lambda each: each.attributes["plancontracts.attempt"]
    )
    assert refused.attributes["plancontracts.outcome"] == "refused"
    assert waiting.status == "error"  # ended by the signal, not by an answer
    assert receiver.total("plancontracts.write.refusals") == 1


# Secrets -----------------------------------------------------------------------------------


@pytest.mark.parametrize("capture", ["false", "true"])
def test_no_password_or_key_is_exported_even_with_content_capture(
    recipe: Path, capture: str
) -> None:
    password = "hunter2-correct-horse"
    key = "sk-plancontracts-secret-key-0123456789"
    basic = base64.b64encode(f"keeper:{password}".encode()).decode()
    secrets = {
        "PLANCONTRACTS_API_KEY": key,
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": capture,
    }
    with model_server(refused_then_good) as server, otlp_receiver() as receiver:
        # The address's user information is sent (as Basic), the key with an address without.
        address = server.url.replace("http://", f"http://keeper:{password}@")
        for url in (address, server.url):
            arguments = ["write", "--schema", str(recipe), PROMPT, "--server", url, "--otel"]
            done = run(*arguments, endpoint=receiver.url, env=secrets)
            assert done.returncode == 0, done.stderr
    assert f"Basic {basic}" in server.authorizations  # both secrets were used
    assert f"Bearer {key}" in server.authorizations
    assert len(receiver.named("plancontracts write")) == 2
    everything = exported(receiver)
    for secret in (password, key, basic, "hunter2", "sk-plancontracts"):
        assert secret.encode() not in everything, secret
    assert (PROMPT.encode() in everything) == (capture == "true")
