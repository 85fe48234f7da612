"""The local model building a story package through the eight tools, one call at a time.

    builder = Builder.start()                                  # load a model, once
    build = await builder.build("A keeper finds ...", acts=1)  # a whole package
    build.calls                                                # every call and its result
    build.package                                              # the package, or None

The pipeline is strict, so the code sequences it (`pipeline`): the premise,
one character (two when there is more than one act), then per act its
outline, its node web, the encounters of each location and the finalizing
of each location, and last `finalizePackage`. The model writes each call's
arguments under a decoding profile (`Step.profile`) derived from the tool's
input contract with tight bounds (`BUILD_BOUNDS`), and narrowed by the
draft so that the package holds together by construction:

- the code fills every id (characters `char_1`, acts `act_1`, locations
  `loc_1`, encounters `act_1_loc_1_1`), the premise's text, the key of a
  location's background (its id), the package's title (the premise's) and
  a music prompt's weight; and leaves empty the lists the contract lets be
  empty and nothing here needs (motifs, hidden truths);
- the model writes every other required field, and of the optional ones
  only those the package's rules rest on (`NEEDED`): an act's progress
  tracker, an encounter's progression, flags and prerequisites, and the
  characters required;
- references are enums of what exists: the characters proposed so far,
  and as prerequisites the flags that encounters drafted by earlier calls
  set (none while there are none);
- location i connects to location i + 1, so every location is reachable
  from the act's first; other connections are the model's choice;
- each location gets `ENCOUNTERS` encounters, each giving 1 to
  `MOST_PROGRESSION`, and the act's required progress is at most one less
  than the number of its encounters: the act can be completed without any
  one of them, so by more than one path, and no encounter is a dead end.

A call whose every field the code fills (`finalizePackage`) is made without
the model. Each call the model writes is checked against its tool's
contract before it is made; one that breaks it is a `ProfileBug`. A call the
draft still refuses is made again, its refusal in the prompt; a package
`finalizePackage` refuses sends its report to the model, which makes one
repair call (`updateElement`, or new encounters for a location) before the
package is finalized again. Every call counts toward `max_calls`: when they
run out, the build stops where it is, without a package, and the draft
keeps every call that succeeded.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache, partial
from importlib.resources import files
from itertools import combinations
from string import Template
from typing import Any

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
from ...generated.story_packages import Progression, StoryDraft, StoryPackage, StoryPremise
from ..core.contracts import contract_schema, field_bound
from ..core.errors import ContractError, ProfileBug
from ..core.profiles import WHITESPACE, Bounds, Deriver
from ..core.tools import Tool
from ..core.validation import convert
from ..model.chat import Message
from ..model.writer import Writer, say_on_stderr
from .session import CallResult, Session
from .tools import TOOLS

__all__ = [
    "BUILD_BOUNDS",
    "ENCOUNTERS",
    "LOCATIONS",
    "MOST_ACTS",
    "MOST_PROGRESSION",
    "NEEDED",
    "Build",
    "Builder",
    "Step",
    "ToolCall",
    "build_messages",
    "checked_premise",
    "pipeline_length",
    "repair_step",
    "steps",
]

BUILD_BOUNDS = Bounds(string=32, items=2, integer=100)
"A few words a text and at most two items a list: a small model writes a call in seconds."
ENCOUNTERS = 2
"Encounters a location gets: two, so that no act's progress takes every one of them."
MOST_PROGRESSION = 3
"The most progression one encounter gives."
LOCATIONS = range(2, 4)
"How many locations an act may have: two or three (the connections are enumerated)."
MOST_ACTS = 3
"The most acts a build makes."
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
CALL_TOKENS = 800
"Enough for the longest call a profile allows."
SPARE_CALLS = 4
"Calls a build has beyond its pipeline by default, for refusals and repairs."
VIOLATIONS_SHOWN = 5
"Violations of a refused package the model reads, at most."


@dataclass(frozen=True)
class ToolCall:
    """One call the build made, and what it did."""

    tool: str
    "The tool's name."
    arguments: dict[str, Any]
    "The arguments, as the model wrote them with what the code filled in."
    result: CallResult
    "What the call did: `result.ok`, `result.message`, `result.package` when one was made."


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


@dataclass
class Build:
    """A build so far: the premise, the session it drafts in, and every call it made, in order."""

    premise: str
    session: Session
    calls: list[ToolCall] = field(default_factory=list)

    @property
    def package(self) -> StoryPackage | None:
        """The finalized package, or None while there is none."""
        last = self.calls[-1].result if self.calls else None
        return last.package if last is not None else None


# Premise and sizes ----------------------------------------------------------------------------


def checked_premise(text: str) -> str:
    """`text` trimmed, as the premise of a build. Raises ValueError when empty or too long."""
    premise = text.strip()
    most = field_bound(StoryPremise, "premise", "max_length")
    if not premise:
        raise ValueError("the premise is empty")
    if len(premise) > most:
        raise ValueError(f"the premise is {len(premise)} characters long; at most {most} allowed")
    return premise


def _characters(acts: int) -> int:
    return 1 if acts == 1 else 2


def pipeline_length(acts: int, locations: int) -> int:
    """How many calls the pipeline makes when none is refused."""
    per_act = 2 + 2 * locations  # outline, node web, then encounters and finalizing per location
    return 1 + _characters(acts) + acts * per_act + 1


# Profiles -------------------------------------------------------------------------------------


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


def _outline_choice(act: str, locations: int) -> Choice:
    profile = _profile(STORY_ACT_OUTLINE)
    _drop(profile, "id", "intendedLocations")
    tracker = _at(profile, "globalProgression")
    # Each encounter gives at least 1: without any one of them, the others give this much.
    most = ENCOUNTERS * locations - 1
    _set(tracker, "requiredValue", {"type": "integer", "minimum": 1, "maximum": most})

    def fill(written: dict[str, Any]) -> dict[str, Any]:
        return _kept(written, id=act, intendedLocations=_location_ids(locations))

    return Choice(TOOLS.taking(STORY_ACT_OUTLINE), profile, fill)


def _connections(ids: list[str], index: int) -> list[list[str]]:
    """Every list of connections location `index` may have: the next location always first."""
    after = ids[index + 1 : index + 2]
    others = [each for number, each in enumerate(ids) if number not in (index, index + 1)]
    return [
        [*after, *chosen]
        for size in range(len(others) + 1)
        for chosen in combinations(others, size)
    ]


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
    act: str, location: str, characters: list[str], flags: list[str], *, named: bool
) -> Choice:
    """Encounters for one location; `named` writes its act and location ids (a repair's choice)."""
    profile = _profile(STORY_NODE_ENCOUNTERS)
    if named:
        _set(profile, "actId", {"const": act})
        _set(profile, "nodeId", {"const": location})
    else:
        _drop(profile, "actId", "nodeId")
    encounters = profile["properties"]["encounters"]
    encounters["minItems"] = encounters["maxItems"] = ENCOUNTERS
    item = _at(profile, "encounters[]")
    _drop(item, "id")
    _set(item, "givesProgression", {"type": "integer", "minimum": 1, "maximum": MOST_PROGRESSION})
    _set(item, "requiredCharacters", _listed(characters, BUILD_BOUNDS.items))
    if flags:
        _set(item, "prerequisites", _listed(flags, 1))
    else:
        _drop(item, "prerequisites")

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


# The pipeline ---------------------------------------------------------------------------------


def _flags(draft: StoryDraft) -> list[str]:
    """The flags that encounters drafted so far set, each once, in order."""
    found: dict[str, None] = {}
    for act in draft.acts:
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


def _encounters_step(act: str, location: str, draft: StoryDraft) -> Step:
    choice = _encounters_choice(act, location, _known(draft), _flags(draft), named=False)
    return Step(f'location "{location}" of act "{act}"', (choice,))


def _package_step(draft: StoryDraft) -> Step:
    title = draft.premise.title if draft.premise is not None else ""
    return Step("the whole story", (_finalize_package_choice(title),))


def steps(premise: str, acts: int, locations: int) -> Iterator[Callable[[StoryDraft], Step]]:
    """The pipeline's steps, in order, each made from the draft as it stands when its turn comes."""
    yield _fixed("the story", _premise_choice(premise))
    for number in range(1, _characters(acts) + 1):
        yield _fixed(f'the character "char_{number}"', _character_choice(number))
    for act in (_act_id(number) for number in range(1, acts + 1)):
        ids = _location_ids(locations)
        yield _fixed(f'act "{act}"', _outline_choice(act, locations))
        yield partial(_web_step, act, ids)
        for location in ids:
            yield partial(_encounters_step, act, location)
        for location in ids:
            about = f'location "{location}" of act "{act}"'
            yield _fixed(about, _finalize_node_choice(act, location))
    yield _package_step


def repair_step(draft: StoryDraft) -> Step:
    """After a refused package: change an element, or draft a location's encounters again.

    Encounters drafted again take no prerequisites, so that no repair makes
    a cycle of flags.
    """
    characters = [each.id for each in draft.characters]
    choices = [_update_choice(draft)]
    choices.extend(
        _encounters_choice(act.outline.id, location.id, characters, [], named=True)
        for act in draft.acts
        for location in act.locations
    )
    return Step("the package finalizePackage refused", tuple(choices))


# The prompt -----------------------------------------------------------------------------------


def _template(name: str) -> Template:
    return Template(files(__package__).joinpath("templates", name).read_text("utf-8"))


_SENTENCE = re.compile(r"^(.*?[.!?])(?:\s|$)")


def _gist(tool: Tool) -> str:
    """The first sentence of the tool's description, from its contract."""
    found = _SENTENCE.match(tool.description)
    return found[1] if found else tool.description


@cache
def _pipeline() -> str:
    return "\n".join(
        f"{number}. `{tool.name}`: {_gist(tool)}" for number, tool in enumerate(TOOLS, 1)
    )


def _resolved(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """`node` with its local reference followed, its own keywords first."""
    while "$ref" in node:
        target = schema["$defs"][node["$ref"].removeprefix("#/$defs/")]
        node = {**target, **{key: value for key, value in node.items() if key != "$ref"}}
    return node


def _fields(tool: Tool, profile: dict[str, Any]) -> list[str]:
    """A line per field the model writes, with its description from the tool's contract."""
    schema = contract_schema(tool.parameters)
    lines: list[str] = []

    def walk(written: dict[str, Any], contract: dict[str, Any], prefix: str) -> None:
        for name, node in written.get("properties", {}).items():
            inner = _resolved(schema, contract["properties"][name])
            lines.append(f"- `{prefix}{name}`: {inner.get('description', '')}".rstrip())
            if node.get("type") == "object" and node.get("properties"):
                walk(node, inner, f"{prefix}{name}.")
            elif node.get("type") == "array":
                items = node.get("prefixItems", [node.get("items")])[0]
                if isinstance(items, dict) and items.get("type") == "object":
                    walk(items, _resolved(schema, inner["items"]), f"{prefix}{name}[].")

    walk(profile, schema, "")
    return lines


def _story(draft: StoryDraft) -> str:
    """The draft in a few lines: the premise's title, the characters, each act and its locations."""
    premise = draft.premise
    if premise is None:
        return "Nothing yet."
    lines = [f'- "{premise.title}", {premise.genre}']
    lines += [f'- {each.id} ({each.role}): "{each.name}"' for each in draft.characters]
    for act in draft.acts:
        tracker = act.outline.global_progression
        needs = (
            f", needs progress {tracker.required_value}" if isinstance(tracker, Progression) else ""
        )
        lines.append(f'- {act.outline.id}: "{act.outline.title}"{needs}')
        for location in act.locations:
            if location.web is None:
                lines.append(f"  - {location.id}: not wired yet")
                continue
            state = f"{len(location.encounters)} encounters"
            state += ", finalized" if location.finalized is not None else ""
            to = ", ".join(location.web.connections) or "nowhere"
            lines.append(f'  - {location.id} "{location.web.title}", to {to}: {state}')
    flags = _flags(draft)
    if flags:
        lines.append(f"- flags set so far: {', '.join(flags)}")
    return "\n".join(lines)


def _refusal(call: CallResult) -> str:
    """What the model reads of the refused call: its error, and a refused package's problems."""
    if call.error is None:
        return ""
    lines = [f"The last call, {call.tool}, was refused: {call.message}"]
    shown = call.error.violations[:VIOLATIONS_SHOWN]
    lines += [f"- {each.pointer or 'the package'}: {each.message}" for each in shown]
    more = len(call.error.violations) - len(shown)
    if more > 0:
        lines.append(f"- and {more} more")
    return "\n".join(lines)


def build_messages(
    premise: str, step: Step, draft: StoryDraft, refused: CallResult | None
) -> list[Message]:
    """What the model reads before it writes `step`'s call: chat messages.

    The system message describes the pipeline, each tool by the first
    sentence of its contract's description; the user message gives the
    premise, the story so far, the call to write and its fields (each
    described by its contract), and the refusal of the last call, if any.
    """
    if len(step.choices) == 1:
        choice = step.choices[0]
        call = f"`{choice.tool.name}` for {step.about}. Write its arguments as JSON:"
        fields = "\n".join(_fields(choice.tool, choice.profile))
    else:
        names = " or ".join(f"`{choice.tool.name}`" for choice in step.choices[:2])
        call = (
            f"a repair of {step.about}: {names}, then the package is finalized again. "
            'Write the call as JSON, {"tool": NAME, "arguments": {...}}.'
        )
        fields = ""
    user = _template("build-call.md").substitute(
        premise=premise,
        story=_story(draft),
        call=call,
        fields=fields,
        refusal=_refusal(refused) if refused is not None else "",
    )
    system = _template("build.md").substitute(pipeline=_pipeline())
    return [
        {"role": "system", "content": system.strip()},
        {"role": "user", "content": re.sub(r"\n{3,}", "\n\n", user).strip()},
    ]


# Building -------------------------------------------------------------------------------------


@dataclass
class Builder:
    """Builds story packages with one loaded model (or any `Writer`)."""

    writer: Writer
    say: Callable[[str], None] = say_on_stderr

    async def build(
        self,
        premise: str,
        *,
        acts: int = 1,
        locations: int = LOCATIONS[0],
        max_calls: int | None = None,
        seed: int | None = None,
        on_call: Callable[[ToolCall], None] | None = None,
        session: Session | None = None,
    ) -> Build:
        """Build a package of `premise` with `acts` acts of `locations` locations each.

        At most `max_calls` calls are made (default: the pipeline's, plus
        `SPARE_CALLS`); `on_call` is told of each as soon as it is made.
        `session` is where the draft is kept (default: a new one that saves
        nothing); it must hold no premise yet. The model writes in a worker
        thread: cancelling stops it at its next token. Raises ValueError for
        an empty or too long premise, `acts` outside 1 to `MOST_ACTS`,
        `locations` outside `LOCATIONS`, `max_calls` below 1 or a session
        that has a premise; GenerationFailed when the model writes no
        complete call (the prompt outgrew the model's context, say);
        ProfileBug when a call breaks its tool's contract (a bug).
        """
        premise = checked_premise(premise)
        if not 1 <= acts <= MOST_ACTS:
            raise ValueError(f"a build makes 1 to {MOST_ACTS} acts, not {acts}")
        if locations not in LOCATIONS:
            raise ValueError(
                f"an act has {LOCATIONS[0]} to {LOCATIONS[-1]} locations, not {locations}"
            )
        calls = (
            max_calls if max_calls is not None else pipeline_length(acts, locations) + SPARE_CALLS
        )
        if calls < 1:
            raise ValueError(f"a build makes at least 1 call, not {calls}")
        session = session if session is not None else Session()
        if session.draft.premise is not None:
            raise ValueError("the session's draft has a premise already: a build starts one")
        build = Build(premise, session)
        refused: CallResult | None = None
        for made in steps(premise, acts, locations):
            refused = None
            while True:
                if len(build.calls) >= calls:
                    return build
                step = made(session.draft)
                call = await self._call(build, step, refused, seed, on_call)
                if call.result.ok:
                    break
                refused = call.result
                if call.tool == TOOLS.taking(STORY_FINALIZE_PACKAGE).name:
                    # The package was refused: one repair, then it is finalized again.
                    if len(build.calls) >= calls:
                        return build
                    await self._call(build, repair_step(session.draft), refused, seed, on_call)
        return build

    async def _call(
        self,
        build: Build,
        step: Step,
        refused: CallResult | None,
        seed: int | None,
        on_call: Callable[[ToolCall], None] | None,
    ) -> ToolCall:
        """Write `step`'s call (with the model, unless the code fills it all), check it, make it."""
        written: dict[str, Any] = {}
        if step.written:
            messages = build_messages(build.premise, step, build.session.draft, refused)
            answer = "Arguments JSON" if len(step.choices) == 1 else "Tool call JSON"
            written = await self.writer.write_chat(
                messages, step.profile, answer=answer, max_tokens=CALL_TOKENS, seed=seed
            )
        tool, arguments = step.call(written)
        try:
            convert(tool.parameters, arguments)
        except ContractError as error:
            raise ProfileBug(f"a {tool.name} call broke its contract: {error}") from None
        call = ToolCall(tool.name, arguments, build.session.call(tool.name, arguments))
        build.calls.append(call)
        if on_call is not None:
            on_call(call)
        return call
