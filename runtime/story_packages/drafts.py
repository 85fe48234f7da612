"""Drafts: a new one, a copy to change, the new draft made of it, the package it makes.

`opened` copies the latest draft, deeply and typed as it is, a handler
(`handlers`) changes that copy once it has checked the call, and `closed`
judges the copy by the draft's contract (`story-draft`, whose schema holds
every limit the models do not check when a field is set) and makes the new
draft of it. The draft before is never touched, so a call refused anywhere
along the way leaves it as it was. `package_of` assembles a finished draft
into a story package's document and judges it, every violation with its
JSON Pointer.
"""

from __future__ import annotations

import copy
import math
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import msgspec

from ...generated import STORY_DRAFT, STORY_PACKAGE
from ...generated.story_packages import PersonalArc, StoryDraft
from ..core.errors import Violations
from ..core.validation import convert, violations

__all__ = [
    "closed",
    "encounter_ids",
    "estimated_duration",
    "new_draft",
    "opened",
    "package_of",
]

SECONDS_PER_FRAME = (10, 20)
"The pace a playthrough's estimate assumes: each expected frame takes 10 to 20 seconds."


def new_draft(locale: str, package_id: str | None = None) -> StoryDraft:
    """An empty draft in `locale`, with `package_id` or a new random UUID.

    Raises `ContractError` when the locale is no language tag or the id no UUID.
    """
    return convert(
        STORY_DRAFT,
        {
            "packageId": package_id or str(uuid.uuid4()),
            "locale": locale,
            "status": "drafting",
            "generationMs": 0,
            "premise": None,
            "characters": [],
            "acts": [],
            "assets": {"backgrounds": {}, "characters": {}, "music": {}},
        },
    )


def opened(draft: StoryDraft) -> StoryDraft:
    """A deep copy of `draft` to change: nothing done to it reaches `draft`."""
    return copy.deepcopy(draft)


def closed(draft: StoryDraft) -> StoryDraft:
    """The changed copy as the new draft. Raises `ContractError` if it breaks its contract."""
    return convert(STORY_DRAFT, msgspec.to_builtins(draft))


def encounter_ids(draft: StoryDraft, *, besides: tuple[str, str] | None = None) -> Iterator[str]:
    """Every encounter id in the draft, arc encounters included; `besides` (act, location) aside."""
    for act in draft.acts:
        for location in act.locations:
            if besides != (act.outline.id, location.id):
                yield from (encounter.id for encounter in location.encounters)
    for character in draft.characters:
        arc = character.personal_arc
        if isinstance(arc, PersonalArc):
            yield from (encounter.id for encounter in arc.arc_encounters)


def estimated_duration(draft: StoryDraft) -> str:
    """`A-B minutes`: every location encounter's expected frames at `SECONDS_PER_FRAME`."""
    frames = sum(
        encounter.pacing.expected_frames
        for act in draft.acts
        for location in act.locations
        for encounter in location.encounters
    )
    low, high = (max(1, math.ceil(frames * seconds / 60)) for seconds in SECONDS_PER_FRAME)
    return f"{low}-{high} minutes"


def package_of(
    finished: StoryDraft, title: str, created: datetime
) -> tuple[dict[str, Any], Violations]:
    """The package a finished draft makes, as contract JSON, and its violations of `story-package`.

    The violations are the schema's and the rules beyond it that the
    package's family declares, every one, each with its JSON Pointer. The
    package is assembled as JSON, the form it is judged in: a package that
    breaks its contract has no typed form to build.
    """
    draft = msgspec.to_builtins(finished)
    premise = draft["premise"]
    plot = {
        key: premise[key]
        for key in (
            "premise",
            "themes",
            "globalContext",
            "globalMaterials",
            "globalWorldInfo",
            "possibleEndings",
        )
        if key in premise
    }
    plot["acts"] = [_act(act) for act in draft["acts"]]
    locations = [location["web"] for act in draft["acts"] for location in act["locations"]]
    used = {
        "characters": {character["id"] for character in draft["characters"]},
        "backgrounds": {web["location"] for web in locations},
        "music": {web["mood"] for web in locations},
    }
    assets = {
        kind: {key: file for key, file in files.items() if key in used[kind]}
        for kind, files in draft["assets"].items()
    }
    package = {
        "id": draft["packageId"],
        "createdAt": created.astimezone(UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z"),
        "title": title,
        "genre": premise["genre"],
        "artStyle": premise["artStyle"],
        "language": draft["locale"],
        "characters": draft["characters"],
        "plot": plot,
        "assets": assets,
        "meta": {
            "totalNodes": len(locations),
            "estimatedDuration": estimated_duration(finished),
            "generationMs": draft["generationMs"],
        },
    }
    return package, violations(STORY_PACKAGE, package)


def _act(act: dict[str, Any]) -> dict[str, Any]:
    outline = {key: value for key, value in act["outline"].items() if key != "intendedLocations"}
    return {**outline, "sandboxLocations": [_location(location) for location in act["locations"]]}


def _location(location: dict[str, Any]) -> dict[str, Any]:
    return {**location["web"], "encounters": location["encounters"]}
