"""plancontracts: schema-first contracts for LLM planning systems.

    from plancontracts import PLAN, ContractError, decode

    try:
        plan = decode(PLAN, text)            # bytes or str -> a Plan, typed as one
    except ContractError as error:
        for violation in error.violations:   # every problem, each with its JSON Pointer
            print(violation.pointer, violation.message)

The contracts live as JSON Schemas; `plancontracts.generated` holds the typed
msgspec models derived from them and a handle per contract (`PLAN`,
`TOOL_EVENT`...: a `Contract`), and `plancontracts.runtime` the code that
validates, executes and plans with them. A function given a handle returns
its contract's type; given the contract's name (`"plan"`), it returns `Any`.
The names below are the public API; each is imported on first use, so
`import plancontracts` costs next to nothing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Each public name, and the module it lives in (relative to this package).
_EXPORTS = {
    "Contract": "generated",
    "EXECUTION_RESULT": "generated",
    "FROZEN_PLANS": "generated",
    "GOAL_EVENT": "generated",
    "GOAL_PLAN": "generated",
    "GOAL_PLAN_OUTPUT": "generated",
    "GOAL_PLANNING_SYSTEM": "generated",
    "PLAN": "generated",
    "PLAN_ATTEMPT": "generated",
    "PLANNING_BLOCK": "generated",
    "PLANNING_SESSION": "generated",
    "SESSION_ADD_STEP": "generated",
    "SESSION_CLEAR_PLAN": "generated",
    "SESSION_MARK_STEP": "generated",
    "SESSION_PLAN": "generated",
    "SESSION_READ_PLAN": "generated",
    "SESSION_SETUP_PLAN": "generated",
    "SESSION_UPDATE_STEP": "generated",
    "SKILL_MANIFEST": "generated",
    "STORY_ACT_OUTLINE": "generated",
    "STORY_ACT_OUTLINE_RESULT": "generated",
    "STORY_CHARACTER": "generated",
    "STORY_CHARACTER_RESULT": "generated",
    "STORY_DRAFT": "generated",
    "STORY_FINALIZE_NODE": "generated",
    "STORY_FINALIZE_NODE_RESULT": "generated",
    "STORY_FINALIZE_PACKAGE": "generated",
    "STORY_FINALIZE_PACKAGE_RESULT": "generated",
    "STORY_NODE_ENCOUNTERS": "generated",
    "STORY_NODE_ENCOUNTERS_RESULT": "generated",
    "STORY_NODE_WEB": "generated",
    "STORY_NODE_WEB_RESULT": "generated",
    "STORY_PACKAGE": "generated",
    "STORY_PREMISE": "generated",
    "STORY_PREMISE_RESULT": "generated",
    "STORY_UPDATE_ELEMENT": "generated",
    "STORY_UPDATE_ELEMENT_RESULT": "generated",
    "TOOL_EVENT": "generated",
    "TOOL_REQUEST": "generated",
    "ContractError": "runtime.core.errors",
    "PlanContractsError": "runtime.core.errors",
    "UnknownContractError": "runtime.core.errors",
    "Violation": "runtime.core.errors",
    "Violations": "runtime.core.errors",
    "contract_names": "runtime.core.contracts",
    "contract_schema": "runtime.core.contracts",
    "root_type": "runtime.core.contracts",
    "Rules": "runtime.core.rules",
    "schema_text": "runtime.core.schema_text",
    "convert": "runtime.core.validation",
    "decode": "runtime.core.validation",
    "violations": "runtime.core.validation",
    "ToolValidationError": "runtime.core.tools",
    "Limits": "runtime.engine.limits",
    "check_plan": "runtime.engine.executor",
    "execute_plan": "runtime.engine.executor",
    "SkillSet": "runtime.engine.skills",
    "bundled_skills": "runtime.engine.skills",
    "discover_skills": "runtime.engine.skills",
}

__all__ = [
    "EXECUTION_RESULT",
    "FROZEN_PLANS",
    "GOAL_EVENT",
    "GOAL_PLAN",
    "GOAL_PLANNING_SYSTEM",
    "GOAL_PLAN_OUTPUT",
    "PLAN",
    "PLANNING_BLOCK",
    "PLANNING_SESSION",
    "PLAN_ATTEMPT",
    "SESSION_ADD_STEP",
    "SESSION_CLEAR_PLAN",
    "SESSION_MARK_STEP",
    "SESSION_PLAN",
    "SESSION_READ_PLAN",
    "SESSION_SETUP_PLAN",
    "SESSION_UPDATE_STEP",
    "SKILL_MANIFEST",
    "STORY_ACT_OUTLINE",
    "STORY_ACT_OUTLINE_RESULT",
    "STORY_CHARACTER",
    "STORY_CHARACTER_RESULT",
    "STORY_DRAFT",
    "STORY_FINALIZE_NODE",
    "STORY_FINALIZE_NODE_RESULT",
    "STORY_FINALIZE_PACKAGE",
    "STORY_FINALIZE_PACKAGE_RESULT",
    "STORY_NODE_ENCOUNTERS",
    "STORY_NODE_ENCOUNTERS_RESULT",
    "STORY_NODE_WEB",
    "STORY_NODE_WEB_RESULT",
    "STORY_PACKAGE",
    "STORY_PREMISE",
    "STORY_PREMISE_RESULT",
    "STORY_UPDATE_ELEMENT",
    "STORY_UPDATE_ELEMENT_RESULT",
    "TOOL_EVENT",
    "TOOL_REQUEST",
    "Contract",
    "ContractError",
    "Limits",
    "PlanContractsError",
    "Rules",
    "SkillSet",
    "ToolValidationError",
    "UnknownContractError",
    "Violation",
    "Violations",
    "bundled_skills",
    "check_plan",
    "contract_names",
    "contract_schema",
    "convert",
    "decode",
    "discover_skills",
    "execute_plan",
    "root_type",
    "schema_text",
    "violations",
]

# What the names are, for type checkers. `__all__`, these imports and `_EXPORTS` say the
# same; tests/test_layers.py holds them to it.
if TYPE_CHECKING:
    from .generated import (
        EXECUTION_RESULT,
        FROZEN_PLANS,
        GOAL_EVENT,
        GOAL_PLAN,
        GOAL_PLAN_OUTPUT,
        GOAL_PLANNING_SYSTEM,
        PLAN,
        PLAN_ATTEMPT,
        PLANNING_BLOCK,
        PLANNING_SESSION,
        SESSION_ADD_STEP,
        SESSION_CLEAR_PLAN,
        SESSION_MARK_STEP,
        SESSION_PLAN,
        SESSION_READ_PLAN,
        SESSION_SETUP_PLAN,
        SESSION_UPDATE_STEP,
        SKILL_MANIFEST,
        STORY_ACT_OUTLINE,
        STORY_ACT_OUTLINE_RESULT,
        STORY_CHARACTER,
        STORY_CHARACTER_RESULT,
        STORY_DRAFT,
        STORY_FINALIZE_NODE,
        STORY_FINALIZE_NODE_RESULT,
        STORY_FINALIZE_PACKAGE,
        STORY_FINALIZE_PACKAGE_RESULT,
        STORY_NODE_ENCOUNTERS,
        STORY_NODE_ENCOUNTERS_RESULT,
        STORY_NODE_WEB,
        STORY_NODE_WEB_RESULT,
        STORY_PACKAGE,
        STORY_PREMISE,
        STORY_PREMISE_RESULT,
        STORY_UPDATE_ELEMENT,
        STORY_UPDATE_ELEMENT_RESULT,
        TOOL_EVENT,
        TOOL_REQUEST,
        Contract,
    )
    from .runtime.core.contracts import contract_names, contract_schema, root_type
    from .runtime.core.errors import (
        ContractError,
        PlanContractsError,
        UnknownContractError,
        Violation,
        Violations,
    )
    from .runtime.core.rules import Rules
    from .runtime.core.schema_text import schema_text
    from .runtime.core.tools import ToolValidationError
    from .runtime.core.validation import convert, decode, violations
    from .runtime.engine.executor import check_plan, execute_plan
    from .runtime.engine.limits import Limits
    from .runtime.engine.skills import SkillSet, bundled_skills, discover_skills


def _exported(name: str) -> Any:
    """The public name `name`, imported on first use. Raises AttributeError for any other."""
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'plancontracts' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # found once; later lookups do not come here
    return value


# Only at run time: a type checker that saw a module `__getattr__` would type
# every other name, a user's typo included, as Any instead of refusing it.
if not TYPE_CHECKING:
    __getattr__ = _exported


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
