"""Schema patterns: `$` ends the text, in every pattern the project writes, derives or is given."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiers import examples_at_most

from plancontracts import contract_names
from plancontracts.runtime.core.patterns import (
    OutOfTime,
    deadline,
    matches,
    matching_budget,
    pattern_validator,
    python_pattern,
)
from plancontracts.runtime.core.profiles import contract_profile
from plancontracts.runtime.core.schema_text import display_pattern
from plancontracts.runtime.goal_plans.profiles import output_profile
from plancontracts.runtime.model.writer import profile_accepts
from plancontracts.runtime.planning_blocks.profiles import block_profile
from plancontracts.runtime.session_plans.profiles import call_profile
from plancontracts.runtime.tool_plans import plan_profile

SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"


def patterns_in(schema: Any) -> Iterator[str]:
    """Every pattern of `schema`: `pattern` values and `patternProperties` keys."""
    pending = [schema]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str):
                yield node["pattern"]
            if isinstance(node.get("patternProperties"), dict):
                yield from node["patternProperties"]
            pending += node.values()
        elif isinstance(node, list):
            pending += node


def every_pattern() -> list[str]:
    """The patterns of schemas/ and of every decoding profile the project derives."""
    import json

    found: set[str] = set()
    for path in SCHEMAS.rglob("*.json"):
        found.update(patterns_in(json.loads(path.read_text(encoding="utf-8"))))
    profiles: list[Any] = [contract_profile(name) for name in contract_names()]
    profiles += [plan_profile().schema, output_profile(), call_profile(None, "Ship it")]
    profiles += [block_profile(mode).schema for mode in ("think", "story")]
    for profile in profiles:
        found.update(patterns_in(profile))
    return sorted(found)


PATTERNS = every_pattern()


def test_the_patterns_are_found() -> None:
    # Both spellings: the contracts' `$(?!\n)` and the profiles' bare `$`.
    assert len(PATTERNS) > 20
    assert any(p.endswith("$(?!\\n)") for p in PATTERNS)
    assert any(p.endswith("$") for p in PATTERNS)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_a_text_a_pattern_accepts_is_refused_with_a_final_newline(pattern: str) -> None:
    # Every pattern the project writes is anchored at both ends: what it accepts,
    # it must not accept with a newline after it, as the contract would refuse it.
    assert pattern.startswith("^"), pattern
    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": pattern}}}
    check = pattern_validator()({"type": "string", "pattern": pattern})
    # Drawn from the pattern as Python reads it without lookahead, which hypothesis cannot draw.
    drawn = st.from_regex(python_pattern(display_pattern(pattern)), fullmatch=True)

    accepted: list[str] = []

    @settings(max_examples=examples_at_most(10), suppress_health_check=list(HealthCheck))
    @given(drawn)
    def accepted_then_refused(text: str) -> None:
        if not matches(pattern, text):  # such as a text the lookahead refuses
            return
        accepted.append(text)
        assert check.is_valid(text)
        assert profile_accepts({"x": text}, schema)
        assert not check.is_valid(text + "\n")
        assert not profile_accepts({"x": text + "\n"}, schema)

    accepted_then_refused()
    assert accepted, f"no text drawn from {pattern!r} was accepted"


def test_a_served_answer_ending_in_a_newline_is_refused_by_the_profile() -> None:
    # The answer a server gave: the profile's check let it through, the contract refused it.
    assert not profile_accepts({"x": "2d6\n"}, {"properties": {"x": {"pattern": "^2d6$"}}})
    assert profile_accepts({"x": "2d6"}, {"properties": {"x": {"pattern": "^2d6$"}}})


@pytest.mark.parametrize(
    ("pattern", "python"),
    [
        ("^a$", r"^a\Z"),
        ("^a$(?!\\n)", r"^a\Z(?!\n)"),
        ("^[$]$", r"^[$]\Z"),
        ("^\\$$", r"^\$\Z"),
        ("^[]$]$", r"^[]$]\Z"),
        ("^[^]$]+$", r"^[^]$]+\Z"),
        ("^[a\\]$]$", r"^[a\]$]\Z"),
        ("a|b$", r"a|b\Z"),
    ],
)
def test_only_a_dollar_that_ends_the_text_is_rewritten(pattern: str, python: str) -> None:
    assert python_pattern(pattern) == python


def test_pattern_properties_match_whole_keys_too() -> None:
    schema = {"type": "object", "patternProperties": {"^a$": {"type": "integer"}}}
    check = pattern_validator()(schema)
    assert not check.is_valid({"a": "x"})
    assert check.is_valid({"a\n": "x"})  # not matched, so not checked


def test_a_pattern_that_backtracks_without_end_stops_at_the_deadline() -> None:
    # `regex` takes about 3 s for 24 `a`, doubling with each one more: 40 take days.
    with deadline(0.2), pytest.raises(OutOfTime) as stopped:
        matches("^(a|a)*$", "a" * 40 + "!")
    assert stopped.value.pattern == "^(a|a)*$"


def test_a_pattern_that_backtracks_without_end_spends_the_matching_budget() -> None:
    with matching_budget(0.2), pytest.raises(OutOfTime) as stopped:
        matches("^(a|a)*$", "a" * 40 + "!")
    assert stopped.value.pattern == "^(a|a)*$"


def test_the_matching_budget_counts_only_the_time_spent_matching() -> None:
    # A budget is not a deadline: time between matches, spent judging other keywords of a
    # large document, leaves it whole. Each match here takes microseconds.
    with matching_budget(0.05):
        time.sleep(0.1)
        assert matches("^a$", "a")
        time.sleep(0.1)
        assert not matches("^a$", "b")
    with deadline(0.05):
        time.sleep(0.1)
        with pytest.raises(OutOfTime):
            matches("^a$", "a")


def test_the_matching_budget_is_spent_by_matches_together() -> None:
    # Each match backtracks for about 12 ms (16 `a`), within the budget alone: together,
    # a few of them spend it.
    def match_many() -> None:
        for _ in range(10_000):
            matches("^(a|a)*$", "a" * 16 + "!")

    with matching_budget(0.05), pytest.raises(OutOfTime):
        match_many()


def test_a_profile_bug_is_one_line_not_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    # Whichever command meets one (`plan`, `play`, `session drive`, `story build`):
    # stood in for here by `contracts`, the cheapest command to run.
    from commands import cli

    from plancontracts.runtime.cli import commands
    from plancontracts.runtime.core.errors import ProfileBug

    def broken(*arguments: Any) -> int:
        raise ProfileBug("a plan decoded under the profile is invalid: /narrative: too long")

    monkeypatch.setattr(commands, "_contracts", broken)
    done = cli("contracts")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "plancontracts: error: a plan decoded under the profile is invalid: /narrative: too long "
        "(a bug in plancontracts' decoding profile: the answer is not used)\n"
    )
