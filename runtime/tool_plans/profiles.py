"""The decoding profile of plans: the `plan` contract narrowed by the skills at hand.

`plan_profile` narrows the contract's profile (see `runtime.core.profiles`):
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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from ...generated import PLAN
from ...generated.tool_plans import Plan, SkillChoice
from ..core.errors import ContractError, GenerationFailed, ProfileBug
from ..core.profiles import Bounds, Deriver, contract_profile
from ..core.validation import decode
from ..engine.checks import check_plan
from ..engine.skills import Script, SkillSet, bundled_skills
from .choosing import NARRATION_CAPABILITY, narration_scripts, skill_names

__all__ = ["PlanProfile", "plan_profile"]

PLAN_BOUNDS = Bounds()
"The bounds of plans: the profile defaults."
MAX_TOOLS = 4
"Most tools a model writes in one plan: three chosen skills and the narration."


@dataclass(frozen=True)
class PlanProfile:
    """A decoding schema for plans over some skills, and the way back to a plan.

    For a plan of chosen tools the model writes less than a plan: each
    tool's `input` (and its `toolPath` where the tool may call one of
    several scripts) and the narrative; `to_plan` fills in the rest.
    """

    schema: dict[str, Any]
    skills: SkillSet
    disabled: tuple[str, ...]
    chosen: tuple[tuple[Script, ...], ...] | None = None
    "The scripts each tool may call, when a choosing step chose them."
    narration: Script | None = None
    "The narration script `to_plan` calls last, when a choosing step chose the tools."

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
        choice: SkillChoice | None = None,
    ) -> Plan:
        """The plan a decoded document stands for, with the fields the model never writes.

        `choice` says how its skills were chosen (`metadata.choice`).
        Raises ProfileBug when the result breaks the `plan` contract or the
        executor's checks: the profile should have made that impossible.
        """
        from ..core.patterns import pattern_validator

        found = next(iter(pattern_validator()(self.schema).iter_errors(decoded)), None)
        if found is not None:
            where = "/" + "/".join(str(part) for part in found.absolute_path)
            raise ProfileBug(f"a document the profile refuses, at {where}: {found.message}")
        if choice is not None and self.chosen is not None:
            skills = [a[0].skill for a in self.chosen if not self._narrates(a)]
            told = [chosen.skill for chosen in choice.skills]
            if told != list(dict.fromkeys(skills)):
                raise ProfileBug(f"the choice {told} is not the profile's tools {skills}")
        written = self._calls(decoded) if self.chosen is not None else decoded
        document = {
            "requestId": request_id or str(uuid.uuid4()),
            **written,
            "disabledSkills": list(self.disabled),
            "metadata": {"generationAttempt": generation, "parentPlanId": parent_plan_id},
        }
        if choice is not None:
            document["metadata"]["choice"] = msgspec.to_builtins(choice)
        try:
            plan: Plan = decode(PLAN, json.dumps(document))
        except ContractError as error:
            raise ProfileBug(f"a plan decoded under the profile is invalid: {error}") from None
        problem = check_plan(plan, skills=self.skills)
        if problem is not None:
            raise ProfileBug(f"a plan decoded under the profile was rejected: {problem.message}")
        return plan

    def _narrates(self, alternatives: tuple[Script, ...]) -> bool:
        skill = self.skills.skills.get(alternatives[0].skill)
        return skill is not None and NARRATION_CAPABILITY in skill.manifest.capabilities

    def entry(self, position: int, written: dict[str, Any]) -> dict[str, Any]:
        """Tool `position` (from 1) of the plan, from its entry as the model wrote it.

        Under a profile of chosen tools the model writes only each tool's
        input (and its script, where a tool has several): its id is
        `t<position>`, and it runs after the one before (a narration tool,
        after all of them). Otherwise the entry is the plan's tool as it is.
        """
        if self.chosen is None:
            return written
        alternatives = self.chosen[position - 1]
        earlier = [f"t{number}" for number in range(1, position)]
        narrates = self._narrates(alternatives)
        return {
            "toolId": f"t{position}",
            "toolPath": written.get("toolPath", alternatives[0].tool_path),
            "input": written["input"],
            "dependencies": earlier if narrates else earlier[-1:],
            **({"required": False} if narrates else {}),
        }

    def _calls(self, decoded: dict[str, Any]) -> dict[str, Any]:
        """A plan's fields from what the model wrote for chosen tools: each after the last.

        `decoded` is one the profile accepts: one entry for each tool of `chosen`.
        """
        assert self.chosen is not None
        entries = decoded.get("tools", [])
        if len(entries) != len(self.chosen):
            raise ValueError(f"{len(entries)} entries for {len(self.chosen)} chosen tools")
        tools = [self.entry(position, entry) for position, entry in enumerate(entries, 1)]
        if tools and self.narration is not None:
            tools.append(
                {
                    "toolId": f"t{len(tools) + 1}",
                    "toolPath": self.narration.tool_path,
                    "input": {},
                    "dependencies": [tool["toolId"] for tool in tools],
                    "required": False,
                }
            )
        return {**decoded, "tools": tools}


def plan_profile(
    skills: SkillSet | None = None,
    *,
    disabled: Iterable[str] = (),
    chosen: Sequence[Sequence[Script]] | None = None,
    max_tools: int = MAX_TOOLS,
    bounds: Bounds = PLAN_BOUNDS,
) -> PlanProfile:
    """The decoding profile for plans over the enabled scripts of `skills`.

    `skills` defaults to the bundled skills; `disabled` names skills the plan
    may not use. Without `chosen`, tool i may call any enabled script, at
    most `max_tools` tools; with no usable script, the profile allows
    narration-only plans. With `chosen` (the scripts a choosing step picked,
    `choosing.Chosen.scripts` for each tool), tool i calls one script of
    `chosen[i]`, every one of them required, each after the one before,
    then the narration skill's script (when one is enabled) narrates them
    all; the model writes only their inputs (see `PlanProfile`), and an
    empty `chosen` allows only narration-only plans. Raises ValueError when
    `chosen` holds more tools than `max_tools` allows, or a disabled script,
    or `max_tools` is under 1; TypeError when `disabled` is one string;
    GenerationFailed when a script's input schema has no profile.
    """
    skills = bundled_skills() if skills is None else skills
    off = tuple(sorted(skill_names(disabled)))
    if max_tools < 1:
        raise ValueError(f"max_tools must be at least 1, not {max_tools}")
    schema = contract_profile(PLAN, bounds)
    if chosen is not None:
        return _chosen_profile(schema, skills, off, chosen, max_tools, bounds)
    tools = schema["properties"]["tools"]
    template = tools["items"]

    def variant(script: Script, position: int, dependencies: dict[str, Any]) -> dict[str, Any]:
        properties = {
            **template["properties"],
            "toolId": {"const": f"t{position}"},
            "toolPath": {"const": script.tool_path},
            "input": _input_profile(script, bounds),
            "dependencies": dependencies,
        }
        # Every field written, in the contract's order: one shape for the model to follow.
        return {**template, "properties": properties, "required": list(properties)}

    def earlier(position: int) -> dict[str, Any]:
        ids = [f"t{n}" for n in range(1, position)]
        if not ids:
            return {"type": "array", "maxItems": 0}
        return {"type": "array", "items": {"enum": ids}, "maxItems": len(ids)}

    scripts = [
        script
        for skill in skills.skills.values()
        if skill.name not in off
        for script in skill.scripts.values()
    ]
    if scripts:
        positions = [
            {"anyOf": [variant(script, position, earlier(position)) for script in scripts]}
            for position in range(1, max_tools + 1)
        ]
        tools.update({"prefixItems": positions, "items": False, "maxItems": max_tools})
    else:
        # No item schema: llguidance writes nothing at all under `maxItems` 0
        # beside a schema for the items it may not write.
        del tools["items"]
        tools["maxItems"] = 0
    return PlanProfile(schema, skills, off)


def _chosen_profile(
    schema: dict[str, Any],
    skills: SkillSet,
    off: tuple[str, ...],
    chosen: Sequence[Sequence[Script]],
    max_tools: int,
    bounds: Bounds,
) -> PlanProfile:
    """The profile of a plan of `chosen` tools: the model writes their inputs, code the rest.

    Each tool is written as its `input` alone, or with its `toolPath` where
    it may call one of several scripts; the narration script is called last
    by `to_plan` when it takes an empty input, and is written as a tool of
    its own otherwise.
    """
    narrators = narration_scripts(skills, off) if chosen else []
    narration = next((s for s in narrators if s.check_input({}, seconds=1.0) is None), None)
    calls = [tuple(alternatives) for alternatives in chosen]
    if narrators and narration is None:
        calls.append(tuple(narrators))
    if len(calls) + (narration is not None) > max_tools:
        raise ValueError(f"{len(chosen)} chosen tools and a narration do not fit {max_tools}")
    entries = []
    for position, alternatives in enumerate(calls, 1):
        if not alternatives or any(script.skill in off for script in alternatives):
            raise ValueError(f"tool {position} has no enabled script to call")
        variants = []
        for script in alternatives:
            own: dict[str, Any] = {"input": _input_profile(script, bounds)}
            if len(alternatives) > 1:
                own = {"toolPath": {"const": script.tool_path}, **own}
            variants.append(
                {
                    "type": "object",
                    "additionalProperties": False,
                    "required": list(own),
                    "properties": own,
                }
            )
        entries.append(variants[0] if len(variants) == 1 else {"anyOf": variants})
    tools: dict[str, Any] = {"type": "array", "maxItems": len(entries)}
    if entries:
        tools.update({"prefixItems": entries, "items": False, "minItems": len(entries)})
    schema["properties"]["tools"] = tools
    return PlanProfile(schema, skills, off, tuple(calls), narration)


def _input_profile(script: Script, bounds: Bounds) -> dict[str, Any]:
    """The decoding schema of `script`'s input: its input schema, derived within `bounds`.

    Raises GenerationFailed when the schema refers to what a profile cannot
    hold (another file, a pointer other than `#/$defs/NAME`, a definition
    that refers to itself): no model can be asked to write that input.
    """
    own: dict[str, Any] = {"type": "object"}
    if script.input_validator is not None and isinstance(script.input_validator.schema, Mapping):
        own = dict(script.input_validator.schema)
    try:
        return Deriver(own.get("$defs", {}), bounds).derive(own)
    except KeyError as error:
        why = f"its reference {error.args[0]!r} is not one of its own $defs"
    except RecursionError:
        why = "its definitions refer to themselves"
    raise GenerationFailed(f"the input schema of {script.tool_path} has no profile: {why}")
