"""The core every other layer builds on: contracts, strict JSON, validation, rules, texts, profiles.

It imports nothing of the project but `plancontracts.generated`.
"""
