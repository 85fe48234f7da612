"""Playing a finished story package as the seed's Director would: pure functions, no I/O.

    state = start(package)
    while state.ended is UNSET:
        choices = offered(package, state)           # what the player may do now
        state = choose(package, state, choices[0].choice)

The package is a finalized one (it satisfies its schema and the package's
rules, which keep its ids unique); the state is a `story-playthrough`
document. What the Director does, as the playthrough contract's description
says it:

- At a location, it offers the encounters of the location's pool whose
  prerequisites are all set and none of whose `excludeIfFlags` is set, not
  yet played or repeatable, by priority (urgent first), then the arc
  encounters of the characters present (required by the location or by one
  of its encounters) on the same terms, then a move along each connection,
  then each inevitable event of the act not yet fired: its trigger
  condition is free text that only a person (or a model) can judge, so the
  one playing the Director fires it.
- Each choice advances the act's doom clock by one, up to its
  `requiredValue`; each escalation threshold reached happens once.
- An encounter sets all its `potentialFlags` and gives its progression
  the first time it is played.
- The act ends by progression (its tracker reached), by a fired event that
  forces the climax, or by doom (its clock full), checked in that order;
  play goes on at the next act's first location, or the story ends.

Every function reads the package as given and returns new values: the
state passed in is never changed. Each costs time linear in the package's
size (and `resumed` in the log's length times that).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

import msgspec
from msgspec import UNSET, UnsetType

from ...generated.story_packages import (
    Act,
    ActState,
    ArcEncounter,
    Choice,
    Encounter,
    Location,
    Outcome,
    PackageRef,
    StoryPackage,
    StoryPlaythrough,
)
from ..core.contracts import field_bound
from ..core.errors import PlayRefused, shown

__all__ = [
    "MAX_CHOICES",
    "Offer",
    "choose",
    "happenings",
    "offered",
    "package_hash",
    "resolve",
    "resumed",
    "start",
]

MAX_CHOICES = field_bound(StoryPlaythrough, "log", "max_length")
"The most choices one playthrough takes: its log's bound in the contract."

_PRIORITY = {"urgent": 0, "high": 1, "normal": 2, "low": 3}
"The Director's order of preference between encounters offered together."


@dataclass(frozen=True)
class Offer:
    """One choice offered now: the choice itself, and what a player reads of it."""

    choice: Choice
    title: str
    "The encounter's, location's or event's title."
    detail: str
    "For an encounter its type and focus, for a move nothing, for an event its trigger condition."


def package_hash(package: StoryPackage) -> str:
    """The SHA-256 (hex) of `package`'s content: its model in compact JSON, keys sorted.

    Two files holding the same package in other layouts, key orders or with
    defaults written out or left out, have the same hash.
    """
    return hashlib.sha256(msgspec.json.encode(package, order="sorted")).hexdigest()


def start(package: StoryPackage) -> StoryPlaythrough:
    """A new playthrough of `package`: its first act, at the act's first location."""
    first = package.plot.acts[0]
    return StoryPlaythrough(
        package=PackageRef(id=package.id, sha256=package_hash(package)),
        acts=[_new_act(first)],
        location=first.sandbox_locations[0].id,
        flags=[],
        played={},
        log=[],
    )


def offered(package: StoryPackage, state: StoryPlaythrough) -> list[Offer]:
    """What the player may choose now, in the order the Director prefers; empty once it ended.

    Raises PlayRefused when `state` names an act or location `package` lacks.
    """
    if state.ended is not UNSET:
        return []
    act, location = _where(package, state)
    flags = set(state.flags)
    offers = [
        Offer(Choice(kind="encounter", id=e.id), e.title, _about(e))
        for e in _encounters_here(package, location)
        if _available(e, flags, state.played)
    ]
    seen: set[str] = set()
    for target in location.connections:
        if target not in seen:
            seen.add(target)
            offers.append(Offer(Choice(kind="move", id=target), _location(act, target).title, ""))
    fired = set(state.acts[-1].events)
    for event in act.inevitable_events or ():
        if event.id not in fired:
            detail = event.trigger_condition
            offers.append(Offer(Choice(kind="event", id=event.id), event.title, detail))
    return offers


def resolve(package: StoryPackage, state: StoryPlaythrough, wanted: int | str | Choice) -> Choice:
    """The choice offered now that `wanted` names: its number (from 1), its id, or itself.

    Raises PlayRefused, in one line, when it names none, or (an id) more
    than one kind of choice.
    """
    choices = offered(package, state)
    if state.ended is not UNSET:
        raise PlayRefused(f"the story has ended (by {state.ended}): no choice is offered")
    if isinstance(wanted, Choice):
        if any(offer.choice == wanted for offer in choices):
            return wanted
        raise PlayRefused(f"{wanted.kind} {shown(wanted.id)} is not offered now{_listed(choices)}")
    if isinstance(wanted, int):
        if 1 <= wanted <= len(choices):
            return choices[wanted - 1].choice
        raise PlayRefused(f"no choice {wanted}: the choices are numbered 1 to {len(choices)}")
    named = [offer.choice for offer in choices if offer.choice.id == wanted]
    if not named:
        raise PlayRefused(f"{shown(wanted)} is not offered now{_listed(choices)}")
    if len(named) > 1:
        kinds = " and ".join(choice.kind for choice in named)
        raise PlayRefused(
            f"{shown(wanted)} names both a{'n' if kinds[0] in 'ae' else ''} {kinds}: "
            "choose by number, or by kind and id"
        )
    return named[0]


def choose(package: StoryPackage, state: StoryPlaythrough, choice: Choice) -> StoryPlaythrough:
    """The playthrough after `choice`, one of those `offered` now; `state` is left as it was.

    Raises PlayRefused, in one line, when the choice is not offered now, the
    story has ended, or the log is full.
    """
    if state.ended is not UNSET:
        raise PlayRefused(f"the story has ended (by {state.ended}): no choice is offered")
    if len(state.log) >= MAX_CHOICES:
        raise PlayRefused(f"the playthrough is full: it took {MAX_CHOICES} choices, the most")
    act, location = _where(package, state)
    flags = list(state.flags)
    played = dict(state.played)
    current = msgspec.structs.replace(
        state.acts[-1],
        escalations=list(state.acts[-1].escalations),
        events=list(state.acts[-1].events),
    )
    place = state.location
    climax = False
    refused = f"{choice.kind} {shown(choice.id)} is not offered now"
    if choice.kind == "encounter":
        encounter = next(
            (e for e in _encounters_here(package, location) if e.id == choice.id), None
        )
        if encounter is None or not _available(encounter, set(flags), played):
            raise PlayRefused(refused)
        first_time = choice.id not in played
        played[choice.id] = played.get(choice.id, 0) + 1
        known = set(flags)
        for flag in encounter.potential_flags or ():
            if flag not in known:
                known.add(flag)
                flags.append(flag)
        if first_time:
            current.progression += encounter.gives_progression or 0
    elif choice.kind == "move":
        if choice.id not in location.connections:
            raise PlayRefused(refused)
        place = choice.id
    else:
        event = next((e for e in act.inevitable_events or () if e.id == choice.id), None)
        if event is None or event.id in current.events:
            raise PlayRefused(refused)
        current.events.append(event.id)
        climax = event.forces_climax
    clock = act.opposing_force
    if clock is not UNSET:
        current.doom = min(current.doom + 1, clock.required_value)
        for escalation in clock.escalation_events:
            if (
                escalation.threshold <= current.doom
                and escalation.threshold not in current.escalations
            ):
                current.escalations.append(escalation.threshold)
    acts = [*state.acts[:-1], current]
    ended: Outcome | UnsetType = UNSET
    outcome = _outcome(act, current, climax)
    if outcome is not None:
        current.outcome = outcome
        following = len(acts)
        if following < len(package.plot.acts):
            after = package.plot.acts[following]
            acts.append(_new_act(after))
            place = after.sandbox_locations[0].id
        else:
            ended = outcome
    return StoryPlaythrough(
        package=state.package,
        acts=acts,
        location=place,
        flags=flags,
        played=played,
        log=[*state.log, choice],
        ended=ended,
    )


def resumed(package: StoryPackage, state: StoryPlaythrough) -> StoryPlaythrough:
    """`state`, once checked to be a playthrough of `package` that its log replays exactly.

    Raises PlayRefused, in one line, when it names another package (by id)
    or another content of it (by hash), when a choice of its log was not
    offered where it was made, or when the state is not the one its log
    leads to.
    """
    if state.package.id != package.id:
        raise PlayRefused(f"it is a playthrough of package {state.package.id}, not of {package.id}")
    if state.package.sha256 != package_hash(package):
        raise PlayRefused(
            f"it is a playthrough of another version of package {package.id}: "
            "its content hash differs, so its choices may no longer be offered"
        )
    replayed = start(package)
    for number, choice in enumerate(state.log, 1):
        try:
            replayed = choose(package, replayed, choice)
        except PlayRefused as refusal:
            raise PlayRefused(f"its log's choice {number} cannot be replayed: {refusal}") from None
    if msgspec.json.encode(replayed) != msgspec.json.encode(state):
        raise PlayRefused("its state is not the one its log leads to: it was changed by hand")
    return replayed


def happenings(
    package: StoryPackage, before: StoryPlaythrough, after: StoryPlaythrough
) -> list[str]:
    """What happened between two states, one after the other, as lines a player reads.

    The doom clock's escalations reached, the inevitable event fired, how an
    act ended and the next began, and how the story ended.
    """
    lines: list[str] = []
    for index, now in enumerate(after.acts):
        act = package.plot.acts[index]
        then = before.acts[index] if index < len(before.acts) else _new_act(act)
        clock = act.opposing_force
        if clock is not UNSET:
            said = {e.threshold: e.description for e in clock.escalation_events}
            lines.extend(
                f"{clock.tracker_label} reaches {threshold}: {said[threshold]}"
                for threshold in now.escalations[len(then.escalations) :]
            )
        events = {e.id: e for e in act.inevitable_events or ()}
        lines.extend(
            f"{events[fired].title}: {events[fired].description}"
            for fired in now.events[len(then.events) :]
        )
        if now.outcome is not UNSET and then.outcome is UNSET:
            lines.append(f"{act.title} ends ({_ended_by(act, now.outcome)})")
        if index >= len(before.acts):
            lines.append(f"{act.title} begins: {act.objective}")
    if after.ended is not UNSET and before.ended is UNSET:
        lines.append("the story ends")
    return lines


# Helpers ----------------------------------------------------------------------------


def _new_act(act: Act) -> ActState:
    return ActState(id=act.id, progression=0, doom=0, escalations=[], events=[])


def _where(package: StoryPackage, state: StoryPlaythrough) -> tuple[Act, Location]:
    """The current act and location; PlayRefused when the package has no such act or location."""
    index = len(state.acts) - 1
    acts = package.plot.acts
    if index >= len(acts) or acts[index].id != state.acts[-1].id:
        raise PlayRefused(f"the package has no act {shown(state.acts[-1].id)} at {index + 1}")
    act = acts[index]
    return act, _location(act, state.location)


def _location(act: Act, name: str) -> Location:
    for location in act.sandbox_locations:
        if location.id == name:
            return location
    raise PlayRefused(f"act {shown(act.id)} has no location {shown(name)}")


def _encounters_here(
    package: StoryPackage, location: Location
) -> Iterator[Encounter | ArcEncounter]:
    """The location's pool by priority, then the arcs of the characters present, by priority."""
    pool = list(location.encounters or ())
    yield from sorted(pool, key=lambda e: _PRIORITY[e.priority])
    present = set(location.required_characters)
    for encounter in pool:
        present.update(encounter.required_characters or ())
    arcs = [
        encounter
        for character in package.characters
        if character.id in present and character.personal_arc is not UNSET
        for encounter in character.personal_arc.arc_encounters
    ]
    yield from sorted(arcs, key=lambda e: _PRIORITY[e.priority])


def _available(
    encounter: Encounter | ArcEncounter, flags: set[str], played: dict[str, int]
) -> bool:
    if encounter.id in played and not encounter.repeatable:
        return False
    if any(flag not in flags for flag in encounter.prerequisites or ()):
        return False
    return not any(flag in flags for flag in encounter.exclude_if_flags or ())


def _about(encounter: Encounter | ArcEncounter) -> str:
    focus = encounter.pacing.focus.replace("_", " ")
    return f"{encounter.type.replace('_', ' ')}, {focus}" + (
        ", repeatable" if encounter.repeatable else ""
    )


def _outcome(act: Act, current: ActState, climax: bool) -> Outcome | None:
    tracker = act.global_progression
    if tracker is not UNSET and current.progression >= tracker.required_value:
        return "progression"
    if climax:
        return "climax"
    clock = act.opposing_force
    if clock is not UNSET and current.doom >= clock.required_value:
        return "doom"
    return None


def _ended_by(act: Act, outcome: str) -> str:
    if outcome == "progression" and act.global_progression is not UNSET:
        return f"{act.global_progression.tracker_label} reached"
    if outcome == "doom" and act.opposing_force is not UNSET:
        return f"{act.opposing_force.tracker_label} full: the climax is forced"
    return "an inevitable event forces the climax"


def _listed(choices: list[Offer]) -> str:
    if not choices:
        return ": nothing is"
    names = ", ".join(f"{offer.choice.kind} {offer.choice.id}" for offer in choices[:8])
    more = len(choices) - 8
    return f" (offered: {names}{f' and {more} more' if more > 0 else ''})"
