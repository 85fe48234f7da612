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
The names below are the public API. The handles and `Contract` come with the
generated models (`plancontracts.generated`, whose index the code generator
writes); the rest is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import generated
from .generated import *  # noqa: F403  # Contract and every contract's handle
from .runtime.core.lazy import lazy_names

__version__ = "0.1.0"

# Each public name besides the generated ones, and the module it lives in (relative to
# this package), imported on first use.
_EXPORTS = {
    "AnswerRefused": "runtime.core.errors",
    "AssetGenerationError": "runtime.core.errors",
    "ContractError": "runtime.core.errors",
    "GenerationFailed": "runtime.core.errors",
    "MalformedJSON": "runtime.core.errors",
    "MigrationFailed": "runtime.core.errors",
    "NoModel": "runtime.core.errors",
    "NotAModel": "runtime.core.errors",
    "OutOfTime": "runtime.core.errors",
    "PlanContractsError": "runtime.core.errors",
    "PlayRefused": "runtime.core.errors",
    "ProfileBug": "runtime.core.errors",
    "ProtocolViolation": "runtime.core.errors",
    "ScriptFailure": "runtime.core.errors",
    "ServerFailed": "runtime.core.errors",
    "StoreError": "runtime.core.errors",
    "StreamError": "runtime.core.errors",
    "TooLarge": "runtime.core.errors",
    "ToolValidationError": "runtime.core.errors",
    "TooManyGoals": "runtime.core.errors",
    "UnknownContractError": "runtime.core.errors",
    "UnknownToolError": "runtime.core.errors",
    "UnusableSchema": "runtime.core.errors",
    "UnusableScript": "runtime.core.errors",
    "UsageError": "runtime.core.errors",
    "WriteFailed": "runtime.core.errors",
    "Attempt": "runtime.core.errors",
    "MAX_VIOLATIONS": "runtime.core.errors",
    "Violation": "runtime.core.errors",
    "Violations": "runtime.core.errors",
    "ContractSet": "runtime.core.validation",
    "from_asyncio": "runtime.core.asyncio_bridge",
    "stream_from_asyncio": "runtime.core.asyncio_bridge",
    "load_contracts": "runtime.core.schema_sets",
    "ContractChange": "runtime.core.diff",
    "diff": "runtime.core.diff",
    "schemas_at": "runtime.core.diff",
    "contract_names": "runtime.core.contracts",
    "contract_schema": "runtime.core.contracts",
    "root_type": "runtime.core.contracts",
    "Rules": "runtime.core.rules",
    "Migrated": "runtime.core.migrations",
    "MigrationStep": "runtime.core.migrations",
    "migrate": "runtime.core.validation",
    "schema_text": "runtime.core.schema_text",
    "convert": "runtime.core.validation",
    "decode": "runtime.core.validation",
    "violations": "runtime.core.validation",
    "Budget": "runtime.model.writing",
    "Partial": "runtime.model.writing",
    "write": "runtime.model.writing",
    "write_sync": "runtime.model.writing",
    "ModelChoice": "runtime.model.choice",
    "ServerSettings": "runtime.model.resolution",
    "load_writer": "runtime.model.choice",
    "Limits": "runtime.engine.limits",
    "check_plan": "runtime.engine.checks",
    "execute_plan": "runtime.engine.executor",
    "execute_streamed": "runtime.engine.streamed",
    "PlanHeader": "runtime.engine.streamed",
    "Refusal": "runtime.engine.streamed",
    "bundled_skills": "runtime.engine.skills",
    "discover_skills": "runtime.engine.skills",
    "SkillSet": "runtime.engine.skills",
}

__all__ = [
    *generated.__all__,
    "MAX_VIOLATIONS",
    "AnswerRefused",
    "AssetGenerationError",
    "Attempt",
    "Budget",
    "ContractChange",
    "ContractError",
    "ContractSet",
    "GenerationFailed",
    "Limits",
    "MalformedJSON",
    "Migrated",
    "MigrationFailed",
    "MigrationStep",
    "ModelChoice",
    "NoModel",
    "NotAModel",
    "OutOfTime",
    "Partial",
    "PlanContractsError",
    "PlanHeader",
    "PlayRefused",
    "ProfileBug",
    "ProtocolViolation",
    "Refusal",
    "Rules",
    "ScriptFailure",
    "ServerFailed",
    "ServerSettings",
    "SkillSet",
    "StoreError",
    "StreamError",
    "TooLarge",
    "TooManyGoals",
    "ToolValidationError",
    "UnknownContractError",
    "UnknownToolError",
    "UnusableSchema",
    "UnusableScript",
    "UsageError",
    "Violation",
    "Violations",
    "WriteFailed",
    "bundled_skills",
    "check_plan",
    "contract_names",
    "contract_schema",
    "convert",
    "decode",
    "diff",
    "discover_skills",
    "execute_plan",
    "execute_streamed",
    "from_asyncio",
    "load_contracts",
    "load_writer",
    "migrate",
    "root_type",
    "schema_text",
    "schemas_at",
    "stream_from_asyncio",
    "violations",
    "write",
    "write_sync",
]

# What the names are, for type checkers. tests/test_layers.py holds these imports,
# `__all__` and `_EXPORTS` to the same names.
if TYPE_CHECKING:
    from .runtime.core.asyncio_bridge import from_asyncio, stream_from_asyncio
    from .runtime.core.contracts import contract_names, contract_schema, root_type
    from .runtime.core.diff import ContractChange, diff, schemas_at
    from .runtime.core.errors import (
        MAX_VIOLATIONS,
        AnswerRefused,
        AssetGenerationError,
        Attempt,
        ContractError,
        GenerationFailed,
        MalformedJSON,
        MigrationFailed,
        NoModel,
        NotAModel,
        OutOfTime,
        PlanContractsError,
        PlayRefused,
        ProfileBug,
        ProtocolViolation,
        ScriptFailure,
        ServerFailed,
        StoreError,
        StreamError,
        TooLarge,
        ToolValidationError,
        TooManyGoals,
        UnknownContractError,
        UnknownToolError,
        UnusableSchema,
        UnusableScript,
        UsageError,
        Violation,
        Violations,
        WriteFailed,
    )
    from .runtime.core.migrations import Migrated, MigrationStep
    from .runtime.core.rules import Rules
    from .runtime.core.schema_sets import load_contracts
    from .runtime.core.schema_text import schema_text
    from .runtime.core.validation import ContractSet, convert, decode, migrate, violations
    from .runtime.engine.checks import check_plan
    from .runtime.engine.executor import execute_plan
    from .runtime.engine.limits import Limits
    from .runtime.engine.skills import SkillSet, bundled_skills, discover_skills
    from .runtime.engine.streamed import PlanHeader, Refusal, execute_streamed
    from .runtime.model.choice import ModelChoice, load_writer
    from .runtime.model.resolution import ServerSettings
    from .runtime.model.writing import Budget, Partial, write, write_sync


_exported, __dir__ = lazy_names(__name__, _EXPORTS)
if not TYPE_CHECKING:  # why only at run time: runtime/core/lazy.py
    __getattr__ = _exported
