"""Rules of the story package that a JSON Schema cannot state, checked on parsed JSON.

What finalizing a package checks, so that `validate story-package` reports it
for any package, every problem with its pointer:

- References resolve. Each connection names a location of its own act;
  each `requiredCharacters` entry (of locations, encounters and arc
  encounters) names a character; an arc encounter's `arcCharacterId` names
  the character whose arc holds it. Asset keys resolve: each location's
  `location` key in `assets.backgrounds`, its `mood` in `assets.music`, and
  the id of each character whose `imagePrompt` is not blank in
  `assets.characters` (a blank prompt asks for no portrait). Assets nothing
  names are allowed: a renamed mood may leave one behind, harmlessly.
- Every location has at least one encounter. One with neither encounters
  nor connections is a placeholder the node web never filled, and is
  reported as such (once, and not also as unreachable).
- Every location is reachable from its act's start, the act's first
  location, by following connections one way, as written.
- Every prerequisite flag can be set. Acts are played in order and flags
  carry over from one to the next; an arc encounter can happen from the
  first act its character is in (required by a location or an encounter of
  it) on. An encounter happens once its prerequisites are set by encounters
  that can happen themselves (in its act, an earlier one, or an arc): flags
  set by nobody, only in a later act, or only by encounters that can never
  happen (a chain back to a missing flag, a cycle) are reported at the
  prerequisite.
- An act's `globalProgression.requiredValue` is reachable by more than one
  path. A path is a set of encounters whose `givesProgression`, each counted
  once (a repeatable one too: replaying is no other path), adds up to the
  required value; the act's encounters and the arc encounters of the
  characters in the act count. There is more than one such set exactly when
  the total still reaches the value without the encounter that gives least,
  which is what is checked: reaching it must never take every encounter
  that gives progression. Prerequisites are the flag rule's to judge.
- Doom-clock thresholds (`opposingForce.escalationEvents`) strictly increase
  and are at most the clock's `requiredValue`, where the climax is forced.
- No dead ends: every encounter (arc encounters too) gives progression,
  sets a flag, or is repeatable. The seed says encounters MUST assign
  `potentialFlags` and `givesProgression`; the schema keeps both optional,
  since ambient filler has neither, and this rule asks for one of the three.

- Varied pacing: a location with two encounters or more does not give them
  all one `pacing.focus`. The seed asks each location to mix
  `dialogue_and_worldbuilding` with `tension_and_action`; a location of one
  encounter cannot, and a quiet one (`standard` beside dialogue, as the
  upstream package's reading room) is the author's choice, so what is
  refused is a pool of one pace.

What playing a package (`story play`, `play.py`) needs besides; the second
was found by playing random finalized packages until a state had no way
forward:

- Ids are unique: characters, acts, encounters (of every act and arc
  together), a location or inevitable event within its act. A playthrough
  names them by id.
- Every act can always end, whatever the player chose before. An act ends by
  its progression tracker, its doom clock or an inevitable event that forces
  the climax (which the Director may fire at any time). So an act has an
  event that `forcesClimax`; or a doom clock, and at each location a
  connection or a repeatable encounter that can always be played there (with
  no flag but those the location's own encounters set: a player may arrive
  having skipped every other), so that a choice, which advances the clock,
  is always offered until it is full; or a tracker whose `requiredValue` the
  encounters that can always be played give, and every location reached
  leading back to the act's start (a player who follows a one-way connection
  is not stranded away from them). The encounters that can always be played
  are those no flag any encounter sets excludes, whose prerequisites such
  encounters of the same act set: a flag of an earlier act may have been
  missed there, and an arc encounter counts only in the first act its
  character is in, since it may have been played there.

Each rule reads the value as parsed, whatever else is wrong with it, and
checks only what is there and well typed. The rules walk the package in
loops, never by recursion, and with sets and maps keyed by id, so any value
costs time linear in its size.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ...generated import STORY_PACKAGE, STORY_PLAYTHROUGH
from ..core.errors import Violation, shown
from ..core.jsontext import escape_token
from ..core.rules import Rules, as_integer

__all__ = ["RULES", "STORY_PACKAGE_RULES", "STORY_PLAYTHROUGH_RULES"]

NAMES_SHOWN = 5
"Ids quoted at most in one message: a hostile package could hold millions."


@dataclass
class _Act:
    index: int
    where: str
    value: dict[str, Any]
    label: str
    "How messages name the act: its id, or its pointer when it has none."
    locations: list[tuple[int, str, dict[str, Any]]]
    "Each location that is an object: its index, pointer and value."
    encounters: list[tuple[str, dict[str, Any]]]
    by_id: dict[str, dict[str, Any]]
    "Each location by id; the first one, where ids repeat."
    present: dict[str, None]
    "The ids that the act's locations and encounters require, in order."


@dataclass
class _Arc:
    owner: str | None
    where: str
    value: dict[str, Any]


@dataclass
class _Story:
    package: dict[str, Any]
    characters: list[tuple[int, dict[str, Any]]]
    character_ids: dict[str, int]
    acts: list[_Act]
    arcs: list[_Arc]


@dataclass(eq=False)
class _Node:
    """An encounter in the search for the flags that can be set."""

    where: str
    prerequisites: list[tuple[int, str]]
    sets: list[str]
    missing: int = 0
    "How many distinct prerequisites are not set yet."
    dead: bool = False
    "True once its act is over: flags set later no longer make it happen."


@dataclass
class _Setters:
    """Where each flag is in some encounter's potentialFlags, whether it can happen or not."""

    first_act: dict[str, int] = field(default_factory=dict)
    "The first act with an encounter that names the flag."
    anywhere: set[str] = field(default_factory=set)
    labels: dict[int, str] = field(default_factory=dict)
    "Each act's label by its index."


def _story_package(value: Any) -> Iterator[Violation]:
    if not isinstance(value, dict):
        return  # the schema says what it should have been
    story = _read(value)
    yield from _connections(story)
    yield from _characters(story)
    yield from _assets(story)
    yield from _encounter_pools(story)
    yield from _reachable_locations(story)
    yield from _flags(story)
    yield from _progression(story)
    yield from _doom_clocks(story)
    yield from _dead_ends(story)
    yield from _unique_ids(story)
    yield from _ways_to_end(story)
    yield from _pacing(story)


def _read(package: dict[str, Any]) -> _Story:
    """The parts of `package` the rules look at, each where it is well typed."""
    characters = [
        (index, character)
        for index, character in enumerate(_list(package.get("characters")))
        if isinstance(character, dict)
    ]
    character_ids: dict[str, int] = {}
    arcs = []
    for index, character in characters:
        owner = character.get("id")
        owner = owner if isinstance(owner, str) else None
        if owner is not None:
            character_ids.setdefault(owner, index)
        arc = character.get("personalArc")
        encounters = _list(arc.get("arcEncounters")) if isinstance(arc, dict) else []
        for number, encounter in enumerate(encounters):
            if isinstance(encounter, dict):
                where = f"/characters/{index}/personalArc/arcEncounters/{number}"
                arcs.append(_Arc(owner, where, encounter))
    plot = package.get("plot")
    acts = []
    for index, act in enumerate(_list(plot.get("acts")) if isinstance(plot, dict) else []):
        if isinstance(act, dict):
            acts.append(_read_act(index, act))
    return _Story(package, characters, character_ids, acts, arcs)


def _read_act(index: int, act: dict[str, Any]) -> _Act:
    where = f"/plot/acts/{index}"
    name = act.get("id")
    label = f"act {shown(name)}" if isinstance(name, str) else f"the act at {where}"
    locations = [
        (number, f"{where}/sandboxLocations/{number}", location)
        for number, location in enumerate(_list(act.get("sandboxLocations")))
        if isinstance(location, dict)
    ]
    encounters = [
        (f"{at}/encounters/{number}", encounter)
        for _, at, location in locations
        for number, encounter in enumerate(_list(location.get("encounters")))
        if isinstance(encounter, dict)
    ]
    by_id: dict[str, dict[str, Any]] = {}
    for _, _, location in locations:
        if isinstance(location.get("id"), str):
            by_id.setdefault(location["id"], location)
    present = {
        character: None
        for holder in (*(location for _, _, location in locations), *(e for _, e in encounters))
        for _, character in _strings(holder.get("requiredCharacters"))
    }
    return _Act(index, where, act, label, locations, encounters, by_id, present)


# References -------------------------------------------------------------------------


def _connections(story: _Story) -> Iterator[Violation]:
    act_of: dict[str, str] = {}
    for act in story.acts:
        for location_id in act.by_id:
            act_of.setdefault(location_id, act.label)
    for act in story.acts:
        for _, where, location in act.locations:
            for number, target in _strings(location.get("connections")):
                if target in act.by_id:
                    continue
                elsewhere = act_of.get(target)
                hint = (
                    f" (it is a location of {elsewhere}: connections stay within their act)"
                    if elsewhere is not None
                    else ""
                )
                yield Violation(
                    f"{where}/connections/{number}",
                    f"{shown(target)} is not a location of {act.label}{hint}",
                )


def _characters(story: _Story) -> Iterator[Violation]:
    holders: list[tuple[str, dict[str, Any]]] = []
    for act in story.acts:
        holders.extend((where, location) for _, where, location in act.locations)
        holders.extend(act.encounters)
    holders.extend((arc.where, arc.value) for arc in story.arcs)
    known = story.character_ids
    listed = f"its characters are {_names(known)}" if known else "it has none"
    for where, holder in holders:
        for number, character in _strings(holder.get("requiredCharacters")):
            if character not in known:
                yield Violation(
                    f"{where}/requiredCharacters/{number}",
                    f"{shown(character)} is not a character of the package ({listed})",
                )
    for arc in story.arcs:
        named = arc.value.get("arcCharacterId")
        if isinstance(named, str) and arc.owner is not None and named != arc.owner:
            yield Violation(
                f"{arc.where}/arcCharacterId",
                f"{shown(named)} is not {shown(arc.owner)}, whose arc holds this encounter",
            )


def _assets(story: _Story) -> Iterator[Violation]:
    assets = story.package.get("assets")
    if not isinstance(assets, dict):
        return

    def keyed(name: str) -> dict[str, Any] | None:
        files = assets.get(name)
        return files if isinstance(files, dict) else None

    portraits = keyed("characters")
    if portraits is not None:
        for index, character in story.characters:
            name, prompt = character.get("id"), character.get("imagePrompt")
            wanted = isinstance(prompt, str) and prompt.strip() != ""
            if wanted and isinstance(name, str) and name not in portraits:
                yield Violation(
                    f"/characters/{index}/id",
                    f"{shown(name)} has no portrait in /assets/characters, "
                    "though its imagePrompt asks for one",
                )
    for field_name, map_name, what in (
        ("location", "backgrounds", "background"),
        ("mood", "music", "music"),
    ):
        files = keyed(map_name)
        if files is None:
            continue
        for act in story.acts:
            for _, where, location in act.locations:
                key = location.get(field_name)
                if isinstance(key, str) and key not in files:
                    yield Violation(
                        f"{where}/{field_name}",
                        f"{shown(key)} has no {what} in /assets/{map_name}",
                    )


# Locations --------------------------------------------------------------------------


def _is_placeholder(location: dict[str, Any]) -> bool:
    """True for a location with neither encounters nor connections: the node web never filled it."""
    return _absent_or_empty(location, "encounters") and _absent_or_empty(location, "connections")


def _encounter_pools(story: _Story) -> Iterator[Violation]:
    for act in story.acts:
        for _, where, location in act.locations:
            if _is_placeholder(location):
                yield Violation(
                    where,
                    "is a placeholder: it has no connections and no encounters "
                    "(the node web and the encounters never filled it in)",
                )
            elif _absent_or_empty(location, "encounters"):
                yield Violation(
                    where, "has no encounters: every location has at least one for the Director"
                )


def _reachable_locations(story: _Story) -> Iterator[Violation]:
    for act in story.acts:
        if not act.locations or act.locations[0][0] != 0:
            continue  # no first location to start from: the schema says why
        start = act.locations[0][2].get("id")
        if not isinstance(start, str):
            continue
        reached = {start}
        waiting = [start]
        while waiting:
            location = act.by_id[waiting.pop()]
            for _, target in _strings(location.get("connections")):
                if target in act.by_id and target not in reached:
                    reached.add(target)
                    waiting.append(target)
        for _, where, location in act.locations:
            name = location.get("id")
            if isinstance(name, str) and name not in reached and not _is_placeholder(location):
                yield Violation(
                    where,
                    f"cannot be reached from the act's start, {shown(start)} "
                    "(its first location), by following connections",
                )


# Flags ------------------------------------------------------------------------------


def _node(where: str, encounter: dict[str, Any]) -> _Node:
    return _Node(
        where,
        list(_strings(encounter.get("prerequisites"))),
        [flag for _, flag in _strings(encounter.get("potentialFlags"))],
    )


def _flags(story: _Story) -> Iterator[Violation]:
    first_act: dict[str, int] = {}
    for act in story.acts:
        for character in act.present:
            first_act.setdefault(character, act.index)
    setters = _Setters(labels={act.index: act.label for act in story.acts})
    arcs_from: dict[int, list[_Node]] = {}
    absent: list[_Node] = []  # arcs of characters no act requires: they never happen
    for arc in story.arcs:
        node = _node(arc.where, arc.value)
        start = first_act.get(arc.owner) if arc.owner is not None else None
        (absent if start is None else arcs_from.setdefault(start, [])).append(node)
        _note_setters(setters, node, start)
    acts = [(act, [_node(where, e) for where, e in act.encounters]) for act in story.acts]
    for act, nodes in acts:
        for node in nodes:
            _note_setters(setters, node, act.index)

    flags_set: set[str] = set()
    waiting: dict[str, list[_Node]] = {}

    def settle(arrived: Iterable[_Node]) -> None:
        """Add encounters to the search and set every flag that follows, in a loop."""
        ready = []
        for node in arrived:
            missing = {flag for _, flag in node.prerequisites if flag not in flags_set}
            node.missing = len(missing)
            for flag in missing:
                waiting.setdefault(flag, []).append(node)
            if not missing:
                ready.append(node)
        while ready:
            for flag in ready.pop().sets:
                if flag in flags_set:
                    continue
                flags_set.add(flag)
                for other in waiting.pop(flag, ()):
                    other.missing -= 1
                    if other.missing == 0 and not other.dead:
                        ready.append(other)

    for act, nodes in acts:
        settle([*arcs_from.get(act.index, ()), *nodes])
        for node in nodes:
            if node.missing:
                node.dead = True  # the act is over; later flags come too late for it
                yield from _unmet(node, act, flags_set, setters)
    for nodes in arcs_from.values():
        for node in nodes:
            if node.missing:
                yield from _unmet(node, None, flags_set, setters)
    for node in absent:  # never in play: only a flag nobody sets is worth telling
        yield from _unmet(node, None, setters.anywhere, setters)


def _note_setters(setters: _Setters, node: _Node, act: int | None) -> None:
    for flag in node.sets:
        setters.anywhere.add(flag)
        if act is not None and act < setters.first_act.get(flag, act + 1):
            setters.first_act[flag] = act


def _unmet(
    node: _Node, act: _Act | None, flags_set: set[str], setters: _Setters
) -> Iterator[Violation]:
    """A violation for each prerequisite of `node` that is not set by the end of `act`."""
    for number, flag in node.prerequisites:
        if flag in flags_set:
            continue
        if flag not in setters.anywhere:
            why = "no encounter's potentialFlags name it, so this encounter can never happen"
        elif act is not None and setters.first_act.get(flag, -1) > act.index:
            later = setters.labels[setters.first_act[flag]]
            why = f"only encounters of a later act, {later}, set it, so this one can never happen"
        else:
            why = "only encounters that can never happen set it, so neither can this one"
        yield Violation(f"{node.where}/prerequisites/{number}", f"{shown(flag)}: {why}")


# Progression and the doom clock -----------------------------------------------------


def _progression(story: _Story) -> Iterator[Violation]:
    # Per character, what their arc gives in all and its least positive amount,
    # so each act adds a character's arc at once, whatever its length.
    arcs: dict[str, tuple[int, int]] = {}
    for arc in story.arcs:
        amount = _gives(arc.value)
        if arc.owner is not None and amount > 0:
            total, least = arcs.get(arc.owner, (0, amount))
            arcs[arc.owner] = (total + amount, min(least, amount))
    for act in story.acts:
        tracker = act.value.get("globalProgression")
        required = as_integer(tracker.get("requiredValue")) if isinstance(tracker, dict) else None
        if required is None:
            continue
        gives = [amount for _, e in act.encounters if (amount := _gives(e)) > 0]
        from_arcs = [arcs[name] for name in act.present if name in arcs]
        arc_total = sum(total for total, _ in from_arcs)
        total = sum(gives) + arc_total
        least = min((*gives, *(least for _, least in from_arcs)), default=0)
        if total - least >= required:
            continue
        source = f"the act's encounters give {total} in all"
        if arc_total:
            source += f" ({arc_total} of it from character arcs)"
        where = f"{act.where}/globalProgression/requiredValue"
        if total < required:
            message = f"is {required}, but {source}: the act can never be completed"
        else:
            message = (
                f"is {required}, and {source}: reaching it takes every encounter that gives "
                "progression, a single path; give more (one more encounter giving progression "
                "is enough) so that there is more than one"
            )
        yield Violation(where, message)


def _doom_clocks(story: _Story) -> Iterator[Violation]:
    for act in story.acts:
        clock = act.value.get("opposingForce")
        if not isinstance(clock, dict):
            continue
        maximum = as_integer(clock.get("requiredValue"))
        highest: int | None = None
        for number, event in enumerate(_list(clock.get("escalationEvents"))):
            threshold = as_integer(event.get("threshold")) if isinstance(event, dict) else None
            if threshold is None:
                continue
            where = f"{act.where}/opposingForce/escalationEvents/{number}/threshold"
            if highest is not None and threshold <= highest:
                yield Violation(
                    where,
                    f"is {threshold}, not above an earlier threshold, {highest}: "
                    "thresholds strictly increase",
                )
            if maximum is not None and threshold > maximum:
                yield Violation(
                    where,
                    f"is {threshold}, past the doom clock's maximum, its requiredValue {maximum}",
                )
            highest = threshold if highest is None else max(highest, threshold)


def _dead_ends(story: _Story) -> Iterator[Violation]:
    encounters = [e for act in story.acts for e in act.encounters]
    encounters.extend((arc.where, arc.value) for arc in story.arcs)
    for where, encounter in encounters:
        gives = as_integer(encounter.get("givesProgression", 0))
        flags = encounter.get("potentialFlags", [])
        repeatable = encounter.get("repeatable", False)
        if gives is None or not isinstance(flags, list) or not isinstance(repeatable, bool):
            continue  # not well typed: the schema says so
        if gives > 0 or flags or repeatable:
            continue
        yield Violation(
            where,
            "is a dead end: it gives no progression, sets no flag and is not repeatable "
            "(give it givesProgression, potentialFlags or repeatable: true)",
        )


# Play ---------------------------------------------------------------------------------


def _unique_ids(story: _Story) -> Iterator[Violation]:
    def repeats(ids: Iterable[tuple[str, Any]], what: str) -> Iterator[Violation]:
        seen: set[str] = set()
        for where, name in ids:
            if not isinstance(name, str):
                continue
            if name in seen:
                yield Violation(where, f"{shown(name)} is already the id of {what}: ids are unique")
            seen.add(name)

    yield from repeats(
        ((f"/characters/{index}/id", c.get("id")) for index, c in story.characters), "a character"
    )
    yield from repeats(((f"{a.where}/id", a.value.get("id")) for a in story.acts), "an act")
    encounters = [e for act in story.acts for e in act.encounters]
    encounters.extend((arc.where, arc.value) for arc in story.arcs)
    yield from repeats(((f"{where}/id", e.get("id")) for where, e in encounters), "an encounter")
    for act in story.acts:
        yield from repeats(
            ((f"{where}/id", place.get("id")) for _, where, place in act.locations),
            f"a location of {act.label}",
        )
        events = _list(act.value.get("inevitableEvents"))
        yield from repeats(
            (
                (f"{act.where}/inevitableEvents/{number}/id", event.get("id"))
                for number, event in enumerate(events)
                if isinstance(event, dict)
            ),
            f"an inevitable event of {act.label}",
        )


def _stranded(act: _Act) -> str | None:
    """The pointer of the first location reached from the act's start that cannot lead back."""
    if not act.locations or act.locations[0][0] != 0:
        return None  # no first location: the schema says why
    start = act.locations[0][2].get("id")
    if not isinstance(start, str):
        return None
    leads: dict[str, set[str]] = {}  # each location, to the locations it connects to
    led: dict[str, set[str]] = {}  # each location, from the locations connecting to it
    for name, location in act.by_id.items():
        for _, target in _strings(location.get("connections")):
            if target in act.by_id:
                leads.setdefault(name, set()).add(target)
                led.setdefault(target, set()).add(name)
    forward = _reached(start, leads)
    back = _reached(start, led)
    for _, where, location in act.locations:
        named = location.get("id")
        if isinstance(named, str) and named in forward and named not in back:
            return where
    return None


def _reached(start: str, edges: dict[str, set[str]]) -> set[str]:
    """Every node reached from `start` along `edges`, in a loop."""
    reached = {start}
    waiting = [start]
    while waiting:
        for other in edges.get(waiting.pop(), ()):
            if other not in reached:
                reached.add(other)
                waiting.append(other)
    return reached


def _ways_to_end(story: _Story) -> Iterator[Violation]:
    settable = {
        flag
        for _, encounter in [e for act in story.acts for e in act.encounters]
        + [(arc.where, arc.value) for arc in story.arcs]
        for _, flag in _strings(encounter.get("potentialFlags"))
    }
    first_act: dict[str, int] = {}
    for act in story.acts:
        for character in act.present:
            first_act.setdefault(character, act.index)
    for act in story.acts:
        if not isinstance(act.value.get("sandboxLocations"), list):
            continue  # no locations to play: the schema says why
        events = _list(act.value.get("inevitableEvents"))
        if any(isinstance(e, dict) and e.get("forcesClimax") is True for e in events):
            continue  # the Director may fire it whenever play would stall
        arcs = [
            arc.value
            for arc in story.arcs
            if arc.owner is not None and first_act.get(arc.owner) == act.index
        ]
        safe = _always_playable([e for _, e in act.encounters] + arcs, settable)
        clock = act.value.get("opposingForce")
        stuck = _stuck(act, settable) if isinstance(clock, dict) else None
        if isinstance(clock, dict) and stuck is None:
            continue  # a choice is always offered, and each one advances the clock
        tracker = act.value.get("globalProgression")
        required = as_integer(tracker.get("requiredValue")) if isinstance(tracker, dict) else None
        always = sum(_gives(encounter) for encounter in safe)
        stranded = _stranded(act)
        if required is not None and always >= required and stranded is None:
            continue
        otherwise = (
            "its doom clock stops there, and no inevitable event forces the climax"
            if stuck is not None
            else "it has no doom clock and no inevitable event that forces the climax"
        )
        if required is not None and always < required:
            if _total(act, story) < required:
                continue  # no play reaches it: the progression rule says so
            yield Violation(
                f"{act.where}/globalProgression/requiredValue",
                f"is {required}, but the encounters that can always be played give {always} "
                "(one a settable flag excludes, or that needs a flag of an earlier act, which "
                f"may have been missed, may never be), and {otherwise}"
                + (f" ({stuck} offers nothing once played)" if stuck is not None else ""),
            )
        elif required is not None and stranded is not None:
            yield Violation(
                stranded,
                "cannot lead back to the act's start by following connections: a player who "
                f"goes there is stranded away from the act's progression, and {otherwise}",
            )
        elif stuck is not None:
            yield Violation(
                stuck,
                "has no connection and no repeatable encounter that can always be played: once "
                "its encounters are played nothing is offered, so the doom clock stops before "
                "it is full, and the act has no progression tracker or climax event to end it",
            )
        else:
            yield Violation(
                act.where,
                "can never end: it has no globalProgression, no opposingForce and no inevitable "
                "event that forcesClimax",
            )


def _total(act: _Act, story: _Story) -> int:
    """What the act's encounters and the arcs of the characters in it give in all."""
    arcs = sum(_gives(arc.value) for arc in story.arcs if arc.owner in act.present)
    return sum(_gives(encounter) for _, encounter in act.encounters) + arcs


def _stuck(act: _Act, settable: set[str]) -> str | None:
    """The first location with no connection and no repeatable encounter always playable there.

    A player may reach a location with no connection holding no flag at all
    (those set elsewhere may have been skipped on the way), and cannot leave
    it: only the location's own encounters can set what its repeatable one
    needs.
    """
    for _, where, location in act.locations:
        if not _absent_or_empty(location, "connections"):
            continue
        here = [e for e in _list(location.get("encounters")) if isinstance(e, dict)]
        if not any(e.get("repeatable") is True for e in _always_playable(here, settable)):
            return where
    return None


def _always_playable(encounters: list[dict[str, Any]], settable: set[str]) -> list[dict[str, Any]]:
    """The encounters no settable flag excludes whose prerequisites such encounters set, in turn."""
    open_ = [
        e
        for e in encounters
        if not any(flag in settable for _, flag in _strings(e.get("excludeIfFlags")))
    ]
    flags: set[str] = set()
    chosen: list[dict[str, Any]] = []
    waiting: dict[str, list[tuple[dict[str, Any], set[str]]]] = {}
    ready = []
    for encounter in open_:
        missing = {flag for _, flag in _strings(encounter.get("prerequisites"))}
        if missing:
            entry = (encounter, missing)
            for flag in missing:
                waiting.setdefault(flag, []).append(entry)
        else:
            ready.append(encounter)
    while ready:
        encounter = ready.pop()
        chosen.append(encounter)
        for _, flag in _strings(encounter.get("potentialFlags")):
            if flag in flags:
                continue
            flags.add(flag)
            for other, missing in waiting.pop(flag, ()):
                missing.discard(flag)
                if not missing:
                    ready.append(other)
    return chosen


STORY_PACKAGE_RULES = Rules(STORY_PACKAGE.name, "the story package's rules", _story_package)
"What finalizing a package checks beyond its schema."


# Pacing -------------------------------------------------------------------------------


def _pacing(story: _Story) -> Iterator[Violation]:
    for act in story.acts:
        for _, where, location in act.locations:
            focuses = {
                pacing["focus"]
                for encounter in _list(location.get("encounters"))
                if isinstance(encounter, dict)
                and isinstance(pacing := encounter.get("pacing"), dict)
                and isinstance(pacing.get("focus"), str)
            }
            counted = sum(1 for e in _list(location.get("encounters")) if isinstance(e, dict))
            if counted >= 2 and len(focuses) == 1:
                yield Violation(
                    f"{where}/encounters",
                    f"gives every encounter the focus {shown(focuses.pop())}: a location's "
                    "pool varies its pacing (the seed mixes dialogue_and_worldbuilding with "
                    "tension_and_action), so give one of them another focus",
                )


# A playthrough ----------------------------------------------------------------------


def _story_playthrough(value: Any) -> Iterator[Violation]:
    """What a playthrough's own parts say of each other; its package's play checks the rest.

    Every act but the last has ended, and the last has exactly when the
    story has, the same way; act ids do not repeat; escalation thresholds
    strictly increase; `played` counts the log's encounter choices, no more
    and no fewer.
    """
    if not isinstance(value, dict):
        return
    acts = [
        (number, act)
        for number, act in enumerate(_list(value.get("acts")))
        if isinstance(act, dict)
    ]
    ended = value.get("ended")
    seen: set[str] = set()
    for number, act in acts:
        where = f"/acts/{number}"
        name = act.get("id")
        if isinstance(name, str):
            if name in seen:
                yield Violation(f"{where}/id", f"{shown(name)} is already an act reached")
            seen.add(name)
        last = number == len(_list(value.get("acts"))) - 1
        outcome = act.get("outcome")
        if not last and outcome is None:
            yield Violation(where, "has no outcome, yet a later act was reached: it ended")
        elif last and outcome != ended and isinstance(ended, str | None):
            story = "has not ended" if ended is None else f"ended by {shown(ended)}"
            said = "no outcome" if outcome is None else f"the outcome {shown(outcome)}"
            yield Violation(where, f"has {said}, but the story {story}: the last act tells how")
        highest = 0
        for index, threshold in enumerate(_list(act.get("escalations"))):
            if isinstance(threshold, int) and not isinstance(threshold, bool):
                if threshold <= highest:
                    yield Violation(
                        f"{where}/escalations/{index}",
                        f"is {threshold}, not above the one before, {highest}: "
                        "thresholds are reached in increasing order",
                    )
                highest = max(highest, threshold)
    played = value.get("played")
    log = value.get("log")
    if not isinstance(played, dict) or not isinstance(log, list):
        return
    counted: dict[str, int] = {}
    for choice in log:
        if isinstance(choice, dict) and choice.get("kind") == "encounter":
            name = choice.get("id")
            if isinstance(name, str):
                counted[name] = counted.get(name, 0) + 1
    for name, times in played.items():
        if as_integer(times) is not None and counted.get(name, 0) != times:
            yield Violation(
                f"/played/{escape_token(name)}",
                f"is {times}, but the log chooses the encounter {counted.get(name, 0)} times",
            )
    for name, times in counted.items():
        if name not in played:
            yield Violation(
                "/played",
                f"lacks {shown(name)}, which the log chooses {times} time(s)",
            )


STORY_PLAYTHROUGH_RULES = Rules(
    STORY_PLAYTHROUGH.name, "the story playthrough's rules", _story_playthrough
)
"What a playthrough's parts say of each other, checked without its package."

RULES = {STORY_PACKAGE.name: STORY_PACKAGE_RULES, STORY_PLAYTHROUGH.name: STORY_PLAYTHROUGH_RULES}
"The family's rules beyond its contracts' schemas, found by `runtime.core.rules`."


# Helpers ----------------------------------------------------------------------------


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _strings(value: Any) -> Iterator[tuple[int, str]]:
    """Each string of a list, with its index: the rules look only at well-typed entries."""
    for index, item in enumerate(_list(value)):
        if isinstance(item, str):
            yield index, item


def _absent_or_empty(holder: dict[str, Any], name: str) -> bool:
    """True when `holder` has no `name`, or an empty list there (another type is the schema's)."""
    value = holder.get(name, [])
    return isinstance(value, list) and not value


def _gives(encounter: dict[str, Any]) -> int:
    """The progression an encounter gives: 0 unless it is a well-typed positive integer."""
    amount = as_integer(encounter.get("givesProgression"))
    return amount if amount is not None and amount > 0 else 0


def _names(names: Iterable[str]) -> str:
    """The first NAMES_SHOWN names, quoted, and how many more there are."""
    listed: list[str] = []
    more = 0
    for name in names:
        if len(listed) < NAMES_SHOWN:
            listed.append(shown(name, limit=40))
        else:
            more += 1
    return ", ".join(listed) + (f" and {more} more" if more else "")
