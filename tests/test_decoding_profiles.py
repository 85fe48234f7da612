"""Decoding profiles: closed and bounded everywhere, and valid by construction."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from schema_strategies import valid_documents
from tiers import examples_at_most

from plancontracts import contract_names, violations
from plancontracts.runtime.core.profiles import WHITESPACE, Bounds, contract_profile
from plancontracts.runtime.core.rules import rules_of
from plancontracts.runtime.engine.skills import SkillSet, bundled_skills
from plancontracts.runtime.tool_plans import plan_profile

SKILLS = sorted(bundled_skills().skills)


def nodes(schema: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(schema, dict):
        yield path, schema
        for key, value in schema.items():
            yield from nodes(value, f"{path}/{key}")
    elif isinstance(schema, list):
        for index, value in enumerate(schema):
            yield from nodes(value, f"{path}/{index}")


def assert_closed_and_bounded(schema: dict[str, Any], bounds: Bounds) -> None:
    Draft202012Validator.check_schema(schema)
    assert schema["x-guidance"] == WHITESPACE
    for path, node in nodes(schema):
        assert "$ref" not in node, path
        assert not any(key.startswith("x-") for key in node if key != "x-guidance"), path
        if "const" in node or "enum" in node:
            continue
        kind = node.get("type")
        if kind == "object":
            if "properties" in node:
                assert node["additionalProperties"] is False, path
            else:
                assert node["maxProperties"] <= bounds.items, path
        elif kind == "string":
            assert node["maxLength"] <= bounds.string, path
            assert "(?!" not in node.get("pattern", ""), path
        elif kind in ("integer", "number"):
            assert -bounds.integer <= node["minimum"], path
            assert "maximum" in node, path
        elif kind == "array":
            assert node["maxItems"] <= max(bounds.items, 8), path


@pytest.mark.parametrize("contract", contract_names())
def test_every_contract_profile_is_closed_and_bounded(contract: str) -> None:
    assert_closed_and_bounded(contract_profile(contract), Bounds())


# Plans and planning blocks have profiles of their own, narrowed by context
# (tests/test_thinking.py for blocks); frozen plans are written by code, never a model.
@pytest.mark.parametrize(
    "contract",
    [name for name in contract_names() if name != "plan" and rules_of(name) is None],
)
def test_what_a_contract_profile_allows_the_contract_accepts(contract: str) -> None:
    profile = contract_profile(contract)

    @settings(max_examples=examples_at_most(50), suppress_health_check=[HealthCheck.too_slow])
    @given(valid_documents(profile))
    def check(document: Any) -> None:
        assert Draft202012Validator(profile).is_valid(document)
        assert violations(contract, document) == ()

    check()


def test_the_plan_profile_leaves_out_what_the_planner_fills() -> None:
    schema = plan_profile().schema
    assert list(schema["properties"]) == ["narrative", "tools"]
    variant = schema["properties"]["tools"]["prefixItems"][2]["anyOf"][0]
    assert list(variant["properties"]) == ["toolId", "toolPath", "input", "dependencies"]
    assert variant["required"] == list(variant["properties"])
    assert variant["properties"]["toolId"] == {"const": "t3"}
    assert variant["properties"]["dependencies"]["items"] == {"enum": ["t1", "t2"]}


def test_the_plan_profile_offers_only_enabled_scripts() -> None:
    profile = plan_profile(disabled=["memory", "dice-roller"], max_tools=2)
    paths = {
        variant["properties"]["toolPath"]["const"]
        for position in profile.schema["properties"]["tools"]["prefixItems"]
        for variant in position["anyOf"]
    }
    assert paths == {
        script.tool_path
        for skill in bundled_skills().skills.values()
        if skill.name not in ("memory", "dice-roller")
        for script in skill.scripts.values()
    }
    assert_closed_and_bounded(profile.schema, Bounds())


def test_the_key_names_the_schema() -> None:
    assert plan_profile().key == plan_profile().key
    assert plan_profile().key != plan_profile(disabled=["memory"]).key
    assert plan_profile(skills=SkillSet()).schema["properties"]["tools"]["maxItems"] == 0


@given(st.sets(st.sampled_from(SKILLS)), st.integers(1, 4), st.data())
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_every_document_a_plan_profile_allows_is_an_executable_plan(
    disabled: set[str], max_tools: int, data: st.DataObject
) -> None:
    profile = plan_profile(disabled=disabled, max_tools=max_tools)
    document = data.draw(valid_documents(profile.schema))
    assert Draft202012Validator(profile.schema).is_valid(document)
    plan = profile.to_plan(json.loads(json.dumps(document)), generation=2)
    assert len(plan.tools) <= max_tools
    assert not {tool.tool_path.split("/")[1] for tool in plan.tools} & disabled
    assert plan.disabled_skills == sorted(disabled)
