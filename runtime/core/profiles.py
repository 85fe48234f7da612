"""Decoding profiles: the schema a model writes under, derived from a contract.

A contract says what is valid; a decoding profile says what a model may write
now. A small model under a grammar still writes whatever the grammar allows,
so the profile leaves it no room to wander (see docs/local-model.md):

- references inlined and annotations dropped;
- every object closed; a free-form object becomes a short map of named
  scalars unless the context gives it a shape; fields marked `x-decoding: omit`
  in the contract are left out (the planner fills them, or their defaults apply);
- every string, array, map and number bounded;
- whitespace fixed, through llguidance's `x-guidance` options.

`contract_profile` derives a whole contract's profile; families narrow their
own contracts further with `Deriver` (tool plans by the skills at hand,
planning blocks into a shape that makes the planning protocol hold by
construction).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .contracts import AnyContract, contract_name, contract_schema, is_bundled
from .errors import ProfileBug, UnusableSchema
from .schema_text import display_pattern
from .schema_tree import draft_of, references

__all__ = [
    "WHITESPACE",
    "Bounds",
    "Deriver",
    "ProfileBug",
    "closed",
    "contract_profile",
    "every_field_written",
    "without",
]

WHITESPACE = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
_DROPPED = {"description", "title", "examples", "default", "$comment", "format", "discriminator"}
_DROPPED |= {"$schema", "$id", "$defs"}
_NAME = "^[A-Za-z_][A-Za-z0-9_]{0,39}$"


@dataclass(frozen=True)
class Bounds:
    """The bounds a profile puts where the contract sets none (or a looser one)."""

    string: int = 300
    "Most characters in a string."
    items: int = 4
    "Most items in an array, or entries in a map."
    integer: int = 1_000_000
    "Integers lie within plus or minus this."


def contract_profile(
    contract: AnyContract, bounds: Bounds = Bounds(), *, whole: bool = False
) -> dict[str, Any]:
    """The decoding schema of `contract` (a handle or a name), derived from its bundled schema.

    `whole` keeps the fields the contract requires that it marks `x-decoding:
    omit` (a plan's `requestId`): a document written with no planner to fill
    them in (`plancontracts.write`) must hold them.

    Raises `UnusableSchema` for a user's contract no profile is derived from:
    one of another draft than 2020-12, one whose references name anything but
    entries of its `$defs`, one that refers to itself (a profile writes
    every reference out).
    """
    schema = contract_schema(contract)
    name = contract_name(contract)
    if draft_of(schema) not in (None, "2020-12"):
        raise UnusableSchema(f"{name}: a decoding profile is derived from a draft 2020-12 schema")
    if not is_bundled(contract):  # plancontracts' own are written in what the deriver reads
        unread = _unread(schema)
        if unread is not None:
            raise UnusableSchema(f"{name}: no decoding profile: {unread}")
    try:
        derived = Deriver(schema.get("$defs", {}), bounds, whole=whole).derive(schema)
    except KeyError as missing:  # a reference to no entry of `$defs`: only a user's says so
        raise UnusableSchema(
            f"{name}: no decoding profile: the reference {missing.args[0]!r} names no entry of "
            "`$defs`"
        ) from None
    except RecursionError:
        raise UnusableSchema(
            f"{name}: no decoding profile: the schema refers to itself, and a profile writes "
            "every reference out"
        ) from None
    left = next(references(derived, "file:///profile.json"), None)
    if left is not None:  # under a schema without `type`, which the deriver copies as it is
        raise UnusableSchema(
            f"{name}: no decoding profile: the reference {left[0]!r} is under a schema "
            "without a `type` the profile could write out"
        )
    return {**derived, "x-guidance": WHITESPACE}


_READ = frozenset(
    {
        "$ref", "anyOf", "oneOf", "const", "enum", "type",
        "minLength", "maxLength", "pattern",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
        "items", "minItems", "maxItems", "uniqueItems",
        "properties", "required", "additionalProperties", "propertyNames",
        "minProperties", "maxProperties",
    }
) | _DROPPED  # fmt: skip
"The keywords the deriver writes out or drops; a user's schema with another has no profile."


def _unread(schema: Any) -> str | None:
    """Why a user's schema has no profile: a keyword or a shape the deriver does not read."""
    pending: list[tuple[str, Any]] = [("", schema)]
    while pending:
        where, node = pending.pop()
        if not isinstance(node, dict):
            return f"the boolean schema at {where or '/'} (write it as an object)"
        for key in node:
            if key not in _READ and not key.startswith("x-"):
                return f"`{key}` at {where or '/'} is not a keyword a profile is derived from"
        if isinstance(node.get("type"), list):
            return f"the list of types at {where}/type (write `anyOf`)"
        for key in ("properties", "$defs"):
            pending += [(f"{where}/{key}/{name}", sub) for name, sub in node.get(key, {}).items()]
        for key in ("anyOf", "oneOf"):
            pending += [(f"{where}/{key}/{i}", sub) for i, sub in enumerate(node.get(key, []))]
        for key in ("items", "additionalProperties", "propertyNames"):
            if key in node and node[key] is not True:
                pending.append((f"{where}/{key}", node[key]))
    return None


def closed(properties: dict[str, Any]) -> dict[str, Any]:
    """An object of `properties`, closed, every field required (see `every_field_written`)."""
    return every_field_written({"type": "object", "properties": properties})


def every_field_written(node: dict[str, Any]) -> dict[str, Any]:
    """`node` closed, with every field required and every list holding at least one item.

    One shape, always written in full, is the easiest for a small model to follow.
    """
    properties = {
        name: {**field, "minItems": 1} if field.get("type") == "array" else field
        for name, field in node["properties"].items()
    }
    return {
        **node,
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


class Deriver:
    """Derives decoding schemas from a contract's nodes, within `bounds`.

    `definitions` are the contract's `$defs`, which references resolve to;
    `text_pattern`, when given, constrains every string the contract leaves free.
    """

    def __init__(
        self,
        definitions: dict[str, Any],
        bounds: Bounds,
        text_pattern: str | None = None,
        *,
        whole: bool = False,
    ) -> None:
        self.definitions = definitions
        self.bounds = bounds
        self.text_pattern = text_pattern
        "A pattern for every string the contract leaves free."
        self.whole = whole
        "Whether required fields marked `x-decoding: omit` are written all the same."

    def derive(self, node: dict[str, Any]) -> dict[str, Any]:
        if "$ref" in node:
            name = node["$ref"].removeprefix("#/$defs/")
            return self.derive({**self.definitions[name], **without(node, "$ref")})
        out = {key: value for key, value in node.items() if key not in _DROPPED}
        out = {key: value for key, value in out.items() if not key.startswith("x-")}
        for key in ("anyOf", "oneOf"):
            if key in out:
                out["anyOf"] = [self.derive(branch) for branch in out.pop(key)]
        kind = out.get("type")
        if "const" in out or "enum" in out:
            return out
        if kind == "string":
            out["maxLength"] = min(out.get("maxLength", self.bounds.string), self.bounds.string)
            if self.text_pattern and "pattern" not in out:
                out["pattern"] = self.text_pattern
            if "pattern" in out:
                # The contracts end patterns with `$(?!\n)` for Python's `re`;
                # grammar engines anchor whole strings and know no lookahead.
                out["pattern"] = display_pattern(out["pattern"])
        elif kind == "integer" or kind == "number":
            out.setdefault("minimum", -self.bounds.integer)
            out.setdefault("maximum", self.bounds.integer)
        elif kind == "array":
            out["items"] = self.derive(out.get("items", {"type": "string"}))
            out["maxItems"] = min(out.get("maxItems", self.bounds.items), self.bounds.items)
        elif kind == "object":
            out = self.object(out)
        return out

    def object(self, node: dict[str, Any]) -> dict[str, Any]:
        properties = node.get("properties")
        if properties is not None:
            required = set(node.get("required", ())) if self.whole else set()
            kept = {
                name: self.derive(sub)
                for name, sub in properties.items()
                if sub.get("x-decoding") != "omit" or name in required
            }
            out = {**node, "properties": kept, "additionalProperties": False}
            out["required"] = [name for name in node.get("required", ()) if name in kept]
            return out
        values = node.get("additionalProperties", True)
        if values is True or values == {}:
            # Free-form: a few named scalars, so that the model cannot nest or ramble.
            out = {**node, **self.free_form()}
        else:
            out = {**node, "additionalProperties": self.derive(values)}
        if "propertyNames" in node:
            out["propertyNames"] = self.derive(node["propertyNames"])
        out["maxProperties"] = min(node.get("maxProperties", self.bounds.items), self.bounds.items)
        return out

    def free_form(self) -> dict[str, Any]:
        text = {"type": "string", "maxLength": self.bounds.string}
        number = {"minimum": -self.bounds.integer, "maximum": self.bounds.integer}
        scalars = [text, {"type": "integer", **number}, {"type": "boolean"}, {"type": "null"}]
        return {
            "type": "object",
            "propertyNames": {"type": "string", "maxLength": 40, "pattern": _NAME},
            "additionalProperties": {"anyOf": scalars},
        }


def without(node: dict[str, Any], *keys: str) -> dict[str, Any]:
    """`node` without the members `keys`."""
    return {name: value for name, value in node.items() if name not in keys}
