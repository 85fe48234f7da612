"""Decoding profiles: the schema a model writes under, derived from a contract.

A contract says what is valid; a decoding profile says what a model may write
now. A small model under a grammar still writes whatever the grammar allows,
so the profile leaves it no room to wander (see the measurements behind this
in the README):

- references inlined and annotations dropped;
- every object closed; a free-form object becomes a short map of named
  scalars unless the context gives it a shape; fields marked `x-decoding: omit` in the contract
  are left out (the planner fills them, or their defaults apply);
- every string, array, map and number bounded;
- whitespace fixed, through llguidance's `x-guidance` options.

`plan_profile` narrows the `plan` contract further by the skills at hand:
each tool's `toolPath` is one script of an enabled skill, its `input` that
script's own input schema, and tool i may depend only on tools 1..i-1, so
every decoded plan is acyclic with no dangling reference. `PlanProfile.to_plan`
maps a decoded document back and validates it against the contract and the
executor's checks; a failure there is a bug in the profile, raised as such.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from plancontracts.generated.tool_plans import Plan
from plancontracts.runtime.contracts import contract_schema
from plancontracts.runtime.errors import ContractError
from plancontracts.runtime.executor import check_plan
from plancontracts.runtime.schema_text import display_pattern
from plancontracts.runtime.skills import SkillSet, bundled_skills
from plancontracts.runtime.validation import decode

__all__ = ["Bounds", "PlanProfile", "ProfileBug", "contract_profile", "plan_profile"]

WHITESPACE = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
_DROPPED = {"description", "title", "examples", "default", "$comment", "format", "discriminator"}
_DROPPED |= {"$schema", "$id", "$defs"}
_NAME = "^[A-Za-z_][A-Za-z0-9_]{0,39}$"


@dataclass(frozen=True)
class Bounds:
    """The bounds a profile puts where the contract sets none (or a looser one)."""

    string: int = 300
    "Most characters in a string."
    items: int = 4
    "Most items in an array, or entries in a map."
    integer: int = 1_000_000
    "Integers lie within plus or minus this."


class ProfileBug(AssertionError):
    """A document decoded under a profile breaks the contract: the profile is wrong."""


def contract_profile(contract: str, bounds: Bounds = Bounds()) -> dict[str, Any]:
    """The decoding schema of `contract`, derived from its bundled schema."""
    schema = contract_schema(contract)
    derived = _Deriver(schema.get("$defs", {}), bounds).derive(schema)
    return {**derived, "x-guidance": WHITESPACE}


@dataclass(frozen=True)
class PlanProfile:
    """A decoding schema for plans over some skills, and the way back to a plan."""

    schema: dict[str, Any]
    skills: SkillSet
    disabled: tuple[str, ...]

    @property
    def key(self) -> str:
        """A digest of the schema: the same key means the same compiled constraint."""
        text = json.dumps(self.schema, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def to_plan(
        self,
        decoded: dict[str, Any],
        *,
        generation: int = 1,
        parent_plan_id: str | None = None,
        request_id: str | None = None,
    ) -> Plan:
        """The plan a decoded document stands for, with the fields the model never writes.

        Raises ProfileBug when the result breaks the `plan` contract or the
        executor's checks: the profile should have made that impossible.
        """
        document = {
            "requestId": request_id or str(uuid.uuid4()),
            **decoded,
            "disabledSkills": list(self.disabled),
            "metadata": {"generationAttempt": generation, "parentPlanId": parent_plan_id},
        }
        try:
            plan: Plan = decode("plan", json.dumps(document))
        except ContractError as error:
            raise ProfileBug(f"a plan decoded under the profile is invalid: {error}") from None
        problem = check_plan(plan, skills=self.skills)
        if problem is not None:
            raise ProfileBug(f"a plan decoded under the profile was rejected: {problem.message}")
        return plan


def plan_profile(
    skills: SkillSet | None = None,
    *,
    disabled: Iterable[str] = (),
    max_tools: int = 4,
    bounds: Bounds = Bounds(),
) -> PlanProfile:
    """The decoding profile for plans over the enabled scripts of `skills`.

    `skills` defaults to the bundled skills; `disabled` names skills the plan
    may not use. At most `max_tools` tools; with no usable script, the
    profile allows narration-only plans.
    """
    skills = bundled_skills() if skills is None else skills
    off = tuple(sorted(set(disabled)))
    schema = contract_profile("plan", bounds)
    tools = schema["properties"]["tools"]
    template = tools["items"]
    scripts = [
        script
        for skill in skills.skills.values()
        if skill.name not in off
        for script in skill.scripts.values()
    ]
    positions = []
    for position in range(1, max_tools + 1):
        earlier = [f"t{n}" for n in range(1, position)]
        dependencies = (
            {"type": "array", "items": {"enum": earlier}, "maxItems": len(earlier)}
            if earlier
            else {"type": "array", "maxItems": 0}
        )
        variants = []
        for script in scripts:
            own: dict[str, Any] = {"type": "object"}
            if script.input_validator is not None and isinstance(
                script.input_validator.schema, Mapping
            ):
                own = dict(script.input_validator.schema)
            schema_of_input = _Deriver(own.get("$defs", {}), bounds).derive(own)
            properties = {
                **template["properties"],
                "toolId": {"const": f"t{position}"},
                "toolPath": {"const": script.tool_path},
                "input": schema_of_input,
                "dependencies": dependencies,
            }
            # Every field written, in the contract's order: one shape for the model to follow.
            variants.append({**template, "properties": properties, "required": list(properties)})
        positions.append({"anyOf": variants})
    if scripts:
        tools.update({"prefixItems": positions, "items": False, "maxItems": max_tools})
    else:
        tools.update({"maxItems": 0})
    return PlanProfile(schema, skills, off)


class _Deriver:
    def __init__(self, definitions: dict[str, Any], bounds: Bounds) -> None:
        self.definitions = definitions
        self.bounds = bounds

    def derive(self, node: dict[str, Any]) -> dict[str, Any]:
        if "$ref" in node:
            name = node["$ref"].removeprefix("#/$defs/")
            return self.derive({**self.definitions[name], **_without(node, "$ref")})
        out = {key: value for key, value in node.items() if key not in _DROPPED}
        out = {key: value for key, value in out.items() if not key.startswith("x-")}
        for key in ("anyOf", "oneOf"):
            if key in out:
                out["anyOf"] = [self.derive(branch) for branch in out.pop(key)]
        kind = out.get("type")
        if "const" in out or "enum" in out:
            return out
        if kind == "string":
            out["maxLength"] = min(out.get("maxLength", self.bounds.string), self.bounds.string)
            if "pattern" in out:
                # The contracts end patterns with `$(?!\n)` for Python's `re`;
                # grammar engines anchor whole strings and know no lookahead.
                out["pattern"] = display_pattern(out["pattern"])
        elif kind == "integer" or kind == "number":
            out.setdefault("minimum", -self.bounds.integer)
            out.setdefault("maximum", self.bounds.integer)
        elif kind == "array":
            out["items"] = self.derive(out.get("items", {"type": "string"}))
            out["maxItems"] = min(out.get("maxItems", self.bounds.items), self.bounds.items)
        elif kind == "object":
            out = self.object(out)
        return out

    def object(self, node: dict[str, Any]) -> dict[str, Any]:
        properties = node.get("properties")
        if properties is not None:
            kept = {
                name: self.derive(sub)
                for name, sub in properties.items()
                if sub.get("x-decoding") != "omit"
            }
            out = {**node, "properties": kept, "additionalProperties": False}
            out["required"] = [name for name in node.get("required", ()) if name in kept]
            return out
        values = node.get("additionalProperties", True)
        if values is True or values == {}:
            # Free-form: a few named scalars, so that the model cannot nest or ramble.
            out = {**node, **self.free_form()}
        else:
            out = {**node, "additionalProperties": self.derive(values)}
        if "propertyNames" in node:
            out["propertyNames"] = self.derive(node["propertyNames"])
        out["maxProperties"] = min(node.get("maxProperties", self.bounds.items), self.bounds.items)
        return out

    def free_form(self) -> dict[str, Any]:
        text = {"type": "string", "maxLength": self.bounds.string}
        number = {"minimum": -self.bounds.integer, "maximum": self.bounds.integer}
        scalars = [text, {"type": "integer", **number}, {"type": "boolean"}, {"type": "null"}]
        return {
            "type": "object",
            "propertyNames": {"type": "string", "maxLength": 40, "pattern": _NAME},
            "additionalProperties": {"anyOf": scalars},
        }


def _without(node: dict[str, Any], key: str) -> dict[str, Any]:
    return {name: value for name, value in node.items() if name != key}
