"""Matching a JSON Schema `pattern`: as ECMA-262 reads it, in time that can be bounded.

A schema's pattern is an ECMA-262 regular expression, searched for in the
string. Python's `re` reads it almost the same way, with one difference that
lets text through: its `$` also matches before a final newline, so `^2d6$`
accepts `"2d6\\n"`. Every pattern the project checks (a contract's, a
decoding profile's, a user schema folder's, a skill's input schema's) is
matched here, with `$` read as the end of the string.

Matching uses `regex`, whose matching can be stopped: under `deadline`, a
pattern that backtracks without end (`^(a+)+$` against `aaaa...!`) raises
`OutOfTime` when the deadline comes, instead of running for minutes. Under
`matching_budget`, only the time spent matching counts: a large document
that other keywords take long to judge is not cut short.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any

from .errors import OutOfTime, shown

if TYPE_CHECKING:
    import regex as regex_module
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

__all__ = [
    "OutOfTime",
    "compiled",
    "deadline",
    "matches",
    "matching_budget",
    "pattern_keywords",
    "pattern_validator",
    "python_pattern",
    "time_left",
]

_DEADLINE: ContextVar[float | None] = ContextVar("pattern deadline", default=None)
"When the check under way must stop, on the monotonic clock; None: no limit."

_LONGEST_MATCH = 1e9
"Seconds: `regex` overflows past about 1e17 and times out at once; 31 years is no limit here."


@contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """Within the block, matching stops `seconds` from now (None: never) with `OutOfTime`."""
    token = _DEADLINE.set(None if seconds is None else time.monotonic() + seconds)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


class _Budget:
    """Seconds of matching left to a block under `matching_budget`."""

    __slots__ = ("left",)

    def __init__(self, seconds: float) -> None:
        self.left = seconds


_BUDGET: ContextVar[_Budget | None] = ContextVar("pattern budget", default=None)
"What the patterns matched in the block under way may still take together; None: no limit."


@contextmanager
def matching_budget(seconds: float | None) -> Iterator[None]:
    """Within the block, the patterns matched may take `seconds` together (None: no limit).

    Past that, matching raises `OutOfTime`. Only the time spent matching
    counts, where `deadline` is a moment on the clock: a document of 4 MB,
    valid, that the other keywords of a 2 MB schema took over 2 s to judge
    was refused under a deadline of 2 s, in the name of whichever pattern
    came next.
    """
    token = _BUDGET.set(None if seconds is None else _Budget(seconds))
    try:
        yield
    finally:
        _BUDGET.reset(token)


def time_left(pattern: str | None) -> float | None:
    """Seconds left before the deadline (None without one). Raises `OutOfTime` at it."""
    end = _DEADLINE.get()
    if end is None:
        return None
    left = end - time.monotonic()
    if left <= 0:
        raise OutOfTime(pattern)
    return min(left, _LONGEST_MATCH)


def python_pattern(pattern: str) -> str:
    """`pattern` with every `$` that ends the text written `\\Z`, as Python reads "end of string".

    A `$` that is escaped (`\\$`) or inside a character class (`[$]`) is a
    dollar sign and is kept; the rest of the pattern is unchanged.
    """
    out: list[str] = []
    in_class = False
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            out.append(pattern[index : index + 2])
            index += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            # `]` first in a class (`[]a]`, `[^]a]`) is a member, not the end: Python reads it so.
            ahead = index + 1 + (pattern[index + 1 : index + 2] == "^")
            if pattern[ahead : ahead + 1] == "]":
                out.append(pattern[index : ahead + 1])
                index = ahead + 1
                continue
        elif char == "$":
            char = r"\Z"
        out.append(char)
        index += 1
    return "".join(out)


@lru_cache(maxsize=512)
def compiled(pattern: str) -> regex_module.Pattern[str]:
    """`pattern` compiled as `matches` matches it. Raises `regex.error` when it cannot be."""
    import regex  # here: most commands check no pattern, and the import takes a while

    with warnings.catch_warnings():  # `[[` warns of a nested set, on standard error
        warnings.simplefilter("ignore", FutureWarning)
        return regex.compile(python_pattern(pattern), regex.VERSION0)


def matches(pattern: str, text: str) -> bool:
    """Whether `pattern` is found in `text`, as JSON Schema's `pattern` keyword asks.

    Raises `OutOfTime` when the deadline (see `deadline`) comes first or the
    budget (see `matching_budget`) is spent, and `regex.error` when the
    pattern cannot be compiled.
    """
    timeout = time_left(pattern)
    budget = _BUDGET.get()
    if budget is None:
        try:
            return compiled(pattern).search(text, timeout=timeout) is not None
        except TimeoutError:
            raise OutOfTime(pattern) from None
    if budget.left <= 0:
        raise OutOfTime(pattern)
    timeout = budget.left if timeout is None else min(timeout, budget.left)
    started = time.monotonic()
    try:
        return compiled(pattern).search(text, timeout=timeout) is not None
    except TimeoutError:
        raise OutOfTime(pattern) from None
    finally:
        budget.left -= time.monotonic() - started


def pattern_keywords() -> dict[str, Callable[..., Iterator[ValidationError]]]:
    """jsonschema keywords `pattern` and `patternProperties`, matching through `matches`.

    jsonschema's own search with Python's `re`, where `$` accepts a final
    newline and no deadline applies.
    """
    from jsonschema.exceptions import ValidationError

    def pattern(validator: Any, expected: str, instance: Any, _: Any) -> Iterator[ValidationError]:
        if validator.is_type(instance, "string") and not matches(expected, instance):
            yield ValidationError(f"{shown(instance)} does not match {shown(expected)}")

    def pattern_properties(
        validator: Any, patterns: dict[str, Any], instance: Any, _: Any
    ) -> Iterator[ValidationError]:
        if not validator.is_type(instance, "object"):
            return
        for expected, subschema in patterns.items():
            for key, value in instance.items():
                if matches(expected, key):
                    yield from validator.descend(value, subschema, path=key, schema_path=expected)

    return {"pattern": pattern, "patternProperties": pattern_properties}


@cache
def pattern_validator() -> type[Draft202012Validator]:
    """Draft 2020-12 validation with patterns matched by `matches`: how profiles are checked."""
    from jsonschema import Draft202012Validator, validators

    extend: Callable[..., type[Draft202012Validator]] = validators.extend  # untyped in its stubs
    return extend(Draft202012Validator, pattern_keywords())
