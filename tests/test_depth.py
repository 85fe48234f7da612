"""Every nesting depth the parser accepts gets a verdict: arrays and objects, several contracts.

The parser (msgspec) counts each level against Python's recursion limit, so
its limit is about 1,000 levels less the depth of the calling code. Up to it,
a document is valid or has its violations listed, whatever reads it
afterwards (the integral-float conversion, the schema, the protocol rules,
the duplicate-key check); past it, the parser itself refuses, in one line.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from commands import cli, plancontracts
from hypothesis import given
from hypothesis import strategies as st

from plancontracts import ContractError, contract_schema, decode
from plancontracts.runtime.core.jsontext import TOO_DEEP

PLAN = contract_schema("plan")["examples"][0]
BLOCK = contract_schema("planning-block")["examples"][0]


def nested(kind: str, depth: int) -> str:
    """`depth` levels of arrays or of objects around the number 1.0.

    The objects' key is a colon written as an escape, which sends the parser
    to its exact, slow check for duplicate keys.
    """
    if kind == "arrays":
        return "[" * depth + "1.0" + "]" * depth
    return '{"a\\u003a": ' * depth + "1.0" + "}" * depth


def in_plan(deep: str) -> str:
    """A valid plan: the deep value in a tool's free-form input, and 2.0 for an integer."""
    plan = {**PLAN, "metadata": {"generationAttempt": 2.0}}
    text = json.dumps(plan).replace('"input": {', '"input": {"deep": DEEP, ', 1)
    return text.replace("DEEP", deep)


def in_block(deep: str) -> str:
    return json.dumps({**BLOCK, "extra": "DEEP"}).replace('"DEEP"', deep)


def in_event(deep: str) -> str:
    return json.dumps({"version": "0", "type": "log", "level": "info", "message": "DEEP"}).replace(
        '"DEEP"', deep
    )


def in_frozen_plans(deep: str) -> str:
    return json.dumps({"deep_topic": "DEEP"}).replace('"DEEP"', deep)


# Each contract: where the deep value goes, and the pointer of the violation it
# causes (None: the document is valid).
CASES: dict[str, tuple[Callable[[str], str], str | None]] = {
    "plan": (in_plan, None),
    "planning-block": (in_block, "/extra"),
    "tool-event": (in_event, "/message"),
    "frozen-plans": (in_frozen_plans, "/deep_topic"),
}
KINDS = ("arrays", "objects")


def verdict(contract: str, kind: str, depth: int) -> tuple[str, ...] | None:
    """The pointers of the document's violations, or None when it is valid."""
    build, _ = CASES[contract]
    try:
        typed = decode(contract, build(nested(kind, depth)))
    except ContractError as error:
        return tuple(violation.pointer or violation.message for violation in error.violations)
    if contract == "plan":
        assert typed.metadata.generation_attempt == 2  # 2.0, an integer as the schema says
    return None


_LIMITS: dict[tuple[str, str], int] = {}
"The deepest nesting parsed, by contract and kind, as `survey` last found it."


def survey(
    contract: str, kind: str, depths: list[int]
) -> tuple[int, dict[int, tuple[str, ...] | None]]:
    """The deepest nesting that `decode` parses, and the verdicts at `depths`.

    The parser's limit depends on how deep the calling code is, so both are
    taken with the same calls from the same frame (no comprehension: in
    Python 3.11 it is a frame of its own). The limit found last is tried
    first: two parses confirm it where it still holds, instead of a search.
    """
    low = _LIMITS.get((contract, kind), 0)
    if not (
        low
        and verdict(contract, kind, low) != (TOO_DEEP,)
        and verdict(contract, kind, low + 1) == (TOO_DEEP,)
    ):
        low, high = 1, 5_000
        while low < high:  # the parser refuses exactly from some depth on
            middle = (low + high + 1) // 2
            if verdict(contract, kind, middle) == (TOO_DEEP,):
                high = middle - 1
            else:
                low = middle
        _LIMITS[contract, kind] = low
    found = {}
    for depth in depths:
        found[depth] = verdict(contract, kind, depth)
    return low, found


def assert_judged(contract: str, depth: int, found: tuple[str, ...] | None) -> None:
    _, pointer = CASES[contract]
    if pointer is None:
        assert found is None, (depth, found)
    else:
        assert found is not None
        assert TOO_DEEP not in found, depth
        assert found[0] == pointer, (depth, found)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("contract", list(CASES))
def test_every_depth_up_to_the_parsers_limit_gets_a_verdict(contract: str, kind: str) -> None:
    limit, _ = survey(contract, kind, [])
    assert 900 < limit < 1_000  # Python's default recursion limit, less the callers' frames
    # Far past the limit, yet under the size where a document of tiny values is
    # refused unparsed (runtime.core.jsontext.DENSE_FROM): the depth is what is judged.
    far = 10_000
    depths = [1, 2, 10, 100, 480, 500, 750, limit - 10, limit - 1, limit, limit + 1, far]
    again, found = survey(contract, kind, depths)
    assert again == limit
    for depth in depths[:-2]:
        assert_judged(contract, depth, found[depth])
    assert found[limit + 1] == found[far] == (TOO_DEEP,)


@pytest.mark.slow  # each example searches for the parser's limit again: a dozen parses
@given(st.sampled_from(list(CASES)), st.sampled_from(KINDS), st.integers(1, 1_200))
def test_any_depth_gets_its_verdict(contract: str, kind: str, depth: int) -> None:
    limit, found = survey(contract, kind, [depth])
    if depth > limit:
        assert found[depth] == (TOO_DEEP,)
    else:
        assert_judged(contract, depth, found[depth])


# In a process: the stack a command has is the subject. Run in the test's
# process, the deepest document accepted moved by one level between calls
# (985 levels refused, then accepted once other calls had run), so a search
# for the limit there depends on which tests ran before.
@pytest.mark.process
def test_the_command_judges_every_depth_its_parser_accepts(tmp_path: Path) -> None:
    def validate(depth: int) -> subprocess.CompletedProcess[str]:
        path = tmp_path / f"deep-{depth}.json"
        path.write_text(in_plan(nested("arrays", depth)))
        return plancontracts("validate", "plan", str(path))

    low, high = 500, 1_500
    while low < high:
        middle = (low + high + 1) // 2
        done = validate(middle)
        assert "Traceback" not in done.stderr
        if TOO_DEEP in done.stdout:
            assert done.returncode == 1
            high = middle - 1
        else:
            assert done.returncode == 0, done.stdout + done.stderr
            low = middle
    assert low > 900
    assert validate(low).returncode == 0
    assert TOO_DEEP in validate(low + 1).stdout


def test_normalize_writes_back_a_block_as_deep_as_its_parser_accepts(tmp_path: Path) -> None:
    path = tmp_path / "block.json"
    path.write_text(in_block("[" * 980 + '"<b>x</b>"' + "]" * 980))  # under the limit, ~990
    done = cli("normalize", "--json", "planning-block", str(path))
    assert done.returncode == 1, done.stderr
    assert done.stderr == ""
    # Too deep for this test's own parser: read as text.
    assert done.stdout.count("\n") == 1
    assert (
        '"errors": [{"pointer": "/extra", "message": "unknown field \\"extra\\""}]' in done.stdout
    )
    assert '"before": "<b>x</b>", "after": "x"' in done.stdout
    assert '"extra": ' + "[" * 980 + '"x"' + "]" * 980 + "}}" in done.stdout
