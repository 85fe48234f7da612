"""The planning tools' prompt section, their definitions for function calling, a drive's prompt.

The section is one Markdown section (`templates/section.md` beside this
module): a heading, a short intro, the strategy's mindset
(`templates/mindset-<strategy>.md`), an ordered list saying how to use the
tools, and an ordered list of the tools (`tools.TOOLS`) with their
parameters. The templates refer to a tool by its parameter contract (`$session_setup_plan` for
`session-setup-plan`); its name, description, parameters and their limits
are read from the contract's bundled schema, so none is typed here. The tools
are listed, and defined for function calling, in the order the usage list
first names them. A drive's model reads the section for its strategy, the
objective, its last calls and the plan (`drive_messages`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from enum import StrEnum
from functools import cache
from typing import Any

from ...generated.session_plans import SessionPlan
from ..core.contracts import contract_schema
from ..core.schema_text import between, display_pattern
from ..core.sessions import ToolCall
from ..core.templates import template, template_text
from ..core.tools import Tool
from ..model.chat import Message
from .tools import TOOLS

__all__ = [
    "RECENT_CALLS",
    "PlanningStrategy",
    "drive_messages",
    "planning_section",
    "planning_tools",
    "tool_definitions",
]


class PlanningStrategy(StrEnum):
    """The mindset the section nudges a model toward; only that part of the section differs."""

    REACT = "react"
    "Reason briefly, act, observe the result, repeat. The default."
    PLAN_ACT_REFLECT = "plan-act-reflect"
    "Outline the whole plan, carry it out, reflect after each call or step."
    GOAL_DECOMPOSE_ROUTE_SYNTHESISE = "goal-decompose-route-synthesise"
    "Restate the goal, split it into sub-problems, route each to a tool, synthesise the results."


@cache
def planning_tools() -> tuple[Tool, ...]:
    """Every planning tool, in the order the section's usage list first names them.

    Raises ValueError when the usage list names no tool of a contract that
    has one: the template and the schemas are out of step.
    """
    usage = template_text(__package__, "section.md")
    return tuple(sorted(TOOLS, key=lambda tool: usage.index(f"${_placeholder(tool)}")))


@cache
def planning_section(strategy: PlanningStrategy = PlanningStrategy.REACT) -> str:
    """The planning tools' section of a prompt, in Markdown, for `strategy`.

    Every strategy gives the same text but for the mindset paragraph. Raises
    ValueError, or KeyError for a placeholder that names no tool, when the
    templates and the schemas are out of step.
    """
    names = {_placeholder(tool): f"`{tool.name}`" for tool in planning_tools()}
    mindset = template(__package__, f"mindset-{strategy.value}.md").substitute(names).strip()
    tools = "\n".join(_entry(number, tool) for number, tool in enumerate(planning_tools(), 1))
    section = template(__package__, "section.md").substitute(names, mindset=mindset, tools=tools)
    return section.strip() + "\n"


def tool_definitions() -> list[dict[str, Any]]:
    """The planning tools for function calling, as OpenAI-compatible servers take them.

    Each is `{"type": "function", "function": {"name", "description",
    "parameters"}}`, where `parameters` is the contract's whole schema, self-
    contained (its references point into its own `$defs`). A fresh copy on
    every call.
    """
    return [tool.definition() for tool in planning_tools()]


def _placeholder(tool: Tool) -> str:
    """How the templates name `tool`: by its parameter contract, `session_setup_plan`."""
    return tool.parameters.name.replace("-", "_")


def _entry(number: int, tool: Tool) -> str:
    """One tool of the section's list: its name and description, then its parameters."""
    schema = contract_schema(tool.parameters)
    indent = " " * len(f"{number}. ")
    lines = _fields(schema, schema.get("$defs", {}), indent) or [f"{indent}- No parameters."]
    return "\n".join([f"{number}. `{tool.name}`: {tool.description}", *lines])


def _fields(schema: dict[str, Any], definitions: dict[str, Any], indent: str) -> list[str]:
    """An object's fields as a Markdown list at `indent`, the fields of objects they hold nested."""
    required = schema.get("required", [])
    lines = []
    for name, field in schema.get("properties", {}).items():
        field = _resolved(field, definitions)
        flags = "required" if name in required else "optional"
        if "default" in field:
            flags += f", default `{json.dumps(field['default'])}`"
        line = f"{indent}- `{name}` ({flags}): {_kind(field, definitions)}."
        description = field.get("description", "").strip()
        lines.append(f"{line} {description}".rstrip())
        inner = _resolved(field.get("items", {}), definitions) if "items" in field else field
        if "properties" in inner:
            lines += _fields(inner, definitions, indent + "  ")
    return lines


def _resolved(schema: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    """`schema` with its reference followed: the definition, under the field's own keywords."""
    while "$ref" in schema:
        target = definitions[schema["$ref"].removeprefix("#/$defs/")]
        schema = {**target, **{key: value for key, value in schema.items() if key != "$ref"}}
    return schema


def _kind(schema: dict[str, Any], definitions: dict[str, Any]) -> str:
    """What a value must be, with every limit the schema sets on it.

    Raises ValueError for a type the section has no wording for.
    """
    if "anyOf" in schema:
        return " or ".join(_kind(_resolved(s, definitions), definitions) for s in schema["anyOf"])
    if "enum" in schema:
        return "one of " + ", ".join(f"`{value}`" for value in schema["enum"])
    kind = schema.get("type")
    if kind == "string":
        size = between(schema.get("minLength"), schema.get("maxLength"), "characters")
        pattern = schema.get("pattern")
        return (
            "a string"
            + (f" of {size}" if size else "")
            + (f" matching `{display_pattern(pattern)}`" if pattern else "")
        )
    if kind == "array":
        size = between(schema.get("minItems"), schema.get("maxItems"), "items")
        items = _resolved(schema.get("items", {}), definitions)
        if "properties" in items:
            return f"a list of {size or 'items'}, each an object with the fields below"
        return f"a list of {size or 'items'}, each {_kind(items, definitions)}"
    if kind == "object":
        return "an object with the fields below" if "properties" in schema else "an object"
    if kind == "null":
        return "null"
    # Wording a type without its limits would hide them from the model: a new kind
    # of value in the schemas needs its wording here first.
    raise ValueError(f"no wording for values of type {kind!r} in the planning section")


RECENT_CALLS = 6
"How many of its last calls, with their results, the model reads: the prompt stays bounded."


def drive_messages(
    objective: str,
    calls: Iterable[ToolCall[SessionPlan | None]],
    plan: SessionPlan | None,
    strategy: PlanningStrategy = PlanningStrategy.REACT,
) -> list[Message]:
    """What the model reads before its next call: chat messages.

    The system message is the planning section for `strategy`; the user
    message gives `objective` and asks for one call. Then come the last
    `RECENT_CALLS` of `calls`, each the model's call (as its JSON) and the
    result it read back, and last the plan as it stands.
    """
    messages: list[Message] = [
        {"role": "system", "content": planning_section(strategy).strip()},
        {
            "role": "user",
            "content": template(__package__, "drive.md").substitute(objective=objective).strip(),
        },
    ]
    for call in list(calls)[-RECENT_CALLS:]:
        written = json.dumps({"tool": call.tool, "arguments": call.arguments})
        messages.append({"role": "assistant", "content": written})
        outcome = "ok" if call.result.ok else "refused"
        messages.append({"role": "user", "content": f"Result ({outcome}): {call.result.message}"})
    messages[-1] = {**messages[-1], "content": f"{messages[-1]['content']}\n\n{_shown(plan)}"}
    return messages


def _shown(plan: SessionPlan | None) -> str:
    """The plan in a few lines: its status and objective, each step's id, status and title."""
    if plan is None:
        return "There is no plan yet."
    lines = [f"The plan ({plan.status}): {plan.objective}"]
    lines += [f"- {step.step_id} ({step.status}): {step.title}" for step in plan.steps]
    if not plan.steps:
        lines.append("- no steps")
    return "\n".join(lines)


def _asked(objective: str) -> str:
    return template(__package__, "drive.md").substitute(objective=objective).strip()
