"""What a change of schemas does to the documents already written and the programs reading them.

    changes = diff("old/schemas", "schemas")
    for change in changes:
        print(change.line())    # plan #/properties/tools/items/required: field required: ...

Each change is judged for the two sides that matter once documents are stored:

- *readers*: new code reading old documents. Compatible when every document
  the old schema accepts, the new one accepts too (the schema was widened).
- *writers*: old code reading new documents. Compatible when every document
  the new schema accepts, the old one accepted (the schema was narrowed).

A verdict is `compatible`, `breaking` or `unknown`. `compatible` is a claim
held for every document (a property test draws documents to try it); where
the comparison cannot decide (two different patterns, `if`/`then`/`else`, a
keyword it does not read), it says `unknown`, never a guess. A change of
`default` keeps every document valid, but a document that leaves the field
out is read as one value by old code and another by new: breaking for both.

The comparison walks the two bundled schemas side by side. A schema is a
conjunction of its keywords, so each keyword is compared on its own, except
where keywords read each other: `properties` with `required`,
`additionalProperties` and `patternProperties`; `prefixItems` with `items`;
`contains` with its bounds; `if` with `then` and `else`; `oneOf`, whose
branches must stay apart (compared as `anyOf` where every branch is told
apart by a required property's `const`). Under `not` the two sides trade
places. A `$ref` is followed once for each pair of targets.
"""

from __future__ import annotations

import json
import math
import os
import posixpath
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import urldefrag, urljoin

from .errors import UnusableSchema
from .jsontext import escape_token, reference_tokens
from .patterns import compiled
from .schema_sets import bundled
from .schema_tree import MAX_SCHEMA_FOLDER_BYTES, draft_of, version_of

__all__ = [
    "BREAKING",
    "COMPATIBLE",
    "UNKNOWN",
    "ContractChange",
    "Verdict",
    "bundles_at",
    "bundles_to_compare",
    "diff",
    "diff_bundles",
    "schemas_at",
    "unbumped",
]

Verdict = Literal["compatible", "breaking", "unknown"]
COMPATIBLE: Final = "compatible"
BREAKING: Final = "breaking"
UNKNOWN: Final = "unknown"

_Sides = tuple[Verdict, Verdict]
WIDER: Final[_Sides] = (COMPATIBLE, BREAKING)
"The schema accepts more: old documents are read, new ones may be refused by old code."
NARROWER: Final[_Sides] = (BREAKING, COMPATIBLE)
"The schema accepts less: old documents may be refused, new ones old code reads."
BOTH: Final[_Sides] = (BREAKING, BREAKING)
UNDECIDED: Final[_Sides] = (UNKNOWN, UNKNOWN)
SAME: Final[_Sides] = (COMPATIBLE, COMPATIBLE)

ANNOTATIONS = frozenset(
    {
        "$schema",
        "$id",
        "$anchor",
        "$comment",
        "$defs",
        "definitions",
        "$vocabulary",
        "title",
        "description",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "contentMediaType",
        "contentEncoding",
        "contentSchema",
        "$dynamicAnchor",
        "id",
    }
)
"Keywords that never change which documents a schema accepts (`$defs` is read through `$ref`)."
_MINIMA = ("minLength", "minItems", "minProperties", "minimum", "exclusiveMinimum")
_MAXIMA = ("maxLength", "maxItems", "maxProperties", "maximum", "exclusiveMaximum")
_OBJECT = (
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
)
_ARRAY = ("items", "prefixItems", "additionalItems")
_CONTAINS = ("contains", "minContains", "maxContains")
_CONDITION = ("if", "then", "else")
_READ = frozenset(
    {
        *_MINIMA,
        *_MAXIMA,
        *_OBJECT,
        *_ARRAY,
        *_CONTAINS,
        *_CONDITION,
        "type",
        "enum",
        "const",
        "multipleOf",
        "pattern",
        "format",
        "uniqueItems",
        "propertyNames",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "$ref",
        "default",
    }
)
_TYPES = frozenset({"null", "boolean", "object", "array", "number", "string", "integer"})
_DYNAMIC = ("$dynamicRef", "$recursiveRef", "$dynamicAnchor", "$recursiveAnchor")
_SHOWN = 60
"Characters of a value quoted in a change's line."


@dataclass(frozen=True)
class ContractChange:
    """One difference between two versions of a contract, judged for readers and writers.

    `pointer` is the JSON Pointer of the schema location in the new bundled
    schema (where the old one had it, for what was removed; `plancontracts
    schema CONTRACT` prints the bundle). `change` is its kind, such as
    `field-added` or `bound-tightened`; `why` says in one line what it does to
    documents.
    """

    contract: str
    pointer: str
    change: str
    readers: Verdict
    writers: Verdict
    why: str

    @property
    def compatible(self) -> bool:
        """Whether both sides are compatible."""
        return self.readers == COMPATIBLE and self.writers == COMPATIBLE

    def line(self) -> str:
        """The change as one line of text."""
        return (
            f"{self.contract} #{self.pointer}: {self.change.replace('-', ' ')}: readers "
            f"{self.readers}, writers {self.writers}: {self.why}"
        )

    def to_json(self) -> dict[str, str]:
        """The change as a JSON object, as `diff --json` writes it."""
        return {
            "contract": self.contract,
            "pointer": self.pointer,
            "change": self.change,
            "readers": self.readers,
            "writers": self.writers,
            "why": self.why,
        }


def diff(
    old: str | os.PathLike[str],
    new: str | os.PathLike[str],
    *,
    resources: Mapping[str, Any] | None = None,
) -> list[ContractChange]:
    """Every change from the contracts at `old` to those at `new`, in contract order.

    Each is a schema file, a schema folder (laid out as plancontracts'
    schemas/) or the folder of a package `plancontracts generate` wrote. Two
    files are compared as one contract whatever their names (named after the
    new file); two folders contract by contract, a contract only one of them
    holds being added or removed. `resources` are more schemas references may
    name, as for `load_contracts`. Raises `UnusableSchema`, naming the file,
    for a schema either side cannot use, a path that is missing, or a file
    given with a folder.
    """
    return diff_bundles(*bundles_to_compare(old, new, resources=resources))


def bundles_to_compare(
    old: str | os.PathLike[str],
    new: str | os.PathLike[str],
    *,
    resources: Mapping[str, Any] | None = None,
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """The bundled contracts `diff` compares for `old` and `new` (see `diff`)."""
    for path in (old, new):
        if not Path(path).exists():
            raise UnusableSchema(f"{os.fspath(path)}: no such file or folder")
    files = Path(old).is_file(), Path(new).is_file()
    if files[0] != files[1]:
        raise UnusableSchema("OLD and NEW are two files or two folders, not one of each")
    old_bundles = bundled(old, resources=resources)
    new_bundles = bundled(new, resources=resources)
    if files[0]:  # one contract, whatever each file is named
        (name,) = new_bundles
        old_bundles = {name: next(iter(old_bundles.values()))}
    return old_bundles, new_bundles


def bundles_at(
    revision: str, folder: str | os.PathLike[str], *, resources: Mapping[str, Any] | None = None
) -> dict[str, dict[str, Any]]:
    """Each contract of the schema folder `folder` as git revision `revision` held it, bundled.

    None of them where the revision has no such folder. Raises
    `UnusableSchema` as `schemas_at` does, and for a schema of the revision
    that cannot be used, naming it as `FOLDER at REVISION: FILE`.
    """
    with schemas_at(revision, folder) as at:
        if at is None:
            return {}
        try:
            return bundled(at, resources=resources)
        except UnusableSchema as error:
            said = str(error).replace(str(at), f"{os.fspath(folder)} at {revision}", 1)
            raise UnusableSchema(said) from None


def diff_bundles(
    old: Mapping[str, dict[str, Any]], new: Mapping[str, dict[str, Any]]
) -> list[ContractChange]:
    """Every change from `old` to `new`, each mapping contract names to bundled schemas."""
    changes: list[ContractChange] = []
    for name in sorted(set(old) | set(new)):
        if name not in new:
            changes.append(
                ContractChange(
                    name,
                    "",
                    "contract-removed",
                    BREAKING,
                    COMPATIBLE,
                    "documents stored under it have no contract to be read by",
                )
            )
        elif name not in old:
            changes.append(
                ContractChange(
                    name,
                    "",
                    "contract-added",
                    COMPATIBLE,
                    COMPATIBLE,
                    "no document was stored under it",
                )
            )
        else:
            try:
                changes += _contract_changes(name, old[name], new[name])
            except RecursionError:  # the walk follows nesting and references by recursion
                changes.append(
                    ContractChange(
                        name,
                        "",
                        "schema-changed",
                        UNKNOWN,
                        UNKNOWN,
                        "its schemas nest or refer too deeply to be compared",
                    )
                )
    return changes


def unbumped(
    changes: list[ContractChange],
    old: Mapping[str, Mapping[str, Any]],
    new: Mapping[str, Mapping[str, Any]],
) -> dict[str, tuple[int | None, int | None]]:
    """The contracts with a change that is not compatible and a version that was not raised.

    Maps each to its old and new `x-version`. A contract whose version rose
    may break; a schema without one is at version 1; a removed contract is
    always named.
    """
    left: dict[str, tuple[int | None, int | None]] = {}
    for change in changes:
        if change.compatible or change.contract in left:
            continue
        before = version_of(old.get(change.contract, {}))
        after = version_of(new.get(change.contract, {}))
        if _or_first(after) <= _or_first(before):
            left[change.contract] = (before, after)
    return left


def _contract_changes(name: str, old: dict[str, Any], new: dict[str, Any]) -> list[ContractChange]:
    """The changes from one bundled schema of contract `name` to the next."""
    drafts = _draft(old), _draft(new)
    if drafts[0] != drafts[1]:
        why = f"the draft changed from {drafts[0]} to {drafts[1]}: its keywords mean other things"
        return [ContractChange(name, "/$schema", "draft-changed", UNKNOWN, UNKNOWN, why)]
    if _dynamic(old) or _dynamic(new):
        if _meaning(old) == _meaning(new):
            return []
        # What a dynamic reference names depends on the path a validation takes.
        why = "it holds dynamic references ($dynamicRef, $recursiveRef), which are not compared"
        return [ContractChange(name, "", "schema-changed", UNKNOWN, UNKNOWN, why)]
    return _Comparison(name, old, new, drafts[0]).changes


def _draft(bundle: dict[str, Any]) -> str:
    try:
        return draft_of(bundle) or "2020-12"
    except UnusableSchema:
        return "unknown"


def _dynamic(bundle: dict[str, Any]) -> bool:
    text = _canonical(bundle)
    return any(f'"{keyword}"' in text for keyword in _DYNAMIC)


def _or_first(version: int | None) -> int:
    return 1 if version is None else version


class _Comparison:
    """The changes from one bundled schema of a contract to the next."""

    def __init__(self, contract: str, old: dict[str, Any], new: dict[str, Any], draft: str) -> None:
        self.contract = contract
        self.changes: list[ContractChange] = []
        self.legacy = draft in ("4", "6", "7")
        "Drafts before 2019-09: `$ref` hides the keywords beside it; `dependencies`."
        self.identity = "id" if draft == "4" else "$id"
        self.bases = (_base_of(old, self.identity), _base_of(new, self.identity))
        self.indexes = (
            _Index(old, self.bases[0], self.identity, legacy=self.legacy),
            _Index(new, self.bases[1], self.identity, legacy=self.legacy),
        )
        "Each side's documents by URI, and its anchors: found once, not per reference."
        self.seen: set[tuple[str, str, tuple[str, ...]]] = set()
        "Pairs of reference targets compared, with the transforms they were compared under."
        self.verdicts: dict[tuple[str, str, tuple[str, ...]], _Sides] = {}
        "What differs between each pair compared, for a second reference to the same pair."
        self.transforms: list[tuple[str, Callable[[_Sides], _Sides]]] = []
        "What enclosing keywords do to a verdict (`not` swaps the sides), innermost last."
        self._compare(old, new, "", self.bases)

    def _add(self, pointer: str, change: str, sides: _Sides, why: str) -> None:
        for _, transform in reversed(self.transforms):
            sides = transform(sides)
        names = {name for name, _ in self.transforms}
        if "not" in names:
            why += " (inside `not`: what it accepts, the schema refuses)"
        if "oneOf" in names:
            why += " (inside `oneOf`, whose branches must not overlap)"
        self.changes.append(ContractChange(self.contract, pointer, change, *sides, why))

    @contextmanager
    def _under(self, name: str, transform: Callable[[_Sides], _Sides]) -> Iterator[None]:
        self.transforms.append((name, transform))
        try:
            yield
        finally:
            self.transforms.pop()

    def _compare(self, old: Any, new: Any, at: str, bases: tuple[str, str]) -> None:
        """Add the changes from schema `old` to schema `new`, both at `at`."""
        if old is True:
            old = {}
        if new is True:
            new = {}
        if old is False or new is False:
            if old is False and new is not False:
                self._add(at, "schema-opened", WIDER, "accepted no value; now accepts some")
            elif new is False and old is not False:
                self._add(at, "schema-closed", NARROWER, "now accepts no value")
            return
        if not isinstance(old, dict) or not isinstance(new, dict):
            if old != new:
                self._add(at, "schema-changed", UNDECIDED, "not a schema this check reads")
            return
        bases = (_rebased(bases[0], old, self.identity), _rebased(bases[1], new, self.identity))
        if self.legacy:  # a `$ref` stands alone: what is beside it is not read
            old = {"$ref": old["$ref"]} if "$ref" in old else old
            new = {"$ref": new["$ref"]} if "$ref" in new else new
        if bases[0] == bases[1] and _same(old, new, meaning=True):
            return  # the same schema but for annotations, referring to nothing that could differ
        if any(key.startswith("unevaluated") for key in (*old, *new)):
            # Which properties or items are "evaluated" depends on every other keyword.
            self._add(
                at,
                "keyword-changed",
                UNDECIDED,
                "an `unevaluated*` keyword reads every other keyword here",
            )
            return
        if ("$ref" in old or "$ref" in new) and self._references(old, new, at, bases):
            return
        self._types(old, new, at)
        self._values(old, new, at)
        self._bounds(old, new, at)
        self._strings(old, new, at)
        self._objects(old, new, at, bases)
        self._arrays(old, new, at, bases)
        self._combinations(old, new, at, bases)
        if not _same(old.get("propertyNames", True), new.get("propertyNames", True)):
            self._compare(
                old.get("propertyNames", True),
                new.get("propertyNames", True),
                f"{at}/propertyNames",
                bases,
            )
        if "default" in old or "default" in new:
            before, after = old.get("default", _NONE), new.get("default", _NONE)
            if _canonical(before) != _canonical(after):
                self._add(
                    f"{at}/default",
                    "default-changed",
                    BOTH,
                    f"a document that leaves it out is read as {_default(before)} by old "
                    f"code and as {_default(after)} by new code",
                )
        read = _READ - (
            {"dependentRequired", "dependentSchemas"} if self.legacy else {"dependencies"}
        )
        for key in sorted((set(old) | set(new)) - read - ANNOTATIONS):
            if key.startswith("x-") or _canonical(old.get(key)) == _canonical(new.get(key)):
                continue
            self._add(
                f"{at}/{escape_token(key)}",
                "keyword-changed",
                UNDECIDED,
                f"`{key}` changed, a keyword this check does not read",
            )

    # --- references ------------------------------------------------------------------------

    def _references(
        self, old: dict[str, Any], new: dict[str, Any], at: str, bases: tuple[str, str]
    ) -> bool:
        """Compare where a `$ref` leads; True when that was the whole comparison."""
        refs = (old.get("$ref"), new.get("$ref"))
        if refs[0] is not None and refs[1] is not None:
            targets = [urljoin(base, ref) for base, ref in zip(bases, refs, strict=True)]
            located = [self._target(side, target) for side, target in enumerate(targets)]
            if located[0][0] is _NONE or located[1][0] is _NONE:
                self._add(
                    f"{at}/$ref",
                    "ref-target-changed",
                    UNDECIDED,
                    "a reference this check cannot follow",
                )
                return False
            shown = [
                _fragment(target, index.base)
                for target, index in zip(targets, self.indexes, strict=True)
            ]
            if shown[0] != shown[1]:
                before = len(self.changes)
                sides = self._follow(targets, located)
                # Told before its target's changes, which it explains.
                self.changes.insert(
                    before,
                    ContractChange(
                        self.contract,
                        f"{at}/$ref",
                        "ref-target-changed",
                        *sides,
                        f"refers to {shown[1]}, not {shown[0]}"
                        + (", which accepts the same documents" if sides == SAME else ""),
                    ),
                )
            else:
                self._follow(targets, located)
            return False  # the keywords beside it are compared too
        # A `$ref` on one side only: where it stands alone, compare what it names.
        side = 0 if refs[0] is not None else 1
        holder = (old, new)[side]
        if set(holder) - ANNOTATIONS - {"$ref"}:
            self._add(
                f"{at}/$ref",
                "ref-target-changed",
                UNDECIDED,
                "a reference beside other keywords, compared with a schema without one",
            )
            return True
        target = urljoin(bases[side], holder["$ref"])
        schema, _ = self._target(side, target)
        if schema is _NONE:
            self._add(
                f"{at}/$ref",
                "ref-target-changed",
                UNDECIDED,
                "a reference this check cannot follow",
            )
            return True
        target_base = urldefrag(target)[0]
        if side == 0:
            self._compare(schema, new, at, (target_base, bases[1]))
        else:
            self._compare(old, schema, at, (bases[0], target_base))
        return True

    def _follow(self, targets: list[str], located: list[tuple[Any, str]]) -> _Sides:
        """Compare two reference targets, once per pair; the verdict on what differs there."""
        key = (targets[0], targets[1], tuple(name for name, _ in self.transforms))
        if key in self.seen:  # compared already, or being compared further up (a cycle)
            return self.verdicts.get(key, SAME)
        self.seen.add(key)
        before = len(self.changes)
        self._compare(
            located[0][0],
            located[1][0],
            located[1][1],
            (urldefrag(targets[0])[0], urldefrag(targets[1])[0]),
        )
        self.verdicts[key] = _worst(self.changes[before:])
        return self.verdicts[key]

    def _target(self, side: int, uri: str) -> tuple[Any, str]:
        """The schema at `uri` in one side's bundle and its JSON Pointer there.

        `_NONE` where it is not there.
        """
        document, fragment = urldefrag(uri)
        index = self.indexes[side]
        found, pointer = index.documents.get(document or index.base, (_NONE, ""))
        if found is _NONE or not fragment:
            return found, pointer
        if not fragment.startswith("/"):  # an anchor of that document
            return index.anchors.get((document or index.base, fragment), (_NONE, ""))
        node = found
        for token in reference_tokens(fragment):
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                return _NONE, ""
        return node, pointer + fragment

    # --- one keyword at a time --------------------------------------------------------------

    def _types(self, old: dict[str, Any], new: dict[str, Any], at: str) -> None:
        before, after = _type_set(old.get("type")), _type_set(new.get("type"))
        if before is None or after is None:
            if old.get("type") != new.get("type"):
                self._add(f"{at}/type", "keyword-changed", UNDECIDED, "`type` is not a type name")
            return
        added = sorted(t for t in after if not _covers(before, t))
        lost = sorted(t for t in before if not _covers(after, t))
        if not added and not lost:
            return
        what = f"{_type_text(before)} -> {_type_text(after)}"
        if added and lost:
            self._add(
                f"{at}/type",
                "type-changed",
                BOTH,
                f"{what}: each side holds values the other refuses",
            )
        elif added:
            self._add(
                f"{at}/type",
                "type-widened",
                WIDER,
                f"{what}: new documents may hold {', '.join(added)} here, which old code refuses",
            )
        else:
            self._add(
                f"{at}/type",
                "type-narrowed",
                NARROWER,
                f"{what}: old documents may hold {', '.join(lost)} here, which new code refuses",
            )

    def _values(self, old: dict[str, Any], new: dict[str, Any], at: str) -> None:
        before, after = _allowed_values(old), _allowed_values(new)
        if before == after:
            return
        keyword = "const" if "const" in new or ("const" in old and "enum" not in new) else "enum"
        where = f"{at}/{keyword}"
        if before is None or after is None:
            if after is not None:
                self._add(
                    where, "enum-added", NARROWER, f"values are now limited to {_listed(after)}"
                )
            else:
                self._add(where, "enum-removed", WIDER, "values are no longer limited")
            return
        added = [value for key, value in after.items() if key not in before]
        lost = [value for key, value in before.items() if key not in after]
        if added:
            self._add(
                where, "enum-value-added", WIDER, f"{_listed(added)} allowed: old code refuses it"
            )
        if lost:
            self._add(
                where,
                "enum-value-removed",
                NARROWER,
                f"{_listed(lost)} no longer allowed: old documents may hold it",
            )

    def _bounds(self, old: dict[str, Any], new: dict[str, Any], at: str) -> None:
        for keyword, least in [(k, True) for k in _MINIMA] + [(k, False) for k in _MAXIMA]:
            before, after = old.get(keyword), new.get(keyword)
            if _canonical(before) == _canonical(after):
                continue
            where = f"{at}/{keyword}"
            if not all(_is_number(value) for value in (before, after) if value is not None):
                self._add(where, "keyword-changed", UNDECIDED, f"`{keyword}` is not a number")
                continue
            what = f"{keyword} {_shown(before) if before is not None else 'none'} -> " + (
                _shown(after) if after is not None else "none"
            )
            if before is None:
                tighter = True
            elif after is None:
                tighter = False
            else:
                tighter = after > before if least else after < before
            if tighter:
                self._add(
                    where, "bound-tightened", NARROWER, f"{what}: old documents may be outside it"
                )
            else:
                self._add(
                    where,
                    "bound-loosened",
                    WIDER,
                    f"{what}: new documents may be outside what old code accepts",
                )
        before, after = old.get("multipleOf"), new.get("multipleOf")
        if _canonical(before) != _canonical(after):
            self._step(before, after, f"{at}/multipleOf")
        if bool(old.get("uniqueItems")) != bool(new.get("uniqueItems")):
            if new.get("uniqueItems"):
                self._add(
                    f"{at}/uniqueItems",
                    "bound-tightened",
                    NARROWER,
                    "items must now differ: old documents may repeat one",
                )
            else:
                self._add(
                    f"{at}/uniqueItems",
                    "bound-loosened",
                    WIDER,
                    "items may now repeat, which old code refuses",
                )

    def _step(self, before: Any, after: Any, where: str) -> None:
        """Judge a change of `multipleOf` from `before` to `after` (None: not there)."""
        if not all(_is_number(v) and v > 0 for v in (before, after) if v is not None):
            self._add(where, "keyword-changed", UNDECIDED, "`multipleOf` is not a number")
            return
        what = f"multipleOf {_shown(before)} -> {_shown(after)}"
        if before is None:
            self._add(where, "bound-tightened", NARROWER, f"{what}: old documents may break it")
        elif after is None:
            self._add(
                where, "bound-loosened", WIDER, f"{what}: new documents may break the old step"
            )
        elif not all(isinstance(v, int) for v in (before, after)):
            # A validator divides by a fractional step in floating point: 0.3 is no multiple
            # of 0.1 there (0.3 / 0.1 is 2.9999999999999996), whatever the arithmetic says.
            self._add(
                where, "bound-changed", UNDECIDED, f"{what}: fractional steps are not compared"
            )
        elif after % before == 0:
            self._add(where, "bound-tightened", NARROWER, f"{what}: old documents may break it")
        elif before % after == 0:
            self._add(
                where, "bound-loosened", WIDER, f"{what}: new documents may break the old step"
            )
        else:
            self._add(
                where, "bound-changed", BOTH, f"{what}: each side holds numbers the other refuses"
            )

    def _strings(self, old: dict[str, Any], new: dict[str, Any], at: str) -> None:
        for keyword in ("pattern", "format"):
            before, after = old.get(keyword), new.get(keyword)
            if before == after:
                continue
            where = f"{at}/{keyword}"
            if before is None:
                self._add(
                    where,
                    f"{keyword}-added",
                    NARROWER,
                    f"strings must now match {_shown(after)}: old documents may not",
                )
            elif after is None:
                self._add(
                    where,
                    f"{keyword}-removed",
                    WIDER,
                    f"strings need no longer match {_shown(before)}, which old code asks",
                )
            else:
                self._add(
                    where,
                    f"{keyword}-changed",
                    UNDECIDED,
                    f"{_shown(before)} -> {_shown(after)}: which strings both accept is "
                    "not decided",
                )

    # --- objects ------------------------------------------------------------------------------

    def _objects(
        self, old: dict[str, Any], new: dict[str, Any], at: str, bases: tuple[str, str]
    ) -> None:
        if all(_same(old.get(k), new.get(k)) for k in _OBJECT):
            return
        old_props, new_props = _mapping(old.get("properties")), _mapping(new.get("properties"))
        old_required, new_required = _names(old.get("required")), _names(new.get("required"))
        old_rest = old.get("additionalProperties", True)
        new_rest = new.get("additionalProperties", True)
        old_patterns = _mapping(old.get("patternProperties"))
        new_patterns = _mapping(new.get("patternProperties"))
        added = [key for key in new_props if key not in old_props]
        removed = [key for key in old_props if key not in new_props]
        renamed = _renames(removed, added, old_props, new_props)
        for key in [key for key in new_props if key in old_props]:  # in the schema's order
            self._compare(
                old_props[key], new_props[key], f"{at}/properties/{escape_token(key)}", bases
            )
        for key in added:
            if key in renamed.values():
                continue
            sides, why = self._field(
                key, old_rest, old_patterns, new_props[key], bases, appears=True
            )
            if key in new_required:
                sides = (BREAKING, sides[1])
                why = f"required: old documents leave it out; {why}"
            self._add(
                f"{at}/properties/{escape_token(key)}", "field-added", sides, f"{key!r} {why}"
            )
        for key in removed:
            if key in renamed:
                continue
            sides, why = self._field(
                key, new_rest, new_patterns, old_props[key], bases, appears=False
            )
            if key in old_required:
                sides = (sides[0], BREAKING)
                why = f"{why}; old code requires it"
            self._add(
                f"{at}/properties/{escape_token(key)}", "field-removed", sides, f"{key!r} {why}"
            )
        for was, now in renamed.items():
            gone, _ = self._field(was, new_rest, new_patterns, old_props[was], bases, appears=False)
            came, _ = self._field(now, old_rest, old_patterns, new_props[now], bases, appears=True)
            sides = _worse(gone, came)
            if now in new_required:
                sides = (BREAKING, sides[1])
            if was in old_required:
                sides = (sides[0], BREAKING)
            self._add(
                f"{at}/properties/{escape_token(now)}",
                "field-renamed",
                sides,
                f"{was!r} removed and {now!r} added with the same schema: old documents' "
                f"{was!r} is not read as {now!r}",
            )
        for key in sorted((new_required - old_required) - set(added)):
            self._add(
                f"{at}/required",
                "field-required",
                NARROWER,
                f"{key!r} is now required: old documents may leave it out",
            )
        for key in sorted((old_required - new_required) - set(removed)):
            self._add(
                f"{at}/required",
                "field-optional",
                WIDER,
                f"{key!r} is no longer required: old code expects it",
            )
        if not _same(old_rest, new_rest):
            self._rest(old_rest, new_rest, f"{at}/additionalProperties", bases)
        if not _same(old_patterns, new_patterns):
            for pattern in sorted(old_patterns.keys() | new_patterns.keys()):
                where = f"{at}/patternProperties/{escape_token(pattern)}"
                if pattern in old_patterns and pattern in new_patterns:
                    self._compare(old_patterns[pattern], new_patterns[pattern], where, bases)
                elif _canonical(old_patterns.get(pattern)) != _canonical(new_patterns.get(pattern)):
                    self._add(
                        where,
                        "keyword-changed",
                        UNDECIDED,
                        "a pattern of `patternProperties` added or removed: which keys it "
                        "takes from the others is not decided",
                    )
        self._dependencies(old, new, at, bases)

    def _field(
        self,
        key: str,
        rest: Any,
        patterns: dict[str, Any],
        schema: Any,
        bases: tuple[str, str],
        *,
        appears: bool,
    ) -> tuple[_Sides, str]:
        """The verdict on a property that one side names and the other leaves to the rest.

        `appears`: the new side names it (added), else the old one (removed).
        `rest` is the other side's `additionalProperties`.
        """
        if any(_may_match(pattern, key) for pattern in patterns):
            return UNDECIDED, "falls under the other side's `patternProperties`"
        open_ = _accepts_all(rest)
        if rest is False:
            if appears:
                return WIDER, "added: old code refuses documents holding it (closed object)"
            return NARROWER, "removed: new code refuses old documents holding it (closed object)"
        if open_:
            if _accepts_all(schema):
                return SAME, "added or removed: any value was allowed either way"
            if appears:
                return NARROWER, "added: old documents may hold any value under that name"
            return WIDER, "removed: new documents may hold any value under that name"
        # The rest is a schema: the field is compared with it.
        judged = self._judged([(rest, schema) if appears else (schema, rest)], bases)
        if not judged:
            return SAME, "added or removed: `additionalProperties` gave it the same schema"
        return _worst(judged), "compared with `additionalProperties`, which held it"

    def _judged(self, pairs: list[tuple[Any, Any]], bases: tuple[str, str]) -> list[ContractChange]:
        """The changes between each pair of schemas, judged aside: not told as changes here."""
        before, seen, verdicts = len(self.changes), self.seen, self.verdicts
        # Every reference followed afresh: a pair compared elsewhere is judged here too.
        self.seen, self.verdicts = set(), {}
        try:
            for old, new in pairs:
                if old is not None and new is not None:
                    self._compare(old, new, "", bases)
        finally:
            self.seen, self.verdicts = seen, verdicts
        judged = self.changes[before:]
        del self.changes[before:]
        return judged

    def _rest(self, old: Any, new: Any, at: str, bases: tuple[str, str]) -> None:
        if old is False and _accepts_all(new):
            self._add(
                at,
                "additional-properties-opened",
                WIDER,
                "other keys are now allowed: old code refuses them",
            )
        elif new is False and _accepts_all(old):
            self._add(
                at,
                "additional-properties-closed",
                NARROWER,
                "other keys are now refused: old documents may hold some",
            )
        else:
            self._compare(old, new, at, bases)

    def _dependencies(
        self, old: dict[str, Any], new: dict[str, Any], at: str, bases: tuple[str, str]
    ) -> None:
        old_names, old_schemas = _dependency_parts(old, legacy=self.legacy)
        new_names, new_schemas = _dependency_parts(new, legacy=self.legacy)
        for key in sorted(old_names.keys() | new_names.keys()):
            before, after = old_names.get(key, set()), new_names.get(key, set())
            where = f"{at}/dependentRequired/{escape_token(key)}"
            if after - before:
                self._add(
                    where,
                    "field-required",
                    NARROWER,
                    f"with {key!r}, {_listed(sorted(after - before))} now required",
                )
            if before - after:
                self._add(
                    where,
                    "field-optional",
                    WIDER,
                    f"with {key!r}, {_listed(sorted(before - after))} no longer required",
                )
        for key in sorted(old_schemas.keys() | new_schemas.keys()):
            where = f"{at}/dependentSchemas/{escape_token(key)}"
            self._compare(old_schemas.get(key, True), new_schemas.get(key, True), where, bases)

    # --- arrays --------------------------------------------------------------------------------

    def _arrays(
        self, old: dict[str, Any], new: dict[str, Any], at: str, bases: tuple[str, str]
    ) -> None:
        if not all(_same(old.get(k), new.get(k)) for k in _ARRAY):
            (old_prefix, old_rest, _), (new_prefix, new_rest, new_key) = map(
                _array_parts, (old, new)
            )
            for index in range(max(len(old_prefix), len(new_prefix))):
                before = old_prefix[index] if index < len(old_prefix) else old_rest
                after = new_prefix[index] if index < len(new_prefix) else new_rest
                where = (
                    f"{at}/{new_key}/{index}"
                    if index < len(new_prefix)
                    else f"{at}/{'items' if new_key == 'prefixItems' else 'additionalItems'}"
                )
                self._compare(before, after, where, bases)
            rest_at = f"{at}/{'items' if new_key == 'prefixItems' else 'additionalItems'}"
            self._compare(old_rest, new_rest, rest_at, bases)
        if not all(_same(old.get(k), new.get(k)) for k in _CONTAINS):
            if "maxContains" in old or "maxContains" in new:
                self._add(
                    f"{at}/contains",
                    "keyword-changed",
                    UNDECIDED,
                    "`contains` with `maxContains`: a wider `contains` may count too many",
                )
                return
            before, after = old.get("contains"), new.get("contains")
            if before is None or after is None:
                if after is not None:
                    self._add(
                        f"{at}/contains",
                        "constraint-added",
                        NARROWER,
                        "an item must now match `contains`",
                    )
                else:
                    self._add(
                        f"{at}/contains",
                        "constraint-removed",
                        WIDER,
                        "no item need match `contains` now",
                    )
                return
            self._compare(before, after, f"{at}/contains", bases)
            least = old.get("minContains", 1), new.get("minContains", 1)
            if least[0] != least[1]:
                sides = NARROWER if least[1] > least[0] else WIDER
                self._add(
                    f"{at}/minContains",
                    "bound-tightened" if sides == NARROWER else "bound-loosened",
                    sides,
                    f"minContains {least[0]} -> {least[1]}",
                )

    # --- combinations ---------------------------------------------------------------------------

    def _combinations(
        self, old: dict[str, Any], new: dict[str, Any], at: str, bases: tuple[str, str]
    ) -> None:
        if not all(_same(old.get(k), new.get(k)) for k in _CONDITION) and (
            any(_canonical(old.get(k)) != _canonical(new.get(k)) for k in _CONDITION)
            or self._judged([(old.get(k), new.get(k)) for k in _CONDITION], bases)
        ):
            self._add(
                f"{at}/if",
                "keyword-changed",
                UNDECIDED,
                "`if`/`then`/`else` changed: what each branch takes is not decided",
            )
        if not _same(old.get("not"), new.get("not")):
            if "not" not in old:
                self._add(f"{at}/not", "constraint-added", NARROWER, "`not` added")
            elif "not" not in new:
                self._add(f"{at}/not", "constraint-removed", WIDER, "`not` removed")
            else:
                with self._under("not", lambda sides: (sides[1], sides[0])):
                    self._compare(old["not"], new["not"], f"{at}/not", bases)
        self._branches("allOf", old, new, at, bases)
        self._branches("anyOf", old, new, at, bases)
        self._branches("oneOf", old, new, at, bases)

    def _branches(
        self,
        keyword: str,
        old: dict[str, Any],
        new: dict[str, Any],
        at: str,
        bases: tuple[str, str],
    ) -> None:
        before, after = old.get(keyword), new.get(keyword)
        if _same(before, after):
            return
        where = f"{at}/{keyword}"
        if not isinstance(before, list) or not isinstance(after, list):
            if before is None and isinstance(after, list):
                # Nothing is refused only where the new keyword takes every value: all of
                # `allOf`'s schemas, any of `anyOf`'s, or `oneOf`'s only one (two overlap).
                takes_all = {
                    "allOf": all(map(_accepts_all, after)),
                    "anyOf": any(map(_accepts_all, after)),
                    "oneOf": len(after) == 1 and _accepts_all(after[0]),
                }[keyword]
                sides = SAME if takes_all else NARROWER
                self._add(where, "constraint-added", sides, f"`{keyword}` added")
            elif after is None and isinstance(before, list):
                self._add(where, "constraint-removed", WIDER, f"`{keyword}` removed")
            else:
                self._add(where, "keyword-changed", UNDECIDED, f"`{keyword}` is not a list")
            return
        exclusive = keyword == "oneOf" and not (
            _told_apart(before, self, 0) and _told_apart(after, self, 1)
        )
        pairs, only_old, only_new = _paired(before, after)
        if exclusive:
            # Branches of `oneOf` must not overlap: a wider branch may take a document
            # another one takes (refused), a narrower one may stop taking it (refused).
            context = self._under(
                "oneOf",
                lambda s: tuple(  # type: ignore[arg-type,return-value]
                    UNKNOWN if verdict == COMPATIBLE else verdict for verdict in s
                ),
            )
        else:
            context = self._under("", lambda sides: sides)
        with context:
            for old_index, new_index in pairs:
                self._compare(before[old_index], after[new_index], f"{where}/{new_index}", bases)
        for new_index in only_new:
            if keyword == "allOf":
                sides = SAME if _accepts_all(after[new_index]) else NARROWER
                self._add(
                    f"{where}/{new_index}",
                    "constraint-added",
                    sides,
                    "a schema added to `allOf`: old documents may break it",
                )
            else:
                sides = (UNKNOWN, BREAKING) if exclusive else WIDER
                self._add(
                    f"{where}/{new_index}",
                    "branch-added",
                    sides,
                    f"a branch added to `{keyword}`: new documents may take it, which old "
                    "code refuses",
                )
        for old_index in only_old:
            if keyword == "allOf":
                self._add(
                    where,
                    "constraint-removed",
                    WIDER,
                    f"schema {old_index} of `allOf` removed: new documents may break it",
                )
            else:
                sides = (BREAKING, UNKNOWN) if exclusive else NARROWER
                self._add(
                    where,
                    "branch-removed",
                    sides,
                    f"branch {old_index} of `{keyword}` removed: old documents may have taken it",
                )


# --- reading schemas ---------------------------------------------------------------------


class _Missing:
    def __repr__(self) -> str:
        return "none"


_NONE: Final[Any] = _Missing()


def _meaning(schema: Any) -> str:
    """`schema` without what never changes which documents it accepts, as comparable text."""
    return _canonical(_without_annotations(schema))


def _without_annotations(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {
            key: (
                {name: _without_annotations(value) for name, value in schema[key].items()}
                if key in ("properties", "patternProperties", "$defs", "dependentSchemas")
                and isinstance(schema[key], dict)
                else _without_annotations(value)
                if key not in ("const", "enum", "default")
                else value
            )
            for key, value in schema.items()
            if key not in ANNOTATIONS - {"$id", "$defs", "definitions", "id"}
            and not key.startswith("x-")
        }
    if isinstance(schema, list):
        return [_without_annotations(item) for item in schema]
    return schema


def _canonical(value: Any) -> str:
    if value is _NONE:
        return "\0none"
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _same(one: Any, two: Any, *, meaning: bool = False) -> bool:
    """Whether two keyword values are the same text and refer to nothing (a target may differ).

    `meaning`: two schemas, compared without their annotations.
    """
    text = _meaning(one) if meaning else _canonical(one)
    same = text == (_meaning(two) if meaning else _canonical(two))
    return same and '"$ref"' not in text and '"$dynamicRef"' not in text


def _accepts_all(schema: Any) -> bool:
    """Whether `schema` accepts every value by its look alone (`true`, `{}`, annotations)."""
    if schema is True:
        return True
    return isinstance(schema, dict) and all(
        key in ANNOTATIONS or key.startswith("x-") or key == "default" for key in schema
    )


def _type_set(value: Any) -> frozenset[str] | None:
    if value is None:
        return _TYPES
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not all(name in _TYPES for name in names):
        return None
    return frozenset(names)


def _covers(types: frozenset[str], name: str) -> bool:
    return name in types or (name == "integer" and "number" in types)


def _type_text(types: frozenset[str]) -> str:
    return "any" if types == _TYPES else "|".join(sorted(types))


def _allowed_values(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The values `const` and `enum` leave, by their canonical text; None for any value."""
    values: dict[str, Any] | None = None
    if isinstance(schema.get("enum"), list):
        values = {_canonical(value): value for value in schema["enum"]}
    if "const" in schema:
        key = _canonical(schema["const"])
        values = {} if values is not None and key not in values else {key: schema["const"]}
    return values


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _names(value: Any) -> set[str]:
    return {name for name in value if isinstance(name, str)} if isinstance(value, list) else set()


def _renames(
    removed: list[str], added: list[str], old: dict[str, Any], new: dict[str, Any]
) -> dict[str, str]:
    """Removed fields paired with added ones of the same schema, where the pair is the only one."""
    gone: dict[str, list[str]] = {}
    came: dict[str, list[str]] = {}
    for was in removed:
        gone.setdefault(_meaning(old[was]), []).append(was)
    for now in added:
        came.setdefault(_meaning(new[now]), []).append(now)
    return {
        names[0]: came[meaning][0]
        for meaning, names in gone.items()
        if len(names) == 1 and len(came.get(meaning, ())) == 1
    }


def _dependency_parts(
    schema: dict[str, Any], *, legacy: bool
) -> tuple[dict[str, set[str]], dict[str, Any]]:
    """`dependentRequired` and `dependentSchemas`; before 2019-09, `dependencies` split so."""
    if not legacy:
        names = {
            key: _names(value) for key, value in _mapping(schema.get("dependentRequired")).items()
        }
        return names, dict(_mapping(schema.get("dependentSchemas")))
    names, schemas = {}, {}
    for key, value in _mapping(schema.get("dependencies")).items():
        if isinstance(value, list):
            names[key] = _names(value)
        else:
            schemas[key] = value
    return names, schemas


def _array_parts(schema: dict[str, Any]) -> tuple[list[Any], Any, str]:
    """The schemas of the first items, that of the rest, and the keyword holding the first."""
    if isinstance(schema.get("items"), list):  # drafts before 2020-12
        return schema["items"], schema.get("additionalItems", True), "items"
    prefix = schema.get("prefixItems")
    return (prefix if isinstance(prefix, list) else []), schema.get("items", True), "prefixItems"


def _paired(
    before: list[Any], after: list[Any]
) -> tuple[list[tuple[int, int]], list[int], list[int]]:
    """Branches matched: equal ones first, then the rest in order, and those left on each side."""
    waiting: dict[str, list[int]] = {}
    for new_index, branch in enumerate(after):
        waiting.setdefault(_meaning(branch), []).append(new_index)
    pairs: list[tuple[int, int]] = []
    old_left: list[int] = []
    for old_index, branch in enumerate(before):
        same = waiting.get(_meaning(branch))
        if same:
            pairs.append((old_index, same.pop(0)))
        else:
            old_left.append(old_index)
    matched = {new_index for _, new_index in pairs}
    new_left = [index for index in range(len(after)) if index not in matched]
    if len(old_left) == len(new_left):
        pairs += zip(old_left, new_left, strict=True)
        old_left, new_left = [], []
    return pairs, old_left, new_left


def _told_apart(branches: list[Any], comparison: _Comparison, side: int) -> bool:
    """Whether every branch takes only objects whose one property is a `const` of its own (a tag).

    Then no value matches two branches, whatever else each holds. Tags are
    compared as JSON Schema compares values: 1 and 1.0 are one tag.
    """
    tags: list[dict[str, str]] = []
    for branch in branches:
        if isinstance(branch, dict) and set(branch) - ANNOTATIONS == {"$ref"}:
            branch, _ = comparison._target(side, urljoin(comparison.bases[side], branch["$ref"]))
        if not isinstance(branch, dict) or branch.get("type") != "object":
            return False  # a value of another type ignores `required` and `properties`
        required = _names(branch.get("required"))
        properties = _mapping(branch.get("properties"))
        tags.append(
            {
                key: _tag(properties[key]["const"])
                for key in required
                if isinstance(properties.get(key), dict) and "const" in properties[key]
            }
        )
    if not tags:
        return False
    for key in tags[0]:
        values = [tag.get(key) for tag in tags]
        if None not in values and len(set(values)) == len(values):
            return True
    return False


def _tag(value: Any) -> str:
    if _is_number(value):
        return repr(float(value))  # lossy for huge integers: two of them may look one, not apart
    return _canonical(value)


def _worst(changes: list[ContractChange]) -> _Sides:
    sides: _Sides = SAME
    for change in changes:
        sides = _worse(sides, (change.readers, change.writers))
    return sides


def _worse(one: _Sides, two: _Sides) -> _Sides:
    order = {COMPATIBLE: 0, UNKNOWN: 1, BREAKING: 2}
    readers = max(one[0], two[0], key=order.__getitem__)
    writers = max(one[1], two[1], key=order.__getitem__)
    return readers, writers


def _may_match(pattern: str, key: str) -> bool:
    """Whether `pattern` may match `key`, as validation matches it (the same `regex` engine)."""
    import regex

    try:
        return compiled(pattern).search(key, timeout=1.0) is not None
    except (regex.error, TimeoutError):
        return True  # not known: as if it matched


def _base_of(bundle: dict[str, Any], identity: str) -> str:
    named = bundle.get(identity)
    if isinstance(named, str) and not named.startswith("#"):
        return urldefrag(named)[0]
    return "urn:plancontracts:bundle"


def _rebased(base: str, schema: dict[str, Any], identity: str = "$id") -> str:
    """The base URI inside `schema`: its `$id` (`id` in draft 4), unless that is an anchor."""
    named = schema.get(identity)
    if not isinstance(named, str) or named.startswith("#"):
        return base
    return urldefrag(urljoin(base, named))[0]


_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_SCHEMA_VALUES = (
    "additionalProperties", "items", "additionalItems", "contains", "propertyNames", "if",
    "then", "else", "not", "unevaluatedItems", "unevaluatedProperties", "contentSchema",
)  # fmt: skip


class _Index:
    """The schema documents a bundle holds, by URI (itself, and those it embeds), and anchors.

    Each with its JSON Pointer in the bundle. Only what is read as a schema is
    looked at: an `$id` inside `examples` or `default` names nothing. `identity`
    is the draft's keyword for a schema's URI (`id` in draft 4); before 2019-09
    (`legacy`), its fragment-only values (`#name`) are the anchors.
    """

    def __init__(self, root: dict[str, Any], base: str, identity: str, *, legacy: bool) -> None:
        self.base = base
        self.documents: dict[str, tuple[Any, str]] = {base: (root, "")}
        self.anchors: dict[tuple[str, str], tuple[Any, str]] = {}
        pending: list[tuple[Any, str, str]] = [(root, base, "")]
        while pending:
            node, at, pointer = pending.pop()
            if not isinstance(node, dict):
                continue
            inner = _rebased(at, node, identity)
            if inner != at:
                self.documents.setdefault(inner, (node, pointer))
            if legacy:  # an anchor is an identity of a fragment alone: `"$id": "#name"`
                named = node.get(identity)
                anchor = named[1:] if isinstance(named, str) and named.startswith("#") else None
            else:
                anchor = node.get("$anchor")
            if isinstance(anchor, str):
                self.anchors.setdefault((inner, anchor), (node, pointer))
            for key in (*_SCHEMA_MAPS, "dependencies"):
                for name, value in _mapping(node.get(key)).items():
                    pending.append((value, inner, f"{pointer}/{key}/{escape_token(name)}"))
            for key in _SCHEMA_LISTS:
                if isinstance(node.get(key), list):
                    pending += [
                        (value, inner, f"{pointer}/{key}/{index}")
                        for index, value in enumerate(node[key])
                    ]
            for key in _SCHEMA_VALUES:
                if key in node:
                    pending.append((node[key], inner, f"{pointer}/{key}"))


def _fragment(uri: str, base: str) -> str:
    """`uri` as shown: its fragment alone inside the bundle's own document (two files differ)."""
    document, fragment = urldefrag(uri)
    return f"#{fragment}" if document in ("", base) else uri


def _shown(value: Any) -> str:
    if value is _NONE:
        return "nothing"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def _default(value: Any) -> str:
    return "having no default" if value is _NONE else _shown(value)


def _listed(values: Any) -> str:
    items = list(values.values()) if isinstance(values, dict) else list(values)
    shown = ", ".join(_shown(value) for value in items[:5])
    return shown + (f" and {len(items) - 5} more" if len(items) > 5 else "")


# --- a revision's schemas, read with git ---------------------------------------------------

MAX_REVISION_FILES = 10_000
"Files of a folder read from a revision at most, whatever their size."


@contextmanager
def schemas_at(revision: str, folder: str | os.PathLike[str]) -> Iterator[Path | None]:
    """The schema folder `folder` as revision `revision` of its git repository held it.

    Yields a temporary folder holding the revision's JSON files of `folder`
    (read with git, no checkout: the working tree is not touched), removed
    afterwards; None when the revision has no such folder, or is `HEAD` before
    the first commit. `folder` must be inside a git working tree. Raises
    `UnusableSchema`, one line, when git is missing, `folder` is not in a
    repository, the revision is not one of its commits, or the files are more
    than a schema folder may hold.
    """
    if not isinstance(revision, str) or not revision or revision.startswith("-"):
        raise UnusableSchema(f"{revision!r} is not a revision")
    where = Path(folder)
    if not where.is_dir():
        raise UnusableSchema(f"{where}: no such folder")
    prefix = _git(where, "rev-parse", "--show-prefix").strip()
    if revision == "HEAD" and not _has_commits(where):
        yield None  # the first commit: every contract is new (a pre-commit hook's case)
        return
    commit = _git(
        where,
        "rev-parse",
        "--verify",
        "--quiet",
        "--end-of-options",
        f"{revision}^{{commit}}",
        failed=f"{revision!r} is not a commit of the repository {where} is in",
    ).strip()
    folder_itself = prefix.rstrip("/")
    if folder_itself and _git(
        where, "ls-tree", "--full-tree", commit, "--", folder_itself
    ).startswith("120000"):
        raise UnusableSchema(f"{where} at {revision}: is a symbolic link, not followed")
    # The whole folder: `.` at the repository's top, where the prefix is empty.
    listing = _git(where, "ls-tree", "-r", "-l", "-z", "--full-tree", commit, "--", prefix or ".")
    files: dict[str, tuple[str, str, int]] = {}
    for entry in filter(None, listing.split("\0")):
        meta, _, path = entry.partition("\t")
        mode, kind, sha, size = meta.split()
        if kind == "blob":
            files[path] = (mode, sha, int(size) if size.isdigit() else 0)
    real = _links_followed(where, revision, prefix, files)
    entries: list[tuple[str, str]] = []
    total = 0
    for path in sorted(path for path in files if path.endswith(".json")):
        _, sha, size = files[real[path]]
        total += size
        if total > MAX_SCHEMA_FOLDER_BYTES or len(entries) >= MAX_REVISION_FILES:
            raise UnusableSchema(
                f"{where} at {revision}: its JSON files hold more than a schema folder may "
                f"({MAX_SCHEMA_FOLDER_BYTES >> 20} MiB)"
            )
        entries.append((sha, path[len(prefix) :]))
    if not entries:
        yield None
        return
    blobs = _blobs(where, [sha for sha, _ in entries])
    with tempfile.TemporaryDirectory(prefix="plancontracts-diff-") as temporary:
        root = Path(temporary) / (where.resolve().name or "schemas")
        for (_, relative), data in zip(entries, blobs, strict=True):
            target = root / relative
            if ".." in Path(relative).parts:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        try:
            yield root
        finally:
            shutil.rmtree(root, ignore_errors=True)


def _links_followed(
    where: Path, revision: str, prefix: str, files: dict[str, tuple[str, str, int]]
) -> dict[str, str]:
    """Each JSON file's path, and the file it names: itself, or what its symbolic links lead to.

    As in the working tree, a link inside the folder is followed and one that
    leaves it is refused. Raises `UnusableSchema` naming the link.
    """
    links = {path: sha for path, (mode, sha, _) in files.items() if mode == "120000"}
    targets: dict[str, str] = {}
    for path, data in zip(links, _blobs(where, list(links.values())), strict=True):
        targets[path] = data.decode(errors="replace")
    real: dict[str, str] = {}
    for path in (path for path in files if path.endswith(".json")):
        at, hops = path, 0
        while at in targets:
            hops += 1
            at = posixpath.normpath(posixpath.join(posixpath.dirname(at), targets[at]))
            named = f"{where} at {revision}: {path[len(prefix) :]}"
            if hops > 40:
                raise UnusableSchema(f"{named}: is a loop of symbolic links")
            if not at.startswith(prefix) or at.startswith("../"):
                raise UnusableSchema(f"{named}: is a symbolic link that leaves the folder")
        if at not in files:
            raise UnusableSchema(
                f"{where} at {revision}: {path[len(prefix) :]}: is a symbolic link to no file"
            )
        real[path] = at
    return real


def _blobs(where: Path, shas: list[str]) -> list[bytes]:
    """The contents of git blobs, in the order given, read by one `git cat-file --batch`."""
    if not shas:
        return []
    read = _git(where, "cat-file", "--batch", given="".join(f"{sha}\n" for sha in shas), raw=True)
    found, offset = [], 0
    for _ in shas:
        header_end = read.index(b"\n", offset)  # "<sha> blob <size>"
        size = int(read[offset:header_end].split()[2])
        found.append(read[header_end + 1 : header_end + 1 + size])
        offset = header_end + 1 + size + 1
    return found


def _has_commits(where: Path) -> bool:
    try:
        _git(where, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    except UnusableSchema:
        return False
    return True


def _git(
    where: Path,
    *args: str,
    failed: str | None = None,
    given: str | None = None,
    raw: bool = False,
) -> Any:
    try:
        done = subprocess.run(
            ["git", "-C", str(where), *args],
            input=None if given is None else given.encode(),
            capture_output=True,
            check=False,
            # No pager, no prompt for credentials, no configuration that runs a program.
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "LC_ALL": "C"},
        )
    except FileNotFoundError:
        raise UnusableSchema("git is not installed: --against reads the revision with it") from None
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        if failed is None:
            failed = said[-1] if said else f"git {args[0]} failed"
            if "not a git repository" in failed:
                failed = f"{where} is not in a git repository"
        raise UnusableSchema(failed)
    return done.stdout if raw else done.stdout.decode(errors="replace")
