"""Shared test setup: snapshot files under snapshots/, upstream fixtures, hypothesis profiles."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

# Nothing downloads in tests: huggingface_hub (here and in every subprocess a test
# starts) answers from its cache or fails at once. Download tests use a local server.
os.environ["HF_HUB_OFFLINE"] = "1"

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOTS = ROOT / "snapshots"
# Other projects' public data, used in place as external fixtures. It sits beside
# the checkout in the project's own workspace and is absent from a user's clone.
UPSTREAM = ROOT.parent / "shared" / "upstream"

# "full" (the default, and what CI runs) draws at least 1,000 documents per
# contract; "quick" is for iterating: PLANCONTRACTS_HYPOTHESIS=quick.
settings.register_profile(
    "full",
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
settings.register_profile(
    "quick",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
settings.load_profile(os.environ.get("PLANCONTRACTS_HYPOTHESIS", "full"))


class MarkdownSnapshot(SingleFileSnapshotExtension):
    """One readable Markdown file per snapshot, under the top-level snapshots/ folder."""

    file_extension = "md"
    _write_mode = WriteMode.TEXT

    @classmethod
    def dirname(cls, *, test_location: Any) -> str:
        return str(SNAPSHOTS / test_location.basename)


@pytest.fixture
def markdown_snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(MarkdownSnapshot)


@pytest.fixture
def upstream() -> Path:
    """The folder of upstream fixtures; the test is skipped where it is absent."""
    if not UPSTREAM.is_dir():
        pytest.skip(f"upstream fixtures not found at {UPSTREAM}")
    return UPSTREAM
