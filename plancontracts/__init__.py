"""plancontracts: schema-first contracts for LLM planning systems.

    from plancontracts import ContractError, decode

    try:
        plan = decode("plan", text)          # bytes or str -> a typed Plan
    except ContractError as error:
        for violation in error.violations:   # every problem, each with its JSON Pointer
            print(violation.pointer, violation.message)

The contracts live as JSON Schemas; `plancontracts.generated` holds the typed
msgspec models derived from them, and `plancontracts.runtime` the code that
validates, executes and plans with them. The names below are the public API;
each is imported on first use, so `import plancontracts` costs next to nothing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Each public name, and the module it lives in (relative to this package).
_EXPORTS = {
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
    "Limits": "runtime.engine.limits",
    "check_plan": "runtime.engine.executor",
    "execute_plan": "runtime.engine.executor",
    "SkillSet": "runtime.engine.skills",
    "bundled_skills": "runtime.engine.skills",
    "discover_skills": "runtime.engine.skills",
}

__all__ = [
    "ContractError",
    "Limits",
    "PlanContractsError",
    "Rules",
    "SkillSet",
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
    from .runtime.core.validation import convert, decode, violations
    from .runtime.engine.executor import check_plan, execute_plan
    from .runtime.engine.limits import Limits
    from .runtime.engine.skills import SkillSet, bundled_skills, discover_skills


def __getattr__(name: str) -> Any:
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'plancontracts' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # found once; later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
