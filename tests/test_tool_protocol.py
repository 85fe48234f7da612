"""The tool protocol against real processes: a corpus of scripts that misbehave.

Every script lives in tests/fault_skills/faults/ and records the pid of each
process it starts in the data folder, so each test can check the process
table afterwards: nothing may be left running.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
from commands import _WITHOUT_A_MODEL
from fields import error_of, present

from plancontracts.generated.tool_plans import (
    AssetEvent,
    DoneEvent,
    ExecutionResult,
    Plan,
    RetryPolicy,
    ToolInvocation,
    ToolRequest,
    UiEvent,
)
from plancontracts.runtime.core.validation import violations
from plancontracts.runtime.engine.executor import EmitEvent, execute_plan
from plancontracts.runtime.engine.limits import Limits
from plancontracts.runtime.engine.skills import discover_skills
from plancontracts.runtime.engine.tool_process import ProcessEnd

FAULTS = Path(__file__).parent / "fault_skills"
GRACE = 1.0


def tool(tool_id: str, script: str, **fields: Any) -> ToolInvocation:
    fields.setdefault("retry_policy", RetryPolicy(max_retries=0))
    return ToolInvocation(tool_id=tool_id, tool_path=f"skills/faults/{script}.py", **fields)


def run(
    tmp_path: Path, *tools: ToolInvocation, limits: Limits | None = None, **options: Any
) -> ExecutionResult:
    plan = Plan(request_id=str(uuid.uuid4()), tools=list(tools), parallel=True)
    result = trio.run(
        partial(
            execute_plan,
            plan,
            skills=discover_skills([FAULTS]),
            data_root=tmp_path,
            limits=limits or Limits(shutdown_grace=GRACE, plan_timeout=120),
            **options,
        )
    )
    assert violations("execution-result", msgspec.to_builtins(result)) == ()
    return result


def started_pids(data: Path, skill: str = "faults") -> list[int]:
    """The processes the scripts of `skill` noted in its folder of the data root `data`."""
    pids = data / skill / "pids"
    return [int(line) for line in pids.read_text().split()] if pids.exists() else []


def running(pid: int) -> bool:
    """Whether `pid` is a live process; a zombie waiting for its reaper is not."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return False
    return stat.rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")


def assert_nothing_left(data: Path, skill: str = "faults") -> None:
    pids = started_pids(data, skill)
    assert pids, "the script never started"
    assert [pid for pid in pids if running(pid)] == []


# One test per fault: state, category, code, and the events kept before it.
FAULT_CORPUS = {
    "fails": ("failed", "tool_failure", "wet_torch", 2),
    "crash": ("failed", "process_error", "exit_status", 1),
    "exit_status": ("failed", "process_error", "exit_status", 1),
    "garbage": ("failed", "invalid_json", "malformed_line", 1),
    "long_line": ("failed", "invalid_json", "line_too_long", 1),
    "flood": ("failed", "invalid_json", "too_many_events", 1000),
    "after_done": ("failed", "invalid_json", "output_after_done", 1),
    "second_done": ("failed", "invalid_json", "output_after_done", 1),
    "no_done": ("failed", "process_error", "no_done", 1),
    "unknown_type": ("failed", "invalid_json", "invalid_event", 1),
    "bad_version": ("failed", "invalid_json", "invalid_event", 0),
    "asset_outside": ("failed", "invalid_json", "asset_outside_folder", 1),
    "hang": ("timeout", "timeout", "tool_deadline", 1),
    "ignore_term": ("timeout", "timeout", "tool_deadline", 1),
    "close_stdout": ("timeout", "timeout", "tool_deadline", 1),
}


@pytest.mark.parametrize("script", sorted(FAULT_CORPUS))
def test_each_fault_has_its_outcome_and_leaves_nothing(tmp_path: Path, script: str) -> None:
    state, category, code, kept = FAULT_CORPUS[script]
    result = run(tmp_path, tool("t", script, timeout_ms=1000))
    (trace,) = result.tool_results
    error = error_of(trace)
    assert (trace.state, error.category, error.code) == (state, category, code)
    assert len(trace.events) == kept
    assert not result.success
    assert result.failed_tools == ["t"]
    assert result.disabled_skills == ["faults"]
    assert result.can_replan
    # The deadline holds: one second for the attempt, the grace, and the slack
    # a loaded machine needs to start and stop processes; a hang would take minutes.
    assert result.execution_time_ms < (1.0 + GRACE + 60) * 1000
    assert_nothing_left(tmp_path)


def test_notices_past_the_plan_s_budget_are_counted_not_kept(tmp_path: Path) -> None:
    # 2 attempts x 50 ui_events of 1,000 bytes; notices may fill half of 20,000.
    chatty = {"count": 50, "bytes": 1000, "type": "ui_event", "ok": False}
    seen: list[UiEvent] = []
    result = run(
        tmp_path,
        tool("t", "chatty", input=chatty, retry_policy=RetryPolicy(max_retries=1, backoff_ms=1)),
        limits=Limits(shutdown_grace=GRACE, plan_timeout=20, max_kept_event_bytes=20_000),
        on_ui_event=lambda tool_id, event: seen.append(event),
    )
    (trace,) = result.tool_results
    kinds = [type(event).__name__ for event in trace.events]
    # The first ten notices are kept; then none, in either attempt. Both done events are kept.
    assert kinds == ["UiEvent"] * 10 + ["DoneEvent", "DoneEvent"]
    dropped = present(trace.dropped_events, "droppedEvents")
    assert (dropped.count, dropped.bytes) == (90, 90_000)
    assert (error_of(trace).code, trace.retry_count) == ("failed", 1)
    assert len(seen) == 100  # dropped from the trace, still delivered


def test_messages_name_the_line_and_the_problem(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        tool("a", "unknown_type", async_=True),
        tool("b", "bad_version", async_=True),
        tool("c", "garbage", async_=True),
    )
    messages = [error_of(trace).message for trace in result.tool_results]
    assert messages[0].startswith('output line 2: /type: unknown type "teleport"')
    assert messages[1] == 'output line 1: /version: must be "0", got "1"'
    assert messages[2].startswith("output line 2: malformed JSON")


def test_a_crash_reports_its_signal_and_standard_error(tmp_path: Path) -> None:
    result = run(tmp_path, tool("a", "crash", async_=True), tool("b", "exit_status", async_=True))
    crash, status = result.tool_results
    assert error_of(crash).message == "the script was killed by signal SIGSEGV"
    error = error_of(status)
    assert error.message == "the script exited with status 3"
    assert "something went wrong after done" in present(error.details, "details")["stderr"]


def test_standard_error_keeps_its_end_where_the_reason_is(tmp_path: Path) -> None:
    result = run(tmp_path, tool("t", "long_traceback"))
    (trace,) = result.tool_results
    error = error_of(trace)
    assert (error.category, error.code) == ("process_error", "exit_status")
    stderr = present(error.details, "details")["stderr"]
    assert stderr.endswith("ValueError: the reason is on the last line\n")
    dropped = int(stderr.split()[0].lstrip("["))
    assert stderr.startswith(f"[{dropped} earlier bytes dropped]\n")
    # What was kept and what was dropped add up to everything written.
    kept = stderr.split("\n", 1)[1].encode()
    assert len(kept) <= Limits().max_stderr_bytes
    assert "déjà vu, line 0999" in stderr
    assert "line 0000" not in stderr
    assert "\ufffd" not in stderr


def test_a_character_split_by_the_stderr_limit_is_dropped_whole() -> None:
    euro = "€".encode()  # three bytes
    end = ProcessEnd(stderr=bytearray(euro[1:] + b"ok"), stderr_dropped=7)
    assert end.stderr_text() == "[9 earlier bytes dropped]\nok"
    assert ProcessEnd(stderr=bytearray(euro)).stderr_text() == "€"


def test_sigterm_is_followed_by_sigkill_after_the_grace(tmp_path: Path) -> None:
    started = time.monotonic()
    result = run(tmp_path, tool("t", "ignore_term", timeout_ms=1000))
    elapsed = time.monotonic() - started
    assert result.tool_results[0].state == "timeout"
    # Bounds, not a timing claim: it cannot end before deadline + grace, and
    # SIGKILL must end it well before deadline + grace + the test's patience.
    assert 1.0 + GRACE <= elapsed < 1.0 + GRACE + 60
    assert_nothing_left(tmp_path)


def test_a_grandchild_does_not_outlive_its_script(tmp_path: Path) -> None:
    result = run(tmp_path, tool("t", "grandchild"))
    assert result.tool_results[0].state == "success"
    assert len(started_pids(tmp_path)) == 2
    assert_nothing_left(tmp_path)


def test_events_are_kept_across_retries_and_counted(tmp_path: Path) -> None:
    result = run(
        tmp_path, tool("t", "flaky", retry_policy=RetryPolicy(max_retries=3, backoff_ms=1))
    )
    (trace,) = result.tool_results
    assert (trace.state, trace.retry_count) == ("success", 2)
    dones = [event for event in trace.events if isinstance(event, DoneEvent)]
    assert dones == trace.events  # one done per attempt, nothing else
    assert [done.summary for done in dones] == ["attempt 1", "attempt 2", "attempt 3"]
    assert trace.output == {"summary": "attempt 3"}
    assert result.success
    assert result.failed_tools == []


def test_backoff_doubles_between_retries(tmp_path: Path) -> None:
    started = time.monotonic()
    result = run(
        tmp_path, tool("t", "fails", retry_policy=RetryPolicy(max_retries=2, backoff_ms=300))
    )
    assert result.tool_results[0].retry_count == 2
    assert time.monotonic() - started >= 0.3 + 0.6


def test_the_plan_deadline_stops_running_tools_and_skips_the_rest(tmp_path: Path) -> None:
    limits = Limits(shutdown_grace=GRACE, plan_timeout=1.5)
    started = time.monotonic()
    result = run(
        tmp_path,
        tool("slow", "ignore_term", timeout_ms=300_000),
        tool("after", "ok", dependencies=["slow"]),
        limits=limits,
    )
    slow, after = result.tool_results
    error = error_of(slow)
    assert (slow.state, error.category, error.code) == (
        "timeout",
        "timeout",
        "plan_deadline",
    )
    assert len(slow.events) == 1
    assert after.state == "skipped"
    assert time.monotonic() - started < 1.5 + GRACE + 10
    assert_nothing_left(tmp_path)


def test_a_required_failure_skips_dependents_and_others_keep_running(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        tool("bad", "fails", async_=True),
        tool("child", "ok", dependencies=["bad"], async_=True),
        tool("grandchild", "ok", dependencies=["child"], async_=True),
        tool("other", "ok", async_=True),
    )
    states = {trace.tool_id: trace.state for trace in result.tool_results}
    assert states == {
        "bad": "failed",
        "child": "skipped",
        "grandchild": "skipped",
        "other": "success",
    }
    assert not result.success
    assert result.aggregated_state == {"ok": {"other": 1}}


def test_dependents_of_an_optional_failure_receive_null(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        tool("maybe", "fails", required=False),
        tool("fine", "ok"),
        tool("echo", "echo_input", dependencies=["maybe", "fine"], input={"n": 1}),
    )
    assert result.success
    assert result.failed_tools == ["maybe"]
    assert result.disabled_skills == ["faults"]
    assert result.aggregated_state["received"]["echo"] == {
        "input": {"n": 1},
        "dependencies": [
            ["fine", {"summary": "fine", "state": {"ok": {"fine": 1}}}],
            ["maybe", None],
        ],
    }


def test_interface_events_reach_the_callback_as_they_arrive(tmp_path: Path) -> None:
    seen: list[tuple[str, UiEvent]] = []
    run(
        tmp_path,
        tool("echo", "echo_input"),
        on_ui_event=lambda tool_id, event: seen.append((tool_id, event)),
    )
    assert [(tool_id, event.event, event.payload) for tool_id, event in seen] == [
        ("echo", "narrative_choice", {"choices": ["left", "right"]})
    ]


def test_assets_inside_the_data_folder_are_registered(tmp_path: Path) -> None:
    result = run(tmp_path, tool("draw", "asset_inside"))
    (asset,) = result.aggregated_assets
    assert (asset.asset_id, asset.tool_id) == ("map", "draw")
    assert Path(asset.path) == (tmp_path / "faults" / "map.txt").resolve()


def test_an_asset_swapped_before_its_script_exits_is_refused(tmp_path: Path) -> None:
    draw = tool("draw", "asset_swap", input={"register": "maps/map.txt", "swapAfterDone": True})
    result = run(tmp_path, draw)
    (trace,) = result.tool_results
    assert trace.state == "failed"
    # Registered first (the script waits a second), then swapped: asset_swapped.
    # Should the executor read the event only after the swap, the link is
    # refused at registration instead; either way nothing points outside.
    assert error_of(trace).code in ("asset_swapped", "asset_outside_folder")
    assert result.aggregated_assets == []
    assert "/etc/passwd" not in msgspec.json.encode(result).decode()


@pytest.mark.parametrize("how", ["symlink", "file", "folder"])
def test_an_asset_swapped_by_a_later_tool_fails_the_tool_that_registered_it(
    tmp_path: Path, how: str
) -> None:
    result = run(
        tmp_path,
        tool("draw", "asset_swap", input={"register": "maps/map.txt"}),
        tool(
            "swap", "asset_swap", input={"swap": "maps/map.txt", "how": how}, dependencies=["draw"]
        ),
    )
    draw, swap = result.tool_results
    assert swap.state == "success"
    error = error_of(draw)
    assert (draw.state, error.category, error.code) == ("failed", "invalid_json", "asset_swapped")
    assert error.message == (
        f"asset 'map': {tmp_path.resolve() / 'faults' / 'maps' / 'map.txt'} was replaced "
        "after it was registered (by another file, or a link on its path), so it is not reported"
    )
    assert draw.output is msgspec.UNSET
    assert result.aggregated_assets == []
    assert (result.success, result.failed_tools, result.disabled_skills) == (
        False,
        ["draw"],
        ["faults"],
    )


def test_an_asset_swapped_by_its_function_is_refused(tmp_path: Path) -> None:
    async def draw(request: ToolRequest, emit: EmitEvent) -> None:
        (tmp_path / "map.txt").write_text("a map")
        emit(AssetEvent(version="0", asset_id="map", kind="map", media_type="text/plain",
                        path="map.txt"))  # fmt: skip
        (tmp_path / "link").symlink_to("/etc/passwd")
        (tmp_path / "link").replace(tmp_path / "map.txt")

    call = ToolInvocation(
        tool_id="draw", tool_path="test/draw", retry_policy=RetryPolicy(max_retries=0)
    )
    plan = Plan(request_id=str(uuid.uuid4()), tools=[call])
    result = trio.run(
        partial(
            execute_plan,
            plan,
            skills=discover_skills([]),
            functions={"test/draw": draw},
            asset_folders=[tmp_path],
        )
    )
    (trace,) = result.tool_results
    assert (trace.state, error_of(trace).code) == ("failed", "asset_swapped")
    assert result.aggregated_assets == []


def test_outside_cancellation_leaves_no_process(tmp_path: Path) -> None:
    async def cancel_soon() -> None:
        plan = Plan(
            request_id=str(uuid.uuid4()),
            parallel=True,
            tools=[tool("a", "ignore_term", async_=True), tool("b", "hang", async_=True)],
        )
        with trio.move_on_after(1.0) as scope:
            await execute_plan(
                plan,
                skills=discover_skills([FAULTS]),
                data_root=tmp_path,
                limits=Limits(shutdown_grace=GRACE),
            )
        assert scope.cancelled_caught

    trio.run(cancel_soon)
    assert len(started_pids(tmp_path)) == 2
    assert_nothing_left(tmp_path)


PATIENCE = 300.0
"Seconds a command may take to start, or to stop, on a busy machine; no test claims a speed."
STOPS = {
    signal.SIGTERM: b"plancontracts: stopped by SIGTERM\n",
    signal.SIGHUP: b"plancontracts: stopped by SIGHUP\n",
    signal.SIGINT: b"plancontracts: interrupted\n",
}


def stop_once_started(
    cli: subprocess.Popen[bytes], signum: signal.Signals, started: Callable[[], object]
) -> bytes:
    """Send `signum` once `started()` is true; the command's standard error once it ended."""
    deadline = time.monotonic() + PATIENCE
    while not started() and cli.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    return stop(cli, signum)


def stop(cli: subprocess.Popen[bytes], signum: signal.Signals) -> bytes:
    """Send `signum` now; the rest of the command's standard error once it ended (or was killed)."""
    cli.send_signal(signum)
    try:
        _, err = cli.communicate(timeout=PATIENCE)
    except subprocess.TimeoutExpired:
        cli.kill()
        cli.communicate()
        raise
    return err


def assert_stopped_cleanly(
    cli: subprocess.Popen[bytes], signum: signal.Signals, err: bytes
) -> None:
    assert cli.returncode == 128 + signum, err
    assert err.endswith(STOPS[signum])
    assert b"Traceback" not in err


@pytest.mark.process  # a signal to the command
@pytest.mark.parametrize("signum", list(STOPS))
def test_a_stop_signal_to_execute_leaves_no_process(tmp_path: Path, signum: signal.Signals) -> None:
    plan = tmp_path / "plan.json"
    plan.write_bytes(
        msgspec.json.encode(
            Plan(request_id=str(uuid.uuid4()), tools=[tool("a", "ignore_term", timeout_ms=60_000)])
        )
    )
    command = [sys.executable, "-m", "plancontracts", "execute", str(plan), "--skills", str(FAULTS)]
    command += ["--data", str(tmp_path), "--grace", str(GRACE)]
    cli = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = stop_once_started(cli, signum, lambda: started_pids(tmp_path))
    assert_stopped_cleanly(cli, signum, err)
    assert_nothing_left(tmp_path)


def hanging_torch(folder: Path) -> Path:
    """A skills folder whose torch lighter ignores SIGTERM and hangs, as `ignore_term` does."""
    skill = folder / "torch-lighter"
    skill.mkdir(parents=True)
    manifest = {
        "name": "torch-lighter",
        "version": "1.0.0",
        "description": "A torch that never lights and will not stop.",
        "scripts": [{"name": "light", "path": "light.py", "timeout": 300_000}],
    }
    (skill / "skill.json").write_text(json.dumps(manifest))
    shutil.copy(FAULTS / "faults" / "ignore_term.py", skill / "light.py")
    shutil.copy(FAULTS / "faults" / "_fault.py", skill)
    return folder


@pytest.mark.process  # a signal to the command
@pytest.mark.parametrize(
    ("signum", "turn"),
    [(signum, "plan --execute") for signum in STOPS] + [(signal.SIGTERM, "play")],
)
def test_a_stop_signal_to_a_turn_leaves_no_process(
    tmp_path: Path, signum: signal.Signals, turn: str
) -> None:
    # Planned by the patterns (the packaged model hidden): the torch lighter runs.
    skills, data = hanging_torch(tmp_path / "skills"), tmp_path / "data"
    arguments = ["--skills", str(skills), "--data", str(data)]
    if turn == "play":
        arguments = ["play", *arguments]
    else:
        arguments = ["plan", "--execute", "I light the torch", *arguments]
    cli = subprocess.Popen(
        [sys.executable, "-c", _WITHOUT_A_MODEL, *arguments],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert cli.stdin is not None
    if turn == "play":
        cli.stdin.write(b"I light the torch\n")
        cli.stdin.flush()
    err = stop_once_started(cli, signum, lambda: started_pids(data, "torch-lighter"))
    assert_stopped_cleanly(cli, signum, err)
    assert_nothing_left(data, "torch-lighter")


# The command as a shell in the foreground starts it: Ctrl-C raises KeyboardInterrupt.
# A suite started in the background by a shell without job control inherits SIGINT
# ignored, and Python then leaves it ignored in every process the suite starts.
_WITH_CTRL_C = (
    "import signal, sys\n"
    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "from plancontracts.runtime.cli.main import main\n"
    "raise SystemExit(main(sys.argv[1:]))\n"
)


# A signal to the command while it plans with the packaged model, which it loads itself.
@pytest.mark.model
@pytest.mark.process
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_while_the_model_writes_ends_the_command_cleanly(
    signum: signal.Signals,
) -> None:
    # More inputs than the command could plan before the signal comes, however the
    # machine schedules this test: it must stop, not finish.
    inputs = ["I light the torch", "I examine the iron door", "I roll 2d6", "I look around"] * 8
    cli = subprocess.Popen(
        [sys.executable, "-c", _WITH_CTRL_C, "plan", "--model", "gemma3-270m", *inputs],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert cli.stderr is not None
    said: list[bytes] = []
    # The model writes its first plan right after it is loaded.
    while not said or not (said[-1].startswith(b"model: loaded") or said[-1] == b""):
        said.append(cli.stderr.readline())
    err = stop(cli, signum)
    # Not a crash of llama.cpp's teardown (SIGSEGV, SIGABRT) under the stopped generation.
    assert_stopped_cleanly(cli, signum, b"".join(said) + err)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_process_table_check_sees_a_live_process() -> None:
    # The checks above would pass vacuously if `running` never said yes.
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        assert running(sleeper.pid)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert not running(sleeper.pid)
    assert os.getpid() > 0
