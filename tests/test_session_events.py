"""The events of a session's tool calls: subscribers, `--events FILE`, and the latest plan.

Every call a `PlanSession` takes, refused or not, is told to its subscribers
as a `session-tool-event` document; `session run --events FILE` and `session
drive --events FILE` append them to FILE as NDJSON, as each call is done.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import resource
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
from commands import cli, ctrl_c_as_from_a_terminal
from hypothesis import given, settings
from jsonschema import Draft202012Validator
from local_servers import Reply, conforming, model_server
from test_session_plans import CALLS as RANDOM_CALLS
from test_session_plans import FIRST_CALLS
from tiers import examples_at_most

from plancontracts import (
    SESSION_TOOL_EVENT,
    ContractError,
    contract_schema,
    decode,
    violations,
)
from plancontracts.generated.session_plans import SessionPlan
from plancontracts.runtime.session_plans import PlanSession, SessionToolEvent

OBJECTIVE = "Triage the open bug reports"
SET_UP = {"objective": f"  {OBJECTIVE} ", "initial_steps": [{"title": "List them"}]}
SESSION = "2f6d1c3e-8b1a-4c57-9e0d-5a3b7c9e1f24"

# Five calls: two that succeed, a refused one, an unknown tool, a read.
CALLS: list[tuple[str, Any]] = [
    ("planning_setup_plan", SET_UP),
    ("planning_mark_step", {"step_id": "S001", "status": "in_progress"}),
    ("planning_mark_step", {"step_id": "S002", "status": "done"}),
    ("planning_guess", 5),
    ("planning_read_plan", {}),
]


def made(session: PlanSession) -> None:
    for tool, arguments in CALLS:
        session.call(tool, arguments)


def as_json(event: SessionToolEvent) -> Any:
    return json.loads(msgspec.json.encode(event))


VALIDATOR = Draft202012Validator(contract_schema("session-tool-event"))


def valid(document: Any) -> bool:
    """Whether `document` keeps to the contract: its schema (the if/then rule too) and its type."""
    try:
        decode(SESSION_TOOL_EVENT, json.dumps(document))
    except ContractError:
        return False
    return VALIDATOR.is_valid(document)


# Subscribers -------------------------------------------------------------------------------


def test_subscribers_are_told_of_every_call_in_order_refusals_included() -> None:
    session = PlanSession(session_id=SESSION)
    first: list[SessionToolEvent] = []
    second: list[SessionToolEvent] = []
    told: list[str] = []
    session.subscribe(first.append)
    session.subscribe(second.append)
    session.subscribe(lambda event: told.append(f"{event.sequence} {event.tool}"))
    made(session)
    assert first == second
    assert [(e.sequence, e.tool, e.ok) for e in first] == [
        (1, "planning_setup_plan", True),
        (2, "planning_mark_step", True),
        (3, "planning_mark_step", False),
        (4, "planning_guess", False),
        (5, "planning_read_plan", True),
    ]
    assert told == [f"{n} {tool}" for n, (tool, _) in enumerate(CALLS, 1)]
    assert {event.session_id for event in first} == {SESSION}
    assert session.calls == 5
    setup, _, refused, unknown, read = first
    # Arguments as given, untrimmed; the result as the tool returned it, trimmed.
    assert setup.arguments is SET_UP
    assert setup.result == {
        "objective": OBJECTIVE,
        "initial_steps": [{"title": "List them", "details": None}],
    }
    assert setup.message == "The plan is set up and active, with 1 step, S001."
    assert (setup.error, refused.result, unknown.result) == (None, None, None)
    assert refused.error is not None
    assert refused.error.field == "/step_id"
    assert refused.error.message == refused.message
    assert refused.message == 'step_id: no step "S002" in the plan: its only step is S001'
    assert unknown.arguments is None  # no object: its error says what it was
    assert unknown.error is not None
    assert unknown.error.field is None
    assert unknown.message.startswith('no planning tool is called "planning_guess"')
    assert read.result == json.loads(msgspec.json.encode(session.latest))  # a read returns the plan


def test_every_event_keeps_to_its_contract() -> None:
    session = PlanSession()
    events: list[SessionToolEvent] = []
    session.subscribe(events.append)
    made(session)
    documents = [as_json(event) for event in events]
    assert all(valid(document) for document in documents)
    # The contract's rule beyond its schema: ok exactly when there is a result and no error.
    setup, _, refused, *_ = documents
    assert [
        str(v) for v in violations(SESSION_TOOL_EVENT, {**setup, "error": refused["error"]})
    ] == ["/error: the call succeeded (ok is true), so it has no error: null"]
    assert [str(v) for v in violations(SESSION_TOOL_EVENT, {**refused, "ok": True})] == [
        "/error: the call succeeded (ok is true), so it has no error: null",
        "/result: the call succeeded (ok is true), so it has a result",
    ]
    assert [str(v) for v in violations(SESSION_TOOL_EVENT, {**setup, "ok": False})] == [
        "/error: the call was refused (ok is false), so it says why: an error",
        "/result: the call was refused (ok is false), so it has no result: null",
    ]
    assert not valid({**setup, "error": refused["error"]})
    assert not valid({**setup, "sequence": 0})
    assert not valid({**setup, "session_id": "session 1"})


def test_the_events_examples_are_what_a_session_tells() -> None:
    session = PlanSession(session_id=SESSION)
    events: list[SessionToolEvent] = []
    session.subscribe(events.append)
    session.call("planning_setup_plan", SET_UP)
    session.call("planning_mark_step", {"step_id": "S002", "status": "done"})
    examples = contract_schema("session-tool-event")["examples"]
    timing = ("duration_seconds", "ended_at")
    for example, event in zip(examples, map(as_json, events), strict=True):
        said = {key: value for key, value in event.items() if key not in timing}
        assert said == {key: value for key, value in example.items() if key not in timing}


def test_a_subscriber_that_raises_changes_nothing_of_the_call() -> None:
    failures: list[tuple[int, Exception]] = []
    session = PlanSession(on_subscriber_error=lambda e, error: failures.append((e.sequence, error)))
    after: list[int] = []

    def broken(event: SessionToolEvent) -> None:
        raise RuntimeError(f"cannot take event {event.sequence}")

    session.subscribe(broken)
    session.subscribe(lambda event: after.append(event.sequence))
    done = session.call("planning_setup_plan", SET_UP)
    assert done.ok  # the result stands
    assert session.latest is done.state is not None  # and so does the plan
    assert len(session.history) == 1
    assert after == [1]  # the next subscriber was still told
    assert [(n, str(error)) for n, error in failures] == [(1, "cannot take event 1")]


def test_by_default_a_subscriber_that_raises_is_logged_in_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    session = PlanSession(session_id=SESSION)

    def broken(event: SessionToolEvent) -> None:
        raise ZeroDivisionError("division by zero")

    session.subscribe(broken)
    with caplog.at_level(logging.ERROR, logger="plancontracts.session"):
        assert session.call("planning_setup_plan", SET_UP).ok
    assert [record.getMessage() for record in caplog.records] == [
        f"a subscriber of session {SESSION} failed on call 1 (planning_setup_plan): "
        "ZeroDivisionError: division by zero"
    ]


def test_an_interruption_in_a_subscriber_is_raised_the_plan_kept() -> None:
    session = PlanSession()

    def interrupted(event: SessionToolEvent) -> None:
        session.call("planning_read_plan", {})  # its event waits its turn, which never comes
        raise KeyboardInterrupt

    unsubscribe = session.subscribe(interrupted)
    with pytest.raises(KeyboardInterrupt):
        session.call("planning_setup_plan", SET_UP)
    assert session.latest is not None
    unsubscribe()
    events: list[SessionToolEvent] = []
    session.subscribe(events.append)
    session.call("planning_read_plan", {})
    # The read the interrupted subscriber made is not told late, out of its turn.
    assert [event.sequence for event in events] == [3]


def test_unsubscribing_stops_the_events_and_twice_is_harmless() -> None:
    session = PlanSession()
    events: list[int] = []

    def tell(event: SessionToolEvent) -> None:
        events.append(event.sequence)

    first = session.subscribe(tell)
    second = session.subscribe(tell)  # the same function twice: told twice
    session.call("planning_setup_plan", SET_UP)
    first()
    first()
    session.call("planning_read_plan", {})
    second()
    session.call("planning_read_plan", {})
    assert events == [1, 1, 2]


def test_a_call_a_subscriber_makes_is_told_after_the_event_being_told() -> None:
    session = PlanSession()
    seen: dict[str, list[int]] = {"first": [], "second": []}

    def first(event: SessionToolEvent) -> None:
        seen["first"].append(event.sequence)
        if event.sequence == 1:
            session.call("planning_read_plan", {})

    session.subscribe(first)
    session.subscribe(lambda event: seen["second"].append(event.sequence))
    session.call("planning_setup_plan", SET_UP)
    assert seen == {"first": [1, 2], "second": [1, 2]}


def test_sequence_counts_every_call_even_with_no_one_told() -> None:
    session = PlanSession()
    session.call("planning_read_plan", {})  # refused: no plan
    session.call("planning_setup_plan", SET_UP)
    events: list[SessionToolEvent] = []
    session.subscribe(events.append)
    session.call("planning_read_plan", {})
    assert [event.sequence for event in events] == [3]


def test_the_duration_is_the_calls_own_and_the_end_is_in_utc() -> None:
    session = PlanSession()
    events: list[SessionToolEvent] = []
    session.subscribe(events.append)
    session.subscribe(lambda event: time.sleep(0.2))  # a slow subscriber's time is not the call's
    before = datetime.now(UTC).replace(microsecond=0)
    started = time.monotonic()
    session.call("planning_setup_plan", SET_UP)
    elapsed = time.monotonic() - started
    after = datetime.now(UTC)
    (event,) = events
    assert 0 <= event.duration_seconds < elapsed - 0.2
    assert event.ended_at.endswith("Z")
    assert before <= datetime.fromisoformat(event.ended_at) <= after


def test_a_session_id_is_drawn_or_given_as_a_uuid() -> None:
    assert PlanSession().session_id != PlanSession().session_id
    given = PlanSession(session_id=SESSION.upper().replace("-", ""))
    assert given.session_id == SESSION  # the contract's form, whatever form was given
    with pytest.raises(ValueError, match="hexadecimal UUID"):
        PlanSession(session_id="session 1")


@settings(max_examples=examples_at_most(30))
@given(FIRST_CALLS, RANDOM_CALLS)
def test_random_calls_each_tell_one_event_that_keeps_to_the_contract(
    first: list[tuple[str, Any]], calls: list[tuple[str, Any]]
) -> None:
    session = PlanSession()
    events: list[SessionToolEvent] = []
    session.subscribe(events.append)
    for number, (tool, arguments) in enumerate(first + calls, 1):
        done = session.call(tool, arguments)
        event = events[-1]
        assert (len(events), event.sequence) == (number, number)
        assert (event.tool, event.ok, event.message) == (tool, done.ok, done.message)
        line = msgspec.json.encode(event)
        assert decode(SESSION_TOOL_EVENT, line) == event  # schema and rule


# The latest plan ---------------------------------------------------------------------------


def test_the_latest_plan_is_none_then_the_plan_after_each_call() -> None:
    session = PlanSession()
    assert session.latest is None
    latest: list[SessionPlan | None] = []
    session.subscribe(lambda event: latest.append(session.latest))
    made(session)
    # Told once the call is done: the latest plan is already the plan after it.
    setup, marked, refused, unknown, read = latest
    assert setup is not None
    assert setup.objective == OBJECTIVE
    assert marked is not None
    assert marked.steps[0].status == "in_progress"
    assert session.history == (setup, marked)
    assert refused is unknown is read is marked is session.latest  # unchanged since


# session run --events ----------------------------------------------------------------------


def calls_file(folder: Path, *lines: str) -> Path:
    calls = folder / "calls.ndjson"
    body = [json.dumps({"tool": tool, "arguments": arguments}) for tool, arguments in CALLS]
    calls.write_text("\n".join([*body, *lines]) + "\n")
    return calls


def events_in(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_session_run_appends_one_line_per_call_to_the_events_file(tmp_path: Path) -> None:
    calls = calls_file(tmp_path, "not json", '{"arguments": {}}')  # two lines that are no call
    events = tmp_path / "events.ndjson"
    first = cli("session", "run", str(calls), "--events", str(events))
    assert first.returncode == 1  # some calls were refused
    outcomes = [json.loads(line) for line in first.stdout.splitlines()]
    assert len(outcomes) == len(CALLS) + 3  # each line, then the plan
    checked = cli("validate", "--ndjson", "session-tool-event", str(events))
    assert checked.returncode == 0, checked.stdout
    written = events_in(events)
    assert [event["sequence"] for event in written] == [1, 2, 3, 4, 5]
    assert [event["tool"] for event in written] == [tool for tool, _ in CALLS]
    # Each event says what the run's line for its call says.
    for event, outcome in zip(written, outcomes, strict=False):
        assert (event["tool"], event["ok"]) == (outcome["tool"], outcome["ok"])
        assert event["result"] == outcome.get("result")
        if not event["ok"]:
            assert event["error"]["message"] == outcome["error"]["message"]
    # A second run appends: its own session id, its sequence from 1 again.
    second = cli("session", "run", str(calls), "--events", str(events))
    assert second.returncode == 1
    both = events_in(events)
    assert both[:5] == written
    assert [event["sequence"] for event in both[5:]] == [1, 2, 3, 4, 5]
    assert len({event["session_id"] for event in both[5:]} | {written[0]["session_id"]}) == 2


def test_a_cut_last_line_is_ended_before_the_first_event(tmp_path: Path) -> None:
    events = tmp_path / "events.ndjson"
    events.write_text('{"cut": ')  # an earlier run stopped by a full disk, say
    done = cli("session", "run", str(calls_file(tmp_path)), "--events", str(events))
    assert done.returncode == 1
    cut, *lines = events.read_text().splitlines()
    assert cut == '{"cut": '
    assert len(lines) == len(CALLS)
    assert all(valid(json.loads(line)) for line in lines)


def test_a_run_that_fails_before_its_first_call_leaves_no_events_file(tmp_path: Path) -> None:
    events = tmp_path / "events.ndjson"
    done = cli("session", "run", str(tmp_path / "missing.ndjson"), "--events", str(events))
    assert done.returncode == 2
    assert not events.exists()
    events.write_text("")  # one that was there stays
    cli("session", "run", str(tmp_path / "missing.ndjson"), "--events", str(events))
    assert events.exists()


@pytest.mark.parametrize(
    ("events", "message"),
    [
        ("{calls}", "the events file {calls} is the calls file {calls}: name another file"),
        ("{link}", "the events file {link} is the calls file {calls}: name another file"),
        ("{tmp}", "cannot open the events file {tmp}: is a directory"),
        ("{tmp}/no/events", "cannot open the events file {tmp}/no/events: no such file or"),
        ("-", "--events takes a file: standard output carries the results already"),
    ],
)
def test_session_run_refuses_an_events_file_it_cannot_use_in_one_line(
    tmp_path: Path, events: str, message: str
) -> None:
    calls = calls_file(tmp_path)
    before = calls.read_bytes()
    (tmp_path / "link").symlink_to(calls)
    names = {"calls": str(calls), "link": str(tmp_path / "link"), "tmp": str(tmp_path)}
    done = cli("session", "run", str(calls), "--events", events.format(**names))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(f"plancontracts: error: {message.format(**names)}")
    assert done.stderr.count("\n") == 1
    assert calls.read_bytes() == before


@pytest.mark.parametrize("kind", ["fifo", "device"])
@pytest.mark.parametrize("command", ["run", "drive"])
def test_an_events_file_that_is_no_regular_file_is_refused_before_any_call(
    tmp_path: Path, command: str, kind: str
) -> None:
    # A FIFO nobody reads took the events until its buffer was full, then held
    # the run for good; a device swallows them. Only a regular file keeps them.
    if kind == "fifo":
        events, what = str(tmp_path / "events.fifo"), "a FIFO"
        os.mkfifo(events)
    else:
        events, what = os.devnull, "a character device"
    if command == "run":
        done = cli("session", "run", str(calls_file(tmp_path)), "--events", events)
    else:
        done = cli("session", "drive", OBJECTIVE, "--events", events, "--no-download")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"plancontracts: error: --events {events}: not a regular file ({what})\n"


@pytest.mark.process  # standard input and output redirected to files, as a shell does
@pytest.mark.parametrize("stream", ["stdin", "stdout"])
def test_session_run_refuses_an_events_file_that_is_a_standard_stream(
    tmp_path: Path, stream: str
) -> None:
    calls = calls_file(tmp_path)
    before = calls.read_bytes()
    target = calls if stream == "stdin" else tmp_path / "out.ndjson"
    with calls.open("rb") as stdin, (tmp_path / "out.ndjson").open("wb") as stdout:
        done = subprocess.run(
            [sys.executable, "-m", "plancontracts", "session", "run", "-", "--events", str(target)],
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    assert done.returncode == 2
    where = "standard input" if stream == "stdin" else "where standard output goes"
    assert done.stderr == (
        f"plancontracts: error: the events file {target} is {where}: name another file\n"
    )
    assert calls.read_bytes() == before


def _files_cannot_grow() -> None:
    """In the child: no file may pass 1 byte, failing the write (EFBIG) rather than killing."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1, 1))


@pytest.mark.process  # a file size limit, the child's own
def test_an_events_file_that_cannot_be_written_ends_the_run_in_one_line(tmp_path: Path) -> None:
    # A regular file whose first line cannot be written, as on a full disk.
    events = tmp_path / "events.ndjson"
    done = subprocess.run(
        [sys.executable, "-m", "plancontracts", "session", "run", "-", "--events", str(events)],
        input=calls_file(tmp_path).read_text(),
        capture_output=True,  # pipes: the limit holds files only
        text=True,
        timeout=120,
        preexec_fn=_files_cannot_grow,
    )
    assert (done.returncode, done.stdout) == (1, "")  # stopped at the first call
    assert done.stderr == (
        f"plancontracts: error: cannot write to the events file {events}: file too large\n"
    )


@pytest.mark.process  # a signal to the command
@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_events_written_before_a_signal_are_kept(
    tmp_path: Path, signum: signal.Signals, status: int
) -> None:
    events = tmp_path / "events.ndjson"
    command = [sys.executable, "-m", "plancontracts", "session", "run", "-", "--events"]
    process = subprocess.Popen(
        [*command, str(events)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=ctrl_c_as_from_a_terminal,
    )
    try:
        assert process.stdin is not None
        for tool, arguments in CALLS[:3]:
            process.stdin.write(json.dumps({"tool": tool, "arguments": arguments}).encode() + b"\n")
        process.stdin.flush()  # the command now waits for a fourth line
        deadline = time.monotonic() + 120
        while (not events.exists() or events.read_bytes().count(b"\n") < 3) and (
            time.monotonic() < deadline and process.poll() is None
        ):
            time.sleep(0.05)
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == status, stderr
    written = events_in(events)
    assert [event["sequence"] for event in written] == [1, 2, 3]
    assert all(valid(event) for event in written)
    assert events.read_bytes().endswith(b"\n")


# session drive --events --------------------------------------------------------------------


def test_session_drive_writes_an_event_for_each_call_it_prints(tmp_path: Path) -> None:
    events = tmp_path / "events.ndjson"
    with model_server(conforming) as server:
        done = cli(
            "session",
            "drive",
            OBJECTIVE,
            "--server",
            server.url,
            "--max-calls",
            "2",
            "--events",
            str(events),
        )
    assert done.returncode == 0, done.stderr
    *printed, _ = [json.loads(line) for line in done.stdout.splitlines()]
    written = events_in(events)
    assert len(written) == len(printed) >= 1
    assert all(valid(event) for event in written)
    for event, call in zip(written, printed, strict=True):
        assert event["sequence"] == call["call"]
        assert (event["tool"], event["ok"], event["arguments"]) == (
            call["tool"],
            call["ok"],
            call["arguments"],
        )


def _first_then_slow(number: int, body: dict[str, Any]) -> Reply:
    """The first call at once, then no answer for a minute: a drive to stop while it waits."""
    return dataclasses.replace(conforming(number, body), delay=0.0 if number == 0 else 60.0)


@pytest.mark.process  # a signal to the command
def test_a_drive_stopped_while_the_model_writes_keeps_the_events_written(tmp_path: Path) -> None:
    events = tmp_path / "events.ndjson"
    with model_server(_first_then_slow) as server:
        drive = ["session", "drive", OBJECTIVE, "--server", server.url, "--max-calls", "3"]
        process = subprocess.Popen(
            [sys.executable, "-m", "plancontracts", *drive, "--events", str(events)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + 120
            while not (events.exists() and events.read_bytes().endswith(b"\n")) and (
                time.monotonic() < deadline and process.poll() is None
            ):
                time.sleep(0.05)
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=60)
        finally:
            process.kill()
    assert process.returncode == 143, stderr
    (event,) = events_in(events)
    assert (event["sequence"], event["tool"], event["ok"]) == (1, "planning_setup_plan", True)
    assert valid(event)


def test_session_drive_refuses_an_events_file_before_any_model(tmp_path: Path) -> None:
    done = cli("session", "drive", OBJECTIVE, "--events", str(tmp_path), "--no-download")
    assert (done.returncode, done.stdout) == (2, "")
    assert (
        done.stderr
        == f"plancontracts: error: cannot open the events file {tmp_path}: is a directory\n"
    )


def test_an_objective_refused_leaves_no_events_file(tmp_path: Path) -> None:
    events = tmp_path / "events.ndjson"
    done = cli("session", "drive", "  ", "--events", str(events))
    assert done.returncode == 2
    assert not events.exists()
    assert os.listdir(tmp_path) == []
