"""`write` and `plancontracts write` against real writers: the stub server, the packaged model.

An answer breaking a rule, then a good one: two attempts, the violations in
the second request. The families' generators re-ask the same way before
they fall back.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from commands import cli
from local_servers import Reply, conforming, model_server

from plancontracts import (
    Attempt,
    ServerSettings,
    Violation,
    WriteFailed,
    contract_names,
    load_contracts,
    write,
)
from plancontracts.runtime.model import LocalModel

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
BAD = {"name": "soup!", "serves": 4}  # a pattern a server may drop


@pytest.fixture
def recipe(tmp_path: Path) -> Path:
    path = tmp_path / "recipe.json"
    path.write_text(json.dumps(RECIPE))
    return path


def in_turn(*answers: Any) -> Any:
    def answer(number: int, body: dict[str, Any]) -> Reply:
        return Reply(content=json.dumps(answers[min(number, len(answers) - 1)]))

    return answer


def user_text(request: dict[str, Any]) -> str:
    return "\n".join(m["content"] for m in request["messages"] if m["role"] == "user")


# The command, against a server ---------------------------------------------------------------


def test_a_refused_answer_is_asked_again_with_its_violations(recipe: Path) -> None:
    with model_server(in_turn(BAD, GOOD)) as server:
        done = cli("write", "--schema", str(recipe), "A soup", "--server", server.url)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == GOOD
    assert done.stdout.count("\n") == 1
    refused = [line for line in done.stderr.splitlines() if "refused" in line]
    assert len(refused) == 1
    assert "attempt 1 refused" in refused[0]
    assert "/name" in refused[0]
    assert len(server.requests) == 2
    second = server.requests[1]["messages"]
    assert second[-2] == {"role": "assistant", "content": json.dumps(BAD)}
    assert "/name" in second[-1]["content"]
    assert "/name" not in user_text(server.requests[0])


def test_the_budget_spent_is_one_line_and_exit_status_1(recipe: Path) -> None:
    with model_server(in_turn(BAD)) as server:
        done = cli(
            "write", "--schema", str(recipe), "A soup", "--attempts", "2", "--server", server.url
        )
    assert done.returncode == 1
    assert done.stdout == ""
    lines = [line for line in done.stderr.splitlines() if line.startswith("plancontracts:")]
    assert len(lines) == 3  # one per refused attempt, then why it stopped
    assert "no answer was accepted in 2 attempts" in lines[-1]
    assert len(server.requests) == 2


def test_a_bundled_contract_is_written_under_its_profile() -> None:
    with model_server(conforming) as server:
        done = cli("write", "tool-event", "A log line", "--server", server.url)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["type"]
    sent = server.requests[0]["response_format"]["json_schema"]["schema"]
    assert sent.get("additionalProperties") is False or "oneOf" in sent or "anyOf" in sent


def test_a_contract_of_a_schema_folder(tmp_path: Path) -> None:
    folder = tmp_path / "schemas"
    (folder / "kitchen").mkdir(parents=True)
    (folder / "kitchen" / "recipe.json").write_text(json.dumps(RECIPE))
    with model_server(in_turn(GOOD)) as server:
        done = cli("write", "recipe", "A soup", "--schemas", str(folder), "--server", server.url)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == GOOD


def test_the_prompt_may_come_on_standard_input(recipe: Path) -> None:
    with model_server(in_turn(GOOD)) as server:
        done = cli("write", "--schema", str(recipe), "-", "--server", server.url, stdin="A soup")
    assert done.returncode == 0, done.stderr
    assert user_text(server.requests[0]) == "A soup"


def test_the_system_option_replaces_the_contracts_system_message(recipe: Path) -> None:
    with model_server(in_turn(GOOD)) as server:
        done = cli(
            "write", "--schema", str(recipe), "A soup", "--system", "Be brief.",
            "--server", server.url,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert server.requests[0]["messages"][0] == {"role": "system", "content": "Be brief."}


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        (["write", "recipes", "A soup"], "unknown contract"),
        (["write", "plan"], "no PROMPT"),
        (["write", "plan", "A soup", "more"], "2 prompts"),
        (["write", "plan", "   "], "empty"),
        (["write", "plan", "A soup", "--attempts", "0"], "--attempts"),
        (["write", "--schema", "nowhere.json", "A soup"], "nowhere.json"),
        (["write", "plan", "A soup", "--schemas", "nowhere"], "nowhere"),
    ],
)
def test_usage_errors_are_one_line_and_exit_status_2(arguments: list[str], says: str) -> None:
    done = cli(*arguments, env={"PLANCONTRACTS_SERVER": None})
    assert done.returncode == 2
    assert says in done.stderr
    assert done.stderr.count("error") == 1


# The families re-ask before they fall back ---------------------------------------------------


def test_goals_ask_again_before_the_fallback(tmp_path: Path) -> None:
    from local_servers import simplest_document

    from plancontracts.runtime.goal_plans.profiles import output_profile

    good = simplest_document(output_profile())
    bad = {**good, "steps": "no steps"}
    with model_server(in_turn(bad, good)) as server:
        done = cli(
            "goals", "plan", "Find food", "--needs", '{"hunger": 30}', "--server", server.url,
            cwd=tmp_path,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "answer 1 of 2 refused" in done.stderr
    assert "fallback" not in done.stderr
    assert len(server.requests) == 2
    assert "/steps" in server.requests[1]["messages"][-1]["content"]


# The packaged model, with a caller's check it first fails -----------------------------------


def test_the_local_model_is_asked_again_by_the_callers_check(
    recipe: Path, packaged_model: LocalModel
) -> None:
    contract = load_contracts(recipe)["recipe"]
    checked: list[Any] = []

    def not_the_first(value: Any) -> list[Violation]:
        checked.append(value)
        if len(checked) == 1:
            return [Violation("/name", "name the soup after its main vegetable")]
        return []

    attempts: list[Attempt] = []

    async def written() -> Any:
        return await write(
            contract,
            "A leek soup for four",
            writer=packaged_model,
            check=not_the_first,
            seed=7,
            max_tokens=64,
            on_attempt=attempts.append,
        )

    value = trio.run(written)
    assert value == checked[-1]
    assert [a.number for a in attempts] == [1, 2]
    assert attempts[0].violations == (Violation("/name", "name the soup after its main vegetable"),)
    assert attempts[0].tokens > 0


def test_a_stream_prints_growing_values_then_the_document(recipe: Path) -> None:
    with model_server(in_turn(BAD, GOOD)) as server:
        done = cli("write", "--schema", str(recipe), "A soup", "--stream", "--server", server.url)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[-1] == GOOD
    assert all(line != BAD for line in lines)  # a refused answer's values are never printed


@pytest.mark.process  # a signal to the command
@pytest.mark.parametrize(
    ("signum", "said"),
    [
        (signal.SIGINT, "plancontracts: interrupted"),
        (signal.SIGTERM, "plancontracts: stopped by SIGTERM"),
        (signal.SIGHUP, "plancontracts: stopped by SIGHUP"),
    ],
    ids=lambda value: getattr(value, "name", ""),
)
def test_a_stop_signal_while_the_server_streams_ends_the_command_in_one_line(
    recipe: Path, signum: signal.Signals, said: str
) -> None:
    slow = Reply(content=json.dumps(GOOD), every=0.5, piece=1)  # a minute of answer
    with model_server(lambda number, body: slow) as server:
        arguments = ["--schema", str(recipe), "A soup", "--stream", "--server", server.url]
        command = subprocess.Popen(
            [sys.executable, "-c", CTRL_C_AS_A_TERMINAL, "write", *arguments],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            assert command.stdout is not None
            assert json.loads(command.stdout.readline()) == {}  # the answer is streaming
            command.send_signal(signum)
            out, err = command.communicate(timeout=300)
        finally:
            if command.poll() is None:
                command.kill()
                command.communicate()
    assert command.returncode == 128 + signum
    assert b'"serves":4' not in out  # stopped before the answer was whole
    lines = err.decode().splitlines()
    assert lines[-1] == said
    assert "Traceback" not in err.decode()


CTRL_C_AS_A_TERMINAL = (
    "import signal, sys\n"
    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "from plancontracts.runtime.cli.main import main\n"
    "raise SystemExit(main(sys.argv[1:]))\n"
)
"The console script, with Ctrl-C as from a terminal (a suite in the background ignores it)."


@pytest.mark.slow  # the simplest document of 38 profiles is found once each
@pytest.mark.parametrize("contract", contract_names())
def test_every_bundled_contract_is_written_under_a_profile_its_schema_accepts(
    contract: str,
) -> None:
    """A server keeping to the profile writes a document the contract's schema accepts.

    Only the family's rules beyond the schema, which no profile holds, may
    refuse the simplest such document.
    """
    from plancontracts.runtime.model.served import ServedModel

    with model_server(conforming) as server:
        served = ServedModel.connect(ServerSettings(server.url), say=lambda line: None)

        async def written() -> Any:
            return await write(contract, "Write one", writer=served, attempts=1)

        try:
            trio.run(written)
        except WriteFailed as failure:
            (attempt,) = failure.attempts
            beyond = [v for v in attempt.violations if v.keyword is None]
            assert beyond == list(attempt.violations), attempt.violations
