"""The optional fields of the generated models, read by tests that need them set.

A generated model leaves a field the JSON did not carry as `msgspec.UNSET`, so
its type is `X | UnsetType`. A test that expects the field reads it through
these: it gets an `X`, typed as one, or fails saying what was missing.
"""

from __future__ import annotations

from typing import TypeVar

import msgspec
import pytest

from plancontracts.generated.tool_plans import ExecutionResult, ToolError, ToolResult

_Value = TypeVar("_Value")


def present(value: _Value | msgspec.UnsetType, what: str) -> _Value:
    """`value`; fails the test, naming `what` (the field read), when it is unset."""
    if value is msgspec.UNSET:
        pytest.fail(f"{what} is unset")
    return value


def error_of(result: ToolResult | ExecutionResult) -> ToolError:
    """The error a tool's trace or a plan's result reports.

    Fails the test when there is none, saying how the tool ended or that the
    plan ran, rather than an AttributeError on UNSET.
    """
    error = result.error
    if error is msgspec.UNSET:
        if isinstance(result, ToolResult):
            pytest.fail(f"tool {result.tool_id!r} ended {result.state!r} with no error")
        pytest.fail(f"the plan ran (success: {result.success}) with no error")
    return error
