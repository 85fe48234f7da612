"""plancontracts: schema-first contracts for LLM planning systems.

The contracts live as JSON Schemas; `plancontracts.generated` holds the typed
msgspec models derived from them, and `plancontracts.runtime` validates JSON
against them. Start with `plancontracts.runtime.decode`.
"""

__version__ = "0.1.0"
