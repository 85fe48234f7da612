"""The tools' handlers: check a call's arguments and the draft, then change a copy of the draft.

A call is checked in this order, and refused at the first problem with a
`ToolValidationError`:

1. the draft: a finalized draft takes no call, and every tool but
   `proposeStoryPremise` needs the premise;
2. its arguments, by the tool's input contract, whose schema holds every
   limit (and, for `updateElement`, which ids each kind of element needs);
3. the pipeline: the act outlined, the location wired, its encounters
   drafted, every location finalized, as the step requires; the message
   names the tool of the step that must come first;
4. the references and ids the schemas' decisions state: intended
   locations, connections, characters already proposed, ids unique.

Only then does the handler change a copy of the draft, typed as the draft is
(`drafts.opened`), asking the asset hook for files where the step makes
some, and the copy is judged by the draft's contract as it becomes the new
draft (`drafts.closed`): the models do not check their limits when a field
is set, the contract does. Texts are kept as given: the story's texts are any
Unicode, and no tool trims them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import msgspec
from msgspec import UnsetType

from ...generated import (
    STORY_ACT_OUTLINE,
    STORY_CHARACTER,
    STORY_FINALIZE_NODE,
    STORY_FINALIZE_PACKAGE,
    STORY_NODE_ENCOUNTERS,
    STORY_NODE_WEB,
    STORY_PACKAGE,
    STORY_PREMISE,
    STORY_UPDATE_ELEMENT,
    Contract,
)
from ...generated.story_packages import (
    AssetFile,
    Character,
    DraftAct,
    DraftLocation,
    NodeAssets,
    NodeWebLocation,
    PersonalArc,
    StoryActOutline,
    StoryActOutlineResult,
    StoryCharacter,
    StoryCharacterResult,
    StoryDraft,
    StoryFinalizeNode,
    StoryFinalizeNodeResult,
    StoryFinalizePackage,
    StoryFinalizePackageResult,
    StoryNodeEncounters,
    StoryNodeEncountersResult,
    StoryNodeWeb,
    StoryNodeWebResult,
    StoryPackage,
    StoryPremise,
    StoryPremiseResult,
    StoryUpdateElement,
    StoryUpdateElementResult,
)
from ..core import sessions
from ..core.errors import AssetGenerationError, ContractError, ToolValidationError, shown
from ..core.jsontext import escape_token
from ..core.sessions import Handlers, arguments_of
from ..core.tools import Tool
from ..core.typed_patterns import conforming
from ..core.validation import convert
from .assets import AssetHook, AssetKind, AssetRequest
from .drafts import closed, encounter_ids, opened, package_of
from .tools import TOOLS

__all__ = ["HANDLERS", "Finalized", "Workshop"]

T = TypeVar("T")


@dataclass(frozen=True)
class Workshop:
    """What a call needs besides the draft: where assets are made, and the clock."""

    assets: AssetHook
    "Makes the portraits, backgrounds and music the steps ask for."
    now: Callable[[], datetime]
    "The time now, with its time zone: when a package is finalized."


Handled = sessions.Handled[StoryDraft]


@dataclass(frozen=True)
class Finalized(Handled):
    """What `finalizePackage` did: the finalized draft, and the package made of it, to save."""

    package: StoryPackage | None = None


HANDLERS: Handlers[StoryDraft, Workshop] = Handlers(TOOLS)
"Each tool's handler: given the latest draft, the call's arguments and the workshop."


# Names and messages ---------------------------------------------------------------------


def _name(contract: Contract[Any]) -> str:
    return TOOLS.taking(contract).name


def _listed(ids: Iterable[str]) -> str:
    names = [shown(each) for each in ids]
    return ", ".join(names) if names else "none"


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _given(value: T | UnsetType, default: T) -> T:
    """An optional field's value, or `default` where the document leaves it out."""
    return default if isinstance(value, UnsetType) else value


def _as(value: msgspec.Struct, kind: type[T]) -> T:
    """`value` as `kind`, a model of the same JSON shape (a tool's input as the draft holds it)."""
    return msgspec.convert(msgspec.to_builtins(value), kind)


# The draft's state ----------------------------------------------------------------------


def _drafting(tool: Tool, draft: StoryDraft) -> None:
    if draft.status == "finalized":
        raise ToolValidationError(
            tool.name, None, f"the package {draft.package_id} is finalized: it takes no more calls"
        )
    if tool.parameters is not STORY_PREMISE:
        _proposed(tool, draft)


def _proposed(tool: Tool, draft: StoryDraft) -> StoryPremise:
    if draft.premise is None:
        raise ToolValidationError(
            tool.name,
            None,
            f"there is no premise yet: propose one with {_name(STORY_PREMISE)} first",
        )
    return draft.premise


def _act(tool: Tool, draft: StoryDraft, act_id: str, field: str) -> DraftAct:
    for act in draft.acts:
        if act.outline.id == act_id:
            return act
    known = _listed(act.outline.id for act in draft.acts)
    raise ToolValidationError(
        tool.name,
        field,
        f"no act {shown(act_id)} is outlined (the acts: {known}): "
        f"outline it with {_name(STORY_ACT_OUTLINE)} first",
    )


def _location(tool: Tool, act: DraftAct, location_id: str, field: str) -> DraftLocation:
    for location in act.locations:
        if location.id == location_id:
            return location
    raise ToolValidationError(tool.name, field, _not_intended(act, location_id))


def _node(
    tool: Tool, draft: StoryDraft, act_id: str, node_id: str
) -> tuple[DraftAct, DraftLocation]:
    """The act and location a call names as `actId` and `nodeId`."""
    act = _act(tool, draft, act_id, "/actId")
    return act, _location(tool, act, node_id, "/nodeId")


def _not_intended(act: DraftAct, location_id: str) -> str:
    intended = _listed(location.id for location in act.locations)
    return (
        f"{shown(location_id)} is not an intended location of act {shown(act.outline.id)}: "
        f"they are {intended}"
    )


def _where(act: DraftAct, location: DraftLocation) -> str:
    return f"location {shown(location.id)} of act {shown(act.outline.id)}"


def _wired(tool: Tool, act: DraftAct, location: DraftLocation) -> NodeWebLocation:
    if location.web is None:
        raise ToolValidationError(
            tool.name,
            None,
            f"{_where(act, location)} is a placeholder: wire it with {_name(STORY_NODE_WEB)} first",
        )
    return location.web


def _filled(tool: Tool, act: DraftAct, location: DraftLocation) -> None:
    _wired(tool, act, location)
    if not location.encounters:
        raise ToolValidationError(
            tool.name,
            None,
            f"{_where(act, location)} has no encounters: "
            f"draft them with {_name(STORY_NODE_ENCOUNTERS)} first",
        )


def _unique(tool: Tool, ids: Iterable[tuple[str, str]], taken: Iterable[str], what: str) -> None:
    """Refuse the first of `ids` (each with its pointer) that repeats one before it or `taken`."""
    seen = set(taken)
    for pointer, each in ids:
        if each in seen:
            raise ToolValidationError(
                tool.name, pointer, f"{shown(each)} is already the id of {what}: ids are unique"
            )
        seen.add(each)


def _characters_known(
    tool: Tool, draft: StoryDraft, ids: Iterable[tuple[str, str]], also: str = ""
) -> None:
    """Refuse the first of `ids` (each with its pointer) that names no character but `also`."""
    known = [character.id for character in draft.characters]
    for pointer, each in ids:
        if each not in known and each != also:
            raise ToolValidationError(
                tool.name,
                pointer,
                f"no character {shown(each)} is proposed (the characters: {_listed(known)}): "
                f"propose it with {_name(STORY_CHARACTER)} first",
            )


def _pointed(prefix: str, key: str, values: Iterable[str]) -> Iterator[tuple[str, str]]:
    return ((f"{prefix}/{key}/{index}", each) for index, each in enumerate(values))


def _asset(
    tool: Tool,
    draft: StoryDraft,
    context: Workshop,
    kind: AssetKind,
    key: str,
    prompts: tuple[tuple[str, float], ...],
) -> str:
    """Ask the hook for one asset, record its file under its key, and answer its URL.

    The call is refused when the hook cannot make it.
    """
    art_style = _proposed(tool, draft).art_style
    again = key in _files(draft, kind)
    request = AssetRequest(draft.package_id, kind, key, prompts, art_style, again)
    try:
        made = context.assets(request)
    except AssetGenerationError as error:
        raise ToolValidationError(
            tool.name, None, f"the {request.kind} {shown(request.key)} was not made: {error}"
        ) from None
    # What an asset command made is checked whole, its URL's and type's patterns too.
    file = conforming(msgspec.to_builtins(made), AssetFile)
    _files(draft, kind)[key] = file
    return file.url


def _files(draft: StoryDraft, kind: AssetKind) -> dict[str, AssetFile]:
    """Where the draft keeps the files of `kind`, by key."""
    if kind == "portrait":
        return draft.assets.characters
    return draft.assets.backgrounds if kind == "background" else draft.assets.music


def _image(prompt: str) -> tuple[tuple[str, float], ...]:
    return ((prompt, 1.0),)


def _new(tool: Tool, draft: StoryDraft) -> StoryDraft:
    """The changed copy as the new draft; a limit of the draft's contract refuses the call."""
    try:
        return closed(draft)
    except ContractError as error:
        first = error.violations[0]
        raise ToolValidationError(
            tool.name,
            None,
            f"the draft would break its contract at {first.pointer}: {first.message}",
        ) from None


# The handlers ------------------------------------------------------------------------------


@HANDLERS.handles(STORY_PREMISE)
def _premise(tool: Tool, latest: StoryDraft, value: Any, context: Workshop) -> Handled:
    _drafting(tool, latest)
    arguments: StoryPremise = arguments_of(tool, value)
    if latest.premise is not None:
        raise ToolValidationError(
            tool.name,
            None,
            f"the premise is already proposed: change it with {_name(STORY_UPDATE_ELEMENT)}",
        )
    draft = opened(latest)
    if "language" in value:  # named: it sets the locale; left out: it takes the locale
        draft.locale = arguments.language
    draft.premise = msgspec.structs.replace(arguments, language=draft.locale)
    result = StoryPremiseResult(ok=True, title=arguments.title)
    return Handled(result, _new(tool, draft), f"The premise of {shown(arguments.title)} is set.")


def _arc(character: Character) -> PersonalArc | None:
    arc = character.personal_arc
    return None if isinstance(arc, UnsetType) else arc


def _check_character(tool: Tool, draft: StoryDraft, character: Character, prefix: str) -> None:
    """The arc encounters' ids, their character and the characters they require."""
    own = character.id
    arc = _arc(character)
    encounters = arc.arc_encounters if arc is not None else []
    where = f"{prefix}/personalArc/arcEncounters"
    others = [
        each
        for each in encounter_ids(draft)
        if each not in _arc_ids(draft, own)  # the character's own arc is being replaced
    ]
    _unique(
        tool,
        ((f"{where}/{index}/id", encounter.id) for index, encounter in enumerate(encounters)),
        others,
        "an encounter",
    )
    for index, encounter in enumerate(encounters):
        named = _given(encounter.arc_character_id, own)
        if named != own:
            raise ToolValidationError(
                tool.name,
                f"{where}/{index}/arcCharacterId",
                f"is {shown(named)}, but the arc is {shown(own)}'s",
            )
        required = _given(encounter.required_characters, [])
        _characters_known(
            tool, draft, _pointed(f"{where}/{index}", "requiredCharacters", required), own
        )


def _arc_ids(draft: StoryDraft, character_id: str) -> set[str]:
    for character in draft.characters:
        if character.id == character_id:
            arc = _arc(character)
            return {encounter.id for encounter in arc.arc_encounters} if arc else set()
    return set()


def _portrait(tool: Tool, draft: StoryDraft, context: Workshop, character: Character) -> str | None:
    if not character.image_prompt:
        return None  # an empty prompt asks for no portrait
    return _asset(tool, draft, context, "portrait", character.id, _image(character.image_prompt))


@HANDLERS.handles(STORY_CHARACTER)
def _character(tool: Tool, latest: StoryDraft, value: Any, context: Workshop) -> Handled:
    _drafting(tool, latest)
    arguments: StoryCharacter = arguments_of(tool, value)
    draft = opened(latest)
    if any(character.id == arguments.id for character in draft.characters):
        raise ToolValidationError(
            tool.name,
            "/id",
            f"a character {shown(arguments.id)} is already proposed: "
            f"change it with {_name(STORY_UPDATE_ELEMENT)}",
        )
    character = _as(arguments, Character)
    _check_character(tool, draft, character, "")
    url = _portrait(tool, draft, context, character)
    draft.characters.append(character)
    result = StoryCharacterResult(ok=True, id=arguments.id, name=arguments.name, image_url=url)
    return Handled(result, _new(tool, draft), f"The character {shown(arguments.id)} is proposed.")


@HANDLERS.handles(STORY_ACT_OUTLINE)
def _outline(tool: Tool, latest: StoryDraft, value: Any, context: Workshop) -> Handled:
    _drafting(tool, latest)
    arguments: StoryActOutline = arguments_of(tool, value)
    _unique(
        tool,
        _pointed("", "intendedLocations", arguments.intended_locations),
        (),
        "an intended location of the act",
    )
    draft = opened(latest)
    placeholders = [
        DraftLocation(id=each, web=None, encounters=[], finalized=None)
        for each in arguments.intended_locations
    ]
    act = DraftAct(outline=arguments, locations=placeholders)
    existing = next((each for each in draft.acts if each.outline.id == arguments.id), None)
    with_placeholders = f"with {_counted(len(placeholders), 'placeholder location')}"
    if existing is None:
        draft.acts.append(act)
        message = f"The act {shown(arguments.id)} is outlined, {with_placeholders}."
    else:
        wired = [location.id for location in existing.locations if location.web is not None]
        if wired:
            raise ToolValidationError(
                tool.name,
                "/id",
                f"the act {shown(arguments.id)} is outlined already and its location "
                f"{shown(wired[0])} is wired: change the act with {_name(STORY_UPDATE_ELEMENT)}",
            )
        draft.acts[draft.acts.index(existing)] = act
        message = f"The act {shown(arguments.id)} is outlined again, {with_placeholders}."
    result = StoryActOutlineResult(ok=True, id=arguments.id, title=arguments.title)
    return Handled(result, _new(tool, draft), message)


def _check_web(
    tool: Tool, draft: StoryDraft, act: DraftAct, web: NodeWebLocation, prefix: str
) -> None:
    """A wired location's connections and characters, at `prefix` in the arguments."""
    intended = [location.id for location in act.locations]
    seen: set[str] = set()
    for pointer, each in _pointed(prefix, "connections", web.connections):
        if each == web.id:
            problem = "a location does not connect to itself"
        elif each not in intended:
            problem = _not_intended(act, each)
        elif each in seen:
            problem = f"{shown(each)} is named twice"
        else:
            seen.add(each)
            continue
        raise ToolValidationError(tool.name, pointer, problem)
    required = _given(web.required_characters, [])
    _characters_known(tool, draft, _pointed(prefix, "requiredCharacters", required))


@HANDLERS.handles(STORY_NODE_WEB)
def _node_web(tool: Tool, latest: StoryDraft, value: Any, context: Workshop) -> Handled:
    _drafting(tool, latest)
    arguments: StoryNodeWeb = arguments_of(tool, value)
    draft = opened(latest)
    act = _act(tool, draft, arguments.act_id, "/actId")
    webs = arguments.locations
    _unique(
        tool,
        ((f"/locations/{index}/id", web.id) for index, web in enumerate(webs)),
        (),
        "a location of this call",
    )
    for index, web in enumerate(webs):
        location = _location(tool, act, web.id, f"/locations/{index}/id")
        _check_web(tool, draft, act, web, f"/locations/{index}")
        location.web = web  # its encounters and assets stay
    result = StoryNodeWebResult(ok=True, updated_locations=len(webs))
    message = f"Wired {_counted(len(webs), 'location')} of act {shown(arguments.act_id)}."
    return Handled(result, _new(tool, draft), message)


@HANDLERS.handles(STORY_NODE_ENCOUNTERS)
def _encounters(tool: Tool, latest: StoryDraft, value: Any, context: Workshop) -> Handled:
    _drafting(tool, latest)
    arguments: StoryNodeEncounters = arguments_of(tool, value)
    draft = opened(latest)
    act, location = _node(tool, draft, arguments.act_id, arguments.node_id)
    _wired(tool, act, location)
    encounters = arguments.encounters
    _unique(
        tool,
        ((f"/encounters/{index}/id", each.id) for index, each in enumerate(encounters)),
        encounter_ids(draft, besides=(arguments.act_id, arguments.node_id)),
        "an encounter",
    )
    for index, encounter in enumerate(encounters):
        required = _given(encounter.required_characters, [])
        _characters_known(
            tool, draft, _pointed(f"/encounters/{index}", "requiredCharacters", required)
        )
    location.encounters = encounters  # the pool is replaced, never extended
    result = StoryNodeEncountersResult(
        ok=True, updated=arguments.node_id, encounter_count=len(encounters)
    )
    message = f"The pool of {_where(act, location)} holds {_counted(len(encounters), 'encounter')}."
    return Handled(result, _new(tool, draft), message)


@HANDLERS.handles(STORY_FINALIZE_NODE)
def _finalize_node(tool: Tool, latest: StoryDraft, value: Any, context: Workshop) -> Handled:
    _drafting(tool, latest)
    arguments: StoryFinalizeNode = arguments_of(tool, value)
    draft = opened(latest)
    act, location = _node(tool, draft, arguments.act_id, arguments.node_id)
    _filled(tool, act, location)
    web = _wired(tool, act, location)
    background = _asset(
        tool, draft, context, "background", web.location, _image(arguments.background_prompt)
    )
    music_prompts = tuple((prompt.text, prompt.weight) for prompt in arguments.music_prompts)
    music = _asset(tool, draft, context, "music", web.mood, music_prompts)
    location.finalized = NodeAssets(
        background_prompt=arguments.background_prompt, music_prompts=arguments.music_prompts
    )
    result = StoryFinalizeNodeResult(
        ok=True, id=web.id, title=web.title, background_url=background, music_url=music
    )
    return Handled(result, _new(tool, draft), f"{_where(act, location).capitalize()} is finalized.")


# updateElement ----------------------------------------------------------------------------------


def _merged(
    tool: Tool,
    contract: Contract[Any],
    element: msgspec.Struct,
    changes: dict[str, Any],
    fixed: tuple[str, ...],
) -> Any:
    """`element` with `changes` merged at the top level, judged by `contract` as one of its own.

    The changes are a partial document of the element's contract, so they
    are merged into its JSON; the result is the contract's type (a location
    of a node web for a node).
    """
    for key in changes:
        if key in fixed:
            raise ToolValidationError(
                tool.name,
                f"/changes/{escape_token(key)}",
                f"cannot be changed by {tool.name}" + _instead(contract, key),
            )
    merged = {**msgspec.to_builtins(element), **changes}
    if contract is STORY_NODE_WEB:  # a location is judged as one of a node web
        wrapped, inside = {"actId": "a", "locations": [merged]}, "/locations/0"
    else:
        wrapped, inside = merged, ""
    try:
        judged = convert(contract, wrapped)
    except ContractError as error:
        first = error.violations[0]
        pointer = "/changes" + first.pointer.removeprefix(inside)
        raise ToolValidationError(tool.name, pointer, first.message) from None
    return judged.locations[0] if isinstance(judged, StoryNodeWeb) else judged


def _instead(contract: Contract[Any], key: str) -> str:
    if contract is STORY_ACT_OUTLINE and key == "intendedLocations":
        return f": outline the act again with {_name(STORY_ACT_OUTLINE)}"
    return ": ids are fixed"


_IDS = {"premise": (), "character": ("id",), "act": ("id",), "node": ("actId", "id")}
"The ids each kind of element needs; it takes no other (the schema's description says so)."


@HANDLERS.handles(STORY_UPDATE_ELEMENT)
def _update(tool: Tool, latest: StoryDraft, value: Any, context: Workshop) -> Handled:
    _drafting(tool, latest)
    arguments: StoryUpdateElement = arguments_of(tool, value)
    draft = opened(latest)
    changes = arguments.changes
    kind = arguments.type
    for key in ("actId", "id"):
        if key in _IDS[kind] and key not in value:
            raise ToolValidationError(
                tool.name, "", f"missing required field {shown(key)}: type {shown(kind)} needs it"
            )
        if key not in _IDS[kind] and key in value:
            raise ToolValidationError(tool.name, f"/{key}", f"type {shown(kind)} takes no {key}")
    element = arguments.id if isinstance(arguments.id, str) else None
    act_id = arguments.act_id if isinstance(arguments.act_id, str) else ""
    image: str | None = None
    if kind == "premise":
        if arguments.regenerate_image:
            raise ToolValidationError(tool.name, "/regenerateImage", "the premise has no image")
        premise: StoryPremise = _merged(tool, STORY_PREMISE, _proposed(tool, draft), changes, ())
        draft.locale = premise.language
        draft.premise = premise
    elif kind == "character":
        index = _character_index(tool, draft, element or "")
        merged: StoryCharacter = _merged(
            tool, STORY_CHARACTER, draft.characters[index], changes, ("id",)
        )
        character = _as(merged, Character)
        _check_character(tool, draft, character, "/changes")
        draft.characters[index] = character
        if arguments.regenerate_image:
            image = _portrait(tool, draft, context, character)
            if image is None:
                raise ToolValidationError(
                    tool.name, "/regenerateImage", "the character's imagePrompt is empty"
                )
    elif kind == "act":
        if arguments.regenerate_image:
            raise ToolValidationError(tool.name, "/regenerateImage", "an act has no image")
        act = _act(tool, draft, element or "", "/id")
        act.outline = _merged(
            tool, STORY_ACT_OUTLINE, act.outline, changes, ("id", "intendedLocations")
        )
    else:
        act = _act(tool, draft, act_id, "/actId")
        location = _location(tool, act, element or "", "/id")
        web: NodeWebLocation = _merged(
            tool, STORY_NODE_WEB, _wired(tool, act, location), changes, ("id",)
        )
        _check_web(tool, draft, act, web, "/changes")
        location.web = web
        if arguments.regenerate_image:
            if location.finalized is None:
                raise ToolValidationError(
                    tool.name,
                    "/regenerateImage",
                    f"{_where(act, location)} has no image yet: "
                    f"finalize it with {_name(STORY_FINALIZE_NODE)} first",
                )
            prompt = _image(location.finalized.background_prompt)
            image = _asset(tool, draft, context, "background", web.location, prompt)
    result = StoryUpdateElementResult(ok=True, updated=kind, id=element)
    named = "" if element is None else f" {shown(element)}"
    again = ", its image made again" if image is not None else ""
    return Handled(result, _new(tool, draft), f"Updated the {kind}{named}{again}.")


def _character_index(tool: Tool, draft: StoryDraft, character_id: str) -> int:
    for index, character in enumerate(draft.characters):
        if character.id == character_id:
            return index
    known = _listed(character.id for character in draft.characters)
    raise ToolValidationError(
        tool.name,
        "/id",
        f"no character {shown(character_id)} is proposed (the characters: {known})",
    )


# finalizePackage ----------------------------------------------------------------------------------


@HANDLERS.handles(STORY_FINALIZE_PACKAGE)
def _finalize_package(tool: Tool, latest: StoryDraft, value: Any, context: Workshop) -> Handled:
    _drafting(tool, latest)
    arguments: StoryFinalizePackage = arguments_of(tool, value)
    draft = opened(latest)
    if not draft.characters:
        raise ToolValidationError(
            tool.name,
            None,
            f"there is no character yet: propose one with {_name(STORY_CHARACTER)} first",
        )
    if not draft.acts:
        raise ToolValidationError(
            tool.name,
            None,
            f"there is no act yet: outline one with {_name(STORY_ACT_OUTLINE)} first",
        )
    for act in draft.acts:
        for location in act.locations:
            _filled(tool, act, location)
            if location.finalized is None:
                raise ToolValidationError(
                    tool.name,
                    None,
                    f"{_where(act, location)} is not finalized: "
                    f"finalize it with {_name(STORY_FINALIZE_NODE)} first",
                )
    document, problems = package_of(draft, arguments.title, context.now())
    if problems:
        first = problems[0]
        more = "" if len(problems) == 1 else f" and {len(problems) - 1} more"
        raise ToolValidationError(
            tool.name,
            None,
            f"the package is not valid: {first.pointer or 'the package'}: {first.message}{more}",
            problems,
        )
    package: StoryPackage = convert(STORY_PACKAGE, document)
    draft.status = "finalized"
    total = package.meta.total_nodes or 0
    result = StoryFinalizePackageResult(
        ok=True, package_id=package.id, title=package.title, total_nodes=total
    )
    message = (
        f"The package {shown(package.title)} is finalized, with {_counted(total, 'location')}."
    )
    return Finalized(result, _new(tool, draft), message, package=package)
