"""A model server instead of the local model: a stub server that misbehaves on demand.

The stub (local_servers.model_server) answers OpenAI chat requests as each
test tells it: conforming or not, slow, 429, 500, an answer too large. The
served model must use only answers the profile accepts, try again only
where another try can help, keep its requests bounded, and stop a request
when cancelled. The real server, llama-cpp-python's, is in
test_served_llama_cpp.py.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shlex
import subprocess
import sys
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
from commands import cli, without_a_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from local_servers import A_PLAN, Reply, conforming, model_server, sent_schema, silent_server
from schema_strategies import mutated, valid_documents
from tiers import examples_at_most

from plancontracts import decode
from plancontracts.runtime.core.errors import AnswerRefused, NoModel, ServerFailed
from plancontracts.runtime.engine.skills import bundled_skills
from plancontracts.runtime.model import ModelChoice, ServerSettings, load_first_writer
from plancontracts.runtime.model.served import (
    MAX_RESPONSE_BYTES,
    ServedModel,
    _StreamedAnswer,
    api_base,
    portable,
)
from plancontracts.runtime.model.writer import Piece, watching_tokens
from plancontracts.runtime.tool_plans import Planner, plan_profile

SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["answer"],
    "properties": {"answer": {"enum": ["yes", "no"]}},
}
MESSAGES = [{"role": "user", "content": "yes or no?"}]
ROLL = A_PLAN


def connect(url: str, **settings: Any) -> ServedModel:
    return ServedModel.connect(
        ServerSettings(url, **{"backoff": 0.01, **settings}), environ={}, say=lambda line: None
    )


def write(served: ServedModel, **options: Any) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        return await served.write_chat(MESSAGES, SCHEMA, **options)

    return trio.run(main)


def always(reply: Reply) -> Any:
    return lambda number, body: reply


def test_a_conforming_answer_is_used_and_the_profile_is_sent_as_the_constraint() -> None:
    with model_server(always(Reply())) as server:
        served = connect(server.url)
        assert write(served, max_tokens=64, seed=7) == {"answer": "yes"}
        object_form = connect(server.url, response_format="json_object")
        assert write(object_form, max_tokens=0) == {"answer": "yes"}
    first, second = server.requests
    assert first["model"] == "stub-model"  # the first model the server lists
    assert first["messages"] == MESSAGES
    assert first["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "profile", "schema": SCHEMA},
    }
    assert (first["max_tokens"], first["seed"]) == (64, 7)
    assert second["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert "max_tokens" not in second  # 0: what the context leaves
    assert "seed" not in second
    assert served.counts.answers == 1
    assert served.counts.refused == 0


@pytest.mark.parametrize(
    "content",
    ['{"answer": "maybe"}', '{"answer": "yes", "extra": 1}', "[1]", "yes", '{"answer": ', ""],
)
def test_an_answer_the_profile_does_not_accept_is_refused_and_counted(content: str) -> None:
    with model_server(always(Reply(content=content))) as server:
        served = connect(server.url)
        with pytest.raises(AnswerRefused, match="refused: 1 of 1 answers so far"):
            write(served)
        with pytest.raises(AnswerRefused, match="refused: 2 of 2 answers so far"):
            write(served)
    assert served.counts.refused == 2


@pytest.mark.parametrize(
    ("max_tokens", "said"), [(64, "cut at 64 tokens"), (0, "cut at the server's token limit")]
)
def test_an_answer_cut_at_the_token_limit_says_so(max_tokens: int, said: str) -> None:
    cut = Reply(content='{"answer": ', finish="length")
    with (
        model_server(always(cut)) as server,
        pytest.raises(AnswerRefused, match=f"\\({said}; refused: 1 of 1"),
    ):
        write(connect(server.url), max_tokens=max_tokens)


def test_a_refused_plan_is_never_used_the_planner_answers_with_patterns() -> None:
    said: list[str] = []
    wrong = ROLL.replace("d20", "a hundred sides")  # the formula's pattern refuses it
    with model_server(always(Reply(content=wrong))) as server:
        served = connect(server.url)
        planner = Planner(served, bundled_skills(), say=said.append)
        plan = trio.run(planner.plan, "I light the torch")
    assert [tool.tool_path for tool in plan.tools] != ["skills/dice-roller/roll.py"]
    assert "light.py" in plan.tools[0].tool_path
    # Asked again once with the violation, refused again, then the patterns answer.
    assert [line.split(" refused:")[0] for line in said if " refused:" in line] == [
        "planner: answer 1 of 2",
        "planner: answer 2 of 2",
    ]
    assert "formula" in said[-2]
    assert "planning with patterns" in said[-1]
    assert len(server.requests) == 2
    assert (served.counts.answers, served.counts.refused) == (2, 2)


def test_a_refused_plan_is_asked_again_with_its_violations_and_the_answer_used() -> None:
    said: list[str] = []
    wrong = ROLL.replace("d20", "a hundred sides")
    answers = [Reply(content=wrong), Reply(content=ROLL)]
    with model_server(lambda number, body: answers[number]) as server:
        planner = Planner(connect(server.url), bundled_skills(), say=said.append)
        plan = trio.run(planner.plan, "I roll the die")
    assert plan.tools[0].tool_path == "skills/dice-roller/roll.py"
    assert not any("patterns" in line for line in said)
    asked_again = server.requests[1]["messages"]
    assert asked_again[-2] == {"role": "assistant", "content": wrong}
    assert "/tools/0/input/formula" in asked_again[-1]["content"]


def test_a_conforming_plan_from_the_server_is_the_plan() -> None:
    with model_server(always(Reply(content=ROLL))) as server:
        planner = Planner(connect(server.url), bundled_skills())
        plan = trio.run(planner.plan, "I roll a die")
    assert plan.narrative == "You roll the die."
    assert [tool.input for tool in plan.tools] == [{"formula": "d20"}, {}]  # then the narration
    assert decode("plan", msgspec.json.encode(plan))


def sequence(*replies: Reply) -> Any:
    """The replies in turn, the last one again for every request after."""
    return lambda number, body: replies[min(number, len(replies) - 1)]


@pytest.mark.parametrize(
    "failure",
    [
        Reply(429, headers={"Retry-After": "0"}),
        Reply(429, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}),  # a date gone by
        Reply(503),
        Reply(502, content=None, body=b"<html>bad gateway</html>"),
        Reply(500),
    ],
)
def test_a_busy_or_failing_server_is_tried_again_and_its_answer_used(failure: Reply) -> None:
    with model_server(sequence(failure, Reply())) as server:
        served = connect(server.url)
        assert write(served) == {"answer": "yes"}
    assert len(server.requests) == 2
    assert (served.counts.requests, served.counts.retried) == (2, 1)


def test_retries_are_bounded() -> None:
    with model_server(always(Reply(503, content=None, body=b"overloaded"))) as server:
        served = connect(server.url, retries=2)
        with pytest.raises(ServerFailed, match="failed 3 tries: HTTP 503: 'overloaded'"):
            write(served)
    assert len(server.requests) == 3


@pytest.mark.parametrize(("status", "sent"), [(400, 1), (401, 1), (404, 1), (500, 2)])
def test_an_answer_no_other_try_can_mend_is_not_tried_again_or_a_500_only_once(
    status: int, sent: int
) -> None:
    with model_server(always(Reply(status, content=None, body=b"no"))) as server:
        served = connect(server.url, retries=5)
        with pytest.raises(ServerFailed, match=f"HTTP {status}"):
            write(served)
    assert len(server.requests) == sent


def test_a_server_refusing_the_json_schema_form_points_to_the_other_one() -> None:
    body = b'{"error": "response_format.type: Input should be text or json_object"}'
    with (
        model_server(always(Reply(400, content=None, body=body))) as server,
        pytest.raises(ServerFailed, match="takes the json_object response format"),
    ):
        write(connect(server.url))


def test_a_slow_server_gets_its_request_closed_at_the_timeout() -> None:
    with model_server(always(Reply(delay=30))) as server:
        served = connect(server.url, timeout=0.5)
        with pytest.raises(ServerFailed, match=r"no answer within 0\.5 s"):
            write(served)
    assert server.hung_up == 1  # the timeout closed the connection: the server can stop
    assert len(server.requests) == 1  # no other try: it would be as slow


def test_cancelling_a_request_closes_its_connection() -> None:
    with model_server(always(Reply(delay=30))) as server:
        served = connect(server.url)

        async def main() -> None:
            with trio.move_on_after(0.5):
                await served.write_chat(MESSAGES, SCHEMA)
                raise AssertionError("the request was not cancelled")

        trio.run(main)
    assert server.hung_up == 1


def test_an_answer_too_large_is_not_read_whole() -> None:
    huge = Reply(content=None, body=b"[" + b" " * (MAX_RESPONSE_BYTES + 1))
    with (
        model_server(always(huge)) as server,
        pytest.raises(ServerFailed, match="answered with more than"),
    ):
        write(connect(server.url))


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=9, mtime=0)


def _deflate(data: bytes) -> bytes:
    return zlib.compress(data, 9)


# Each Content-Encoding tested, and how to encode a whole body in it.
BOMBS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": _gzip,
    "gzip, gzip": lambda data: _gzip(_gzip(data)),
    "deflate": _deflate,
    "deflate, gzip": lambda data: _gzip(_deflate(data)),
}
WINDOWS = {"gzip": zlib.MAX_WBITS | 16, "deflate": zlib.MAX_WBITS}
# What a bomb decodes to: well past the cap, and past what reading it within the cap may hold.
BOMB_SIZE = 32 * MAX_RESPONSE_BYTES
MOST_HELD = 4 * MAX_RESPONSE_BYTES


def _bomb(encoding: str) -> tuple[bytes, dict[str, str]]:
    """A body of a few KB that decodes, as `encoding` says, to BOMB_SIZE bytes of one JSON text."""
    layers = [name.strip() for name in encoding.split(",")]
    # The first layer is built a MiB at a time: the bomb itself is never whole in memory.
    packer = zlib.compressobj(9, zlib.DEFLATED, WINDOWS[layers[0]])
    piece = b" " * (1024 * 1024)
    body = packer.compress(b"[") + b"".join(
        packer.compress(piece) for _ in range(BOMB_SIZE // len(piece))
    )
    body += packer.flush()
    for layer in layers[1:]:
        body = BOMBS[layer](body)
    return body, {"Content-Encoding": encoding}


def _peak_while(run: Callable[[], object]) -> int:
    """The most bytes Python held at once while `run` ran (zlib's output included)."""
    tracemalloc.start()
    try:
        run()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


@pytest.mark.parametrize("encoding", sorted(BOMBS))
def test_a_compressed_answer_is_bounded_as_decoded(encoding: str) -> None:
    body, headers = _bomb(encoding)
    assert len(body) < MAX_RESPONSE_BYTES  # what is sent fits: only decoding makes it large
    bomb = Reply(content=None, body=body, headers=headers)
    with model_server(always(bomb)) as server:
        served = connect(server.url)

        def run() -> None:
            with pytest.raises(ServerFailed, match="answered with more than"):
                write(served)

        assert _peak_while(run) < MOST_HELD


@pytest.mark.parametrize("encoding", sorted(BOMBS))
def test_a_compressed_model_list_is_bounded_as_decoded(encoding: str) -> None:
    body, headers = _bomb(encoding)
    listing = Reply(content=None, body=body, headers=headers)
    with model_server(conforming, listing=listing) as server:

        def run() -> None:
            with pytest.raises(NoModel, match="answered with more than"):
                connect(server.url)

        assert _peak_while(run) < MOST_HELD


def test_a_trickling_model_list_ends_at_the_server_timeout() -> None:
    # 150 bytes at one a tenth of a second: every read is quick, the whole takes 15 s.
    listed = json.dumps({"data": [{"id": "stub-model"}]}).encode().ljust(150)
    trickle = Reply(content=None, body=listed, every=0.1)
    with (
        model_server(conforming, listing=trickle) as server,
        pytest.raises(NoModel, match="did not end within the --server-timeout"),
    ):
        connect(server.url, timeout=1.0)


def test_a_model_list_whose_headers_trickle_ends_at_the_server_timeout() -> None:
    # The status line and then a header byte every 0.2 s: every read is quick, and
    # httpx's timeouts, all per read, would wait for the 16 KiB a header may hold.
    import socket
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def trickle() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            while not stop.wait(0.2):
                connection.sendall(b"a")

    sender = threading.Thread(target=trickle, daemon=True)
    sender.start()
    try:
        with pytest.raises(NoModel, match="did not end within the --server-timeout"):
            connect(f"http://127.0.0.1:{listener.getsockname()[1]}", timeout=1.0)
    finally:
        stop.set()
        listener.close()
        sender.join(timeout=10)


@pytest.mark.parametrize("encoding", ["br", "zstd", "compress"])
def test_an_encoding_not_asked_for_is_refused_in_one_line(encoding: str) -> None:
    odd = Reply(content=None, body=b"\x00" * 64, headers={"Content-Encoding": encoding})
    with (
        model_server(always(odd)) as server,
        pytest.raises(ServerFailed, match=f"answered in the '{encoding}' encoding"),
    ):
        write(connect(server.url))


@pytest.mark.parametrize("encoding", sorted(BOMBS))
def test_a_compressed_answer_within_the_cap_is_read(encoding: str) -> None:
    completion = {
        "choices": [{"message": {"content": '{"answer": "yes"}'}, "finish_reason": "stop"}]
    }
    body = BOMBS[encoding](json.dumps(completion).encode())
    reply = Reply(content=None, body=body, headers={"Content-Encoding": encoding})
    with model_server(always(reply)) as server:
        assert write(connect(server.url)) == {"answer": "yes"}


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b'{"choices": []}',
        b'{"choices": [{"message": {"content": 1}}]}',
        b"[" * 100_000,
    ],
)
def test_an_answer_that_is_no_chat_completion_fails_in_one_line(body: bytes) -> None:
    with (
        model_server(always(Reply(content=None, body=body))) as server,
        pytest.raises(ServerFailed) as failure,
    ):
        write(connect(server.url))
    assert "\n" not in str(failure.value)
    assert len(str(failure.value)) < 400


def test_requests_beyond_the_pool_wait_for_a_place_and_none_fails() -> None:
    with model_server(always(Reply(delay=0.3))) as server:
        served = connect(server.url, in_flight=2)
        answers: list[dict[str, Any]] = []

        async def main() -> None:
            async def one() -> None:
                answers.append(await served.write_chat(MESSAGES, SCHEMA))

            async with trio.open_nursery() as nursery:
                for _ in range(6):
                    nursery.start_soon(one)

        trio.run(main)
    assert answers == [{"answer": "yes"}] * 6
    assert server.most_at_once == 2


def test_many_sessions_share_one_server() -> None:
    with model_server(always(Reply(content=ROLL, delay=0.2))) as server:
        planner = Planner(connect(server.url, in_flight=4), bundled_skills())
        plans: list[Any] = []

        async def main() -> None:
            async def session(number: int) -> None:
                for turn in range(2):
                    plan = await planner.plan(f"player {number} rolls a die, turn {turn}")
                    plans.append(plan)

            async with trio.open_nursery() as nursery:
                for number in range(8):
                    nursery.start_soon(session, number)

        trio.run(main)
    assert len(plans) == 16
    assert all(plan.narrative == "You roll the die." for plan in plans)
    assert server.most_at_once == 4


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080/v1"),
        ("http://127.0.0.1:8080/", "http://127.0.0.1:8080/v1"),
        ("http://127.0.0.1:8080/v1/", "http://127.0.0.1:8080/v1"),
        ("https://models.example/api/v1", "https://models.example/api/v1"),
    ],
)
def test_a_server_address_is_taken_with_or_without_its_v1(address: str, expected: str) -> None:
    assert api_base(address) == expected


@pytest.mark.parametrize(
    "address", ["127.0.0.1:8080", "ftp://host/", "http://", "http://host/v1?key=1", "http://[::1"]
)
def test_what_is_no_server_address_is_refused(address: str) -> None:
    with pytest.raises(ValueError, match="address"):
        api_base(address)


def test_the_resolution_order_an_explicit_server_first_then_the_model_then_the_environment() -> (
    None
):
    said: list[str] = []
    with model_server(always(Reply()), models=["a", "b"]) as server:
        environment = {"PLANCONTRACTS_SERVER": server.url}
        asked = ModelChoice("no-such-model", server=ServerSettings(server.url, model="b"))
        explicit = load_first_writer(asked, say=said.append)
        from_environment = load_first_writer(environ=environment, say=said.append)
    assert isinstance(explicit, ServedModel)
    assert explicit.model == "b"
    assert said[0] == f"model: b served at {server.url}/v1 (--server)"
    assert isinstance(from_environment, ServedModel)
    assert from_environment.model == "a"
    assert said[1] == f"model: a served at {server.url}/v1 (PLANCONTRACTS_SERVER)"


def test_a_server_that_does_not_answer_or_serve_the_model_is_said_in_one_line() -> None:
    with silent_server() as (address, _), pytest.raises(NoModel, match="does not answer"):
        ServedModel.connect(ServerSettings(f"http://{address}", timeout=0.5), environ={})
    with (
        model_server(always(Reply()), models=["a"]) as server,
        pytest.raises(NoModel, match="does not serve 'b': it lists 'a'"),
    ):
        ServedModel.connect(ServerSettings(server.url, model="b"), environ={})


# The command line ---------------------------------------------------------------


@pytest.fixture
def environment() -> Iterator[dict[str, str]]:
    """os.environ for the commands these tests run, restored after."""
    saved = dict(os.environ)
    yield os.environ  # type: ignore[misc]
    os.environ.clear()
    os.environ.update(saved)


def test_plan_with_a_server_prints_the_servers_plan(environment: dict[str, str]) -> None:
    environment["PLANCONTRACTS_API_KEY"] = "sk-secret-key"
    with model_server(always(Reply(content=ROLL))) as server:
        done = cli("plan", "--server", server.url, "--no-download", "I roll a die")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["narrative"] == "You roll the die."
    assert server.authorizations == ["Bearer sk-secret-key"]
    assert "sk-secret-key" not in done.stdout + done.stderr  # said nowhere
    assert f"served at {server.url}/v1 (--server)" in done.stderr


def test_the_environment_names_the_server_and_an_explicit_model_comes_first(
    environment: dict[str, str], tmp_path: Path
) -> None:
    with model_server(always(Reply(content=ROLL))) as server:
        environment["PLANCONTRACTS_SERVER"] = server.url
        served = cli("plan", "I roll a die")
        missing = str(tmp_path / "missing.gguf")
        local = without_a_model("plan", "--model", missing, "I roll a die", hub_cache=tmp_path)
    assert "(PLANCONTRACTS_SERVER)" in served.stderr
    assert json.loads(served.stdout)["narrative"] == "You roll the die."
    # --model came first: named and not there, it stops the command rather than
    # falling through to the server the environment names.
    assert local.returncode == 2, local.stderr
    assert "missing.gguf" in local.stderr
    assert len(server.requests) == 1  # the second command never asked the server


def test_plan_with_a_server_that_does_not_answer_fails_in_one_line() -> None:
    with silent_server() as (address, _):
        server = ("--server", f"http://{address}", "--server-timeout", "0.5")
        done = cli("plan", *server, "I roll a die")
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert "error: the model server" in done.stderr
    assert "does not answer" in done.stderr


def test_a_batch_of_plans_runs_at_once_and_prints_in_input_order() -> None:
    def answer(number: int, body: dict[str, Any]) -> Reply:
        asked = body["messages"][-1]["content"]
        first = "input 0" in asked  # answered last: the order printed is the inputs'
        return Reply(content=ROLL.replace("the die", asked[-7:]), delay=1.0 if first else 0.1)

    inputs = "".join(f"I roll a die, input {number}\n" for number in range(6))
    with model_server(answer) as server:
        done = cli("plan", "--server", server.url, "--in-flight", "3", "-", stdin=inputs)
    assert done.returncode == 0, done.stderr
    narratives = [json.loads(line)["narrative"] for line in done.stdout.splitlines()]
    assert narratives == [f"You roll input {number}." for number in range(6)]
    assert server.most_at_once == 3


# Every generator ------------------------------------------------------------------
# The stub keeps to the constraint: it answers the simplest document of the
# schema each request sends, so what the command makes of it is the server's.


@pytest.mark.slow  # the stub finds the simplest document of each schema: seconds each
def test_think_writes_its_check_and_block_with_the_server() -> None:
    with model_server(conforming) as server:
        done = cli("think", "--server", server.url, "THINK: the guard blocks the bridge")
    assert done.returncode == 0, done.stderr
    assert decode("planning-block", done.stdout.encode())
    kinds = [sent_schema(body)["required"] for body in server.requests]
    assert len(kinds) == 2  # the check the code rolls, then the block
    assert "dc" in kinds[0]


@pytest.mark.slow  # the stub finds the simplest document of each schema: seconds each
def test_session_drive_makes_its_calls_with_the_server() -> None:
    with model_server(conforming) as server:
        done = cli("session", "drive", "--server", server.url, "--max-calls", "2", "tidy the camp")
    assert done.returncode == 0, done.stderr
    assert len(server.requests) == 2
    assert json.loads(done.stdout.splitlines()[-1])["plan"]["objective"] == "tidy the camp"


@pytest.mark.slow  # the stub finds the simplest document of each schema: seconds each
def test_story_build_makes_its_calls_with_the_server(tmp_path: Path) -> None:
    with model_server(conforming) as server:
        done = cli(
            "story",
            "build",
            "--server",
            server.url,
            "--out",
            str(tmp_path),
            "A lighthouse keeper finds a map in a bottle.",
        )
    assert done.returncode == 0, done.stderr
    assert len(server.requests) >= 2  # the steps the code cannot fill alone
    assert '"meta"' in done.stdout.splitlines()[-1]  # the package, finalized


@pytest.mark.slow  # the stub finds the simplest document of each schema: seconds each
def test_goals_plan_writes_its_steps_with_the_server() -> None:
    with model_server(conforming) as server:
        done = cli("goals", "plan", "--server", server.url, "cook a hot dinner")
    assert done.returncode == 0, done.stderr
    assert decode("goal-plan", done.stdout.encode())
    assert len(server.requests) == 1
    assert "fallback" not in done.stderr


def test_play_and_plan_execute_run_the_servers_plans(tmp_path: Path) -> None:
    data = ("--data", str(tmp_path))
    with model_server(always(Reply(content=ROLL))) as server:
        played = cli("play", "--server", server.url, *data, stdin="I roll a die\n\n")
        executed = cli("plan", "--execute", "--server", server.url, *data, "I roll a die")
    for done in (played, executed):
        assert done.returncode == 0, done.stderr
        assert "You roll the die." in done.stdout
        assert "1d20 rolled" in done.stderr  # the trace of the plan the server wrote
    assert len(server.requests) == 2


def test_an_address_that_is_none_is_a_usage_error_and_one_from_the_environment_one_line(
    environment: dict[str, str],
) -> None:
    done = cli("plan", "--server", "localhost:8080", "I roll a die")
    assert done.returncode == 2
    assert "argument --server: not an http or https server address: 'localhost:8080'" in done.stderr
    environment["PLANCONTRACTS_SERVER"] = "ftp://models"
    done = cli("plan", "I roll a die")
    assert done.returncode == 1
    assert done.stderr == (
        "plancontracts: error: not an http or https server address: 'ftp://models' "
        "(PLANCONTRACTS_SERVER)\n"
    )


@pytest.mark.process  # a broken pipe, a full disk
@pytest.mark.parametrize("output", ["| head -n 1 >/dev/null", ">/dev/full"])
def test_plans_at_once_end_as_the_others_do_when_their_output_fails(output: str) -> None:
    inputs = "".join(f"I roll a die, input {number}\n" for number in range(40))
    with model_server(always(Reply(content=ROLL))) as server:
        command = f"{shlex.quote(sys.executable)} -m plancontracts plan --server {server.url} -"
        done = subprocess.run(
            ["bash", "-c", f"{command} {output}"],
            input=inputs,
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
    said = done.stderr.splitlines()
    assert said[0].endswith("(--server)")
    if output.startswith("|"):  # the reader has what it wanted: nothing more is said
        assert said[1:] == []
    else:
        assert said[1:] == [
            "plancontracts: error: cannot write to standard output: no space left on device"
        ]
        assert done.returncode == 1


# The schema as servers read it ------------------------------------------------------


def test_a_tuples_false_items_is_sent_as_its_length() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "pair": {"type": "array", "prefixItems": [{}, {}], "items": False},
            "bounded": {
                "type": "array",
                "prefixItems": [{}, {}, {}],
                "items": False,
                "maxItems": 1,
            },
            "open": {"type": "array", "items": {"type": "integer"}},
        },
        "additionalProperties": False,
    }
    sent: dict[str, Any] = portable(schema)
    assert sent["properties"]["pair"] == {"type": "array", "prefixItems": [{}, {}], "maxItems": 2}
    assert sent["properties"]["bounded"]["maxItems"] == 1
    assert "items" not in sent["properties"]["bounded"]
    assert sent["properties"]["open"] == schema["properties"]["open"]
    assert sent["additionalProperties"] is False
    assert schema["properties"]["pair"]["items"] is False  # the profile itself is untouched


PLAN_PROFILE = plan_profile(bundled_skills()).schema


@settings(
    max_examples=examples_at_most(60), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(st.data())
def test_the_plan_profile_as_sent_accepts_exactly_what_the_profile_accepts(
    data: st.DataObject,
) -> None:
    document = data.draw(valid_documents(PLAN_PROFILE))
    changed = data.draw(mutated(document))
    sent = Draft202012Validator(portable(PLAN_PROFILE))
    profile = Draft202012Validator(PLAN_PROFILE)
    assert sent.is_valid(document)
    assert sent.is_valid(changed) == profile.is_valid(changed)


@pytest.mark.process  # what a fresh interpreter imports
def test_the_command_line_offers_the_server_options_without_importing_the_client() -> None:
    # Every command, `validate` too, builds the parser with the server's options:
    # importing the client (httpx, trio, ssl) for that would slow every start.
    code = (
        "import sys\n"
        "from plancontracts.runtime.cli.main import main\n"
        "print(sorted(m for m in ('trio', 'ssl', 'httpx', 'plancontracts.runtime.model.served') "
        "if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.stdout.splitlines()[-1] == "[]", done.stderr


def test_a_password_in_the_servers_address_is_never_shown() -> None:
    said: list[str] = []
    with model_server(always(Reply(content=ROLL))) as server:
        address = server.url.replace("http://", "http://player:hunter2@")
        ServedModel.connect(ServerSettings(address), environ={}, say=said.append)
        done = cli("plan", "--server", address, "I roll a die")
    assert done.returncode == 0, done.stderr
    with silent_server() as (silent, _):
        quiet = f"http://player:hunter2@{silent}"
        failed = cli("plan", "--server", quiet, "--server-timeout", "0.5", "I roll a die")
    refused = cli("plan", "--server", "http://player:hunter2@host/?q=1", "I roll a die")
    assert failed.returncode == 1
    assert refused.returncode == 2
    for line in [*said, done.stderr, failed.stderr, refused.stderr]:
        assert "hunter2" not in line
    assert "http://player:***@127.0.0.1:" in said[0]
    assert "player:***@" in failed.stderr
    assert "player:***@" in refused.stderr


def test_a_model_name_the_server_gives_is_shown_escaped() -> None:
    forged = "m\x1b[2J\nplancontracts: error: forged"
    said: list[str] = []
    with model_server(always(Reply(content=ROLL)), models=[forged]) as server:
        ServedModel.connect(ServerSettings(server.url), environ={}, say=said.append)
    (line,) = said
    assert "\x1b" not in line
    assert "\n" not in line
    assert line.startswith("model: m\\u001b[2J\\u000aplancontracts: error: forged served at ")


# Streamed answers (`stream_chat`): server-sent events, read as they arrive, under the
# same bounds as a whole answer.


def stream(served: ServedModel, **options: Any) -> tuple[list[Piece], list[int]]:
    """The pieces `stream_chat` gives, and the token counts the hook was told, in order."""

    async def main() -> tuple[list[Piece], list[int]]:
        told: list[int] = []
        with watching_tokens(told.append):
            written = served.stream_chat(
                MESSAGES,
                SCHEMA,
                answer="JSON",
                max_tokens=options.get("max_tokens", 64),
                seed=options.get("seed"),
            )
            pieces = [piece async for piece in written]
        return pieces, told

    return trio.run(main)


def events(*data: str, end: bytes = b"\n\n") -> bytes:
    """Server-sent events with `data`, each ended by `end`."""
    return b"".join(b"data: " + item.encode() + end for item in data)


def delta(text: str, finish: str | None = None) -> str:
    return json.dumps(
        {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]}
    )


STREAMED = events(delta('{"answer"'), delta(': "yes"}'), delta("", "stop"), "[DONE]")
"A streamed answer as a server sends it, without usage."


def test_a_streamed_answer_arrives_in_pieces_and_totals_the_servers_token_count() -> None:
    with model_server(always(Reply(tokens=9))) as server:
        served = connect(server.url)
        pieces, told = stream(served, max_tokens=64, seed=7)
    assert "".join(piece.text for piece in pieces) == '{"answer": "yes"}'
    assert [piece.tokens for piece in pieces[:-1]] == [1] * 6  # 17 characters, 3 an event
    assert pieces[-1] == Piece("", 3)  # the server counts 9 tokens: the rest
    assert told == [piece.tokens for piece in pieces]
    (request,) = server.requests
    assert request["stream"] is True
    assert request["stream_options"] == {"include_usage": True}
    assert (request["max_tokens"], request["seed"]) == (64, 7)
    assert served.counts.answers == 1


def test_a_streamed_answer_is_not_judged_the_caller_judges_it() -> None:
    with model_server(always(Reply(content='{"answer": "maybe"'))) as server:
        pieces, told = stream(connect(server.url))
    assert "".join(piece.text for piece in pieces) == '{"answer": "maybe"'
    assert sum(told) == len(pieces)  # the stub counts a token an event: no correction


def test_a_whole_answer_reports_the_tokens_the_server_counts() -> None:
    with model_server(sequence(Reply(tokens=5), Reply())) as server:
        served = connect(server.url)
        for expected in ([5], []):  # a server that does not count says nothing
            told: list[int] = []
            with watching_tokens(told.append):
                write(served)
            assert told == expected


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(STREAMED, id="plain"),
        pytest.param(STREAMED.replace(b"data: ", b"data:"), id="data-without-space"),
        pytest.param(STREAMED.replace(b"\n", b"\r\n"), id="crlf"),
        pytest.param(STREAMED.replace(b"\n", b"\r"), id="cr"),
        pytest.param(b": ping\n\n" + STREAMED.replace(b"\n\n", b"\n: ping\n\n"), id="comments"),
        pytest.param(b"event: message\nid: 1\nretry: 10\n" + STREAMED, id="other-fields-ignored"),
        pytest.param(b"\n\n" + STREAMED.replace(b"\n\n", b"\n\n\n\n"), id="blank-lines"),
        pytest.param(STREAMED.replace(b"[DONE]", b"").rstrip(b"\n"), id="finished-no-done"),
    ],
)
def test_every_form_of_server_sent_events_is_read(body: bytes) -> None:
    reply = Reply(content=None, body=body, headers={"Content-Type": "text/event-stream"})
    with model_server(always(reply)) as server:
        pieces, _ = stream(connect(server.url))
    assert [piece.text for piece in pieces] == ['{"answer"', ': "yes"}']


def test_an_answer_trickled_a_byte_at_a_time_is_read_whole() -> None:
    crlf = STREAMED.replace(b"\n", b"\r\n")  # a CR and its LF in two reads
    with model_server(always(Reply(content=None, body=crlf, every=0.001))) as server:
        pieces, _ = stream(connect(server.url))
    assert [piece.text for piece in pieces] == ['{"answer"', ': "yes"}']


def test_a_server_that_ignores_stream_is_read_as_one_answer() -> None:
    completion = {
        "choices": [{"index": 0, "message": {"content": '{"answer": "no"}'}}],
        "usage": {"completion_tokens": 6},
    }
    whole = Reply(content=None, body=b"\n" + json.dumps(completion).encode())
    with model_server(always(whole)) as server:
        pieces, told = stream(connect(server.url))
    assert pieces == [Piece('{"answer": "no"}', 6)]
    assert told == [6]


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (events("{nope"), "sent an event that is not JSON: '{nope'"),
        (events("[1]"), "sent an event that is not a chat chunk"),
        (events('{"choices": [{"delta": {"content": 5}}]}'), "content is not text"),
        (
            events(delta("{"), '{"error": {"message": "the model crashed"}}'),
            "said an error in its stream: 'the model crashed'",
        ),
        (b'{"error": "overloaded"}', "answered with an error: 'overloaded'"),
        (b'{"choices": []}', "answered with no message text"),
        (b"{nope", "answered with no JSON"),
        (events(delta('{"answer"')), "ended its stream before the answer did, after 9 characters"),
        (b"data: " + b"x" * (MAX_RESPONSE_BYTES + 1), "answered with more than"),
    ],
    ids=[
        "not-json",
        "not-a-chunk",
        "content-not-text",
        "error-in-stream",
        "error-object",
        "object-without-text",
        "object-not-json",
        "no-end",
        "line-past-the-limit",
    ],
)
def test_a_stream_that_is_not_a_chat_answer_fails_in_one_line(body: bytes, said: str) -> None:
    with model_server(always(Reply(content=None, body=body))) as server:
        served = connect(server.url)
        with pytest.raises(ServerFailed, match=re.escape(said)) as failed:
            stream(served)
    assert "\n" not in str(failed.value)
    assert len(server.requests) == 1  # no other try: the server said what it says


def test_a_stream_that_never_ends_ends_at_the_deadline() -> None:
    pings = events(delta("{")) + b": ping\n" * 2000  # a read every 10 ms: 20 s in all
    with model_server(always(Reply(content=None, body=pings, every=0.01))) as server:
        served = connect(server.url, timeout=1.0)
        with pytest.raises(ServerFailed, match=r"had not ended within 1 s$"):
            stream(served)
    assert len(server.requests) == 1


def test_a_stream_whose_first_byte_never_comes_ends_at_the_deadline() -> None:
    with model_server(always(Reply(delay=30))) as server:
        served = connect(server.url, timeout=0.5)
        with pytest.raises(ServerFailed, match=r"had not answered within 0\.5 s$"):
            stream(served)
    assert server.hung_up == 1


def test_a_stream_cut_after_its_first_piece_fails_and_is_never_started_again() -> None:
    cut = Reply(cut=200)  # 90 bytes of the role's event, 87 of the first text's, then a cut
    with model_server(always(cut)) as server:
        served = connect(server.url, retries=3)
        said = "broke off its answer after 3 characters: "
        with pytest.raises(ServerFailed, match=said) as failed:
            stream(served)
    assert "\n" not in str(failed.value)
    assert len(server.requests) == 1


def test_a_stream_that_fails_before_its_first_piece_is_tried_again() -> None:
    with model_server(sequence(Reply(503), Reply(cut=20), Reply())) as server:
        served = connect(server.url, retries=3)
        pieces, _ = stream(served)
    assert "".join(piece.text for piece in pieces) == '{"answer": "yes"}'
    assert len(server.requests) == 3
    assert (served.counts.requests, served.counts.retried) == (3, 2)


def test_a_stream_refused_with_a_status_no_try_mends_fails_at_once() -> None:
    refused = Reply(400, content=None, body=b"no streams here")
    with (
        model_server(always(refused)) as server,
        pytest.raises(ServerFailed, match=r"answered HTTP 400: 'no streams here'$"),
    ):
        stream(connect(server.url, retries=3))
    assert len(server.requests) == 1


@pytest.mark.parametrize("encoding", sorted(BOMBS))
def test_a_compressed_stream_is_read_as_it_says(encoding: str) -> None:
    body = BOMBS[encoding](STREAMED)
    reply = Reply(content=None, body=body, headers={"Content-Encoding": encoding})
    with model_server(always(reply)) as server:
        pieces, _ = stream(connect(server.url))
    assert [piece.text for piece in pieces] == ['{"answer"', ': "yes"}']


def test_a_raw_deflate_stream_is_read() -> None:
    packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    raw = packer.compress(STREAMED) + packer.flush()
    reply = Reply(content=None, body=raw, headers={"Content-Encoding": "deflate"})
    with model_server(always(reply)) as server:
        pieces, _ = stream(connect(server.url))
    assert [piece.text for piece in pieces] == ['{"answer"', ': "yes"}']


@pytest.mark.parametrize("encoding", sorted(BOMBS))
def test_a_compressed_stream_is_bounded_as_decoded(encoding: str) -> None:
    body, headers = _bomb(encoding)
    bomb = Reply(content=None, body=body, headers=headers)
    with model_server(always(bomb)) as server:
        served = connect(server.url)

        def run() -> None:
            with pytest.raises(ServerFailed, match="answered with more than"):
                stream(served)

        assert _peak_while(run) < MOST_HELD


@pytest.mark.parametrize(
    ("encoding", "body", "said"),
    [
        ("br", STREAMED, "answered in the 'br' encoding, which is not read"),
        ("gzip", STREAMED, "answered with a body that is not gzip as it says"),
        ("deflate", b"x", "answered with a body that is not deflate as it says"),
    ],
)
def test_a_stream_in_an_encoding_not_read_fails_in_one_line(
    encoding: str, body: bytes, said: str
) -> None:
    reply = Reply(content=None, body=body, headers={"Content-Encoding": encoding})
    with model_server(always(reply)) as server, pytest.raises(ServerFailed, match=said):
        stream(connect(server.url))


def test_cancelling_a_stream_closes_its_connection() -> None:
    slow = Reply(content='{"answer": "yes"}', piece=1, every=0.2)  # 17 events: 3.4 s
    with model_server(always(slow)) as server:
        served = connect(server.url)
        read: list[Piece] = []

        async def main() -> None:
            pieces = served.stream_chat(MESSAGES, SCHEMA, answer="JSON", max_tokens=64, seed=None)
            with trio.move_on_after(0.5):
                async for piece in pieces:
                    read.append(piece)  # noqa: PERF401 (what was read before the cancel)
            assert 0 < len(read) < 17

        trio.run(main)
        trio.run(trio.sleep, 0.5)  # the server notices at its next write
    assert server.hung_up == 1


def test_closing_a_stream_closes_its_connection_and_frees_its_place() -> None:
    slow = Reply(content='{"answer": "yes"}', piece=1, every=0.2)
    with model_server(always(slow)) as server:
        served = connect(server.url, in_flight=1)

        async def main() -> None:
            written = served.stream_chat(MESSAGES, SCHEMA, answer="JSON", max_tokens=64, seed=None)
            assert (await anext(written)).text == "{"
            await written.aclose()
            with trio.fail_after(5):  # the one place is free again
                async with served._limiter():
                    pass

        trio.run(main)
        trio.run(trio.sleep, 0.5)
    assert server.hung_up == 1


def test_streams_beyond_the_pool_wait_for_a_place() -> None:
    slow = Reply(piece=4, every=0.05)
    with model_server(always(slow)) as server:
        served = connect(server.url, in_flight=2)
        texts: list[str] = []

        async def one() -> None:
            pieces = served.stream_chat(MESSAGES, SCHEMA, answer="JSON", max_tokens=64, seed=None)
            texts.append("".join([piece.text async for piece in pieces]))

        async def main() -> None:
            async with trio.open_nursery() as nursery:
                for _ in range(5):
                    nursery.start_soon(one)

        trio.run(main)
    assert texts == ['{"answer": "yes"}'] * 5
    assert server.most_at_once == 2


def test_an_event_split_across_reads_and_lines_is_read_whole() -> None:
    # One event whose JSON spans two data lines (joined by a newline, as the standard
    # says), its CRLF cut between reads with an empty read between: a decoder's output
    # while a compressed block is incomplete.
    chunk = delta('{"answer": "yes"}').encode()
    first, second = chunk[: chunk.index(b"[")], chunk[chunk.index(b"[") :]
    reads = [b"data: " + first + b"\r", b"", b"\ndata: " + second + b"\r\n", b"\r\n"]
    answer = _StreamedAnswer()
    pieces = [piece for read in reads for piece in answer.feed(read)]
    assert pieces == [Piece('{"answer": "yes"}', 1)]
    assert answer.feed(b"data: [DONE]\r\n\r\n") == []
    assert answer.done
