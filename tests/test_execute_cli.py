"""`plancontracts execute` as a user runs it, in the test's process: real skills, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from commands import cli

from plancontracts import contract_schema, violations
from plancontracts.generated.tool_plans import (
    ErrorEvent,
    ExecutionResult,
    LogEvent,
    ToolEvent,
    ToolResult,
)
from plancontracts.runtime.commandkit import DEFAULT_MAX_BYTES
from plancontracts.runtime.engine.trace import EVENTS_SHOWN, render_trace
from plancontracts.skills import BUNDLED_SKILLS

FAULTS = Path(__file__).parent / "fault_skills"


def execute(tmp_path: Path, plan: Any, *options: str) -> subprocess.CompletedProcess[str]:
    where = tmp_path / "plan.json"
    where.write_text(plan if isinstance(plan, str) else json.dumps(plan))
    return cli("execute", str(where), "--data", str(tmp_path / "data"), *options)


def test_the_schema_examples_run_with_the_bundled_skills(tmp_path: Path) -> None:
    for example in contract_schema("plan")["examples"]:
        done = execute(tmp_path, example, "--json")
        assert done.returncode == 0, done.stdout + done.stderr
        result = json.loads(done.stdout)
        assert violations("execution-result", result) == ()
        assert result["planId"] == example["requestId"]
        assert [trace["state"] for trace in result["toolResults"]] == ["success"] * len(
            example["tools"]
        )


def test_the_readable_trace_has_one_line_per_tool(tmp_path: Path) -> None:
    example = contract_schema("plan")["examples"][0]
    done = execute(tmp_path, example)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"plan {example['requestId']} succeeded in ")
    assert lines[1].split()[:2] == ["light", "success"]
    assert lines[2].split()[:2] == ["look", "success"]
    assert "0 retries" in lines[1]
    assert lines[3].startswith('state: {"torch": {"lit": true}')


def test_a_failed_plan_exits_1_and_says_what_failed(tmp_path: Path) -> None:
    plan = {
        "requestId": "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0",
        "tools": [
            {
                "toolId": "wet",
                "toolPath": "skills/faults/fails.py",
                "retryPolicy": {"maxRetries": 1, "backoffMs": 1},
            },
            {"toolId": "after", "toolPath": "skills/faults/ok.py", "dependencies": ["wet"]},
        ],
    }
    done = execute(tmp_path, plan, "--skills", str(FAULTS))
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("plan 0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0 failed in ")
    assert lines[1].split()[:2] == ["wet", "failed"]
    assert "1 retry " in lines[1]
    assert lines[1].endswith("tool_failure wet_torch: the torch is soaked")
    # The error event of each of its two attempts, under its line.
    assert lines[2:4] == ["    error wet_torch: the torch is soaked"] * 2
    assert lines[4].split()[:2] == ["after", "skipped"]
    assert lines[5:8] == [
        "failed tools: wet",
        "disabled skills: faults",
        "a new plan may do better",
    ]


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        (
            [
                {"toolId": "a", "toolPath": "skills/faults/ok.py", "dependencies": ["b"]},
                {"toolId": "b", "toolPath": "skills/faults/ok.py", "dependencies": ["a"]},
            ],
            "circular_dependency: the dependencies form a cycle: a -> b -> a",
        ),
        (
            [{"toolId": "a", "toolPath": "skills/faults/_fault.py"}],
            "invalid_plan: tool 'a': skills/faults/_fault.py: the skill 'faults' declares no such",
        ),
    ],
)
def test_a_rejected_plan_exits_2_and_nothing_runs(
    tmp_path: Path, tools: list[dict[str, Any]], message: str
) -> None:
    plan = {"requestId": "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0", "tools": tools}
    done = execute(tmp_path, plan, "--skills", str(FAULTS))
    assert done.returncode == 2
    assert done.stdout.startswith(
        f"plan 0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0 rejected before execution: {message}"
    )
    assert not (tmp_path / "data" / "faults" / "pids").exists()


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ('{"requestId": "x", "tools": []}', "/requestId: "),
        ('{"requestId": "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0", "tools": [', "malformed JSON"),
        (
            '{"requestId": "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0", '
            '"tools": [{"toolId": "a", "toolPath": "/bin/sh"}]}',
            "/tools/0/toolPath: ",
        ),
        (
            '{"requestId": "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0", '
            '"tools": [{"toolId": "a", "toolPath": "skills/../../etc/passwd"}]}',
            "/tools/0/toolPath: ",
        ),
    ],
)
def test_a_document_that_is_no_plan_exits_2_with_its_violations(
    tmp_path: Path, text: str, complaint: str
) -> None:
    done = execute(tmp_path, text)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "not a usable plan, so nothing ran" in done.stderr
    assert complaint in done.stderr
    assert "Traceback" not in done.stderr


def test_a_missing_plan_file_is_named(tmp_path: Path) -> None:
    done = cli("execute", str(tmp_path / "none.json"))
    assert done.returncode == 2
    assert done.stderr == f"plancontracts: error: {tmp_path}/none.json: no such file\n"


def test_invalid_skills_are_warnings_and_the_rest_still_runs(tmp_path: Path) -> None:
    skills = tmp_path / "more-skills"
    (skills / "broken").mkdir(parents=True)
    (skills / "broken" / "skill.json").write_text("{}")
    plan = {
        "requestId": "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0",
        "tools": [{"toolId": "a", "toolPath": "skills/faults/ok.py"}],
    }
    done = execute(tmp_path, plan, "--skills", str(skills), "--skills", str(FAULTS), "--json")
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("plancontracts: warning: ")
    assert "broken" in done.stderr
    result = msgspec.json.decode(done.stdout)
    assert result["success"] is True


def deep_tool(kind: str, depth: int) -> dict[str, Any]:
    return {
        "toolId": f"{kind}-{depth}",
        "toolPath": "skills/faults/deep_patch.py",
        "input": {"kind": kind, "depths": [depth]},
        "retryPolicy": {"maxRetries": 0},
        "async": True,
    }


def deep_plan(tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {"requestId": "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0", "parallel": True, "tools": tools}


# Spot depths, then every depth around the parser's limit (about 1,000 levels,
# a little less inside the executor, where the stack is already deeper).
DEPTHS = [3, 100, 499, 500, 501, *range(950, 1001)]
TOO_DEEP = "invalid_json malformed_line: output line 1: arrays and objects nest too deeply"


@pytest.mark.slow  # 112 deep patches, each parsed in a script's process and in the command
def test_every_depth_of_a_state_patch_gets_a_verdict(tmp_path: Path) -> None:
    tools = [deep_tool(kind, depth) for kind in ("array", "object") for depth in DEPTHS]
    done = execute(tmp_path, deep_plan(tools), "--skills", str(FAULTS), "--concurrency", "2")
    assert "Traceback" not in done.stderr
    assert done.returncode == 1, done.stderr
    verdicts = {line.split()[0]: line for line in done.stdout.splitlines()[1 : len(tools) + 1]}
    deepest: dict[str, int] = {}
    for kind in ("array", "object"):
        passed = [d for d in DEPTHS if verdicts[f"{kind}-{d}"].split()[1] == "success"]
        refused = [d for d in DEPTHS if verdicts[f"{kind}-{d}"].split()[1] != "success"]
        # Everything the parser takes runs; everything deeper is refused, saying why.
        assert passed == DEPTHS[: len(passed)]
        assert passed[-1] >= 950
        assert refused
        assert all(TOO_DEEP in verdicts[f"{kind}-{d}"] for d in refused)
        deepest[kind] = passed[-1]
    state = done.stdout.splitlines()[-1]
    assert state.startswith("state: {")
    assert f'"array{deepest["array"]}": ' + "[" * (deepest["array"] - 2) in state
    assert f'"object{deepest["object"]}": ' + '{"a": ' * (deepest["object"] - 2) + "1" in state

    # Around the deepest patch each kind took, as --json. Where the parser stops
    # moves by a level or two with the stack the executor has when it parses.
    edges = [deep_tool(kind, deepest[kind] + step) for kind in deepest for step in (-2, 0, 1, 2)]
    done = execute(tmp_path, deep_plan(edges), "--skills", str(FAULTS), "--json")
    assert "Traceback" not in done.stderr
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(limit + 1000)  # the test's own parser needs the room
    try:
        result = json.loads(done.stdout)
    finally:
        sys.setrecursionlimit(limit)
    succeeded: set[str] = set()
    for trace in result["toolResults"]:
        if trace["state"] == "success":
            succeeded.add(trace["toolId"].replace("-", ""))
        else:
            assert trace["error"]["message"].startswith("output line 1: arrays and objects nest")
    assert done.returncode == (0 if len(succeeded) == len(edges) else 1)
    assert set(result["aggregatedState"]) == succeeded
    assert {f"{kind}{deepest[kind] - 2}" for kind in deepest} <= succeeded


def test_the_event_budget_bounds_the_trace_and_says_what_it_dropped(tmp_path: Path) -> None:
    # 2 attempts of 100 ui_events of 100 KB: 20 MB written; notices may keep 8 MiB.
    chatty = {"count": 100, "bytes": 100_000, "type": "ui_event", "ok": False}
    plan = {
        "requestId": "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0",
        "tools": [
            {
                "toolId": "chatty",
                "toolPath": "skills/faults/chatty.py",
                "input": chatty,
                "retryPolicy": {"maxRetries": 1, "backoffMs": 1},
            }
        ],
    }
    kept = (8 << 20) // 100_000
    dropped = 200 - kept
    done = execute(tmp_path, plan, "--skills", str(FAULTS))
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines()[2] == (
        f"    {dropped} log and ui_event events ({dropped * 100_000} bytes) not kept: "
        "the plan's budget for kept events was spent"
    )
    done = execute(tmp_path, plan, "--skills", str(FAULTS), "--json")
    assert done.returncode == 1, done.stderr
    assert len(done.stdout) < 9 << 20
    (trace,) = json.loads(done.stdout)["toolResults"]
    assert trace["droppedEvents"] == {"count": dropped, "bytes": dropped * 100_000}
    assert len(trace["events"]) == kept + 2


def test_json_output_stays_proportional_to_the_result_however_deep(tmp_path: Path) -> None:
    # Indented, a state nesting 900 deep would print some 800 KB per patch.
    done = execute(
        tmp_path, deep_plan([deep_tool("array", 900)]), "--skills", str(FAULTS), "--json"
    )
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 1
    assert len(done.stdout) < 10_000
    assert json.loads(done.stdout)["success"] is True
    shallow = execute(
        tmp_path, deep_plan([deep_tool("array", 3)]), "--skills", str(FAULTS), "--json"
    )
    assert shallow.stdout.startswith('{\n  "planId": ')  # indented for people


@pytest.mark.parametrize(
    ("options", "shown"),
    [
        ((), []),
        (("-v",), ["    log info: torch lit"]),
        (("-vv",), ["    log info: torch lit"] + ["    log debug: noise"] * 3),
    ],
)
def test_the_trace_shows_log_events_by_verbosity(
    tmp_path: Path, options: tuple[str, ...], shown: list[str]
) -> None:
    plan = {
        "requestId": "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0",
        "tools": [
            {"toolId": "light", "toolPath": "skills/torch-lighter/light.py",
             "input": {"action": "light"}},
            {"toolId": "noise", "toolPath": "skills/faults/chatty.py",
             "input": {"count": 3, "bytes": 90, "type": "log", "ok": True}},
        ],
    }  # fmt: skip
    skills = ("--skills", str(FAULTS), "--skills", str(BUNDLED_SKILLS))
    done = execute(tmp_path, plan, *skills, *options)
    assert done.returncode == 0, done.stderr
    events = [line for line in done.stdout.splitlines() if line.startswith("    ")]
    assert events == shown


def test_a_tool_that_logs_a_lot_shows_a_bounded_trace(tmp_path: Path) -> None:
    plan = {
        "requestId": "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0",
        "tools": [
            {"toolId": "noise", "toolPath": "skills/faults/chatty.py",
             "input": {"count": 500, "bytes": 5000, "type": "log", "ok": True}},
        ],
    }  # fmt: skip
    done = execute(tmp_path, plan, "--skills", str(FAULTS), "-vv")
    assert done.returncode == 0, done.stderr
    events = [line for line in done.stdout.splitlines() if line.startswith("    ")]
    assert events == ["    log debug: noise"] * EVENTS_SHOWN + [
        f"    and {500 - EVENTS_SHOWN} more events (--json lists them)"
    ]


def test_warnings_and_error_events_show_without_asking_each_on_one_line() -> None:
    events: list[ToolEvent] = [
        LogEvent(version="0", level=level, message=f"a {level} message")
        for level in ("debug", "info", "warn", "error")
    ]
    events.append(
        ErrorEvent(version="0", error_code="odd", error_message="first line\nsecond\x1b[31m line")
    )
    trace = ToolResult(
        tool_id="t1", state="success", events=events, execution_time_ms=1, retry_count=0
    )
    result = ExecutionResult(
        plan_id="0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0",
        success=True,
        can_replan=False,
        failed_tools=[],
        disabled_skills=[],
        tool_results=[trace],
        aggregated_state={},
        aggregated_assets=[],
        execution_time_ms=1,
        attempt_number=1,
    )
    lines = render_trace(result).splitlines()
    assert lines[2:5] == [
        "    log warn: a warn message",
        "    log error: a error message",
        "    error odd: first line second\\u001b[31m line",
    ]
    assert lines[5].startswith("state: ")


def test_a_plan_too_large_is_refused_naming_no_option_execute_lacks(tmp_path: Path) -> None:
    done = execute(tmp_path, " " * (DEFAULT_MAX_BYTES + 1))
    assert done.returncode == 2
    assert f"  (document): larger than {DEFAULT_MAX_BYTES} bytes\n" in done.stderr
    assert "--max-bytes" not in done.stderr
