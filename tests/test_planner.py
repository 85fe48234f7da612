"""The local model: where it comes from, decoding under profiles, and the narrator's prompt.

Decoding tests use the real packaged model (Gemma 3 270M), which plans badly
but must still only ever produce plans that pass the contract and the
executor's checks.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import pytest
import trio
from commands import cli, without_a_model
from hypothesis import given, settings
from hypothesis import strategies as st
from local_servers import serve
from packaged_model import model_file
from tiers import examples_at_most

from plancontracts import check_plan
from plancontracts.generated.tool_plans import (
    ExecutionResult,
    Plan,
    PlanAttempt,
    ToolError,
    ToolInvocation,
    ToolResult,
)
from plancontracts.pytest_plugin import PromptSnapshot
from plancontracts.runtime.core.errors import GenerationFailed, NotAModel, UsageError
from plancontracts.runtime.engine.skills import bundled_skills
from plancontracts.runtime.model import ModelChoice, load_first_writer
from plancontracts.runtime.model.chat import render_chat
from plancontracts.runtime.model.local import LocalModel
from plancontracts.runtime.model.resolution import DEFAULT_MODEL, check_gguf
from plancontracts.runtime.model.writer import Piece
from plancontracts.runtime.tool_plans import (
    Attempt,
    attempt_record,
    narrator_messages,
    plan_profile,
    what_failed,
)

FAKE_GGUF = b"GGUF" + (3).to_bytes(4, "little") + bytes(1000)
# A schema that makes the model write at length: at least 2,000 characters,
# hundreds of tokens, far more than a second's work here.
STORY = {
    "type": "object",
    "properties": {"story": {"type": "string", "minLength": 2000, "maxLength": 4000}},
    "required": ["story"],
    "additionalProperties": False,
}


@pytest.fixture
def writer(packaged_model: LocalModel) -> LocalModel:
    return packaged_model


def resolve(env: dict[str, str], *args: str) -> list[str]:
    """The lines the resolution order says, run in a fresh process with `env`.

    A process: huggingface_hub reads its environment (the cache, the hub's
    address, offline or not) once, when it is imported.
    """
    code = (
        "import sys\n"
        "from plancontracts.runtime.model.resolution import candidates\n"
        "for found in candidates(*sys.argv[1:2] or [None], download=True):\n"
        "    print(f'FOUND {found.path} ({found.source})')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return done.stdout.splitlines()


# Where the model comes from ------------------------------------------------------------


@pytest.mark.process  # resolve(): a fresh interpreter
def test_an_explicit_path_comes_first(tmp_path: Path) -> None:
    model = model_file()
    lines = resolve({"HF_HUB_CACHE": str(tmp_path)}, str(model))
    assert lines[0] == f"model: {model} (--model)"
    assert lines[1] == f"FOUND {model} (--model)"
    assert lines[-1].startswith("FOUND ")
    assert lines[-1].endswith("(package)")


@pytest.mark.process  # resolve(): a fresh interpreter
def test_the_environment_variable_and_unknown_names(tmp_path: Path) -> None:
    lines = resolve(
        {"HF_HUB_CACHE": str(tmp_path), "PLANCONTRACTS_MODEL": "gemma3-270m"}, "no-such-model"
    )
    assert lines[0].startswith(
        "model: 'no-such-model' (--model) is neither a file nor a known name"
    )
    assert lines[1] == "model: gemma3-270m from its package (PLANCONTRACTS_MODEL)"
    assert lines[2] == f"FOUND {model_file()} (PLANCONTRACTS_MODEL)"


@pytest.mark.process  # resolve(): a fresh interpreter
def test_a_prepared_hugging_face_cache_is_used_without_network(tmp_path: Path) -> None:
    commit = "c" * 40
    repo = tmp_path / f"models--{DEFAULT_MODEL.repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / commit / DEFAULT_MODEL.filename
    snapshot.parent.mkdir(parents=True)
    snapshot.write_bytes(FAKE_GGUF)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    lines = resolve({"HF_HUB_CACHE": str(tmp_path)})
    assert lines[0] == f"model: {DEFAULT_MODEL} from the Hugging Face cache"
    assert lines[1] == f"FOUND {snapshot} (Hugging Face cache)"


@pytest.fixture
def hub() -> Iterator[tuple[str, list[str]]]:
    """A local stand-in for the Hugging Face hub that serves one small GGUF file."""
    requests: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:
            requests.append(f"{self.command} {self.path}")
            self.send_response(200)
            self.send_header("X-Repo-Commit", "d" * 40)
            self.send_header("ETag", f'"{hashlib.sha256(FAKE_GGUF).hexdigest()}"')
            self.send_header("Content-Length", str(len(FAKE_GGUF)))
            self.end_headers()

        def do_GET(self) -> None:
            self.do_HEAD()
            self.wfile.write(FAKE_GGUF)

        def log_message(self, *args: object) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=serve, args=(server,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", requests
    server.shutdown()


@pytest.mark.process  # resolve(): a fresh interpreter
def test_a_download_goes_through_the_hub_client(tmp_path: Path, hub: tuple[str, list[str]]) -> None:
    endpoint, requests = hub
    env = {"HF_HUB_CACHE": str(tmp_path), "HF_ENDPOINT": endpoint, "HF_HUB_OFFLINE": "0"}
    lines = resolve({**env, "HF_HUB_DISABLE_XET": "1"})
    assert lines[1] == f"model: downloading {DEFAULT_MODEL} from the Hugging Face hub"
    found = Path(lines[2].removeprefix("FOUND ").removesuffix(" (download)"))
    assert found.read_bytes() == FAKE_GGUF
    assert f"GET /{DEFAULT_MODEL.repo_id}/resolve/main/{DEFAULT_MODEL.filename}" in requests


def test_a_file_that_is_not_a_model_is_refused(tmp_path: Path) -> None:
    text = tmp_path / "notes.gguf"
    text.write_text("not a model")
    with pytest.raises(NotAModel, match="not a GGUF model file"):
        check_gguf(text)
    check_gguf(model_file())


@pytest.mark.model
def test_a_truncated_model_named_stops_in_one_line(tmp_path: Path) -> None:
    truncated = tmp_path / "truncated.gguf"
    with model_file().open("rb") as whole:
        truncated.write_bytes(whole.read(1 << 20))
    said: list[str] = []
    choice = ModelChoice(str(truncated), download=False)
    # The model named is the one wanted: another in its place would hide the wrong file.
    with pytest.raises(UsageError, match=f"{truncated} \\(--model\\) cannot be used: "):
        load_first_writer(choice, say=said.append)
    assert said == []


@pytest.mark.parametrize(
    ("model", "said"),
    [
        ("phi3.5", "'phi3.5' (--model) is neither a file nor a known name"),
        ("/nope.gguf", "'/nope.gguf' (--model) is neither a file nor a known name"),
        ("NOTES", "(--model) cannot be used: "),
    ],
)
@pytest.mark.parametrize(
    "command", [["plan", "I roll a d20"], ["goals", "plan", "Reach the tower"]]
)
def test_a_model_named_and_not_found_stops_in_one_line_exit_2(
    tmp_path: Path, model: str, said: str, command: list[str]
) -> None:
    notes = tmp_path / "notes.gguf"
    notes.write_text("not a model")
    done = cli(*command, "--model", model.replace("NOTES", str(notes)), "--no-download")
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert said in done.stderr


@pytest.mark.model
def test_where_the_model_runs_is_said_and_a_build_without_offload_runs_it_on_the_cpu() -> None:
    import llama_cpp

    from plancontracts.runtime.model.local import offload_layers

    said: list[str] = []
    load_first_writer(ModelChoice("gemma3-270m", download=False, gpu_layers=8), say=said.append)
    if llama_cpp.llama_supports_gpu_offload():  # a CUDA or Metal build
        assert (offload_layers(None), offload_layers(8)) == (-1, 8)
        assert said[-1].endswith("with 8 layers on the GPU")
    else:  # as on CI: every layer on the CPU, whatever is asked
        assert (offload_layers(None), offload_layers(8)) == (0, 0)
        assert said[-1] == (
            "model: loaded gemma-3-270m-q4_k_m.gguf on the CPU "
            "(this build of llama-cpp-python cannot offload to a GPU)"
        )


def test_with_no_model_at_all_the_patterns_plan(tmp_path: Path) -> None:
    done = without_a_model("plan", "I light the torch", hub_cache=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "planner: no model; planning with patterns" in done.stderr
    plan = json.loads(done.stdout)
    assert plan["tools"][0]["toolPath"] == "skills/torch-lighter/light.py"


# Decoding ------------------------------------------------------------------------------

INPUTS = [
    "I light the torch",
    "I roll 2d6+3 to climb the wall",
    "I ask the guard about the Iron Guild",
]


@pytest.mark.parametrize("player_input", INPUTS)
def test_the_real_model_writes_checked_plans(writer: LocalModel, player_input: str) -> None:
    skills = bundled_skills()
    for disabled in ([], ["torch-lighter", "dice-roller"]):
        profile = plan_profile(skills, disabled=disabled, max_tools=3)
        prompt = render_chat(narrator_messages(player_input, skills, disabled=disabled), None)
        document = writer.write(prompt, profile.schema, seed=7)
        plan = profile.to_plan(document, generation=2)
        assert check_plan(plan) is None
        assert not {tool.tool_path.split("/")[1] for tool in plan.tools} & set(disabled)


def test_the_compiled_constraint_is_built_once_per_schema(writer: LocalModel) -> None:
    schema = plan_profile(max_tools=2).schema
    first = writer.generator(schema)
    assert writer.generator(json.loads(json.dumps(schema))) is first


def test_a_new_schemas_constraint_reuses_the_tokenizer_built_for_the_first(
    writer: LocalModel,
) -> None:
    # llguidance's tokenizer, made from the whole vocabulary, takes seconds to build:
    # one per model, never one per schema (a replan's new disabled set is a new schema).
    writer.generator(plan_profile(max_tools=2).schema)
    tokenizer = writer._backend.llg_tokenizer
    other = plan_profile(disabled=["torch-lighter"], max_tools=2).schema
    writer.generator(other)
    assert writer._backend.llg_tokenizer is tokenizer
    prompt = render_chat(narrator_messages("look", bundled_skills()), None)
    document = writer.write(prompt, other, seed=7)
    plan = plan_profile(disabled=["torch-lighter"], max_tools=2).to_plan(document, generation=1)
    assert check_plan(plan) is None


def resident_megabytes() -> int:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) // 1024


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_distinct_inputs_reuse_the_shared_prompt_without_growing_memory(
    writer: LocalModel,
) -> None:
    import llama_cpp

    skills = bundled_skills()
    profile = plan_profile(skills)
    context = writer.llama._ctx.ctx

    def plan_for(text: str) -> int:
        """Plan `text`; the number of prompt tokens llama.cpp had to evaluate."""
        llama_cpp.llama_perf_context_reset(context)
        writer.write(render_chat(narrator_messages(text, skills), None), profile.schema, seed=3)
        return int(llama_cpp.llama_perf_context(context).n_p_eval)

    plan_for("I light the torch")
    before = resident_megabytes()
    distinct = [*INPUTS[1:], "I search the chest for a key", "I bow to the queen's envoy"]
    evaluated = [plan_for(text) for text in distinct]
    # Each prompt is some 1,800 tokens, all but the input shared with the last one.
    assert max(evaluated) < 200, evaluated
    # A cache of whole model states grew by about 540 MB per distinct input here.
    assert resident_megabytes() - before < 150


def test_output_cut_by_the_token_budget_is_a_failure(writer: LocalModel) -> None:
    with pytest.raises(GenerationFailed, match="not complete JSON"):
        writer.write("Tell a long story.\n", STORY, max_tokens=8, seed=1)


def test_a_deadline_stops_token_generation_not_only_the_wait(writer: LocalModel) -> None:
    stop = threading.Event()
    outcome: list[BaseException] = []

    def generate() -> None:
        try:
            writer.write("Tell a long story.\n", STORY, max_tokens=3000, stop=stop)
        except BaseException as error:
            outcome.append(error)

    worker = threading.Thread(target=generate)
    worker.start()
    time.sleep(1.0)
    assert worker.is_alive()
    stop.set()
    # Generous for a loaded machine; the outcome below shows the stop ended it.
    worker.join(timeout=300)
    assert not worker.is_alive()
    assert [type(error) for error in outcome] == [GenerationFailed]
    assert str(outcome[0]) == "generation was stopped"


def test_cancelling_from_trio_sets_the_stop(
    writer: LocalModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcome: list[BaseException] = []
    ended = threading.Event()
    pieces = writer.pieces  # what the worker thread runs

    def recorded(*args: Any, **kwargs: Any) -> Iterator[Piece]:
        try:
            yield from pieces(*args, **kwargs)
        except BaseException as error:
            outcome.append(error)
            raise
        finally:
            ended.set()

    monkeypatch.setattr(writer, "pieces", recorded)

    async def cancel_soon() -> None:
        with trio.move_on_after(1.0) as scope:
            await writer.write_in_thread("Tell a long story.\n", STORY, max_tokens=3000)
        assert scope.cancelled_caught

    trio.run(cancel_soon)
    # The abandoned worker goes on until its next token; the stop, not the
    # story's end, is what ends it.
    assert ended.wait(timeout=300)
    assert [str(error) for error in outcome] == ["generation was stopped"]


# The narrator's prompt -------------------------------------------------------------------


def test_the_narrator_prompt(prompt_snapshot: PromptSnapshot) -> None:
    messages = narrator_messages(
        "I light the torch and look around",
        bundled_skills(),
        disabled=["memory"],
        state={"torch": {"lit": False}},
    )
    assert render_chat(messages, None) == prompt_snapshot


def test_the_replan_prompt(prompt_snapshot: PromptSnapshot) -> None:
    # A failed plan's first tool is quoted with its error; a message spread
    # over lines, as a script may write one, is put on one line.
    plan = Plan(
        request_id="00000000-0000-4000-8000-000000000001",
        tools=[
            ToolInvocation(tool_id="light", tool_path="skills/torch-lighter/light.py"),
            ToolInvocation(tool_id="roll", tool_path="skills/dice-roller/roll.py"),
        ],
    )
    result = execution_result(
        plan,
        failed=[
            ("light", "failed", 2, ToolError(category="tool_failure", code="wet",
                                            message="the torch is wet\n\nand the rain goes on")),
            ("roll", "timeout", 0, ToolError(category="timeout", code="tool_deadline",
                                            message="ran longer than 30 s")),
        ],
    )  # fmt: skip
    messages = narrator_messages(
        "I light the torch and look around",
        bundled_skills(),
        disabled=["torch-lighter", "dice-roller"],
        state={"torch": {"lit": False}},
        failures=what_failed(record_of(plan, result)),
    )
    assert render_chat(messages, None) == prompt_snapshot


Ended = Literal["failed", "timeout"]


def record_of(plan: Plan, result: ExecutionResult) -> PlanAttempt:
    """The `plan-attempt` record of `plan`'s first generation, which ended in `result`."""
    return attempt_record(Attempt(plan, result, 0.5, 1.5, 1, datetime.now(UTC)))


def execution_result(
    plan: Plan, *, failed: list[tuple[str, Ended, int, ToolError]], error: ToolError | None = None
) -> ExecutionResult:
    """The result of `plan` whose tools in `failed` ended as given and the others succeeded."""
    ended: dict[str, tuple[Ended | Literal["success"], int, ToolError | None]] = {
        tool_id: (state, retries, why) for tool_id, state, retries, why in failed
    }
    results = []
    for call in plan.tools:
        state, retries, why = ended.get(call.tool_id, ("success", 0, None))
        result = ToolResult(
            tool_id=call.tool_id, state=state, events=[], execution_time_ms=5, retry_count=retries
        )
        if why is not None:
            result.error = why
        results.append(result)
    outcome = ExecutionResult(
        plan_id=plan.request_id,
        success=not failed and error is None,
        can_replan=True,
        failed_tools=[tool_id for tool_id, *_ in failed],
        disabled_skills=[],
        tool_results=results if error is None else [],
        aggregated_state={},
        aggregated_assets=[],
        execution_time_ms=10,
        attempt_number=1,
    )
    if error is not None:
        outcome.error = error
    return outcome


def test_a_rejected_plan_is_told_as_its_reason() -> None:
    plan = Plan(request_id="00000000-0000-4000-8000-000000000001", tools=[])
    why = ToolError(category="circular_dependency", code="cycle", message="t1 -> t2 -> t1")
    lines = what_failed(record_of(plan, execution_result(plan, failed=[], error=why)))
    assert lines == [
        "the plan was rejected before it ran: circular_dependency cycle: t1 -> t2 -> t1"
    ]


def test_past_five_failed_tools_the_rest_are_counted() -> None:
    calls = [ToolInvocation(tool_id=f"t{n}", tool_path="skills/faults/fails.py") for n in range(8)]
    plan = Plan(request_id="00000000-0000-4000-8000-000000000001", tools=calls)
    broken = ToolError(category="process_error", code="exit_status", message="exited with 1")
    failed: list[tuple[str, Ended, int, ToolError]] = [
        (call.tool_id, "failed", 1, broken) for call in calls
    ]
    lines = what_failed(record_of(plan, execution_result(plan, failed=failed)))
    assert lines[:5] == [
        f"`t{n}` (skills/faults/fails.py) failed after 1 retry: process_error exit_status: "
        "exited with 1"
        for n in range(5)
    ]
    assert lines[5:] == ["and 3 more failed tools"]
    assert what_failed(record_of(plan, execution_result(plan, failed=[]))) == []


@settings(max_examples=examples_at_most(50), deadline=None)
@given(message=st.text(max_size=4000), code=st.text(min_size=1, max_size=64))
def test_a_failure_of_any_text_is_one_bounded_line_of_the_prompt(message: str, code: str) -> None:
    plan = Plan(
        request_id="00000000-0000-4000-8000-000000000001",
        tools=[ToolInvocation(tool_id="t1", tool_path="skills/faults/fails.py")],
    )
    why = ToolError(category="tool_failure", code=code, message=message)
    result = execution_result(plan, failed=[("t1", "failed", 0, why)])
    (line,) = what_failed(record_of(plan, result))
    system = narrator_messages("I wait", bundled_skills(), failures=[line])[0]["content"]
    section = system.split("avoids what went wrong:\n", 1)[1]
    assert len(section.splitlines()) == 1
    assert len(section) < 400


def test_a_chat_template_renders_the_messages() -> None:
    template = (
        "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    text = render_chat([{"role": "user", "content": "hi"}], template)
    assert text == "<|user|>hi<|end|><|assistant|>"


@pytest.mark.model
@pytest.mark.process  # llama.cpp writes its log from C: only a process's own stderr shows it
def test_llama_cpp_log_is_quiet_on_a_model_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "plancontracts", "plan", "I roll a d20", "--model", "gemma3-270m"],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert [line for line in done.stderr.splitlines() if not line.startswith("model: ")] == []
