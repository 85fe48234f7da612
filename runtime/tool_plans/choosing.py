"""Choosing the skills a plan calls, before the model writes their inputs (seed 003, FR-003).

    choice = choose_by_cues("I light the torch and examine the iron door", skills)
    [chosen.script.skill for chosen in choice.chosen]  # ['torch-lighter', 'door-examiner']

The planner first chooses which scripts of the enabled skills the input calls
for, then has the model write only their inputs, under a profile that makes
exactly those tools required (`profiles.plan_profile(chosen=...)`). Two steps
choose:

- by cues: each script's manifest lists `cues`, the player words that call
  for it (`light ... torch`). A script is chosen when one of its cues matches
  a sentence of the input; the chosen are ordered by where their cue starts.
  Matching is plain word comparison, linear in the input's length.
- by the model: under `choice_profile`, the model writes the names of the
  skills it chooses among those offered, after a prompt that describes each
  (`prompts.choice_messages`). The planner offers it the skills without cues.

A skill whose capabilities include `narration` (the storyteller) is never
chosen: the planner calls it last to narrate the rest. Disabled skills and
unusable scripts are never offered.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ...generated.tool_plans import ChosenSkill, SkillChoice
from ..core.contracts import field_bound
from ..core.errors import UnusableScript
from ..core.plain_text import one_line
from ..core.profiles import WHITESPACE
from ..engine.skills import Script, SkillSet
from ..model.writer import Writer
from ..model.writing import write_under_profile

__all__ = [
    "NARRATION_CAPABILITY",
    "Choice",
    "Chosen",
    "choice_profile",
    "choose_by_cues",
    "choose_by_model",
    "narration_scripts",
    "offered_scripts",
    "skill_names",
    "usable",
]

NARRATION_CAPABILITY = "narration"
"The capability of a skill that narrates the other tools' outcomes: called last, never chosen."
GAP_WORDS = 6
"How many other words `...` in a cue lets stand between two of its words (the manifest's rule)."
CUE_STEPS = 2_000_000
"Most steps of cue matching for one input (about a second): each input word a cue word reaches."
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})
_WHY_LENGTH = field_bound(ChosenSkill, "why", "max_length")
_WORD = re.compile(r"[0-9]+(?=[a-z])|[a-z0-9]+(?:'[a-z0-9]+)*")
"A word of an input: a number written before letters is one of its own (`2d6` is `2`, `d6`)."
_SENTENCE_END = re.compile(r"[.;:!?\n]")
_VOWELS = frozenset("aeiou")


@dataclass(frozen=True)
class Chosen:
    """One tool chosen for an input: the scripts it may call, all of one skill, and why."""

    scripts: tuple[Script, ...]
    "One script when cues chose it; every offered script of the skill when the model did."
    why: str
    "On one line: the cue and the words it matched, or the step that chose it."

    @property
    def skill(self) -> str:
        """The name of the skill chosen."""
        return self.scripts[0].skill


@dataclass(frozen=True)
class Choice:
    """The scripts a step chose for an input, in the order the plan calls them."""

    by: Literal["cues", "model", "plan", "patterns"]
    chosen: tuple[Chosen, ...]
    untried: int = 0
    "How many offered scripts' cues were not tried: matching ran out of steps (`CUE_STEPS`)."

    @property
    def skills(self) -> list[str]:
        """The names of the chosen skills, each once, in order."""
        return list(dict.fromkeys(chosen.skill for chosen in self.chosen))

    def record(self) -> SkillChoice:
        """The choice as the plan's `metadata.choice`: each skill once, with its first reason."""
        reasons: dict[str, str] = {}
        for chosen in self.chosen:
            reasons.setdefault(chosen.skill, one_line(chosen.why, _WHY_LENGTH))
        return SkillChoice(
            by=self.by, skills=[ChosenSkill(skill=name, why=why) for name, why in reasons.items()]
        )


def skill_names(names: Iterable[str]) -> set[str]:
    """`names` as a set of skill names; raises TypeError for one string, a set of its letters."""
    if isinstance(names, str):
        raise TypeError(f"skill names are given as a collection, not one string: {names!r}")
    return set(names)


def offered_scripts(skills: SkillSet, disabled: Iterable[str] = ()) -> list[Script]:
    """The scripts a choice may pick: usable, of enabled skills, narration skills left out."""
    off = skill_names(disabled)
    return [
        script
        for skill in skills.skills.values()
        if skill.name not in off and NARRATION_CAPABILITY not in skill.manifest.capabilities
        for script in skill.scripts.values()
        if usable(skills, script.tool_path, off)
    ]


def narration_scripts(skills: SkillSet, disabled: Iterable[str] = ()) -> list[Script]:
    """The usable scripts of the enabled narration skills: what a plan calls last."""
    off = skill_names(disabled)
    return [
        script
        for skill in skills.skills.values()
        if skill.name not in off and NARRATION_CAPABILITY in skill.manifest.capabilities
        for script in skill.scripts.values()
        if usable(skills, script.tool_path, off)
    ]


def choose_by_cues(text: str, skills: SkillSet, disabled: Iterable[str] = ()) -> Choice:
    """The offered scripts whose cues match `text`, ordered by where the first match starts.

    Each script is chosen at most once. Scripts without cues are never
    chosen here (the model chooses them). The input is compared folded: its
    compatibility forms (full-width letters) and accents undone, in lower
    case, with curly apostrophes straight. Each cue word is looked up among
    the input's words, never searched for, and a cue with a word the input
    lacks costs nothing more; matching stops after `CUE_STEPS` steps, the
    scripts not tried then counted in `Choice.untried` (a hostile skill
    folder can hold millions of cue words).
    """
    words = _Words(text)
    found: list[tuple[int, int, Chosen]] = []
    matched: dict[str, tuple[int, int] | None] = {}
    offered = offered_scripts(skills, disabled)
    for order, script in enumerate(offered):
        best: tuple[int, int, str] | None = None
        for cue in script.declaration.cues:
            if words.steps > CUE_STEPS:
                return Choice("cues", _ordered(found), untried=len(offered) - order)
            if cue not in matched:
                matched[cue] = words.match(cue)
            span = matched[cue]
            if span is not None and (best is None or span[0] < best[0]):
                best = (span[0], span[1], cue)
        if best is not None:
            start, end, cue = best
            quoted = one_line(" ".join(words.words[start : end + 1]), 120)
            found.append((start, order, Chosen((script,), f'cue "{cue}" matched "{quoted}"')))
    return Choice("cues", _ordered(found))


def _ordered(found: list[tuple[int, int, Chosen]]) -> tuple[Chosen, ...]:
    return tuple(chosen for _, _, chosen in sorted(found, key=lambda f: f[:2]))


async def choose_by_model(
    writer: Writer,
    text: str,
    skills: SkillSet,
    disabled: Iterable[str] = (),
    *,
    among: Iterable[str] | None = None,
    seed: int | None = None,
) -> Choice:
    """The skills the model chooses for `text` among the offered ones, in the order it wrote them.

    `among` narrows the offer to those skill names (default: every skill with
    an offered script). Each chosen skill may call any of its offered
    scripts. Raises GenerationFailed when the model writes no choice.
    """
    from .prompts import choice_messages

    scripts = offered_scripts(skills, disabled)
    wanted = None if among is None else set(among)
    by_skill: dict[str, list[Script]] = {}
    for script in scripts:
        if wanted is None or script.skill in wanted:
            by_skill.setdefault(script.skill, []).append(script)
    if not by_skill:
        return Choice("model", ())
    offered = [skills.skills[name] for name in by_skill]
    # Through the loop every generator writes through, once: traced as they are.
    # Its refusal is raised (WriteFailed), and the planner says it.
    document = await write_under_profile(
        writer,
        choice_messages(text, offered),
        choice_profile(list(by_skill)),
        answer="Skills JSON",
        max_tokens=0,
        seed=seed,
        accept=lambda document: document,
        say=lambda line: None,
        who="skill choice",
        attempts=1,
    )
    names = dict.fromkeys(str(name) for name in document["skills"])
    return Choice(
        "model",
        tuple(Chosen(tuple(by_skill[name]), "the model chose it") for name in names),
    )


def choice_profile(offered: Sequence[str]) -> dict[str, Any]:
    """The decoding schema of the model's choice among the skills named `offered`.

    The model writes `{"skills": [...]}`: each item one of `offered`, at most
    as many as there are; an empty list chooses none. With nothing offered,
    only the empty list is allowed.
    """
    items: dict[str, Any] = {"enum": list(offered)} if offered else {}
    skills: dict[str, Any] = {"type": "array", "maxItems": len(offered)}
    if offered:
        skills["items"] = items
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["skills"],
        "properties": {"skills": skills},
        "x-guidance": WHITESPACE,
    }


def usable(skills: SkillSet, tool_path: str, disabled: Iterable[str]) -> Script | None:
    """The script `tool_path` names when a plan may call it with `disabled` off, else None."""
    try:
        return skills.resolve(tool_path, disabled)
    except UnusableScript:
        return None


class _Words:
    """The words of an input, lower case, each with its sentence, indexed by form."""

    def __init__(self, text: str) -> None:
        self.words: list[str] = []
        self.sentence: list[int] = []
        self.steps = 0
        "The work done so far: positions looked at, over every cue."
        self._places: dict[str, list[int]] = {}
        for number, sentence in enumerate(_SENTENCE_END.split(_folded(text))):
            found = _WORD.findall(sentence)
            self.words += found
            self.sentence += [number] * len(found)
        self._at: dict[str, list[int]] = defaultdict(list)
        for position, word in enumerate(self.words):
            self._at[word].append(position)

    def positions(self, place: str) -> list[int]:
        """Where a word of `place` (alternatives split by `/`) or a plain form of one stands."""
        if place not in self._places:
            found: set[int] = set()
            for word in place.split("/"):
                for form in plain_forms(word):
                    found.update(self._at.get(form, ()))
            self._places[place] = sorted(found)
        return self._places[place]

    def match(self, cue: str) -> tuple[int, int] | None:
        """The first and last word of the earliest match of `cue`, or None.

        Runs one pass per cue word over where that word stands: each
        position reached remembers the earliest start that reaches it.
        """
        parts = cue.split(" ")
        places = [part for part in parts if part != "..."]
        if not all(self.positions(place) for place in places):
            return None  # a word the input lacks: no match, whatever the rest
        reached = {position: position for position in self.positions(parts[0])}
        gap = 0
        for part in parts[1:]:
            if part == "...":
                gap = GAP_WORDS
                continue
            ends = sorted(reached)
            following: dict[int, int] = {}
            self.steps += len(ends) + len(self.positions(part))
            for position in self.positions(part):
                # The positions reached from which this word is 1 to 1 + gap words on.
                low = bisect.bisect_left(ends, position - 1 - gap)
                high = bisect.bisect_left(ends, position)
                starts = [
                    reached[end]
                    for end in ends[low:high]
                    if self.sentence[end] == self.sentence[position]
                ]
                if starts:
                    following[position] = min(starts)
            reached, gap = following, 0
            if not reached:
                return None
        if not reached:
            return None
        end, start = min(reached.items(), key=lambda item: (item[1], item[0]))
        return start, end


def _folded(text: str) -> str:
    """`text` as cues are compared with it: compatibility forms and accents undone, lower case.

    Full-width `LIGHT` and `LİGHT` (a dotted capital I) both read `light`; a curly
    apostrophe reads `'`.
    """
    decomposed = unicodedata.normalize("NFKD", text.translate(_APOSTROPHES))
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def plain_forms(word: str) -> set[str]:
    """`word` and its plain inflections: `roll` gives rolls, rolled, rolling, roll's...

    Regular English endings only: -s, -es, -ed, -d, -ing, -'s, a final `e`
    dropped before -ing and -ed, a final `y` after a consonant turned into
    -ies and -ied, a final consonant doubled before -ed and -ing. Irregular
    forms (`lit`) are cues of their own.
    """
    forms = {word, f"{word}s", f"{word}es", f"{word}ed", f"{word}d", f"{word}ing", f"{word}'s"}
    last = word[-1:]
    if last == "e":
        forms |= {f"{word[:-1]}ing", f"{word[:-1]}ed"}
    if last == "y" and len(word) > 1 and word[-2] not in _VOWELS:
        forms |= {f"{word[:-1]}ies", f"{word[:-1]}ied"}
    if last.isalpha() and last not in _VOWELS and last not in "wxy":
        forms |= {f"{word}{last}ed", f"{word}{last}ing"}
    return forms
