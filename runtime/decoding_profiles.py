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

`block_profile` does the same for planning blocks, in a shape of its own (see
`BlockProfile`) that makes the protocol's rules hold by construction: the
parallel option comes last, after two or three situational choices; the
recommended choice is one of them; every text is free of markup; what code
decides (the roll of the planning check, the coordination DC, the keys) is
never written by the model.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from plancontracts.generated.planning_blocks import PlanningBlock
from plancontracts.generated.tool_plans import Plan
from plancontracts.runtime.contracts import contract_schema
from plancontracts.runtime.errors import ContractError
from plancontracts.runtime.executor import check_plan
from plancontracts.runtime.planning_blocks import PLANNING_BLOCK, normalize_block
from plancontracts.runtime.planning_mechanics import (
    ABILITIES,
    MAX_DC,
    MIN_DC,
    Mode,
    RolledCheck,
    coordination_dc,
    is_parallel,
    snake_case,
)
from plancontracts.runtime.schema_text import display_pattern
from plancontracts.runtime.skills import SkillSet, bundled_skills
from plancontracts.runtime.validation import decode

__all__ = [
    "BlockProfile",
    "Bounds",
    "PlanProfile",
    "ProfileBug",
    "block_profile",
    "choice_keys",
    "contract_profile",
    "plan_profile",
]

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


# Planning blocks -------------------------------------------------------------------

BLOCK_BOUNDS = Bounds(string=120, items=2, integer=40)
"Short texts and two items a list: a small model writes a whole block in seconds."
PLAIN_TEXT = r"^[^<\s\x00-\x1f\x7f-\x9f][^<\x00-\x1f\x7f-\x9f]*$"
"No markup begins without `<`: a text without one and without control characters is plain."
PLANNING_DCS = (2, 25)
"The planning DCs a model may set: 2 to 20 in ordinary play, a little more for epic scope."
PARALLEL_KEY = "parallel_execution"


@dataclass(frozen=True)
class BlockProfile:
    """The decoding schemas of a planning block in one mode, and the way back to a block.

    The model writes `schema`: the block's texts, the recommended choice, one
    or two alternatives, and the parallel option, in that order. In Think
    mode it first writes `check_schema`: the ability, DC and reasons of the
    planning check, which code then rolls; `plan_quality` is filled from the
    roll. Keys come from each choice's text, `recommended_approach` names the
    first choice, and the coordination DC follows from the parallel option's
    base DC, the number of situational choices and their complexity.
    """

    mode: Mode
    schema: dict[str, Any]
    check_schema: dict[str, Any] | None
    "Think mode only: what the model decides before the roll."

    def to_block(
        self,
        decoded: dict[str, Any],
        *,
        decided: dict[str, Any] | None = None,
        check: RolledCheck | None = None,
    ) -> PlanningBlock:
        """The planning block a decoded document stands for (with, in Think mode, its check).

        `decided` is the document written under `check_schema`, `check` the
        roll made from it. Raises ProfileBug when the block breaks the
        contract in this mode or would need a repair: the profile should have
        made both impossible. Raises ValueError when Think mode lacks its check.
        """
        situational = [decoded["recommended"], *decoded["alternatives"]]
        keys = choice_keys([choice["text"] for choice in situational])
        choices: dict[str, Any] = dict(zip(keys, situational, strict=True))
        analysis = dict(decoded["parallel"]["analysis"])
        analysis["coordination_dc"] = coordination_dc(
            analysis["base_dc"], len(keys), analysis["complexity"]
        )
        choices[PARALLEL_KEY] = {**decoded["parallel"], "analysis": analysis}
        block = {
            **_without(decoded, "recommended", "alternatives", "parallel"),
            "choices": choices,
            "analysis": {"recommended_approach": keys[0], **decoded["analysis"]},
        }
        if self.mode == "think":
            if decided is None or check is None:
                raise ValueError("a Think-mode block needs its decided and rolled planning check")
            block["plan_quality"] = {
                **decided,
                **decoded["plan_quality"],
                "stat_value": check.stat_value,
                "modifier": check.modifier,
                "roll_result": check.roll_result,
                "success": check.outcome.success,
                "margin": check.outcome.margin,
                "quality_tier": check.outcome.quality_tier,
            }
        judged = normalize_block(block, self.mode)
        if judged.repairs:
            raise ProfileBug(f"a block decoded under the profile needed repairs: {judged.repairs}")
        if judged.violations:
            listed = "; ".join(map(str, judged.violations))
            raise ProfileBug(f"a block decoded under the profile is invalid: {listed}")
        typed: PlanningBlock = msgspec.convert(block, PlanningBlock)  # judged just above
        return typed


def block_profile(
    mode: Mode,
    *,
    abilities: Iterable[str] = ABILITIES,
    max_situational: int = 3,
    bounds: Bounds = BLOCK_BOUNDS,
) -> BlockProfile:
    """The decoding profile of planning blocks in `mode`, derived from the contract.

    `abilities` are the ones the planning check may use (Think mode);
    `max_situational` (2 or more) bounds the situational choices.
    """
    if max_situational < 2:
        raise ValueError("a block with a parallel option has 2 or more situational choices")
    contract = contract_schema(PLANNING_BLOCK)
    definitions = contract["$defs"]
    deriver = _Deriver(definitions, bounds, text_pattern=PLAIN_TEXT)
    choice = deriver.derive(definitions["Choice"])
    situational = _every_field_written(
        {**choice, "properties": _without(choice["properties"], "analysis")}
    )
    # The parallel option's base DC leaves room for every coordination addition.
    most = coordination_dc(0, max_situational, "complex")
    base_dc = {"type": "integer", "minimum": MIN_DC, "maximum": MAX_DC - most}
    analysis = deriver.derive(definitions["ParallelAnalysis"])
    analysis["properties"]["base_dc"] = base_dc
    parallel = _every_field_written(
        {
            **choice,
            "properties": {**choice["properties"], "analysis": _every_field_written(analysis)},
        }
    )
    recommendation = deriver.derive(definitions["Analysis"])
    properties: dict[str, Any] = {}
    check_schema = None
    if mode == "think":
        quality = definitions["PlanQuality"]["properties"]
        derived = deriver.derive(definitions["PlanQuality"])["properties"]
        before = {
            name: derived[name] for name, field in quality.items() if "x-decoding" not in field
        }
        before["stat_used"] = {"enum": list(abilities)}
        before["dc"] = {"type": "integer", "minimum": PLANNING_DCS[0], "maximum": PLANNING_DCS[1]}
        check_schema = _closed(before)
        after = {
            name: derived[name]
            for name, field in quality.items()
            if field.get("x-decoding") == "after-roll"
        }
        properties["plan_quality"] = _closed(after)
    root = contract["properties"]
    properties["thinking"] = deriver.derive(root["thinking"])
    properties["context"] = deriver.derive(root["context"])
    if mode == "think":
        assessment = _every_field_written(deriver.derive(root["situation_assessment"]))
        properties["situation_assessment"] = assessment
    properties["recommended"] = situational
    properties["alternatives"] = {
        "type": "array",
        "items": situational,
        "minItems": 1,
        "maxItems": max_situational - 1,
    }
    properties["parallel"] = parallel
    properties["analysis"] = _closed(_without(recommendation["properties"], "recommended_approach"))
    if check_schema is not None:
        check_schema["x-guidance"] = WHITESPACE
    return BlockProfile(mode, {**_closed(properties), "x-guidance": WHITESPACE}, check_schema)


def choice_keys(texts: Iterable[str]) -> list[str]:
    """Choice keys made from choice labels, one each, distinct and never the parallel option's.

    `"Bribe the guard"` gives `bribe_the_guard`. A label without Latin
    letters gives `choice_<n>`; a key that would start with a digit or with
    `parallel` gets `choice_` or `option_` in front; a repeated key gets `_2`,
    `_3`, ...
    """
    keys: list[str] = []
    for number, text in enumerate(texts, 1):
        key = snake_case(text, max_length=40) or f"choice_{number}"
        if not key[0].isalpha():
            key = f"choice_{key}"
        if is_parallel(key):
            key = f"option_{key}"
        unique, count = key, 1
        while unique in keys:
            count += 1
            unique = f"{key}_{count}"
        keys.append(unique)
    return keys


def _closed(properties: dict[str, Any]) -> dict[str, Any]:
    return _every_field_written({"type": "object", "properties": properties})


def _every_field_written(node: dict[str, Any]) -> dict[str, Any]:
    """`node` closed, with every field required and every list holding at least one item.

    One shape, always written in full, is the easiest for a small model to follow.
    """
    properties = {
        name: {**field, "minItems": 1} if field.get("type") == "array" else field
        for name, field in node["properties"].items()
    }
    return {
        **node,
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


class _Deriver:
    def __init__(
        self, definitions: dict[str, Any], bounds: Bounds, text_pattern: str | None = None
    ) -> None:
        self.definitions = definitions
        self.bounds = bounds
        self.text_pattern = text_pattern
        "A pattern for every string the contract leaves free."

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
            if self.text_pattern and "pattern" not in out:
                out["pattern"] = self.text_pattern
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


def _without(node: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {name: value for name, value in node.items() if name not in keys}
