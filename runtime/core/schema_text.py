"""A contract's schema as text for a language model to read.

The rendering is derived from the bundled schema alone and is stable: the
same schema always gives the same text. It keeps what a model needs to write
a valid document: every field with its type, whether it is required, its
bounds, enums, patterns and default, its `x-` marks, and its description;
which objects are closed; and the key rules of maps. Object types get a
section each, in the order they are first mentioned. Simple named types are
written out in place, named, and described in a last section, so that no
description of the schema is lost.
"""

from __future__ import annotations

import json
from typing import Any

from .contracts import AnyContract, contract_name, contract_schema

_END_OF_TEXT = "$(?!\\n)"


def display_pattern(pattern: str) -> str:
    """A schema pattern as a reader needs it: `$(?!\\n)`, the schemas' portable
    spelling of "end of text", becomes `$`."""
    return pattern.replace(_END_OF_TEXT, "$")


def schema_text(contract: AnyContract) -> str:
    """Markdown text describing `contract` (a handle or a name) for a model.

    Raises `UnknownContractError` for an unknown name.
    """
    return "\n".join(text for _, text in schema_sections(contract)).rstrip() + "\n"


def schema_sections(contract: AnyContract) -> list[tuple[str, str]]:
    """The sections of `schema_text(contract)` as (name, Markdown) pairs, in order.

    The contract's own section comes first, named `""`; then one section per
    object type, named as in the schema's `$defs`; then `Value types`, when
    the contract names simple types. Raises `UnknownContractError` for an
    unknown name.
    """
    name = contract_name(contract)
    schema = contract_schema(contract)
    renderer = _Renderer(schema.get("$defs", {}))
    title = schema.get("title", name)
    about = schema.get("description", "").strip()
    head = f"# {title} (`{name}`)\n\n{about}\n" if about else f"# {title} (`{name}`)\n"
    sections = [("", f"{head}\n{renderer.body(schema)}")]
    while renderer.pending:
        name = renderer.pending.pop(0)
        definition = renderer.definitions[name]
        text = definition.get("description", "").strip()
        head = f"## {name}\n\n{text}\n" if text else f"## {name}\n"
        sections.append((name, f"{head}\n{renderer.body(definition)}"))
    if renderer.values:
        # Named simple types are written out in place; their own descriptions
        # (what a key or an id means) are kept here, so that none is lost.
        lines = [f"- `{name}`: {text}" for name, text in renderer.values.items()]
        sections.append(("Value types", "## Value types\n\n" + "\n".join(lines) + "\n"))
    return sections


class _Renderer:
    def __init__(self, definitions: dict[str, Any]) -> None:
        self.definitions = definitions
        self.pending: list[str] = []
        self.seen: set[str] = set()
        self.values: dict[str, str] = {}
        "Named simple types met so far, with their descriptions."

    def body(self, schema: dict[str, Any]) -> str:
        if "oneOf" in schema:
            return self.union(schema)
        if "properties" in schema:
            return self.fields(schema)
        return f"A document of this contract is {self.type_of(schema)}.\n"

    def fields(self, schema: dict[str, Any]) -> str:
        required = set(schema.get("required", ()))
        lines = []
        if schema.get("additionalProperties") is False:
            lines.append("An object with these fields and no others:\n")
        for name, given in schema["properties"].items():
            field = given if isinstance(given, dict) else {}  # a boolean schema: no marks
            flag = "required" if name in required else "optional"
            # Marks such as `x-think-mode: required`, which descriptions refer to.
            flag += "".join(f"; `{k}: {v}`" for k, v in field.items() if k.startswith("x-"))
            description = field.get("description", "").strip()
            line = f"- `{name}` ({flag}): {self.type_of(given)}."
            if "default" in field:
                line += f" Default: `{json.dumps(field['default'])}`."
            lines.append(f"{line} {description}".rstrip())
        extra = between(schema.get("minProperties"), schema.get("maxProperties"), "fields")
        if extra:
            lines.append(f"\nThe object has {extra}.")
        return "\n".join(lines) + "\n"

    def union(self, schema: dict[str, Any]) -> str:
        tag = schema.get("discriminator", {}).get("propertyName")
        lines = [
            "One of these objects:\n"
            if not tag
            else f"One of these objects, told apart by `{tag}`:\n"
        ]
        for branch in schema["oneOf"]:
            name = self.reference(branch)
            lines.append(f"- {name}" if name else f"- {self.type_of(branch)}")
        return "\n".join(lines) + "\n"

    def reference(self, schema: dict[str, Any] | bool) -> str | None:
        """The name of a referenced object type, queued for its own section."""
        if not isinstance(schema, dict) or "$ref" not in schema or self.elsewhere(schema):
            return None
        name = str(schema["$ref"]).removeprefix("#/$defs/")
        target = self.definitions[name]
        if "properties" not in target and "oneOf" not in target:
            return None
        if name not in self.seen:
            self.seen.add(name)
            self.pending.append(name)
        return name

    def elsewhere(self, schema: dict[str, Any]) -> bool:
        """Whether `schema` refers to anything but an entry of `$defs` (a user's anchor, say)."""
        reference = schema.get("$ref")
        if not isinstance(reference, str):
            return False
        name = reference.removeprefix("#/$defs/")
        return name == reference or not isinstance(self.definitions.get(name), dict)

    def type_of(self, schema: dict[str, Any] | bool) -> str:
        if not isinstance(schema, dict):  # a boolean schema, in a user's contract
            return "any JSON value" if schema else "nothing: no value is allowed"
        name = self.reference(schema)
        if name:
            article = "an" if name[0] in "AEIOU" else "a"
            return f"{article} {name} object (see below)"
        if self.elsewhere(schema):
            return f"a value of the schema `{schema['$ref']}` refers to"
        if "$ref" in schema:
            name = schema["$ref"].removeprefix("#/$defs/")
            definition = self.definitions[name]
            text = self.type_of(definition)
            description = definition.get("description", "").strip()
            if description and name not in self.values:
                self.values[name] = f"{text}. {description}"
            return f"{text} (see `{name}` below)" if description else text
        if "anyOf" in schema:
            return " or ".join(self.type_of(branch) for branch in schema["anyOf"])
        if "const" in schema:
            return f"always `{json.dumps(schema['const'])}`"
        if "enum" in schema:
            return "one of " + ", ".join(f"`{json.dumps(value)}`" for value in schema["enum"])
        kind = schema.get("type")
        if kind == "string":
            return "a string" + _string_rules(schema)
        if kind in ("integer", "number"):
            return ("an integer" if kind == "integer" else "a number") + _range(schema)
        if kind == "boolean":
            return "true or false"
        if kind == "null":
            return "null"
        if kind == "array":
            size = between(schema.get("minItems"), schema.get("maxItems"), "items")
            item = schema.get("items", {})
            items = self.type_of(item)
            said = item.get("description", "").strip().rstrip(".") if isinstance(item, dict) else ""
            if said and "$ref" not in item:  # a named type says it in its own section
                items += f": {said}"
            return f"an array{f' of {size}' if size else ''}, each {items}"
        if kind == "object":
            return self.map_of(schema)
        return "any JSON value"

    def map_of(self, schema: dict[str, Any]) -> str:
        values = schema.get("additionalProperties", True)
        size = between(schema.get("minProperties"), schema.get("maxProperties"), "entries")
        if "properties" in schema:  # an object written in place, in a user's contract
            named = "; ".join(
                f"`{name}` ({'required' if name in schema.get('required', ()) else 'optional'}): "
                f"{self.type_of(field)}"
                for name, field in schema["properties"].items()
            )
            others = " and no others" if values is False else ""
            return f"an object with the fields {named}{others}"
        if values is False:
            return "an empty object"
        if values is True:
            return "an object with any fields" + (f" ({size})" if size else "")
        keys = "keys"
        if "propertyNames" in schema:
            keys = f"keys that are {self.type_of(schema['propertyNames'])}"
        text = f"an object mapping {keys} to {self.type_of(values)}"
        return text + (f"; {size}" if size else "")


def _string_rules(schema: dict[str, Any]) -> str:
    rules = []
    length = between(schema.get("minLength"), schema.get("maxLength"), "characters")
    if length:
        rules.append(length)
    if "pattern" in schema:
        rules.append(f"matching `{display_pattern(schema['pattern'])}`")
    return f" ({', '.join(rules)})" if rules else ""


def _range(schema: dict[str, Any]) -> str:
    low = schema.get("minimum")
    high = schema.get("maximum")
    if low is not None and high is not None:
        return f" from {low} to {high}"
    if low is not None:
        return f" of at least {low}"
    if high is not None:
        return f" of at most {high}"
    return ""


def between(low: int | None, high: int | None, unit: str) -> str:
    """A size's bounds in words, `1 to 160 characters`; "" when there are none.

    A lower bound of 0 says nothing, so it is left out.
    """
    if low and high:
        return f"{low} to {high} {unit}"
    if high is not None:
        return f"at most {high} {unit}"
    if low:
        return f"at least {low} {unit}"
    return ""
