"""The text of every contract's schema as a model will read it, under review as snapshots.

A schema change shows up as a diff of snapshots/test_schema_text/*.md; accept
it with `pytest --snapshot-update` once the new text reads right.
"""

from __future__ import annotations

import pytest

from plancontracts import contract_names, contract_schema, schema_text
from plancontracts.pytest_plugin import PromptSnapshot


@pytest.mark.parametrize("contract", contract_names())
def test_schema_text(contract: str, prompt_snapshot: PromptSnapshot) -> None:
    assert schema_text(contract) == prompt_snapshot.with_tokenizer(None)


@pytest.mark.parametrize("contract", contract_names())
def test_schema_text_names_every_field_and_its_description(contract: str) -> None:
    text = schema_text(contract)
    schema = contract_schema(contract)
    for definition in [schema, *schema.get("$defs", {}).values()]:
        for name, field in definition.get("properties", {}).items():
            assert f"- `{name}` (" in text
            assert field["description"] in text


def test_schema_text_keeps_key_rules_required_markers_and_bounds() -> None:
    # The upstream prompt showed the model `"choices": {}` and nothing else.
    text = schema_text("planning-block")
    assert "- `choices` (required): an object mapping keys that are a string" in text
    assert "matching `^(god:|think:)?[a-z][a-z0-9]*(_[a-z0-9]+)*$`" in text
    assert "at most 12 entries" in text
    assert '- `risk_level` (optional): one of `"safe"`, `"low"`, `"medium"`, `"high"`' in text
