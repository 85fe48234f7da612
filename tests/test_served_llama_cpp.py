"""A real model server: llama-cpp-python's own, started here with the packaged model.

It takes the profile only as `--response-format json_object`, and turns the
schema into a grammar itself, dropping what its converter does not know (a
plan profile's `prefixItems`, length bounds): its answers are used only where
they pass the profile, the rest are refused and counted, and the command
still prints a valid plan.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import trio
from commands import cli
from packaged_model import model_file

from plancontracts import decode
from plancontracts.runtime.core.errors import ServerFailed
from plancontracts.runtime.model import ServerSettings
from plancontracts.runtime.model.served import ServedModel
from plancontracts.runtime.model.writer import Piece, watching_tokens

# A server process that loads the packaged model: a model test and a process test,
# though neither takes the `packaged_model` fixture.
pytestmark = [pytest.mark.model, pytest.mark.process]

STARTUP_SECONDS = 300  # a loaded 2-core machine; no test asserts speed


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    """llama-cpp-python's server on 127.0.0.1 with the packaged model, for this module."""
    port = free_port()
    command = [
        *(sys.executable, "-m", "llama_cpp.server"),
        *("--model", str(model_file())),
        *("--host", "127.0.0.1", "--port", str(port)),
        *("--n_ctx", "8192", "--n_threads", "2"),
        # Scores for the last token only: its default keeps n_ctx x vocabulary floats (GBs).
        *("--logits_all", "false", "--interrupt_requests", "false", "--verbose", "false"),
    ]
    # Its settings also come from the environment (HOST, PORT...): only PATH and HOME here.
    clean = {name: os.environ[name] for name in ("PATH", "HOME") if name in os.environ}
    server = subprocess.Popen(
        command, env=clean, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:  # it has no /health: it is up when it lists its model
            assert server.poll() is None, "llama-cpp-python's server ended while starting"
            try:
                with urllib.request.urlopen(f"{url}/v1/models", timeout=5):
                    break
            except OSError:
                assert time.monotonic() < deadline, "llama-cpp-python's server did not start"
                time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


YES_OR_NO: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["answer"],
    "properties": {"answer": {"enum": ["yes", "no"]}},
}


def test_the_server_writes_under_a_schema_it_can_turn_into_a_grammar(server_url: str) -> None:
    served = ServedModel.connect(
        ServerSettings(server_url, response_format="json_object"), say=lambda line: None
    )
    messages = [{"role": "user", "content": "Is fire hot? Answer yes or no."}]

    async def main() -> dict[str, Any]:
        return await served.write_chat(messages, YES_OR_NO, max_tokens=16, seed=1)

    assert trio.run(main) in ({"answer": "yes"}, {"answer": "no"})
    assert (served.counts.answers, served.counts.refused) == (1, 0)


def test_the_openai_json_schema_form_is_refused_by_this_server_and_said_so(
    server_url: str,
) -> None:
    served = ServedModel.connect(ServerSettings(server_url, backoff=0.01), say=lambda line: None)
    messages = [{"role": "user", "content": "yes or no?"}]
    with pytest.raises(ServerFailed, match="takes the json_object response format"):
        trio.run(lambda: served.write_chat(messages, YES_OR_NO, max_tokens=4))
    assert served.counts.requests == 2  # a 500: tried once more, no further


def test_plan_against_the_server_prints_a_valid_plan_whoever_wrote_it(server_url: str) -> None:
    options = ("--server", server_url, "--response-format", "json_object", "--seed", "3")
    done = cli("plan", *options, "I light the torch")
    assert done.returncode == 0, done.stderr
    assert decode("plan", done.stdout.encode())
    plan = json.loads(done.stdout)
    assert any("torch-lighter" in tool["toolPath"] for tool in plan["tools"])
    said = done.stderr.splitlines()
    assert said[0].endswith(f"served at {server_url}/v1 (--server)")
    # The server's answer is the plan, or was refused (and said) and the patterns wrote it.
    refused = [line for line in said if "refused: 1 of 1 answers so far" in line]
    assert len(said) == 1 + len(refused)


def test_the_servers_streamed_answer_is_its_whole_answer_and_counts_its_tokens(
    server_url: str,
) -> None:
    served = ServedModel.connect(
        ServerSettings(server_url, response_format="json_object"), say=lambda line: None
    )
    messages = [{"role": "user", "content": "Is fire hot? Answer yes or no."}]

    async def main() -> tuple[dict[str, Any], list[int], list[Piece], list[int]]:
        whole: list[int] = []
        with watching_tokens(whole.append):
            document = await served.write_chat(messages, YES_OR_NO, max_tokens=16, seed=1)
        streamed: list[int] = []
        with watching_tokens(streamed.append):
            written = served.stream_chat(messages, YES_OR_NO, answer="JSON", max_tokens=16, seed=1)
            pieces = [piece async for piece in written]
        return document, whole, pieces, streamed

    document, whole, pieces, streamed = trio.run(main)
    assert json.loads("".join(piece.text for piece in pieces)) == document  # the same seed
    assert len(pieces) > 1  # pieces as the server wrote them, not one whole answer
    assert streamed == [piece.tokens for piece in pieces]
    # Its whole answer says its count (`usage`); its stream does not, and sends a token an
    # event: the same count either way.
    assert len(whole) == 1
    assert sum(streamed) == sum(whole)
