"""The planning tools' prompt section and their definitions for function calling.

Each strategy's section is a snapshot under snapshots/test_session_prompt/,
with its length in tokens; accept a change with `--snapshot-update` once the
new text reads right.
"""

from __future__ import annotations

import argparse
import difflib
import io
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from commands import cli
from jsonschema import Draft202012Validator

from plancontracts.generated import FAMILIES
from plancontracts.pytest_plugin import PromptSnapshot
from plancontracts.runtime.core.contracts import contract_names, contract_schema
from plancontracts.runtime.core.schema_text import display_pattern
from plancontracts.runtime.session_plans import PlanningStrategy, planning_section, tool_definitions
from plancontracts.runtime.session_plans.commands import register
from plancontracts.runtime.session_plans.prompts import _kind, planning_tools

STRATEGIES = list(PlanningStrategy)
TOOL_CONTRACTS = sorted(
    name
    for name in contract_names()
    if FAMILIES[name] == "session_plans" and "x-tool" in contract_schema(name)
)


def nodes(value: Any) -> Iterator[dict[str, Any]]:
    """Every object of a schema, its examples left out."""
    if isinstance(value, dict):
        yield value
        for key, inner in value.items():
            if key != "examples":
                yield from nodes(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from nodes(inner)


def entries(section: str) -> dict[str, str]:
    """The section's list of tools: each tool's name and its entry, parameters included."""
    tools = section[section.index("\n1. `") :]
    found = re.findall(r"^\d+\. `([a-z_]+)`: (.*?)(?=^\d+\. |\Z)", tools, re.M | re.S)
    return dict(found)


# The section ------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES, ids=[s.value for s in STRATEGIES])
def test_the_section(strategy: PlanningStrategy, prompt_snapshot: PromptSnapshot) -> None:
    assert planning_section(strategy) == prompt_snapshot


def test_the_default_strategy_is_react() -> None:
    assert planning_section() == planning_section(PlanningStrategy.REACT)


@pytest.mark.parametrize("strategy", STRATEGIES, ids=[s.value for s in STRATEGIES])
def test_every_byte_is_printable_ascii(strategy: PlanningStrategy) -> None:
    text = planning_section(strategy).encode("utf-8")
    assert [byte for byte in text if byte != 0x0A and not 0x20 <= byte < 0x7F] == []


@pytest.mark.parametrize("strategy", STRATEGIES[1:], ids=[s.value for s in STRATEGIES[1:]])
def test_strategies_differ_in_the_mindset_alone(strategy: PlanningStrategy) -> None:
    react = planning_section(PlanningStrategy.REACT).splitlines()
    other = planning_section(strategy).splitlines()
    changes = [
        change
        for change in difflib.SequenceMatcher(None, react, other, autojunk=False).get_opcodes()
        if change[0] != "equal"
    ]
    assert len(changes) == 1, changes
    _, start, end, other_start, other_end = changes[0]
    # The one change is the mindset paragraph: after the heading and intro, before the usage list.
    usage = react.index("Use the tools this way:")
    assert 2 < start < end < usage
    assert react[start - 1] == other[other_start - 1] == ""
    assert react[end] == other[other_end] == ""


@pytest.mark.parametrize("strategy", STRATEGIES, ids=[s.value for s in STRATEGIES])
def test_one_heading_then_the_usage_list_and_the_tools_list(strategy: PlanningStrategy) -> None:
    section = planning_section(strategy)
    lines = section.splitlines()
    assert [line for line in lines if line.startswith("#")] == [lines[0]]
    assert lines[0].startswith("## ")
    numbered = [int(line.split(".")[0]) for line in lines if re.match(r"\d+\. ", line)]
    assert numbered == [*range(1, 8), *range(1, len(TOOL_CONTRACTS) + 1)]
    usage = section[: section.index("\n1. `")]
    for tool in planning_tools():
        assert f"`{tool.name}`" in usage, tool.name


def test_each_tool_is_listed_with_every_parameter_and_limit_of_its_schema() -> None:
    listed = entries(planning_section())
    assert sorted(listed) == sorted(contract_schema(c)["x-tool"] for c in TOOL_CONTRACTS)
    for contract in TOOL_CONTRACTS:
        schema = contract_schema(contract)
        entry = listed[schema["x-tool"]]
        for node in nodes(schema):
            for name in node.get("properties", {}):
                assert f"`{name}` (" in entry, (contract, name)
            for keyword in ("minLength", "maxLength", "minItems", "maxItems"):
                if keyword in node:
                    assert str(node[keyword]) in entry, (contract, keyword)
            for value in node.get("enum", ()):
                assert f"`{value}`" in entry, (contract, value)
            if "pattern" in node:
                assert f"`{display_pattern(node['pattern'])}`" in entry, (contract, node)
        if "minProperties" in schema:
            optional = schema["minProperties"] - len(schema.get("required", ()))
            assert f"at least {optional} of the optional parameters" in entry
        if not schema["properties"]:
            assert "- No parameters." in entry


def test_the_tools_are_described_by_their_schemas() -> None:
    listed = entries(planning_section())
    for tool in planning_tools():
        assert tool.description[0].isupper()
        assert tool.description.rstrip(".")[1:] in contract_schema(tool.parameters)["description"]
        assert listed[tool.name].startswith(tool.description)


def test_step_ids_in_the_section_are_step_ids_of_the_schema() -> None:
    pattern = contract_schema("session-plan")["$defs"]["step-id"]["pattern"]
    ids = re.findall(r"\bS\d+\b", planning_section())
    assert ids
    assert [step_id for step_id in ids if not re.fullmatch(pattern, step_id)] == []


def test_a_type_the_section_cannot_word_is_refused_not_left_without_its_limits() -> None:
    with pytest.raises(ValueError, match="no wording for values of type 'integer'"):
        _kind({"type": "integer", "maximum": 3}, {})


# Tool definitions -------------------------------------------------------------------------


def test_each_tool_definition_is_an_openai_function_named_by_its_schema() -> None:
    definitions = tool_definitions()
    assert [d["function"]["name"] for d in definitions] == [t.name for t in planning_tools()]
    assert sorted(d["function"]["name"] for d in definitions) == sorted(
        contract_schema(c)["x-tool"] for c in TOOL_CONTRACTS
    )
    for definition, tool in zip(definitions, planning_tools(), strict=True):
        assert set(definition) == {"type", "function"}
        assert definition["type"] == "function"
        assert set(definition["function"]) == {"name", "description", "parameters"}
        # What OpenAI's API accepts as a function name.
        assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", tool.name)
        assert definition["function"]["description"] == tool.description
        assert definition["function"]["parameters"] == contract_schema(tool.parameters)
    json.dumps(definitions)  # plain JSON throughout


@pytest.mark.parametrize("contract", TOOL_CONTRACTS)
def test_a_definitions_parameters_stand_alone_and_accept_the_contracts_examples(
    contract: str,
) -> None:
    tool = contract_schema(contract)["x-tool"]
    [definition] = [d for d in tool_definitions() if d["function"]["name"] == tool]
    parameters = definition["function"]["parameters"]
    Draft202012Validator.check_schema(parameters)
    # No registry: a reference that left the document would fail to resolve.
    validator = Draft202012Validator(parameters)
    examples = contract_schema(contract)["examples"]
    assert examples
    for example in examples:
        assert list(validator.iter_errors(example)) == []
    assert not validator.is_valid({**examples[0], "unknown": 1})


def test_tool_definitions_are_fresh_copies() -> None:
    first = tool_definitions()
    first[0]["function"]["parameters"]["properties"].clear()
    assert tool_definitions()[0]["function"]["parameters"]["properties"]


# The commands, through the family's register ------------------------------------------------


def run_session(*arguments: str) -> str:
    """What `session ARGUMENTS` writes, with the family's commands on a parser of their own."""
    parser = argparse.ArgumentParser(prog="plancontracts")
    register(parser.add_subparsers(required=True))
    args = parser.parse_args(["session", *arguments])
    out = io.StringIO()
    assert args.run(args, out) == 0
    return out.getvalue()


def test_section_prints_the_section_of_the_strategy_asked_for() -> None:
    assert run_session("section") == planning_section(PlanningStrategy.REACT)
    for strategy in STRATEGIES:
        assert run_session("section", "--strategy", strategy.value) == planning_section(strategy)


# The commands as a user runs them ---------------------------------------------------------


def test_plancontracts_session_section() -> None:
    done = cli("session", "section", "--strategy", "plan-act-reflect")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == planning_section(PlanningStrategy.PLAN_ACT_REFLECT)


def test_plancontracts_session_section_refuses_an_unknown_strategy() -> None:
    done = cli("session", "section", "--strategy", "nope")
    assert done.returncode == 2
    assert done.stdout == ""
    assert "argument --strategy: invalid choice: 'nope'" in done.stderr


def test_plancontracts_session_tools() -> None:
    done = cli("session", "tools")
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout) == tool_definitions()
