"""Rules of the contracts that a JSON Schema cannot state, checked on parsed JSON.

Four contracts have them. A planning block must follow the planning protocol:
choice keys in snake_case, at most one parallel option and always last, a
consistent planning check, a recommended approach that exists, a coordination
DC that follows the +2 per additional task rule, and plain text without
markup; in Think mode it also carries its analysis and, with 2 or more
situational choices, the parallel option. Frozen plans must freeze for the
hours their DC sets, from the moment the check failed; a planning session's
too, and none failed after its clock. A story response's narrative is prose,
never the block's JSON, and its block and frozen plans follow their rules.

The rules read the value as parsed, whatever else is wrong with it: each one
checks only what is there and well typed, so a document that breaks the
schema still hears about the rest. Validation (`runtime.core.validation`) adds
their violations to the schema's. Each rule finds its violations one at a
time, in time linear in the value's size, and walks values in loops, never
by recursion, so hostile documents (a million choices, nesting as deep as the
parser allows) cost no more than they must.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from typing import Any, get_args

import msgspec

from ...generated import FROZEN_PLANS as FROZEN_PLANS_CONTRACT
from ...generated import PLANNING_BLOCK
from ...generated import PLANNING_SESSION as PLANNING_SESSION_CONTRACT
from ...generated import STORY_RESPONSE as STORY_RESPONSE_CONTRACT
from ...generated.planning_blocks import Complexity
from ..core.contracts import AnyContract, contract_schema
from ..core.errors import Violation, shown
from ..core.jsontext import escape_token, pointer
from ..core.plain_text import control_characters, free_texts, has_markup
from ..core.rules import Rules, as_integer
from .mechanics import (
    COMPLEXITY_DC,
    HOUR,
    MIN_DC,
    Mode,
    check_outcome,
    coordination_dc,
    freeze_hours,
    is_parallel,
    situational_keys,
    snake_case,
)

__all__ = [
    "FROZEN_PLANS",
    "PLANNING_BLOCK",
    "RULES",
    "SESSION",
    "STORY_MODE",
    "STORY_RESPONSE",
    "THINK_MODE",
    "check_inputs",
    "rules_in",
]

NAMES_SHOWN = 5
"Names quoted at most in one message (a block's choices, say): a hostile one could hold millions."


@cache
def _schema(contract: AnyContract) -> Any:
    """`contract`'s schema, parsed once: the rules only read it."""
    return contract_schema(contract)


# Planning blocks ------------------------------------------------------------------


def _planning_block(value: Any, mode: Mode) -> Iterator[Violation]:
    if not isinstance(value, dict):
        return  # the schema says what it should have been
    yield from _plain_text(value)
    choices = value.get("choices")
    keys = list(choices) if isinstance(choices, dict) else []
    yield from _choice_keys(keys)
    if isinstance(choices, dict):
        yield from _parallel_option(value, choices, mode)
        yield from _recommended_approach(value.get("analysis"), keys)
    yield from _plan_quality(value.get("plan_quality"))
    if mode == "think":
        for field in _think_mode_fields():
            if field not in value:
                yield Violation("", f'missing "{field}", which Think mode requires')


# What any markup or control character looks like in a document's JSON as
# msgspec writes it: a `<` that may open markup, a C0 control escaped (tab, line
# feed and carriage return are text), DEL or a C1 control raw; and a quote
# inside a text, escaped, which JSON written into a text needs for its keys. A
# document whose JSON shows none has nothing to walk for; a false alarm (prose
# quoting speech) only costs the walk.
_SUSPECT = re.compile(rb'<[A-Za-z/!?]|\\u00[01][0-9a-fA-F]|\\[bf"]|\x7f|\xc2[\x80-\x9f]')
# Every match starts with one of these bytes; looking for each (memchr) is
# cheaper than the expression's scan, byte by byte, of a block that has none.
_SUSPECT_STARTS = (b"<", b"\\", b"\x7f", b"\xc2")


def _suspect(encoded: bytes) -> bool:
    """Whether a document's JSON may show markup or a control character."""
    return any(start in encoded for start in _SUSPECT_STARTS) and bool(_SUSPECT.search(encoded))


def _plain_text(value: Any) -> Iterator[Violation]:
    """Every free text holding markup or control characters, in document order."""
    try:
        if not _suspect(msgspec.json.encode(value)):
            return
    except (TypeError, UnicodeEncodeError, RecursionError, msgspec.EncodeError):
        pass  # not JSON msgspec writes (a lone surrogate, deep nesting): walk it all
    for path, text in free_texts(PLANNING_BLOCK, value):
        written = _block_json().search(text)
        if written:
            yield Violation(
                pointer(path),
                f"holds planning-block JSON ({_show(text[written.start() :])}); the block's "
                "fields stay structured, and its texts are prose",
            )
        problems, removed = [], []
        if has_markup(text):
            problems.append(f"holds HTML markup ({_show(text)})")
            removed.append("the markup")
        controls = control_characters(text)
        if controls:
            listed = ", ".join(f"U+{ord(ch):04X}" for ch in dict.fromkeys(controls))
            problems.append(f"holds control characters ({listed})")
            removed.append("the control characters")
        if not problems:
            continue
        yield Violation(
            pointer(path),
            f"{' and '.join(problems)}; text fields are plain text "
            f"(normalize removes {' and '.join(removed)})",
        )


@cache
def _block_json() -> re.Pattern[str]:
    """A JSON object's start, or a planning-block field written as a JSON key.

    The field names are those of the contract's schema, and `planning_block`,
    what a narrative response calls the block.
    """
    schema = _schema(PLANNING_BLOCK)
    objects = [schema, *schema["$defs"].values()]
    names = {name for node in objects for name in node.get("properties", {})}
    keys = "|".join(sorted(map(re.escape, names | {"planning_block"})))
    return re.compile(rf'\{{\s*"|"(?:{keys})"\s*:')


@cache
def _choice_key() -> re.Pattern[str]:
    schema = _schema(PLANNING_BLOCK)
    return re.compile(schema["$defs"]["choice-key"]["pattern"])


def _choice_keys(keys: list[str]) -> Iterator[Violation]:
    for key in keys:
        if _choice_key().fullmatch(key):
            continue
        rule = (
            'is not snake_case: a choice id is lower-case words and digits joined by "_", '
            'starting with a letter, optionally prefixed "god:" or "think:"'
        )
        prefix = next((p for p in ("god:", "think:") if key.lower().startswith(p)), "")
        suggestion = prefix + snake_case(key[len(prefix) :])
        if _choice_key().fullmatch(suggestion):
            rule += f" (for example {_show(suggestion)})"
        yield Violation(f"/choices/{escape_token(key)}", f"choice key {_show(key)} {rule}")


def _parallel_option(
    block: dict[str, Any], choices: dict[str, Any], mode: Mode
) -> Iterator[Violation]:
    keys = list(choices)
    parallel = [(position, key) for position, key in enumerate(keys, 1) if is_parallel(key)]
    situational = len(situational_keys(keys))
    if len(parallel) > 1:
        names = _names([key for _, key in parallel])
        message = f"{len(parallel)} parallel options ({names}); a block offers one"
        yield Violation("/choices", message)
    for position, key in parallel:
        where = f"/choices/{escape_token(key)}"
        if position != len(keys):
            yield Violation(
                where,
                f"the parallel option is choice {position} of {len(keys)}; it must come last "
                "(normalize moves it)",
            )
        if situational < 2:
            yield Violation(
                where,
                "a parallel option runs 2 or more situational choices together; "
                f"this block has {situational}",
            )
        else:
            yield from _coordination_dc(where, choices[key], situational)
    for key in keys:
        choice = choices[key]
        if not is_parallel(key) and isinstance(choice, dict) and "analysis" in choice:
            yield Violation(
                f"/choices/{escape_token(key)}/analysis",
                'only the parallel option (key "parallel" or "parallel_...") has an analysis',
            )
    exclusion = block.get("parallel_exclusion")
    if isinstance(exclusion, str) and parallel:
        yield Violation(
            "/parallel_exclusion",
            f"says why the block offers no parallel option, but {_show(parallel[0][1])} is one",
        )
    excused = exclusion in _enum("parallel_exclusion")
    if mode == "think" and situational >= 2 and not parallel and not excused:
        yield Violation(
            "/choices",
            f"{situational} situational choices and no parallel option: in Think mode "
            'a block with 2 or more offers one, last (key "parallel_..."), '
            "unless parallel_exclusion says why not",
        )


def _coordination_dc(where: str, choice: Any, tasks: int) -> list[Violation]:
    analysis = choice.get("analysis") if isinstance(choice, dict) else None
    if not isinstance(analysis, dict):
        return []
    given = as_integer(analysis.get("coordination_dc"))
    complexity = analysis.get("complexity", "simple")
    if given is None or complexity not in get_args(Complexity):
        return []
    base = as_integer(analysis.get("base_dc"))
    more = f"2 for each of {tasks - 1} more task{'s' if tasks > 2 else ''}"
    extra = COMPLEXITY_DC[complexity]
    if base is not None:
        expected = coordination_dc(base, tasks, complexity)
        highest = _bounds({"$ref": "#/$defs/dc"})[1]
        if expected > highest:
            return [
                Violation(
                    f"{where}/analysis/base_dc",
                    f"is {base}, too high: base_dc + {more} + {extra} for {complexity} complexity "
                    f"is {expected}, above the highest DC, {highest}",
                )
            ]
        if given == expected:
            return []
        because = f"base_dc {base} + {more} + {extra} for {complexity} complexity = {expected}"
    else:
        expected = coordination_dc(MIN_DC, tasks, complexity)
        if given >= expected:
            return []
        because = (
            f"the least DC {MIN_DC} + {more} + {extra} for {complexity} complexity is {expected}"
        )
    return [Violation(f"{where}/analysis/coordination_dc", f"is {given}, but {because}")]


def _recommended_approach(analysis: Any, keys: list[str]) -> Iterator[Violation]:
    if not isinstance(analysis, dict):
        return
    named = analysis.get("recommended_approach")
    if not isinstance(named, str) or named in keys:
        return
    offered = f"its choices are {_names(keys)}" if keys else "it has no choices"
    yield Violation(
        "/analysis/recommended_approach",
        f"names {_show(named)}, which is not a choice of this block ({offered})",
    )


def check_inputs(quality: Any) -> tuple[int, int] | None:
    """`roll_result` and `dc` of a planning check, if both are integers within their bounds.

    Only then do margin, success and tier follow from them; otherwise the
    schema's own violations say what is wrong.
    """
    if not isinstance(quality, dict):
        return None
    fields = _schema(PLANNING_BLOCK)["$defs"]["PlanQuality"]["properties"]
    found = []
    for name in ("roll_result", "dc"):
        value = as_integer(quality.get(name))
        bounds = _bounds(fields[name])
        if value is None or not bounds[0] <= value <= bounds[1]:
            return None
        found.append(value)
    return found[0], found[1]


def _bounds(field: dict[str, Any]) -> tuple[int, int]:
    """The minimum and maximum of an integer field, following its reference."""
    if "$ref" in field:
        definitions = _schema(PLANNING_BLOCK)["$defs"]
        field = definitions[field["$ref"].removeprefix("#/$defs/")]
    return field["minimum"], field["maximum"]


def _plan_quality(quality: Any) -> list[Violation]:
    inputs = check_inputs(quality)
    if inputs is None:
        return []
    roll, dc = inputs
    outcome = check_outcome(roll, dc)
    found: list[Violation] = []
    if "margin" in quality and as_integer(quality["margin"]) != outcome.margin:
        found.append(
            Violation(
                "/plan_quality/margin",
                f"is {_show(quality['margin'])}, but roll_result - dc is {roll} - {dc} = "
                f"{outcome.margin} (normalize recomputes it)",
            )
        )
    if "success" in quality and quality["success"] is not outcome.success:
        reaches = "reaches" if outcome.success else "is below"
        found.append(
            Violation(
                "/plan_quality/success",
                f"is {_show(quality['success'])}, but roll_result {roll} {reaches} dc {dc} "
                "(normalize recomputes it)",
            )
        )
    if "quality_tier" in quality and quality["quality_tier"] != outcome.quality_tier:
        result = "success" if outcome.success else "failure"
        found.append(
            Violation(
                "/plan_quality/quality_tier",
                f"is {_show(quality['quality_tier'])}, but a {result} by {abs(outcome.margin)} "
                f'is "{outcome.quality_tier}" (normalize recomputes it)',
            )
        )
    return found


@cache
def _think_mode_fields() -> tuple[str, ...]:
    """The fields the schema marks `x-think-mode: required`."""
    fields = _schema(PLANNING_BLOCK)["properties"]
    return tuple(name for name, field in fields.items() if field.get("x-think-mode") == "required")


@cache
def _enum(field: str) -> tuple[Any, ...]:
    return tuple(_schema(PLANNING_BLOCK)["properties"][field]["enum"])


# Frozen plans ---------------------------------------------------------------------


def _frozen_plans(value: Any, at: str = "") -> Iterator[Violation]:
    if not isinstance(value, dict):
        return
    for topic, entry in value.items():
        if not isinstance(entry, dict):
            continue
        where = f"{at}/{escape_token(topic)}"
        dc, hours = as_integer(entry.get("original_dc")), as_integer(entry.get("freeze_hours"))
        if dc is not None and hours is not None and hours != freeze_hours(dc):
            yield Violation(
                f"{where}/freeze_hours",
                f"is {hours}, but a failed check at DC {dc} freezes for {freeze_hours(dc)} hours",
            )
        failed, until = as_integer(entry.get("failed_at")), as_integer(entry.get("freeze_until"))
        if failed is not None and until is not None and hours is not None:
            expected = failed + hours * HOUR
            if until != expected:
                yield Violation(
                    f"{where}/freeze_until",
                    f"is {until}, but failed_at + {hours} hours is {expected}",
                )


def _planning_session(value: Any) -> Iterator[Violation]:
    if not isinstance(value, dict):
        return
    frozen = value.get("frozen_plans")
    yield from _frozen_plans(frozen, "/frozen_plans")
    now = as_integer(value.get("time"))
    if now is None or not isinstance(frozen, dict):
        return
    for topic, entry in frozen.items():
        failed = as_integer(entry.get("failed_at")) if isinstance(entry, dict) else None
        if failed is not None and failed > now:
            yield Violation(
                f"/frozen_plans/{escape_token(topic)}/failed_at",
                f"is {failed}, after the session's time, {now}: a plan cannot fail in the future",
            )


# Story responses ------------------------------------------------------------------

# A fenced code block (three or more backticks or tildes at a line's start):
# a model that writes the block into the narrative often fences it.
_FENCE = re.compile(r"^[ \t]*(?:`{3,}|~{3,})[^\n]*", re.MULTILINE)


def _story_response(value: Any) -> Iterator[Violation]:
    if not isinstance(value, dict):
        return
    narrative = value.get("narrative")
    if isinstance(narrative, str):
        yield from _narrative(narrative)
    block = value.get("planning_block")
    for violation in _planning_block(block, "story"):
        yield Violation(f"/planning_block{violation.pointer}", violation.message)
    if isinstance(block, dict) and "plan_quality" in block:
        yield Violation(
            "/planning_block/plan_quality",
            "a story response rolls no planning check: plan_quality belongs to a Think-mode "
            "block, which is answered alone (remove it)",
        )
    updates = value.get("state_updates")
    if isinstance(updates, dict):
        yield from _frozen_plans(updates.get("frozen_plans"), "/state_updates/frozen_plans")


def _narrative(text: str) -> Iterator[Violation]:
    """What the narrative holds that is not prose: the block's JSON, a code fence, markup."""
    where = "/narrative"
    move = "the narrative is story prose only; the choices go in planning_block"
    written = _block_json().search(text)
    if written:
        yield Violation(
            where, f"holds planning-block JSON ({_show(text[written.start() :])}); {move}"
        )
    fence = _FENCE.search(text)
    if fence:
        yield Violation(where, f"holds a fenced code block ({_show(fence[0].strip())}); {move}")
    problems = []
    if has_markup(text):
        problems.append("HTML markup")
    controls = control_characters(text)
    if controls:
        listed = ", ".join(f"U+{ord(ch):04X}" for ch in dict.fromkeys(controls))
        problems.append(f"control characters ({listed})")
    if problems:
        yield Violation(where, f"holds {' and '.join(problems)}; the narrative is plain text")


STORY_MODE = Rules(
    PLANNING_BLOCK.name, "Story mode's rules", lambda value: _planning_block(value, "story")
)
"The planning protocol in Story mode, by which planning blocks are judged unless told otherwise."
THINK_MODE = Rules(
    PLANNING_BLOCK.name, "Think mode's rules", lambda value: _planning_block(value, "think")
)
"The planning protocol in Think mode: Story mode's rules, and the fields Think mode requires."
FROZEN_PLANS = Rules(FROZEN_PLANS_CONTRACT.name, "the freeze rules", _frozen_plans)
"Frozen plans freeze for the hours their DC sets, from the moment the check failed."

SESSION = Rules(PLANNING_SESSION_CONTRACT.name, "the session's rules", _planning_session)
"A session's frozen plans follow the freeze rules, and none failed after its time."

STORY_RESPONSE = Rules(STORY_RESPONSE_CONTRACT.name, "the story response's rules", _story_response)
"""A story response's narrative is prose, never the block's JSON; its block follows Story mode.

Its frozen plans follow the freeze rules.
"""

RULES = {
    PLANNING_BLOCK.name: STORY_MODE,
    FROZEN_PLANS_CONTRACT.name: FROZEN_PLANS,
    PLANNING_SESSION_CONTRACT.name: SESSION,
    STORY_RESPONSE_CONTRACT.name: STORY_RESPONSE,
}
"The family's rules beyond its contracts' schemas, found by `runtime.core.rules`."


def rules_in(mode: Mode) -> Rules:
    """The planning protocol's rules in `mode`. Raises ValueError for an unknown mode."""
    if mode not in ("story", "think"):
        raise ValueError(f"mode is 'story' or 'think', not {mode!r}")
    return THINK_MODE if mode == "think" else STORY_MODE


# Helpers ----------------------------------------------------------------------------


def _show(value: Any) -> str:
    return shown(value, limit=40)


def _names(names: list[str]) -> str:
    """The first NAMES_SHOWN names, quoted, and how many more there are."""
    listed = ", ".join(map(_show, names[:NAMES_SHOWN]))
    more = len(names) - NAMES_SHOWN
    return listed + (f" and {more} more" if more > 0 else "")
