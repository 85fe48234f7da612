"""What each call of a build writes: the pipeline's steps and their decoding profiles.

A step is one call of the pipeline (or a repair) and the tools it may call;
each tool comes with the profile of what the model writes, derived from the
tool's input contract within `BUILD_BOUNDS` and narrowed by the draft, and
with what the code fills in (`Choice.fill`). `steps` yields the pipeline's
steps in order, each made from the draft as it stands when its turn comes;
`repair_step` is the call after a refused package. The agent module says
why each narrowing holds the package together.

A drive (`story drive`, the model as co-author) writes each call under
`drive_profile`: one branch per tool the draft's state leaves open
(`drive_tools`), each tool's whole input contract within `DRIVE_BOUNDS`.
Its ids and references are the model's to choose, and the pipeline's refusals
of wrong ones go back to it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache, partial
from typing import Any

import msgspec

from ...generated import (
    STORY_ACT_OUTLINE,
    STORY_CHARACTER,
    STORY_FINALIZE_NODE,
    STORY_FINALIZE_PACKAGE,
    STORY_NODE_ENCOUNTERS,
    STORY_NODE_WEB,
    STORY_PREMISE,
    STORY_UPDATE_ELEMENT,
    Contract,
)
from ...generated.story_packages import Act, Plot, Progression, StoryDraft, StoryNodeEncounters
from ..core.contracts import contract_schema, field_bound
from ..core.profiles import WHITESPACE, Bounds, Deriver
from ..core.tools import Tool
from .tools import TOOLS

__all__ = [
    "ACTS",
    "BUILD_BOUNDS",
    "DRIVE_BOUNDS",
    "ENCOUNTERS",
    "LOCATIONS",
    "MAX_PROGRESSION",
    "NEEDED",
    "Choice",
    "Shape",
    "Step",
    "drive_profile",
    "drive_tools",
    "flags_set",
    "pipeline_length",
    "repair_step",
    "steps",
]

BUILD_BOUNDS = Bounds(string=32, items=2, integer=100)
"A few words a text and at most two items a list: a small model writes a call in seconds."


def _sizes(struct: type[msgspec.Struct], name: str) -> range:
    """The sizes the schema allows the array field `name` (its Python name) of `struct`."""
    return range(
        field_bound(struct, name, "min_length"), field_bound(struct, name, "max_length") + 1
    )


ACTS = _sizes(Plot, "acts")
"How many acts a package has: the story-package schema's `plot.acts`."

LOCATIONS = _sizes(Act, "sandbox_locations")
"How many locations an act has: the story-package schema's `sandboxLocations`."

ENCOUNTERS = _sizes(StoryNodeEncounters, "encounters")
"How many encounters a location's pool has: the story-node-encounters schema's `encounters`."

MAX_PROGRESSION = 3
"The most progression one encounter gives."

_REQUIRED = field_bound(Progression, "required_value", "le")
"The most progress an act may require."


@dataclass(frozen=True)
class Shape:
    """How big a build's package is: its acts, each act's locations, each location's encounters.

    The defaults are the smallest story of more than one location; the
    schemas bound each size (`ACTS`, `LOCATIONS`, `ENCOUNTERS`).
    """

    acts: int = 1
    locations: int = 2
    encounters: int = 2

    def checked(self) -> Shape:
        """This shape, when a package can have it. Raises ValueError, in one line, saying why not.

        Beyond the schemas' bounds, an act needs two encounters or more in
        all: its required progress is reached without any one of them.
        """
        for size, sizes, what in (
            (self.acts, ACTS, "a package has {} acts (story-package's plot.acts)"),
            (
                self.locations,
                LOCATIONS,
                "an act has {} locations (story-package's sandboxLocations)",
            ),
            (
                self.encounters,
                ENCOUNTERS,
                "a location has {} encounters (story-node-encounters' encounters)",
            ),
        ):
            if size not in sizes:
                raise ValueError(f"{what.format(f'{sizes[0]} to {sizes[-1]}')}, not {size}")
        if self.locations * self.encounters < 2:
            raise ValueError(
                "an act needs 2 encounters or more in all, so that its progress is reached "
                f"without any one of them: {self.locations} location of {self.encounters} "
                "encounter is 1"
            )
        return self


NEEDED = frozenset(
    {
        "globalProgression",
        "givesProgression",
        "potentialFlags",
        "prerequisites",
        "requiredCharacters",
    }
)
"The optional fields the model writes: what the package's rules rest on."


@dataclass(frozen=True)
class Choice:
    """One tool a step may call: the profile of what the model writes, and what the code adds."""

    tool: Tool
    profile: dict[str, Any]
    "The decoding schema of the arguments the model writes."
    fill: Callable[[dict[str, Any]], dict[str, Any]]
    "The whole arguments, given what the model wrote."


@dataclass(frozen=True)
class Step:
    """One call of the pipeline, or a repair: the tools it may call and what it is for."""

    about: str
    'What the call is for, such as `location "loc_1" of act "act_1"`.'
    choices: tuple[Choice, ...]

    @property
    def profile(self) -> dict[str, Any]:
        """The decoding schema of the step: a tool's arguments, or `{"tool", "arguments"}`."""
        if len(self.choices) == 1:
            return {**self.choices[0].profile, "x-guidance": WHITESPACE}
        branches = [
            {
                "type": "object",
                "properties": {"tool": {"const": choice.tool.name}, "arguments": choice.profile},
                "required": ["tool", "arguments"],
                "additionalProperties": False,
            }
            for choice in self.choices
        ]
        return {"anyOf": branches, "x-guidance": WHITESPACE}

    @property
    def written(self) -> bool:
        """Whether the model writes anything: False when the code fills every field."""
        return len(self.choices) > 1 or bool(self.choices[0].profile.get("properties"))

    def call(self, written: dict[str, Any]) -> tuple[Tool, dict[str, Any]]:
        """The tool and its whole arguments, given the document the model wrote."""
        if len(self.choices) == 1:
            choice = self.choices[0]
            return choice.tool, choice.fill(written)
        choice = next(each for each in self.choices if each.tool.name == written["tool"])
        return choice.tool, choice.fill(written["arguments"])


def _characters(acts: int) -> int:
    return 1 if acts == 1 else 2


def pipeline_length(shape: Shape) -> int:
    """How many calls the pipeline of a package of `shape` makes when none is refused."""
    # The outline, the node web, then the encounters and the finalizing of each location.
    per_act = 2 + 2 * shape.locations
    return 1 + _characters(shape.acts) + shape.acts * per_act + 1


@cache
def _derived(tool: Tool) -> dict[str, Any]:
    """`tool`'s arguments within `BUILD_BOUNDS`, every field written but the optional unneeded."""
    schema = contract_schema(tool.parameters)
    profile: dict[str, Any] = _written(
        Deriver(schema.get("$defs", {}), BUILD_BOUNDS).derive(schema)
    )
    return profile


def _written(node: Any) -> Any:
    """`node` with each object's required fields and `NEEDED` ones, all of them required."""
    if isinstance(node, list):
        return [_written(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _written(value) for key, value in node.items()}
    if out.get("type") == "object" and "properties" in out:
        required = set(out.get("required", ()))
        kept = {
            name: value
            for name, value in out["properties"].items()
            if name in required or name in NEEDED
        }
        out["properties"] = kept
        out["required"] = list(kept)
    return out


def _profile(contract: Contract[Any]) -> dict[str, Any]:
    """A fresh copy of the derived profile of the tool taking `contract`, to narrow."""
    profile: dict[str, Any] = copy.deepcopy(_derived(TOOLS.taking(contract)))
    return profile


def _at(profile: dict[str, Any], path: str) -> dict[str, Any]:
    """The object node at `path` (`locations[]`, `globalContext`) of `profile`."""
    node = profile
    for part in filter(None, path.split(".")):
        name, items = part.removesuffix("[]"), part.endswith("[]")
        node = node["properties"][name]
        if items:
            node = node["items"]
    return node


def _drop(node: dict[str, Any], *names: str) -> None:
    """Leave the fields `names` of the object `node` to the code."""
    for name in names:
        node["properties"].pop(name, None)
        node["required"] = [each for each in node["required"] if each != name]


def _set(node: dict[str, Any], name: str, value: dict[str, Any]) -> None:
    node["properties"][name] = value


def _listed(ids: list[str], most: int) -> dict[str, Any]:
    """A list of at most `most` of `ids` (none when there are none)."""
    if not ids:
        return {"type": "array", "maxItems": 0}
    return {"type": "array", "items": {"enum": ids}, "maxItems": min(most, len(ids))}


def _kept(written: dict[str, Any], **filled: Any) -> dict[str, Any]:
    return {**filled, **written}


def _premise_choice(premise: str) -> Choice:
    profile = _profile(STORY_PREMISE)
    _drop(profile, "premise", "globalMaterials")
    _drop(_at(profile, "globalContext"), "overarchingTruths")

    def fill(written: dict[str, Any]) -> dict[str, Any]:
        context = {**written["globalContext"], "overarchingTruths": []}
        return {**written, "globalContext": context, "premise": premise, "globalMaterials": []}

    return Choice(TOOLS.taking(STORY_PREMISE), profile, fill)


def _character_choice(number: int) -> Choice:
    profile = _profile(STORY_CHARACTER)
    _drop(profile, "id")
    roles = [role for role in profile["properties"]["role"]["enum"] if role != "protagonist"]
    if number == 1:  # the story is the first character's: the protagonist
        _drop(profile, "role")
    else:
        _set(profile, "role", {"enum": roles})

    def fill(written: dict[str, Any]) -> dict[str, Any]:
        role = {"role": "protagonist"} if number == 1 else {}
        return _kept(written, id=f"char_{number}", **role)

    return Choice(TOOLS.taking(STORY_CHARACTER), profile, fill)


def _location_ids(count: int) -> list[str]:
    return [f"loc_{number}" for number in range(1, count + 1)]


def _outline_choice(act: str, shape: Shape) -> Choice:
    profile = _profile(STORY_ACT_OUTLINE)
    _drop(profile, "id", "intendedLocations")
    tracker = _at(profile, "globalProgression")
    # Each encounter gives at least 1: without any one of them, the others give this much.
    most = min(shape.encounters * shape.locations - 1, _REQUIRED)
    _set(tracker, "requiredValue", {"type": "integer", "minimum": 1, "maximum": most})

    def fill(written: dict[str, Any]) -> dict[str, Any]:
        return _kept(written, id=act, intendedLocations=_location_ids(shape.locations))

    return Choice(TOOLS.taking(STORY_ACT_OUTLINE), profile, fill)


def _connections(ids: list[str], index: int) -> list[list[str]]:
    """Every list of connections location `index` may have: the next location, and one other."""
    # The last leads to the first: a ring, so every location leads back to the start and
    # play never strands the player (the package's rules).
    if len(ids) == 1:
        return [[]]  # the act's one location is its start
    following = (index + 1) % len(ids)
    after = [ids[following]]
    others = [each for number, each in enumerate(ids) if number not in (index, following)]
    # And at most one other: all the subsets of 23 others are too many to list.
    return [after, *([*after, other] for other in others)]


def _web_choice(act: str, locations: list[str], characters: list[str]) -> Choice:
    profile = _profile(STORY_NODE_WEB)
    _drop(profile, "actId")
    item = _at(profile, "locations[]")
    _drop(item, "id", "location")
    _set(item, "requiredCharacters", _listed(characters, BUILD_BOUNDS.items))
    wired = []
    for index in range(len(locations)):
        each = copy.deepcopy(item)
        _set(each, "connections", {"enum": _connections(locations, index)})
        wired.append(each)
    _set(
        profile,
        "locations",
        {
            "type": "array",
            "prefixItems": wired,
            "items": False,
            "minItems": len(wired),
            "maxItems": len(wired),
        },
    )

    def fill(written: dict[str, Any]) -> dict[str, Any]:
        webs = [
            {"id": name, "location": name, **web}
            for name, web in zip(locations, written["locations"], strict=True)
        ]
        return {"actId": act, "locations": webs}

    return Choice(TOOLS.taking(STORY_NODE_WEB), profile, fill)


def _encounters_choice(
    act: str, location: str, characters: list[str], flags: list[str], *, count: int, named: bool
) -> Choice:
    """`count` encounters for one location; `named` writes its act and location ids (a repair's)."""
    profile = _profile(STORY_NODE_ENCOUNTERS)
    if named:
        _set(profile, "actId", {"const": act})
        _set(profile, "nodeId", {"const": location})
    else:
        _drop(profile, "actId", "nodeId")
    encounters = profile["properties"]["encounters"]
    encounters["minItems"] = encounters["maxItems"] = count
    item = _at(profile, "encounters[]")
    _drop(item, "id")
    _set(item, "givesProgression", {"type": "integer", "minimum": 1, "maximum": MAX_PROGRESSION})
    _set(item, "requiredCharacters", _listed(characters, BUILD_BOUNDS.items))
    if flags:
        _set(item, "prerequisites", _listed(flags, 1))
    else:
        _drop(item, "prerequisites")
    # The pool's pacing varies, as the package's rules ask: the first encounter dwells
    # on dialogue, the second on tension (the seed's mix); any more are free.
    paced = []
    for focus in ("dialogue_and_worldbuilding", "tension_and_action"):
        each = copy.deepcopy(item)
        _set(_at(each, "pacing"), "focus", {"const": focus})
        paced.append(each)
    # A prefix item for each of the `count` encounters, none past it: any more are free.
    free = [copy.deepcopy(item) for _ in range(count - len(paced))]
    encounters["prefixItems"] = [*paced, *free][:count]
    encounters["items"] = False

    def fill(written: dict[str, Any]) -> dict[str, Any]:
        pool = [
            {"id": f"{act}_{location}_{number}", **encounter}
            for number, encounter in enumerate(written["encounters"], 1)
        ]
        return {"actId": act, "nodeId": location, **written, "encounters": pool}

    return Choice(TOOLS.taking(STORY_NODE_ENCOUNTERS), profile, fill)


def _finalize_node_choice(act: str, location: str) -> Choice:
    profile = _profile(STORY_FINALIZE_NODE)
    _drop(profile, "actId", "nodeId")
    _drop(_at(profile, "musicPrompts[]"), "weight")
    profile["properties"]["musicPrompts"]["maxItems"] = 1

    def fill(written: dict[str, Any]) -> dict[str, Any]:
        music = [{**prompt, "weight": 1} for prompt in written["musicPrompts"]]
        return {"actId": act, "nodeId": location, **written, "musicPrompts": music}

    return Choice(TOOLS.taking(STORY_FINALIZE_NODE), profile, fill)


def _finalize_package_choice(title: str) -> Choice:
    profile = _profile(STORY_FINALIZE_PACKAGE)
    _drop(profile, "title")
    return Choice(TOOLS.taking(STORY_FINALIZE_PACKAGE), profile, lambda _: {"title": title})


def _update_choice(draft: StoryDraft) -> Choice:
    """`updateElement` of any element of the draft: one branch per kind, its ids enums."""
    profile = _profile(STORY_UPDATE_ELEMENT)
    _drop(profile, "actId", "id")
    kinds = {
        "premise": {},
        "character": {"id": {"enum": [each.id for each in draft.characters]}},
        "act": {"id": {"enum": [act.outline.id for act in draft.acts]}},
    }
    branches = []
    for kind, ids in kinds.items():
        properties = {"type": {"const": kind}, **ids, "changes": profile["properties"]["changes"]}
        branches.append(_object(properties))
    for act in draft.acts:
        node = {"const": act.outline.id}
        places = {"enum": [location.id for location in act.locations]}
        changes = profile["properties"]["changes"]
        properties = {"type": {"const": "node"}, "actId": node, "id": places, "changes": changes}
        branches.append(_object(properties))
    shaped = {"anyOf": branches}
    return Choice(TOOLS.taking(STORY_UPDATE_ELEMENT), shaped, lambda written: written)


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def flags_set(draft: StoryDraft, act_id: str | None = None) -> list[str]:
    """The flags that encounters drafted so far set (in act `act_id` only, if given), in order."""
    found: dict[str, None] = {}
    for act in draft.acts:
        if act_id is not None and act.outline.id != act_id:
            continue
        for location in act.locations:
            for encounter in location.encounters:
                found.update(dict.fromkeys(encounter.potential_flags or ()))
    return list(found)


def _act_id(number: int) -> str:
    return f"act_{number}"


def _known(draft: StoryDraft) -> list[str]:
    return [each.id for each in draft.characters]


def _fixed(about: str, choice: Choice) -> Callable[[StoryDraft], Step]:
    """A step whose one choice does not depend on the draft."""
    return lambda draft: Step(about, (choice,))


def _web_step(act: str, ids: list[str], draft: StoryDraft) -> Step:
    about = f'the {len(ids)} locations of act "{act}", in order'
    return Step(about, (_web_choice(act, ids, _known(draft)),))


def _encounters_step(act: str, location: str, count: int, draft: StoryDraft) -> Step:
    # Prerequisites name flags of this act only: one of an earlier act may have been missed
    # in play, and the act's progression must not rest on it (the package's rules).
    flags = flags_set(draft, act)
    choice = _encounters_choice(act, location, _known(draft), flags, count=count, named=False)
    return Step(f'location "{location}" of act "{act}"', (choice,))


def _package_step(draft: StoryDraft) -> Step:
    title = draft.premise.title if draft.premise is not None else ""
    return Step("the whole story", (_finalize_package_choice(title),))


def steps(premise: str, shape: Shape) -> Iterator[Callable[[StoryDraft], Step]]:
    """The pipeline's steps for a package of `shape`, each made from the draft as its turn comes."""
    yield _fixed("the story", _premise_choice(premise))
    for number in range(1, _characters(shape.acts) + 1):
        yield _fixed(f'the character "char_{number}"', _character_choice(number))
    for act in (_act_id(number) for number in range(1, shape.acts + 1)):
        ids = _location_ids(shape.locations)
        yield _fixed(f'act "{act}"', _outline_choice(act, shape))
        yield partial(_web_step, act, ids)
        for location in ids:
            yield partial(_encounters_step, act, location, shape.encounters)
        for location in ids:
            about = f'location "{location}" of act "{act}"'
            yield _fixed(about, _finalize_node_choice(act, location))
    yield _package_step


def repair_step(draft: StoryDraft) -> Step:
    """After a refused package: change an element, or draft a location's encounters again.

    Encounters drafted again take no prerequisites, so that no repair makes
    a cycle of flags, and are as many as the location has: the act's
    required progress was set for that many.
    """
    characters = [each.id for each in draft.characters]
    choices = [_update_choice(draft)]
    choices.extend(
        _encounters_choice(
            act.outline.id,
            location.id,
            characters,
            [],
            count=max(len(location.encounters), ENCOUNTERS[0]),
            named=True,
        )
        for act in draft.acts
        for location in act.locations
    )
    return Step("the package finalizePackage refused", tuple(choices))


# A drive: the model chooses the tool ------------------------------------------------------

DRIVE_BOUNDS = Bounds(string=80, items=3, integer=100)
"""Short texts and a few items a list, in a drive's call: a small model writes one in seconds.

A story of more locations or encounters than three is made of more calls
(a node web per act, encounters per location), which the model chooses."""


NUMBER_STEPS = 10
"A number the model writes is one of this many steps (and one) between its bounds."


@cache
def _whole(tool: Tool) -> dict[str, Any]:
    """`tool`'s arguments within `DRIVE_BOUNDS`: its whole input contract, optional fields too."""
    schema = contract_schema(tool.parameters)
    profile: dict[str, Any] = _writable(
        Deriver(schema.get("$defs", {}), DRIVE_BOUNDS).derive(schema)
    )
    return profile


def _writable(node: Any) -> Any:
    """`node` as the local model's grammar can hold it, and a small model finish it.

    Two things of a derived profile are changed. A free-form object's
    `propertyNames` is dropped: with it, llama-cpp-python's grammar admits
    no answer at all (an `updateElement` branch made the whole call's
    answer empty); the handler judges the names. A number between bounds
    becomes one of `NUMBER_STEPS` steps: free, the packaged model wrote a
    music weight's digits on until its tokens ran out.
    """
    if isinstance(node, list):
        return [_writable(item) for item in node]
    if not isinstance(node, dict):
        return node
    if node.get("type") == "number" and {"minimum", "maximum"} <= node.keys():
        low, high = node["minimum"], node["maximum"]
        steps = range(NUMBER_STEPS + 1)
        return {"enum": sorted({round(low + (high - low) * n / NUMBER_STEPS, 6) for n in steps})}
    return {key: _writable(value) for key, value in node.items() if key != "propertyNames"}


def drive_tools(draft: StoryDraft) -> tuple[Tool, ...]:
    """The tools a drive offers the model while the session holds `draft`.

    None once the draft is finalized (it takes no call); the premise's tool
    alone until a premise is proposed (every other tool needs one); then
    every tool but that one, which refuses a second premise.
    """
    if draft.status == "finalized":
        return ()
    premise = TOOLS.taking(STORY_PREMISE)
    if draft.premise is None:
        return (premise,)
    return tuple(tool for tool in TOOLS if tool is not premise)


def drive_profile(draft: StoryDraft, premise: str) -> dict[str, Any]:
    """The decoding schema of a drive's call, `{"tool": NAME, "arguments": {...}}`, now.

    One branch per tool of `drive_tools(draft)`, its arguments under
    `_whole(tool)`; the premise's call carries `premise` as given, never
    one the model writes. Raises ValueError for a finalized draft: no call
    is left to write.
    """
    branches = []
    for tool in drive_tools(draft):
        arguments = _whole(tool)
        if tool.parameters is STORY_PREMISE:
            fixed = {**arguments["properties"], "premise": {"const": premise}}
            arguments = {**arguments, "properties": fixed}
        branches.append(_object({"tool": {"const": tool.name}, "arguments": arguments}))
    if not branches:
        raise ValueError(f"the draft {draft.package_id} is finalized: no call is left to write")
    return {"anyOf": branches, "x-guidance": WHITESPACE}
