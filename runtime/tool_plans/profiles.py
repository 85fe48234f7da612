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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ...generated import PLAN
from ...generated.tool_plans import Plan
from ..core.errors import ContractError, ProfileBug
from ..core.profiles import Bounds, Deriver, contract_profile
from ..core.validation import decode
from ..engine.checks import check_plan
from ..engine.skills import SkillSet, bundled_skills

__all__ = ["PlanProfile", "plan_profile"]

PLAN_BOUNDS = Bounds()
"The bounds of plans: the profile defaults."


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
            plan: Plan = decode(PLAN, json.dumps(document))
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
    bounds: Bounds = PLAN_BOUNDS,
) -> PlanProfile:
    """The decoding profile for plans over the enabled scripts of `skills`.

    `skills` defaults to the bundled skills; `disabled` names skills the plan
    may not use. At most `max_tools` tools; with no usable script, the
    profile allows narration-only plans.
    """
    skills = bundled_skills() if skills is None else skills
    off = tuple(sorted(set(disabled)))
    schema = contract_profile(PLAN, bounds)
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
            schema_of_input = Deriver(own.get("$defs", {}), bounds).derive(own)
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
