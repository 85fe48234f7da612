"""Validation of external JSON against the contracts, and the typed objects it yields.

from plancontracts.runtime import decode, ContractError

try:
    plan = decode("plan", text)          # bytes or str -> a typed Plan
except ContractError as error:
    for violation in error.violations:   # every problem, each with its JSON Pointer
        print(violation.pointer, violation.message)
"""

from plancontracts.runtime.contracts import contract_names, contract_schema, root_type
from plancontracts.runtime.errors import ContractError, UnknownContractError, Violation
from plancontracts.runtime.schema_text import schema_text
from plancontracts.runtime.validation import decode, violations

__all__ = [
    "ContractError",
    "UnknownContractError",
    "Violation",
    "contract_names",
    "contract_schema",
    "decode",
    "root_type",
    "schema_text",
    "violations",
]
