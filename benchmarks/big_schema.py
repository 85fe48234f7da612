"""A large schema in the shape of real-world ones, and documents of it, made deterministically.

    .venv/bin/python benchmarks/big_schema.py OUT.json [DEFINITIONS]   # default 1,000: ~2 MB

`schema(definitions)` is one draft 2020-12 schema file shaped like those
users bring (Kubernetes' OpenAPI-derived schemas, GitHub's webhook payloads,
the Azure Pipelines schema): `definitions` entries in `$defs`, a description
on every definition and property, string enums, patterned and formatted
strings, bounded numbers, nested inline objects, arrays, string maps, an
integer-or-string union, objects closed with `"additionalProperties": false`
and (with `open_objects`) open ones, a chain of definitions each referring to
the next (one in sixteen of them, 62 at 1,000), a tree node that refers to
itself and two definitions that refer to each other. Every definition is
reachable from the root object. At 1,000 definitions the file, written with
an indent of 2 as such files usually are, holds about 2 MB.

`document(definitions, size, invalid=...)` is a document of that schema of
about `size` bytes: valid, or with `invalid` violations planted in it (a
wrong type, a value outside an enum, a string off its pattern, an unknown
field in a closed object, a number out of range), each at its own place.

Both are pure functions of their arguments: the same call gives the same
bytes on every machine and Python version (a seeded `random.Random`, names
never iterated from a set).
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any

JSONValue = Any
DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_PREFIXES = _words(
    "Workload Container Volume Network Ingress Service Secret Config Storage Backup Replica "
    "Schedule Queue Topic Pipeline Stage Job Task Trigger Artifact Registry Image Probe Policy "
    "Quota Limit Node Cluster Zone Region Account Role Binding Token Certificate Endpoint Route "
    "Gateway Listener Webhook Event Alert Metric Log Trace Audit Billing Invoice Repository "
    "Branch Commit Review Release Deployment Environment Variable Template Package Feature"
)
_SUFFIXES = _words(
    "Spec Status Source Reference Template Policy Settings Options Condition Selector Rule "
    "Summary Details Request Response Entry Target Mount Claim Strategy Window Override"
)
_NOUNS = _words(
    "name namespace label annotation owner replica port protocol path host address timeout "
    "interval threshold priority weight version revision image tag digest command argument "
    "secret key value mode phase reason message count limit request capacity region zone "
    "schedule retention duration size format encoding checksum url token scope audience issuer"
)
_WORDS = _words(
    "the controller keeps this value for every replica of the workload and reports it in the "
    "status when the reconciler observes a change to the object defaults are applied by the "
    "server when the field is unset and an empty value means that no limit applies the field "
    "is immutable once set and must be unique within its namespace a client should retry "
    "after the interval elapses when the request fails with a conflict more information "
    "about the lifecycle of this resource is in the reference documentation of the project"
)

# Patterns of the kinds real schemas carry, each with values it matches.
_PATTERNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", ("web", "api-server", "db-0", "worker-7")),
    (r"^[A-Za-z_][A-Za-z0-9_]*$", ("HOME", "max_retries", "Path", "_private")),
    (r"^v[0-9]+(alpha[0-9]+|beta[0-9]+)?$", ("v1", "v2beta1", "v1alpha3")),
    (r"^[0-9]+(\.[0-9]+){2}(-[0-9A-Za-z.-]+)?$", ("1.2.3", "0.10.0-rc.1", "2.0.0")),
    (r"^([0-9]+(ms|s|m|h))+$", ("30s", "5m", "1h30m", "250ms")),
    (r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|m)?$", ("500m", "2Gi", "128Mi", "1.5")),
    (r"^sha256:[a-f0-9]{64}$", ("sha256:" + "ab" * 32, "sha256:" + "0f" * 32)),
    (r"^#[0-9a-fA-F]{6}$", ("#ff8800", "#00AAcc", "#123456")),
    (r"^[A-Z]{2}-[A-Z]{2,3}$", ("EU-WE", "US-EST", "AP-SE")),
    (r"^refs/(heads|tags)/[A-Za-z0-9._/-]+$", ("refs/heads/main", "refs/tags/v1.0")),
    (r"^[a-z][a-z0-9+.-]*://[^ ]+$", ("https://example.org/a", "s3://bucket/key", "git://host/r")),
    (r"^(\*|[0-5]?[0-9]) (\*|[01]?[0-9]|2[0-3]) \* \* \*$", ("0 3 * * *", "* * * * *")),
)
_FORMATS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("date-time", ("2026-11-26T21:40:00Z", "2025-01-02T03:04:05+01:00")),
    ("date", ("2026-11-26", "1999-12-31")),
    ("email", ("ops@example.org", "a.b@example.com")),
    ("uri", ("https://example.org/docs", "urn:example:thing")),
    ("uuid", ("5b0e2c9a-1f3d-4e6a-8b7c-9d0e1f2a3b4c", "00000000-0000-4000-8000-000000000001")),
)


class _Names:
    """Definition and property names, distinct and readable."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.taken: dict[str, None] = {}

    def definition(self, suffixes: tuple[str, ...] | list[str] = _SUFFIXES) -> str:
        for attempt in range(1000):
            name = (
                self.rng.choice(_PREFIXES) + self.rng.choice(_PREFIXES) + self.rng.choice(suffixes)
            )
            if attempt > 50:
                name += str(attempt)
            if name not in self.taken:
                self.taken[name] = None
                return name
        raise AssertionError("ran out of definition names")


def _description(rng: random.Random, low: int = 8, high: int = 20) -> str:
    start = rng.randrange(len(_WORDS))
    words = [_WORDS[(start + index) % len(_WORDS)] for index in range(rng.randint(low, high))]
    text = " ".join(words)
    return text[:1].upper() + text[1:] + "."


def _property_names(rng: random.Random, count: int) -> list[str]:
    names: dict[str, None] = {}
    while len(names) < count:
        first, second = rng.choice(_NOUNS), rng.choice(_NOUNS)
        name = first if rng.random() < 0.3 else first + second[:1].upper() + second[1:]
        names[name] = None
    return list(names)


def schema(definitions: int = 1000, *, seed: int = 27, open_objects: bool = True) -> JSONValue:
    """The schema, as a JSON value: see the module's docstring.

    `definitions` is at least 24. With `open_objects` false every object with
    properties is closed (`"additionalProperties": false`), as plancontracts'
    code generator required before it took open objects.
    """
    if definitions < 24:
        raise ValueError("the schema needs at least 24 definitions")
    rng = random.Random(seed)
    names = _Names(rng)
    defs: dict[str, JSONValue] = {}
    chain = max(4, definitions // 16)
    enums = definitions * 12 // 100
    scalars = definitions * 8 // 100
    fixed = 5  # TreeNode, Selector, SelectorTerm, IntOrString, Metadata, and Entry below
    objects = definitions - chain - enums - scalars - fixed - 1

    enum_names = [
        names.definition(["Kind", "Phase", "Mode", "Type", "Level"]) for _ in range(enums)
    ]
    for name in enum_names:
        values = _property_names(rng, rng.randint(3, 8))
        defs[name] = {"description": _description(rng), "type": "string", "enum": values}
    scalar_names = [
        names.definition(["Name", "Quantity", "Duration", "Id", "Port"]) for _ in range(scalars)
    ]
    for index, name in enumerate(scalar_names):
        if index % 3 == 2:
            low = rng.choice((0, 1))
            defs[name] = {
                "description": _description(rng),
                "type": "integer",
                "minimum": low,
                "maximum": rng.choice((255, 65535, 1_000_000)),
            }
        else:
            pattern, _ = _PATTERNS[rng.randrange(len(_PATTERNS))]
            defs[name] = {
                "description": _description(rng),
                "type": "string",
                "pattern": pattern,
                "maxLength": 253,
            }
    defs["IntOrString"] = {
        "description": "A port number or the name of a port: " + _description(rng, 6, 10),
        "oneOf": [
            {"type": "integer", "minimum": 0, "maximum": 65535},
            {"type": "string", "pattern": _PATTERNS[0][0], "maxLength": 15},
        ],
    }
    defs["Metadata"] = {
        "description": "Standard object metadata. " + _description(rng),
        "type": "object",
        "additionalProperties": False,
        "required": ["name"],
        "properties": {
            "name": {
                "description": _description(rng),
                "type": "string",
                "pattern": _PATTERNS[0][0],
                "maxLength": 63,
            },
            "namespace": {"description": _description(rng), "type": "string", "maxLength": 63},
            "labels": {
                "description": _description(rng),
                "type": "object",
                "additionalProperties": {"type": "string", "maxLength": 63},
            },
            "annotations": {
                "description": _description(rng),
                "type": "object",
                "additionalProperties": {"type": "string"},
            },
            "uid": {"description": _description(rng), "type": "string", "format": "uuid"},
            "created": {"description": _description(rng), "type": "string", "format": "date-time"},
        },
    }

    # The chain: each step refers to the next, so a document may nest through all of them.
    chain_names = [f"Stage{index:03d}" for index in range(chain)]
    for index, name in enumerate(chain_names):
        properties: dict[str, JSONValue] = {
            "name": {"description": _description(rng), "type": "string", "maxLength": 63},
            "timeout": {"description": _description(rng), "$ref": f"#/$defs/{scalar_names[0]}"},
        }
        if index + 1 < chain:
            properties["next"] = {
                "description": _description(rng),
                "$ref": f"#/$defs/{chain_names[index + 1]}",
            }
        defs[name] = {
            "description": f"Stage {index} of the pipeline. " + _description(rng),
            "type": "object",
            "additionalProperties": False,
            "required": ["name"],
            "properties": properties,
        }

    # Recursion: a node holding nodes, and a selector whose terms hold selectors.
    defs["TreeNode"] = {
        "description": "A node of a tree of resources. " + _description(rng),
        "type": "object",
        "additionalProperties": False,
        "required": ["id"],
        "properties": {
            "id": {"description": _description(rng), "type": "string", "maxLength": 63},
            "weight": {"description": _description(rng), "type": "number", "minimum": 0},
            "children": {
                "description": _description(rng),
                "type": "array",
                "items": {"$ref": "#/$defs/TreeNode"},
            },
        },
    }
    defs["Selector"] = {
        "description": "Terms joined by a logical operator. " + _description(rng),
        "type": "object",
        "additionalProperties": False,
        "required": ["operator", "terms"],
        "properties": {
            "operator": {"description": _description(rng), "type": "string", "enum": ["and", "or"]},
            "terms": {
                "description": _description(rng),
                "type": "array",
                "minItems": 1,
                "items": {"$ref": "#/$defs/SelectorTerm"},
            },
        },
    }
    defs["SelectorTerm"] = {
        "description": "A key compared with values, or a nested selector. " + _description(rng),
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "key": {"description": _description(rng), "type": "string", "pattern": _PATTERNS[1][0]},
            "values": {
                "description": _description(rng),
                "type": "array",
                "items": {"type": "string", "maxLength": 63},
                "uniqueItems": True,
            },
            "nested": {"description": _description(rng), "$ref": "#/$defs/Selector"},
        },
    }

    # The bulk: objects that refer to later ones, each referred to by one before it, so that
    # the first reaches them all without a cycle.
    object_names = [names.definition() for _ in range(objects)]
    children: list[list[int]] = [[] for _ in range(objects)]
    for index in range(1, objects):
        children[rng.randrange(max(0, index - 40), index)].append(index)
    for index, name in enumerate(object_names):
        refs = [object_names[child] for child in children[index]]
        extra = rng.randint(0, 2)
        if index + 1 < objects:
            refs += [object_names[rng.randrange(index + 1, objects)] for _ in range(extra)]
        defs[name] = _object(rng, refs, enum_names, scalar_names, open_objects and index % 7 == 3)
    defs["Entry"] = {
        "description": "One item of the list: any of the resources below. " + _description(rng),
        "type": "object",
        "additionalProperties": False,
        "properties": {
            _camel(object_names[index]): {
                "description": _description(rng),
                "$ref": f"#/$defs/{object_names[index]}",
            }
            for index in range(0, objects, max(1, objects // 40))
        },
    }
    assert len(defs) == definitions, (len(defs), definitions)
    return {
        "$schema": DRAFT_2020_12,
        "$id": "https://example.org/schemas/big/big.json",
        "title": "Big",
        "description": "A resource list in the shape of a large real-world API. "
        + _description(rng),
        "type": "object",
        "additionalProperties": False,
        "required": ["apiVersion", "kind", "metadata"],
        "properties": {
            "apiVersion": {"description": _description(rng), "type": "string", "enum": ["v1"]},
            "kind": {"description": _description(rng), "type": "string", "enum": ["List"]},
            "metadata": {"description": _description(rng), "$ref": "#/$defs/Metadata"},
            "spec": {"description": _description(rng), "$ref": f"#/$defs/{object_names[0]}"},
            "pipeline": {"description": _description(rng), "$ref": f"#/$defs/{chain_names[0]}"},
            "tree": {"description": _description(rng), "$ref": "#/$defs/TreeNode"},
            "selector": {"description": _description(rng), "$ref": "#/$defs/Selector"},
            "port": {"description": _description(rng), "$ref": "#/$defs/IntOrString"},
            "items": {
                "description": _description(rng),
                "type": "array",
                "items": {"$ref": "#/$defs/Entry"},
            },
        },
        "$defs": dict(sorted(defs.items())),
    }


def _camel(name: str) -> str:
    return name[:1].lower() + name[1:]


def _object(
    rng: random.Random,
    refs: list[str],
    enum_names: list[str],
    scalar_names: list[str],
    open_object: bool,
) -> JSONValue:
    """An object definition: scalars of every kind, then a property per reference in `refs`."""
    count = rng.randint(4, 9)
    properties: dict[str, JSONValue] = {}
    required: list[str] = []
    for name in _property_names(rng, count):
        kind = rng.randrange(12)
        node: JSONValue
        if kind == 0:
            node = {"type": "string", "maxLength": rng.choice((63, 253, 1024))}
        elif kind == 1:
            node = {"type": "string", "pattern": rng.choice(_PATTERNS)[0]}
        elif kind == 2:
            node = {"type": "string", "format": rng.choice(_FORMATS)[0]}
        elif kind == 3:
            node = {"type": "integer", "minimum": 0, "maximum": rng.choice((10, 100, 86400))}
        elif kind == 4:
            node = {"type": "number", "minimum": 0, "exclusiveMaximum": 1e9}
        elif kind == 5:
            node = {"type": "boolean"}
        elif kind == 6:
            node = {"$ref": f"#/$defs/{rng.choice(enum_names)}"}
        elif kind == 7:
            node = {"$ref": f"#/$defs/{rng.choice(scalar_names)}"}
        elif kind == 8:
            node = {
                "type": "array",
                "items": {"type": "string", "maxLength": 253},
                "maxItems": 64,
                "uniqueItems": True,
            }
        elif kind == 9:
            node = {"type": "object", "additionalProperties": {"type": "string"}}
        elif kind == 10:
            node = _inline(rng, enum_names, depth=2)
        else:
            node = {"$ref": "#/$defs/IntOrString"}
        properties[name] = {"description": _description(rng), **node}
        if kind in (0, 1, 3, 5, 6) and rng.random() < 0.3:
            required.append(name)
    for ref in refs:
        many = rng.random() < 0.4
        target = {"$ref": f"#/$defs/{ref}"}
        name = _camel(ref) + ("List" if many else "")
        node = {"type": "array", "items": target} if many else target
        properties[name] = {"description": _description(rng), **node}
    result: JSONValue = {"description": _description(rng, 20, 40), "type": "object"}
    if not open_object:
        result["additionalProperties"] = False
    if required:
        result["required"] = required
    result["properties"] = properties
    return result


def _inline(rng: random.Random, enum_names: list[str], depth: int) -> JSONValue:
    """A nested object written in place, closed, of scalars and (`depth` > 1) another such."""
    properties: dict[str, JSONValue] = {}
    for name in _property_names(rng, rng.randint(2, 4)):
        kind = rng.randrange(4 if depth > 1 else 3)
        node: JSONValue
        if kind == 0:
            node = {"type": "string", "maxLength": 253}
        elif kind == 1:
            node = {"type": "integer", "minimum": 0}
        elif kind == 2:
            node = {"$ref": f"#/$defs/{rng.choice(enum_names)}"}
        else:
            node = _inline(rng, enum_names, depth - 1)
        properties[name] = {"description": _description(rng), **node}
    return {"type": "object", "additionalProperties": False, "properties": properties}


def text(definitions: int = 1000, *, open_objects: bool = True) -> bytes:
    """The schema as its file holds it: JSON indented by 2, ending in a newline."""
    return (json.dumps(schema(definitions, open_objects=open_objects), indent=2) + "\n").encode()


class _Writer:
    """Builds one document of the schema, spending a budget of bytes."""

    def __init__(self, root: JSONValue, size: int, invalid: int, seed: int) -> None:
        self.root = root
        self.defs: dict[str, JSONValue] = root["$defs"]
        self.rng = random.Random(seed)
        self.left = size
        self.faults = invalid
        # A fault at every n-th scalar, n such that they spread over the whole document
        # (a scalar with its key takes about 27 bytes).
        self.every = max(1, size // 30 // (invalid + 1))
        self.scalars = 0
        self.unknown_due = False
        self.planted: list[str] = []

    def value(self, node: JSONValue, depth: int, pointer: str) -> JSONValue:
        name = ""
        while "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[1]
            node = self.defs[name]
        if "oneOf" in node:
            branch = node["oneOf"][self.rng.randrange(len(node["oneOf"]))]
            return self.value(branch, depth, pointer)
        if "enum" in node:
            return self.scalar(node, pointer, node["enum"][self.rng.randrange(len(node["enum"]))])
        kind = node.get("type")
        if kind == "object":
            return self.object(node, name, depth, pointer)
        if kind == "array":
            return self.array(node, depth, pointer)
        if kind == "string":
            if "pattern" in node:
                examples = dict(_PATTERNS)[node["pattern"]]
            elif "format" in node:
                examples = dict(_FORMATS)[node["format"]]
            else:
                examples = tuple(_NOUNS)
            return self.scalar(node, pointer, examples[self.rng.randrange(len(examples))])
        if kind == "integer":
            return self.scalar(node, pointer, self.rng.randint(node.get("minimum", 0), 10))
        if kind == "number":
            return self.scalar(node, pointer, round(self.rng.uniform(0, 100), 3))
        if kind == "boolean":
            return self.scalar(node, pointer, self.rng.random() < 0.5)
        raise AssertionError(f"no value for {node}")

    def scalar(self, node: JSONValue, pointer: str, value: JSONValue) -> JSONValue:
        self.left -= len(json.dumps(value)) + 4
        self.scalars += 1
        if not (self.faults and self.scalars % self.every == 0):
            return value
        self.faults -= 1
        if len(self.planted) % 4 == 3:  # an unknown field, in the next closed object done
            self.unknown_due = True
            return value
        self.planted.append(pointer)
        if "enum" in node or "pattern" in node:
            return "!not-allowed!"
        if node.get("type") in ("integer", "number"):
            return -1 if len(self.planted) % 2 else "12"
        return 12

    def object(self, node: JSONValue, name: str, depth: int, pointer: str) -> JSONValue:
        properties: dict[str, JSONValue] = node.get("properties", {})
        if not properties:  # a map of strings
            count = self.rng.randint(1, 3) if self.left > 0 else 0
            return {
                f"{_NOUNS[self.rng.randrange(len(_NOUNS))]}-{index}": self.value(
                    node["additionalProperties"], depth + 1, f"{pointer}/k{index}"
                )
                for index in range(count)
            }
        required = node.get("required", [])
        keys = list(properties)
        if pointer:
            self.rng.shuffle(keys)
        else:  # the root: every part, each within a share of the size, then the list fills it
            keys.remove("items")
            keys.append("items")
        result: dict[str, JSONValue] = {}
        for key in keys:
            if key in required:
                wanted = True
            elif not pointer:
                wanted = self.left > 0
            elif self.left <= 0:
                wanted = False
            elif key == "next":  # the chain is followed to its end
                wanted = True
            elif name == "Entry":  # a list item is one or two resources
                wanted = self.rng.random() < 2 / len(keys)
            else:
                wanted = depth < 14 and self.rng.random() < (0.7 if depth < 6 else 0.3)
            if not wanted:
                continue
            self.left -= len(key) + 4
            if not pointer and key != "items":
                before = self.left
                self.left = min(self.left, 4000 + before // 20)
                result[key] = self.value(properties[key], depth + 1, f"/{key}")
                self.left = before - (min(before, 4000 + before // 20) - self.left)
            else:
                result[key] = self.value(properties[key], depth + 1, f"{pointer}/{key}")
        if self.unknown_due and node.get("additionalProperties") is False:
            self.unknown_due = False
            self.planted.append(f"{pointer}/unknownField")
            result["unknownField"] = True
        return result

    def array(self, node: JSONValue, depth: int, pointer: str) -> JSONValue:
        low = node.get("minItems", 0)
        high = min(node.get("maxItems", 6), 6)
        if pointer == "/items":  # the list at the root grows to fill the document
            high = 1 << 30
        items: list[JSONValue] = []
        while len(items) < low or (len(items) < high and self.left > 0 and depth < 14):
            self.left -= 1
            items.append(self.value(node["items"], depth + 1, f"{pointer}/{len(items)}"))
            if node.get("uniqueItems") and len(set(map(json.dumps, items))) < len(items):
                items.pop()
                break
        return items


def document(
    definitions: int = 1000, size: int = 1024, *, invalid: int = 0, seed: int = 0
) -> bytes:
    """A document of `schema(definitions)` of about `size` bytes, with `invalid` violations.

    The root holds, as far as `size` allows, its metadata, the pipeline (the
    whole chain, from 100 kB), a tree, a selector, a resource, then as many
    list items as fill `size`. Faults, when asked for, are spread over it:
    a wrong type, a value outside its enum or off its pattern, a number below
    its minimum, an unknown field in a closed object.
    """
    writer = _Writer(schema(definitions), size, invalid, seed)
    value = writer.value(writer.root, 0, "")
    if writer.faults or writer.unknown_due:  # too small to hold them all: the rest at the root
        value["apiVersion"] = "v0"
        writer.planted.append("/apiVersion")
    return json.dumps(value, separators=(",", ":")).encode()


def main() -> int:
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    data = text(int(sys.argv[2]) if len(sys.argv) == 3 else 1000)
    with open(sys.argv[1], "wb") as file:
        file.write(data)
    print(f"wrote {sys.argv[1]}: {len(data):,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
