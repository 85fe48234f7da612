"""The executor's rules, with in-process tools: checks before execution, order,
concurrency, failure semantics, state merging. Property tests run random DAGs
on trio's mock clock, so their sleeps cost no real time."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
import trio.testing
from fields import error_of
from hypothesis import given
from hypothesis import strategies as st

from plancontracts.generated.tool_plans import (
    DoneEvent,
    ExecutionResult,
    LogEvent,
    Plan,
    PlanMetadata,
    RetryPolicy,
    StatePatchEvent,
    ToolEvent,
    ToolInvocation,
    ToolRequest,
    UiEvent,
)
from plancontracts.runtime.core.validation import violations
from plancontracts.runtime.engine.checks import check_plan
from plancontracts.runtime.engine.executor import EmitEvent, ToolFunction, execute_plan, merge_patch
from plancontracts.runtime.engine.limits import Limits
from plancontracts.runtime.engine.skills import SkillSet, bundled_skills

NO_RETRY = RetryPolicy(max_retries=0)


def call(
    tool_id: str, *dependencies: str, path: str = "test/work", **fields: Any
) -> ToolInvocation:
    fields.setdefault("retry_policy", NO_RETRY)
    return ToolInvocation(
        tool_id=tool_id, tool_path=path, dependencies=list(dependencies), **fields
    )


def plan_of(*tools: ToolInvocation, **fields: Any) -> Plan:
    return Plan(request_id=str(uuid.uuid4()), tools=list(tools), **fields)


def execute(
    plan: Plan, functions: dict[str, ToolFunction], limits: Limits | None = None, **options: Any
) -> ExecutionResult:
    result = trio.run(
        partial(
            execute_plan,
            plan,
            skills=options.pop("skills", SkillSet()),
            functions=functions,
            limits=limits,
            **options,
        ),
        clock=trio.testing.MockClock(autojump_threshold=0),
    )
    assert violations("execution-result", msgspec.to_builtins(result)) == ()
    return result


class Recorder:
    """In-process tools that log when they start and end, and fail on demand."""

    def __init__(
        self, fail: frozenset[str] = frozenset(), durations: dict[str, float] | None = None
    ):
        self.fail = fail
        self.durations = durations or {}
        self.log: list[tuple[str, str]] = []
        self.requests: dict[str, ToolRequest] = {}

    async def __call__(self, request: ToolRequest, emit: EmitEvent) -> None:
        self.log.append(("start", request.tool_id))
        self.requests[request.tool_id] = request
        emit(StatePatchEvent(version="0", patch={"ran": {request.tool_id: request.attempt}}))
        await trio.sleep(self.durations.get(request.tool_id, 1.0))
        self.log.append(("end", request.tool_id))
        if request.tool_id in self.fail:
            raise RuntimeError(f"{request.tool_id} broke")


# Checks before execution --------------------------------------------------------


@pytest.mark.parametrize(
    ("tools", "category", "code", "message"),
    [
        (
            [call("a"), call("a")],
            "invalid_plan",
            "duplicate_tool_id",
            "toolId 'a' is used twice, by tools 0 and 1",
        ),
        (
            [call("a", "ghost")],
            "invalid_plan",
            "unknown_dependency",
            "tool 'a' depends on 'ghost', which is not a tool of this plan",
        ),
        (
            [call("a", "a")],
            "circular_dependency",
            "cycle",
            "the dependencies form a cycle: a -> a",
        ),
        (
            [call("a", "c"), call("b", "a"), call("c", "b"), call("d")],
            "circular_dependency",
            "cycle",
            "the dependencies form a cycle: a -> b -> c -> a",
        ),
        (
            [call("a"), call("b", path="skills/nowhere/x.py")],
            "invalid_plan",
            "unusable_script",
            "tool 'b': skills/nowhere/x.py: no skill named 'nowhere' (skills: none)",
        ),
        (
            [call("a", path="other/work")],
            "invalid_plan",
            "unusable_script",
            "tool 'a': other/work: a script path is written skills/<skill name>/<script path>",
        ),
    ],
)
def test_a_bad_plan_is_rejected_before_anything_runs(
    tools: list[ToolInvocation], category: str, code: str, message: str
) -> None:
    recorder = Recorder()
    result = execute(plan_of(*tools), {"test/work": recorder})
    assert recorder.log == []
    error = error_of(result)
    assert (error.category, error.code, error.message) == (
        category,
        code,
        message,
    )
    assert (result.success, result.tool_results, result.failed_tools) == (False, [], [])
    assert result.can_replan


def test_a_cycle_is_named_even_behind_a_tool_that_waits_on_it() -> None:
    result = execute(
        plan_of(call("z", "b"), call("b", "c"), call("c", "b")), {"test/work": Recorder()}
    )
    assert error_of(result).details == {"cycle": ["b", "c", "b"]}


def test_bundled_scripts_resolve_and_everything_else_is_refused() -> None:
    skills = bundled_skills()
    refused = {
        "skills/dice-roller/skill.json": "declares no such script",
        "skills/dice-roller/nothing.py": "declares no such script",
        "skills/torch-lighter": "a script path is written",
        "tools/torch-lighter": "a script path is written",
        "skills/torch-lighter/light.py": "is disabled for this plan",
    }
    for path, reason in refused.items():
        plan = plan_of(call("t", path=path), disabled_skills=["torch-lighter"])
        result = execute(plan, {}, skills=skills)
        assert reason in error_of(result).message, path
    plan = plan_of(call("roll", path="skills/dice-roller/roll.py", input={"formula": "many"}))
    result = execute(plan, {}, skills=skills)
    error = error_of(result)
    assert error.code == "invalid_input"
    assert error.message.startswith("tool 'roll': input /formula: ")


def test_a_function_of_a_disabled_skill_is_refused() -> None:
    result = execute(plan_of(call("a"), disabled_skills=["test"]), {"test/work": Recorder()})
    assert error_of(result).code == "disabled_skill"


@pytest.mark.parametrize("name", ["work", "skills/x/y", "Test/work", "test/../work", "/abs/x"])
def test_function_names_must_be_skill_slash_tool(name: str) -> None:
    with pytest.raises(ValueError, match="must be <skill name>/<tool name>"):
        execute(plan_of(), {name: Recorder()})


# Running ---------------------------------------------------------------------------


def test_sequential_plans_run_one_tool_at_a_time_in_dependency_order() -> None:
    recorder = Recorder()
    plan = plan_of(call("c", "b"), call("a"), call("b", "a"), call("d"))
    result = execute(plan, {"test/work": recorder})
    starts = [tool for event, tool in recorder.log if event == "start"]
    # Dependency order, ties broken by plan order: c waits for b, which waits for a.
    assert starts == ["a", "b", "c", "d"]
    assert recorder.log == [(event, tool) for tool in starts for event in ("start", "end")]
    assert result.success


def test_parallel_plans_respect_the_concurrency_limit() -> None:
    recorder = Recorder()
    tools = [call(f"t{n}", async_=True) for n in range(8)]
    execute(plan_of(*tools, parallel=True), {"test/work": recorder}, Limits(max_concurrency=3))
    assert _peak(recorder.log) == 3


def test_a_tool_that_is_not_async_runs_alone_even_in_a_parallel_plan() -> None:
    recorder = Recorder()
    tools = [call("a", async_=True), call("alone"), call("b", async_=True), call("c", async_=True)]
    execute(plan_of(*tools, parallel=True), {"test/work": recorder}, Limits(max_concurrency=4))
    start, end = recorder.log.index(("start", "alone")), recorder.log.index(("end", "alone"))
    assert end == start + 1
    assert _peak(recorder.log) == 2


def test_retries_count_and_keep_every_attempts_events() -> None:
    attempts: list[int] = []

    async def flaky(request: ToolRequest, emit: EmitEvent) -> None:
        attempts.append(request.attempt)
        emit(LogEvent(version="0", level="info", message=f"attempt {request.attempt}"))
        if request.attempt < 3:
            emit(DoneEvent(version="0", ok=False, summary="not yet"))

    policy = RetryPolicy(max_retries=5, backoff_ms=100)
    result = execute(plan_of(call("f", retry_policy=policy)), {"test/work": flaky})
    (trace,) = result.tool_results
    assert attempts == [1, 2, 3]
    assert (trace.state, trace.retry_count, len(trace.events)) == ("success", 2, 5)
    # Mock clock: the waits were exactly 100 and 200 ms.
    assert trace.execution_time_ms == 300


def test_retries_never_outlive_the_plan_deadline() -> None:
    async def fails(request: ToolRequest, emit: EmitEvent) -> None:
        raise RuntimeError("not this time")

    policy = RetryPolicy(max_retries=10, backoff_ms=400)
    result = execute(
        plan_of(call("f", retry_policy=policy)), {"test/work": fails}, Limits(plan_timeout=1.5)
    )
    (trace,) = result.tool_results
    # Mock clock, attempts take no time: waits of 0.4 and 0.8 s fit in 1.5 s;
    # the next (1.6 s) would not, so the retry is not made and the plan ends.
    assert (trace.state, trace.retry_count) == ("failed", 2)
    assert result.execution_time_ms == 1200


def test_a_function_that_overruns_its_timeout_times_out() -> None:
    result = execute(
        plan_of(call("slow", timeout_ms=500)), {"test/work": Recorder(durations={"slow": 2.0})}
    )
    (trace,) = result.tool_results
    assert trace.state == "timeout"
    error = error_of(trace)
    assert (error.category, error.message) == ("timeout", "ran longer than 0.5 s")


def test_events_that_break_the_contract_fail_the_tool() -> None:
    async def sloppy(request: ToolRequest, emit: EmitEvent) -> None:
        emit(LogEvent(version="0", level="info", message="x" * 5000))

    result = execute(plan_of(call("s")), {"test/work": sloppy})
    (trace,) = result.tool_results
    error = error_of(trace)
    assert (trace.state, error.category) == ("failed", "invalid_json")
    assert error.message.startswith("/message: ")


def test_an_exception_in_the_ui_handler_propagates() -> None:
    from plancontracts.generated.tool_plans import UiEvent

    async def asks(request: ToolRequest, emit: EmitEvent) -> None:
        # A tool that swallows errors must not hide the caller's.
        with contextlib.suppress(Exception):
            emit(UiEvent(version="0", event="narrative_choice", payload={"choices": ["a"]}))

    def handler(tool_id: str, event: UiEvent) -> None:
        raise LookupError("the handler broke")

    with pytest.raises(LookupError, match="the handler broke"):
        execute(plan_of(call("a")), {"test/work": asks}, on_ui_event=handler)


def test_state_patches_merge_in_dependency_order_not_finishing_order() -> None:
    def patcher(patch: dict[str, Any]) -> ToolFunction:
        async def tool(request: ToolRequest, emit: EmitEvent) -> None:
            await trio.sleep(3.0 if request.tool_id == "first" else 1.0)
            emit(StatePatchEvent(version="0", patch=patch))

        return tool

    plan = plan_of(
        call("first", path="test/first", async_=True),
        call("second", path="test/second", async_=True),
        parallel=True,
    )
    result = execute(
        plan,
        {
            "test/first": patcher({"door": {"open": True, "lock": "iron"}, "torch": "lit"}),
            "test/second": patcher({"door": {"open": False}, "torch": None, "items": [1]}),
        },
    )
    assert result.aggregated_state == {"door": {"open": False, "lock": "iron"}, "items": [1]}


def test_replan_fields_follow_the_generation() -> None:
    metadata = PlanMetadata(generation_attempt=5, parent_plan_id=str(uuid.uuid4()))
    plan = plan_of(call("a"), metadata=metadata, disabled_skills=["dice-roller"])
    result = execute(plan, {"test/work": Recorder(fail=frozenset({"a"}))})
    assert (result.success, result.can_replan) == (False, False)
    assert result.disabled_skills == ["dice-roller", "test"]


# merge_patch ------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abc"), inner, max_size=3)
    ),
    max_leaves=10,
)
objects = st.dictionaries(st.sampled_from("abcd"), json_values, max_size=4)


@given(objects, objects)
def test_merging_a_patch_sets_its_keys_and_keeps_the_rest(
    state: dict[str, Any], patch: dict[str, Any]
) -> None:
    merged = msgspec.json.decode(msgspec.json.encode(state))
    merge_patch(merged, patch)
    for key, value in patch.items():
        if value is None:
            assert key not in merged
        elif not isinstance(value, dict):
            assert merged[key] == value
    for key in state.keys() - patch.keys():
        assert merged[key] == state[key]
    # Applying the same patch again changes nothing.
    again = msgspec.json.decode(msgspec.json.encode(merged))
    merge_patch(again, patch)
    assert again == merged


def nested(kind: type[list[Any]] | type[dict[str, Any]], depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value] if kind is list else {"a": value}
    return value


@pytest.mark.parametrize("kind", [list, dict])
def test_merging_does_not_recurse_however_deep_the_patch(kind: type[Any]) -> None:
    # Far deeper than any parser allows: the walk must not use Python's stack.
    state: dict[str, Any] = {"deep": nested(dict, 50_000), "kept": True}
    patch = {"deep": nested(kind, 50_000)}
    merge_patch(state, patch)
    value, depth = state["deep"], 0
    while value != 1:
        assert isinstance(value, kind)
        value = value[0] if kind is list else value["a"]
        depth += 1
    assert depth == 50_000
    assert state["kept"] is True
    # Values are copied, not shared with the patch.
    patch["deep"] = None
    assert state["deep"] is not None


@pytest.mark.parametrize("kind", [list, dict])
def test_a_function_s_patch_too_deep_to_check_fails_its_tool_saying_so(kind: type[Any]) -> None:
    async def deep(request: ToolRequest, emit: EmitEvent) -> None:
        emit(StatePatchEvent(version="0", patch={"deep": nested(kind, 5_000)}))

    result = execute(plan_of(call("d")), {"test/work": deep})
    (trace,) = result.tool_results
    error = error_of(trace)
    assert (trace.state, error.category, error.code) == ("failed", "invalid_json", "invalid_event")
    assert error.message.startswith("arrays and objects nest too deeply")


# The plan's budget for kept events ------------------------------------------------

Emission = tuple[str, int]
"What a test tool emits: the kind of event and the size of its text."


def event_of(kind: str, size: int) -> ToolEvent:
    if kind == "log":
        return LogEvent(version="0", level="info", message="x", fields={"text": "x" * size})
    if kind == "ui":
        return UiEvent(version="0", event="noise", payload={"text": "x" * size})
    return StatePatchEvent(version="0", patch={"text": "x" * size})


def size_of(event: ToolEvent) -> int:
    return len(msgspec.json.encode(event))


class Emitter:
    """Tools that emit what they are told, attempt after attempt, noting what was accepted."""

    def __init__(self, emissions: dict[str, list[Emission]], failing: frozenset[str]) -> None:
        self.emissions = emissions
        self.failing = failing
        self.accepted: dict[str, list[ToolEvent]] = {name: [] for name in emissions}

    async def __call__(self, request: ToolRequest, emit: EmitEvent) -> None:
        for kind, size in self.emissions[request.tool_id]:
            event = event_of(kind, size)
            emit(event)  # a ProtocolViolation ends the attempt, as the executor wants
            self.accepted[request.tool_id].append(event)
        if request.tool_id in self.failing:
            raise RuntimeError("failed on purpose")


def kept_bytes(result: ExecutionResult) -> tuple[int, int]:
    """The bytes of every event kept in `result`, and of the notices among them."""
    events = [event for trace in result.tool_results for event in trace.events]
    notices = [event for event in events if isinstance(event, LogEvent | UiEvent)]
    return sum(map(size_of, events)), sum(map(size_of, notices))


def test_a_patch_past_the_budget_fails_its_attempt_saying_so() -> None:
    budget = 10_000
    emitter = Emitter({"p": [("patch", 3000)] * 5}, frozenset())
    result = execute(
        plan_of(call("p")), {"test/work": emitter}, Limits(max_kept_event_bytes=budget)
    )
    (trace,) = result.tool_results
    error = error_of(trace)
    assert (trace.state, error.category, error.code) == (
        "failed",
        "invalid_json",
        "too_many_event_bytes",
    )
    size = size_of(event_of("patch", 3000))
    assert error.message == (
        f"a state_patch event of {size} bytes does not fit in what is left "
        f"({budget - 3 * size} bytes) of the plan's {budget} bytes for kept events"
    )
    assert trace.events == emitter.accepted["p"]
    assert len(trace.events) == 3
    assert trace.dropped_events is msgspec.UNSET


def test_notices_never_crowd_out_state() -> None:
    # The notices come first and would fill the budget; half of it stays for state.
    emitter = Emitter(
        {"chatty": [("log", 1000)] * 30, "patch": [("patch", 1000)] * 4},
        frozenset(),
    )
    plan = plan_of(call("chatty"), call("patch", "chatty"))
    result = execute(plan, {"test/work": emitter}, Limits(max_kept_event_bytes=10_000))
    chatty, patch = result.tool_results
    assert result.success
    assert patch.events == emitter.accepted["patch"]
    assert chatty.dropped_events is not msgspec.UNSET
    assert chatty.dropped_events.count + len(chatty.events) == 30
    assert kept_bytes(result)[1] <= 5_000


emission = st.tuples(st.sampled_from(["log", "ui", "patch"]), st.integers(0, 3000))


@given(
    st.dictionaries(st.sampled_from("abcdef"), st.lists(emission, max_size=12), min_size=1),
    st.sets(st.sampled_from("abcdef")),
    st.integers(500, 40_000),
)
def test_the_budget_holds_for_the_whole_plan_and_loses_no_state_silently(
    emissions: dict[str, list[Emission]], failing: set[str], budget: int
) -> None:
    emitter = Emitter(emissions, frozenset(failing))
    policy = RetryPolicy(max_retries=2, backoff_ms=1)
    plan = plan_of(*(call(name, retry_policy=policy) for name in emissions))
    limits = Limits(max_kept_event_bytes=budget)
    result = execute(plan, {"test/work": emitter}, limits)
    kept, notices = kept_bytes(result)
    assert kept <= budget
    assert notices <= budget // 2
    for trace in result.tool_results:
        accepted = emitter.accepted[trace.tool_id]
        # Every event a tool emitted and the executor took is in the trace, or
        # counted as dropped if it only informs; anything else failed its attempt.
        meaningful = [event for event in accepted if isinstance(event, StatePatchEvent)]
        assert [event for event in trace.events if isinstance(event, StatePatchEvent)] == meaningful
        dropped = trace.dropped_events
        count, size = (0, 0) if dropped is msgspec.UNSET else (dropped.count, dropped.bytes)
        notices_kept = [event for event in trace.events if not isinstance(event, StatePatchEvent)]
        assert len(notices_kept) + count == len(accepted) - len(meaningful)
        assert size == sum(map(size_of, accepted)) - sum(map(size_of, trace.events))
        rejected = len(accepted) < (trace.retry_count + 1) * len(emissions[trace.tool_id])
        if trace.state == "success":
            assert not rejected
        elif rejected:
            # The last attempt ended on the tool's own exception, or on the budget.
            assert error_of(trace).code in ("exception", "too_many_event_bytes")


# Random DAGs ------------------------------------------------------------------------


@st.composite
def dags(draw: Callable[..., Any]) -> tuple[Plan, frozenset[str], dict[str, float], int]:
    count = draw(st.integers(1, 12))
    names = [f"t{n}" for n in range(count)]
    # Edges go from a lower to a higher topological rank; the plan lists tools shuffled.
    edges = {
        name: sorted(draw(st.sets(st.sampled_from(names[:rank]), max_size=3)) if rank else [])
        for rank, name in enumerate(names)
    }
    order = draw(st.permutations(names))
    tools = [
        call(
            name,
            *edges[name],
            async_=draw(st.booleans()),
            required=draw(st.booleans()),
        )
        for name in order
    ]
    failing = frozenset(draw(st.sets(st.sampled_from(names), max_size=count)))
    durations = {name: draw(st.sampled_from([0.0, 0.5, 1.0, 2.0])) for name in names}
    plan = plan_of(*tools, parallel=draw(st.booleans()))
    return plan, failing, durations, draw(st.integers(1, 4))


@given(dags())
def test_random_dags_keep_every_rule(
    case: tuple[Plan, frozenset[str], dict[str, float], int],
) -> None:
    plan, failing, durations, limit = case
    recorder = Recorder(fail=failing, durations=durations)
    result = execute(plan, {"test/work": recorder}, Limits(max_concurrency=limit))
    by_id = {tool.tool_id: tool for tool in plan.tools}
    states = {trace.tool_id: trace.state for trace in result.tool_results}
    log = recorder.log
    for tool in plan.tools:
        should_skip = any(
            states[dependency] == "skipped"
            or (states[dependency] == "failed" and by_id[dependency].required)
            for dependency in tool.dependencies
        )
        if should_skip:
            assert states[tool.tool_id] == "skipped"
            assert ("start", tool.tool_id) not in log
            continue
        # It ran, after every dependency ended.
        start = log.index(("start", tool.tool_id))
        for dependency in tool.dependencies:
            assert log.index(("end", dependency)) < start
        assert states[tool.tool_id] == ("failed" if tool.tool_id in failing else "success")
        received = recorder.requests[tool.tool_id].dependencies
        assert set(received) == set(tool.dependencies)
        for dependency in tool.dependencies:
            assert (received[dependency] is None) == (states[dependency] == "failed")
    assert _peak(log) <= (limit if plan.parallel else 1)
    for tool in plan.tools:
        if not (plan.parallel and tool.async_) and ("start", tool.tool_id) in log:
            start = log.index(("start", tool.tool_id))
            assert log[start + 1] == ("end", tool.tool_id)
    assert result.success == all(
        states[tool.tool_id] == "success" or not tool.required for tool in plan.tools
    )
    assert set(result.failed_tools) == {name for name, state in states.items() if state == "failed"}


def _peak(log: list[tuple[str, str]]) -> int:
    running = peak = 0
    for event, _ in log:
        running += 1 if event == "start" else -1
        peak = max(peak, running)
    return peak


def test_the_peak_counter_sees_overlap() -> None:
    # The concurrency assertions above would hold vacuously if `_peak` were wrong.
    assert _peak([("start", "a"), ("start", "b"), ("end", "a"), ("end", "b")]) == 2
    assert _peak([("start", "a"), ("end", "a"), ("start", "b"), ("end", "b")]) == 1


def test_a_tool_event_union_member_round_trips() -> None:
    event: ToolEvent = DoneEvent(version="0", ok=True)
    assert msgspec.to_builtins(event) == {"type": "done", "version": "0", "ok": True}


def test_the_default_data_root_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from plancontracts.runtime.engine.executor import default_data_root

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_data_root() == tmp_path / "plancontracts" / "skills"


def test_check_plan_gives_the_rejection_without_running_anything() -> None:
    recorder = Recorder()
    plan = plan_of(call("a", "b"), call("b", "a"))
    error = check_plan(plan, skills=SkillSet(), functions={"test/work": recorder})
    assert error is not None
    assert (error.category, error.message) == (
        "circular_dependency",
        "the dependencies form a cycle: a -> b -> a",
    )
    assert (
        check_plan(plan_of(call("a")), skills=SkillSet(), functions={"test/work": recorder}) is None
    )
    assert recorder.log == []
