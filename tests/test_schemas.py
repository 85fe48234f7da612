"""The schemas themselves: well-formed, documented, closed, and right about real upstream JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from plancontracts import ContractError, contract_names, decode
from plancontracts.runtime.core.schema_tree import SchemaTree, walk

SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"
TREE = SchemaTree(SCHEMAS)
FILES = sorted(TREE.paths.values())


def document(relative: Path) -> dict[str, Any]:
    return dict(json.loads((SCHEMAS / relative).read_text(encoding="utf-8")))


def test_every_contract_of_the_five_families_is_known() -> None:
    assert set(TREE.families()) == {
        "tool-plans",
        "planning-blocks",
        "session-plans",
        "story-packages",
        "goal-plans",
    }
    assert {"plan", "execution-result", "tool-event", "skill-manifest"} <= set(contract_names())
    assert {"planning-block", "session-plan", "story-package", "goal-plan"} <= set(contract_names())
    assert set(contract_names()) == set(TREE.contracts)


@pytest.mark.parametrize("relative", FILES, ids=str)
def test_schema_file_is_valid_draft_2020_12_with_an_id(relative: Path) -> None:
    schema = document(relative)
    Draft202012Validator.check_schema(schema)
    assert schema["$id"].endswith("/" + relative.as_posix())


@pytest.mark.parametrize("relative", FILES, ids=str)
def test_every_property_and_definition_has_a_description(relative: Path) -> None:
    schema = document(relative)
    missing = [
        pointer
        for pointer, node in walk(schema)
        if (is_property(pointer) or is_definition(pointer)) and not node.get("description")
    ]
    assert not missing, f"no description at {missing}"


def is_property(pointer: str) -> bool:
    tokens = pointer.split("/")
    return len(tokens) >= 3 and tokens[-2] == "properties"


def is_definition(pointer: str) -> bool:
    tokens = pointer.split("/")
    return len(tokens) == 3 and tokens[1] == "$defs"


@pytest.mark.parametrize("relative", FILES, ids=str)
def test_objects_with_named_properties_are_closed(relative: Path) -> None:
    open_objects = [
        pointer
        for pointer, node in walk(document(relative))
        if "properties" in node and node.get("additionalProperties") is not False
    ]
    assert not open_objects


@pytest.mark.parametrize("relative", FILES, ids=str)
def test_patterns_anchor_the_true_end_of_text(relative: Path) -> None:
    # In Python regular expressions a bare `$` also matches before a final newline.
    loose = [
        (pointer, node["pattern"])
        for pointer, node in walk(document(relative))
        if "pattern" in node and not node["pattern"].endswith("$(?!\\n)")
    ]
    assert not loose


@pytest.mark.parametrize("name", contract_names())
def test_every_contract_has_a_valid_example(name: str) -> None:
    examples = TREE.contracts[name].schema.get("examples", [])
    assert examples, f"{name} has no example document"
    for example in examples:
        decode(name, json.dumps(example))


def test_a_misspelled_field_is_an_error_not_ignored() -> None:
    plan = TREE.contracts["plan"].schema["examples"][0]
    plan["tools"][1]["dependancies"] = plan["tools"][1].pop("dependencies", [])
    with pytest.raises(ContractError) as raised:
        decode("plan", json.dumps(plan))
    [violation] = raised.value.violations
    assert violation.pointer == "/tools/1/dependancies"
    assert 'did you mean "dependencies"' in violation.message


# Upstream documents: real JSON nobody here wrote ---------------------------------


def upstream_files(upstream: Path, pattern: str) -> list[Path]:
    found = sorted(upstream.glob(pattern))
    assert found, f"no upstream fixtures match {pattern}"
    return found


def test_upstream_narratoria_plans_validate_as_they_are(upstream: Path) -> None:
    for path in upstream_files(upstream, "narratoria/example-plan*.json"):
        plan = decode("plan", path.read_bytes())
        assert plan.tools, path.name


def test_upstream_story_package_validates_as_it_is(upstream: Path) -> None:
    package = decode("story-package", (upstream / "vn/synthetic_full_package.json").read_bytes())
    assert package.plot.acts[0].sandbox_locations


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # The legacy scene-based shape: a top-level `setting`, acts made of `scenes`.
        ("legacy_fixture_tests_vnLanguage_spec.json", "/plot/acts/0/scenes"),
        ("legacy_fixture_tests_vnPackage_spec.json", "/setting"),
        # The legacy node-based shape: `plot.nodes` instead of acts.
        ("legacy_mock_src_lib_mockVNData_MOCK_PACK.json", "/plot/nodes"),
    ],
)
def test_upstream_legacy_story_fixtures_are_rejected(
    upstream: Path, name: str, expected: str
) -> None:
    with pytest.raises(ContractError) as raised:
        decode("story-package", (upstream / "vn" / name).read_bytes())
    pointers = [violation.pointer for violation in raised.value.violations]
    assert expected in pointers


def test_upstream_valid_planning_blocks_validate(upstream: Path) -> None:
    for path in upstream_files(upstream, "worldarchitect/valid_*.json"):
        decode("planning-block", path.read_bytes())


def test_upstream_goal_plans_validate_once_they_say_their_horizon(upstream: Path) -> None:
    # The upstream kept a goal's horizon out of its plans; the contract stores it.
    plans = json.loads((upstream / "jenbina/planning_system_to_dict.json").read_text())["plans"]
    failed = json.loads((upstream / "jenbina/max_replans_failed_plan.json").read_text())["plan"]
    for plan in [*plans, failed]:
        with pytest.raises(ContractError) as raised:
            decode("goal-plan", json.dumps(plan))
        assert [(v.pointer, v.keyword) for v in raised.value.violations] == [("", "required")]
        assert "horizon" in raised.value.violations[0].message
        decode("goal-plan", json.dumps({**plan, "horizon": "short"}))


def test_upstream_model_output_outside_the_bounds_is_rejected(upstream: Path) -> None:
    # The upstream planner clamped a step estimate of 100 cycles to 5 after the
    # fact; under the contract the model can never write it.
    fixtures = json.loads((upstream / "jenbina/test_fixture_llm_responses.json").read_text())
    clamped = next(
        f for f in fixtures["fixtures"] if f["test"] == "test_create_plan_clamps_estimated_cycles"
    )
    with pytest.raises(ContractError) as raised:
        decode("goal-plan-output", json.dumps(clamped["llm_response"]))
    assert "/steps/0/estimated_cycles" in [v.pointer for v in raised.value.violations]
