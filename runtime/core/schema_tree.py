"""Loading the schema tree and bundling contracts into self-contained documents.

A *contract* is a schema file whose root declares a document type (`type` or
`oneOf`); its name is the file's stem and its family the folder it sits in.
Any other schema file is a library of definitions, such as `common.json`.
Names of contracts and family folders are lower-case words joined by hyphens
(`tool-event`), so that each is also a Python name (`TOOL_EVENT`, `tool_plans`),
and every file must be a valid draft 2020-12 schema.

Bundling follows every `$ref` from a contract and copies each referenced
definition into the bundle's own `$defs`, so that the result needs no other
file. Definitions keep the key they have in their file; a contract referenced
as a whole is named after it in PascalCase (`tool-event` -> `ToolEvent`).
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# How `re` reads a pattern, with its repeat counts; typeshed knows it only as sre_parse, whose
# import warns that it is deprecated.
from re import _constants, _parser  # type: ignore[attr-defined]
from typing import Any
from urllib.parse import quote, unquote, urldefrag, urljoin

from .errors import UnusableSchema

JSONSchema = dict[str, Any]

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
# Keywords whose value maps names (data, not keywords) to subschemas.
NAMED_SUBSCHEMAS = ("properties", "$defs", "patternProperties", "dependentSchemas")
_NAME = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
_SHOWN = 120
"Characters of a schema checker's message kept in an error line: it may quote a whole value."
MAX_SCHEMA_FILE_BYTES = 4 << 20
"What one schema file may hold: plancontracts' largest holds 32 kB."
MAX_SCHEMA_FOLDER_BYTES = 32 << 20
"What a schema folder's files may hold together."
MAX_SCHEMA_DEPTH = 64
"""How deeply a schema file's JSON may nest: plancontracts' deepest nests 11 levels. Checking
and bundling a schema follow its depth by recursion, which Python bounds."""
MAX_PATTERN_SIZE = 10_000
"""How large one pattern may be with its repeats written out: each character, class, group or
anchor counts 1, and a repeat multiplies what it repeats by its largest count (its least when it
has no largest). The matcher writes repeats out when compiling: `a{10000000}` takes 2 GB. The
largest of plancontracts' own patterns comes to 68."""
MAX_FOLDER_PATTERN_SIZE = 100_000
"What a schema folder's different patterns may come to together, each counted as above."
MAX_FOLDER_PATTERNS = 1_000
"""How many different patterns a schema folder may hold: a key is matched against every pattern
of `patternProperties`, and 90,000 took 40 s per document. plancontracts' own hold 22."""
_REFUSED_KEYWORDS = {
    "$dynamicRef": "refer with `$ref` to a file of the folder or one of its `$defs`",
    "$dynamicAnchor": "refer with `$ref` to a file of the folder or one of its `$defs`",
}
"Keywords a schema folder may not use, with what to do instead: bundling cannot keep them."
_VALUES = {"const", "enum", "default", "examples"}
"Keywords whose value is data, not schemas."
_KINDS = {
    stat.S_IFDIR: "a folder",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


@dataclass(frozen=True)
class Contract:
    """One contract: a schema file that describes a kind of document."""

    name: str
    family: str
    path: Path
    uri: str
    schema: JSONSchema

    @property
    def class_name(self) -> str:
        """The Python name of the contract's root type, such as `ExecutionResult`."""
        return pascal_case(self.name)


def pascal_case(name: str) -> str:
    """`execution-result` -> `ExecutionResult`."""
    return "".join(part[:1].upper() + part[1:] for part in name.replace("_", "-").split("-"))


def module_name(family: str) -> str:
    """The generated module of a family: `tool-plans` -> `tool_plans`."""
    return family.replace("-", "_")


def constant_name(contract: str) -> str:
    """The Python name of a contract's handle: `tool-event` -> `TOOL_EVENT`."""
    return contract.replace("-", "_").upper()


class SchemaTree:
    """Every schema file under one folder, indexed by `$id`.

    Errors name files by their path inside the folder, for the caller to say
    which folder it is.
    """

    def __init__(self, root: Path) -> None:
        if not root.is_dir():
            raise UnusableSchema("is not a folder" if root.exists() else "no such folder")
        self.root = root
        self.documents: dict[str, JSONSchema] = {}
        self.paths: dict[str, Path] = {}
        contracts: dict[str, Contract] = {}
        patterns = _Patterns()
        left = MAX_SCHEMA_FOLDER_BYTES
        for path in sorted(root.rglob("*.json")):
            relative = path.relative_to(root)
            data = _read_schema_file(root, path, relative, min(left, MAX_SCHEMA_FILE_BYTES))
            left -= len(data)
            document = _parse_schema_file(data, relative)
            uri = document.get("$id")
            if not isinstance(uri, str) or not uri:
                raise UnusableSchema(f"{relative}: has no `$id`")
            # `https://ex.org/a.json#` names the document `https://ex.org/a.json`, which its
            # references `a.json#/$defs/x` name once their empty fragment is taken off.
            uri = uri.removesuffix("#")
            if document.get("$schema") != DRAFT_2020_12:
                raise UnusableSchema(f"{relative}: `$schema` must be {DRAFT_2020_12}")
            if uri in self.documents:
                raise UnusableSchema(f"{relative}: `$id` {uri} is used twice")
            # Before jsonschema's check, which compiles every pattern with `re`: a repeat count
            # over 2**32 - 1 raises OverflowError there, not the SchemaError it reports.
            _check_keywords(document, relative, patterns)
            _check_schema(document, relative)
            self.documents[uri] = document
            self.paths[uri] = relative
            if "type" in document or "oneOf" in document:
                if len(relative.parts) != 2:
                    raise UnusableSchema(
                        f"{relative}: a contract must sit in a family folder, one level deep"
                    )
                name = path.stem
                for kind, word in (("contract", name), ("family folder", relative.parts[0])):
                    if not _NAME.fullmatch(word):
                        raise UnusableSchema(
                            f"{relative}: {kind} name {word!r} must be lower-case words "
                            "joined by hyphens, such as tool-event"
                        )
                if name in contracts:
                    raise UnusableSchema(
                        f"{relative}: contract name {name!r} is used twice, "
                        f"by {contracts[name].path} too"
                    )
                contracts[name] = Contract(name, relative.parts[0], relative, uri, document)
        if not contracts:
            raise UnusableSchema("holds no contract")
        self.contracts = dict(sorted(contracts.items()))

    def families(self) -> dict[str, list[Contract]]:
        """Contracts grouped by family, both in name order."""
        grouped: dict[str, list[Contract]] = {}
        for contract in self.contracts.values():
            grouped.setdefault(contract.family, []).append(contract)
        return dict(sorted(grouped.items()))

    def bundle(self, contract: Contract) -> JSONSchema:
        """The contract as one self-contained schema, for any JSON Schema tool."""
        bundler = _Bundler(self)
        root: JSONSchema = bundler.rewrite(contract.schema, contract.uri, keep_identity=True)
        root.pop("$defs", None)
        if bundler.definitions:
            root["$defs"] = dict(sorted(bundler.definitions.items()))
        return root

    def family_bundle(self, family: str) -> JSONSchema:
        """Every contract of a family and what they reference, as `$defs` only.

        This is the input of the model generator: each contract root becomes a
        definition named after the contract. Examples are left out; they are
        documentation, not types.
        """
        bundler = _Bundler(self, drop_examples=True)
        for contract in self.families()[family]:
            bundler.add_whole(contract.uri)
        return {"$schema": DRAFT_2020_12, "$defs": dict(sorted(bundler.definitions.items()))}

    def resolve(self, base: str, reference: str) -> tuple[str, str]:
        """Split a `$ref` seen in document `base` into (document URI, JSON Pointer).

        The pointer is percent-decoded, as a URI fragment is (RFC 6901,
        section 6); its tokens keep their `~0` and `~1` escapes. Raises
        UnusableSchema when the reference names no file of the folder: none
        is read or fetched from anywhere else.
        """
        try:
            # A fragment alone names a place in `base` whatever its scheme: urljoin joins only
            # the schemes it knows to be hierarchical, and leaves `#/$defs/x` as it is for `urn:`.
            whole = base + reference if reference.startswith("#") else urljoin(base, reference)
            uri, fragment = urldefrag(whole)
        except ValueError as error:  # a URI that cannot be parsed, such as `http://[`
            raise UnusableSchema(f"{self.paths[base]}: `$ref` {reference!r}: {error}") from None
        if uri not in self.documents:
            raise UnusableSchema(
                f"{self.paths[base]}: `$ref` {reference!r} names no schema file of the folder"
            )
        return uri, unquote(fragment)


class _Bundler:
    """Copies reachable definitions into one `$defs`, rewriting references to them."""

    def __init__(self, tree: SchemaTree, *, drop_examples: bool = False) -> None:
        self.tree = tree
        self.drop_examples = drop_examples
        self.definitions: dict[str, JSONSchema] = {}
        self.origin: dict[str, tuple[str, str]] = {}

    def rewrite(self, node: Any, base: str, *, keep_identity: bool = False) -> Any:
        if isinstance(node, list):
            return [self.rewrite(item, base) for item in node]
        if not isinstance(node, dict):
            return node
        result: JSONSchema = {}
        for key, value in node.items():
            if key == "$ref":
                name = self.add(*self.tree.resolve(base, value))
                result[key] = "#/$defs/" + _fragment_token(name)
            elif (key in ("$id", "$schema") and not keep_identity) or (
                key == "examples" and self.drop_examples
            ):
                continue
            elif key in NAMED_SUBSCHEMAS:
                result[key] = {name: self.rewrite(sub, base) for name, sub in value.items()}
            elif key in ("examples", "default", "const", "enum"):
                result[key] = copy.deepcopy(value)
            else:
                result[key] = self.rewrite(value, base)
        return result

    def add_whole(self, uri: str) -> str:
        return self.add(uri, "")

    def add(self, uri: str, pointer: str) -> str:
        name = self._name(uri, pointer)
        if name in self.origin:
            if self.origin[name] != (uri, pointer):
                raise UnusableSchema(
                    f"two definitions would both be bundled as {name!r}: "
                    f"{self.tree.paths[self.origin[name][0]]}#{self.origin[name][1]} and "
                    f"{self.tree.paths[uri]}#{pointer}; rename one"
                )
            return name
        self.origin[name] = (uri, pointer)
        self.definitions[name] = {}  # reserve the name before recursing: schemas may recurse
        target = _follow(self.tree.documents[uri], pointer, self.tree.paths[uri])
        rewritten = self.rewrite(target, uri)
        rewritten.pop("$defs", None)
        self.definitions[name] = rewritten
        return name

    def _name(self, uri: str, pointer: str) -> str:
        if pointer == "":
            return pascal_case(self.tree.paths[uri].stem)
        parts = pointer.split("/")
        if len(parts) != 3 or parts[:2] != ["", "$defs"]:
            raise UnusableSchema(
                f"{self.tree.paths[uri]}#{pointer}: references must name a whole file "
                "or one entry of its `$defs`"
            )
        return _unescape(parts[2])


def _follow(document: JSONSchema, pointer: str, path: Path) -> JSONSchema:
    node: Any = document
    for token in map(_unescape, pointer.split("/")[1:]):
        if not isinstance(node, dict) or token not in node:
            raise UnusableSchema(f"{path}#{pointer}: no such definition")
        node = node[token]
    if not isinstance(node, dict):
        raise UnusableSchema(f"{path}#{pointer}: is not a schema")
    return node


def _check_schema(document: JSONSchema, relative: Path) -> None:
    """Refuse a file that is not a valid draft 2020-12 schema, naming where it breaks the rules."""
    # Imported here: code generation and `validate --schemas` need it, other commands do not.
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(document)
    except SchemaError as error:
        where = "".join(f"/{_escape(str(token))}" for token in error.absolute_path)
        message = error.message if len(error.message) <= _SHOWN else error.message[:_SHOWN] + "…"
        raise UnusableSchema(f"{relative}#{where}: not a valid JSON Schema: {message}") from None


def walk(schema: Any, pointer: str = "") -> Iterator[tuple[str, JSONSchema]]:
    """Every subschema of a schema with its JSON Pointer, the schema itself first."""
    if not isinstance(schema, dict):
        return
    yield pointer, schema
    for key, value in schema.items():
        if key in NAMED_SUBSCHEMAS:
            for name, sub in value.items():
                yield from walk(sub, f"{pointer}/{key}/{_escape(name)}")
        elif key in ("items", "additionalProperties", "propertyNames", "not", "if", "then", "else"):
            yield from walk(value, f"{pointer}/{key}")
        elif key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            for index, sub in enumerate(value):
                yield from walk(sub, f"{pointer}/{key}/{index}")


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _unescape(token: str) -> str:
    # In this order, so that `~01` is `~1` (RFC 6901, section 4).
    return token.replace("~1", "/").replace("~0", "~")


def _fragment_token(name: str) -> str:
    """`name` as a JSON Pointer token in a URI fragment: escaped, then percent-encoded."""
    return quote(_escape(name), safe="~!$&'()*+,;=:@")


def _read_schema_file(root: Path, path: Path, relative: Path, limit: int) -> bytes:
    """The bytes of one schema file: a regular file inside `root`, of at most `limit` bytes.

    A FIFO, a device or a folder is refused before it is opened for reading
    (opening a FIFO waits for a writer; /dev/zero never ends), and so is a
    symbolic link that leaves the folder. Raises UnusableSchema naming why.
    """
    try:
        real = path.resolve(strict=True)
        if not real.is_relative_to(root.resolve()):
            raise UnusableSchema(f"{relative}: is a symbolic link that leaves the folder")
        _require_regular(os.stat(real).st_mode, relative)
        descriptor = os.open(real, os.O_RDONLY | os.O_NONBLOCK)
        with open(descriptor, "rb") as file:
            _require_regular(os.fstat(descriptor).st_mode, relative)  # replaced in between?
            data = file.read(limit + 1)
    except RuntimeError:  # how Python before 3.13 reports a loop of symbolic links
        raise UnusableSchema(f"{relative}: is a loop of symbolic links") from None
    except OSError as error:
        raise UnusableSchema(f"{relative}: cannot read: {error.strerror or error}") from None
    if len(data) > limit:
        whole = " (with the files before it)" if limit < MAX_SCHEMA_FILE_BYTES else ""
        raise UnusableSchema(f"{relative}: holds more than {limit} bytes{whole}")
    return data


def _require_regular(mode: int, relative: Path) -> None:
    if not stat.S_ISREG(mode):
        kind = _KINDS.get(stat.S_IFMT(mode), "an unknown kind of file")
        raise UnusableSchema(f"{relative}: is not a regular file ({kind})")


def _parse_schema_file(data: bytes, relative: Path) -> JSONSchema:
    """One schema file's JSON object, read as strictly as a document is.

    Raises UnusableSchema if it is none, nests too deeply, writes one key twice
    in an object (Python's json keeps the last, other tools the first), or
    holds a number that is not JSON: `NaN`, `Infinity`, a number too large for
    a float (`1e400`), or an integer of more digits than Python converts.
    """
    if _nesting(data) > MAX_SCHEMA_DEPTH:
        raise UnusableSchema(f"{relative}: nests more than {MAX_SCHEMA_DEPTH} levels deep")

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result = dict(pairs)
        if len(result) < len(pairs):
            twice = next(key for index, (key, _) in enumerate(pairs) if key in dict(pairs[:index]))
            raise UnusableSchema(f"{relative}: the key {twice!r} is written twice in one object")
        return result

    def not_json(constant: str) -> Any:
        raise UnusableSchema(f"{relative}: cannot read as JSON: {constant} is not a JSON number")

    def finite(text: str) -> float:
        number = float(text)
        if not math.isfinite(number):
            raise UnusableSchema(f"{relative}: the number {text} is too large for a float")
        return number

    def integer(text: str) -> int:
        digits = len(text.lstrip("-"))
        if digits > sys.get_int_max_str_digits() > 0:
            raise UnusableSchema(
                f"{relative}: an integer of {digits} digits; "
                f"at most {sys.get_int_max_str_digits()} are read"
            )
        return int(text)

    try:
        document = json.loads(
            data.decode("utf-8"),
            object_pairs_hook=unique,
            parse_constant=not_json,
            parse_float=finite,
            parse_int=integer,
        )
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UnusableSchema(f"{relative}: cannot read as JSON: {error}") from None
    if not isinstance(document, dict):
        raise UnusableSchema(f"{relative}: a schema file must hold a JSON object")
    return document


_NESTING = re.compile(rb'"(?:[^"\\]++|\\.)*+"|[\[\]{}]')
"A string, possessive (its brackets are text), or a bracket."


def _nesting(data: bytes) -> int:
    """How deeply the JSON text `data` nests, counted on its brackets outside strings."""
    depth = deepest = 0
    for token in _NESTING.finditer(data):
        mark = token.group()
        if mark in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        elif mark in (b"]", b"}"):
            depth -= 1
    return deepest


def _check_keywords(document: JSONSchema, relative: Path, patterns: _Patterns) -> None:
    """Refuse a keyword, an `$id` or a pattern the folder's schemas may not use, naming where.

    Every subschema is looked at: `$id` anywhere but the root, `$dynamicRef`,
    `$dynamicAnchor`, and a pattern (`pattern`, a key of `patternProperties`)
    that `patterns` refuses.
    """
    for pointer, node in _schema_objects(document):
        where = f"{relative}#{pointer}"
        for keyword, instead in _REFUSED_KEYWORDS.items():
            if keyword in node:
                raise UnusableSchema(f"{where}: `{keyword}` is not supported: {instead}")
        # An `$id` inside a file would be the base of the references below it; bundling
        # resolves every reference against its file's `$id`, and would follow the wrong one.
        if "$id" in node and pointer:
            raise UnusableSchema(
                f"{where}: an `$id` inside a schema is not read: give the definition its own file"
            )
        pattern = node.get("pattern")
        if isinstance(pattern, str):
            patterns.add(pattern, f"{where}/pattern")
        named = node.get("patternProperties")
        if isinstance(named, dict):
            for key in named:
                patterns.add(key, f"{where}/patternProperties/{_escape(key)}")


def _schema_objects(document: JSONSchema) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every object of a schema file that is read as a schema, with its JSON Pointer.

    That is every object but values (`const`, `enum`, `default`, `examples`)
    and maps of names (`properties`), wherever it sits: `walk` knows the
    keywords code generation reads, jsonschema follows more (`contains`). A map
    of names holds schemas under any name, `const` included.
    """
    pending: list[tuple[str, Any, bool]] = [("", document, False)]
    while pending:
        pointer, node, names = pending.pop()
        if isinstance(node, list):
            pending += [(f"{pointer}/{index}", item, False) for index, item in enumerate(node)]
        elif isinstance(node, dict):
            if not names:
                yield pointer, node
            pending += [
                (f"{pointer}/{_escape(key)}", value, not names and key in NAMED_SUBSCHEMAS)
                for key, value in node.items()
                if names or key not in _VALUES
            ]


class _Patterns:
    """The different patterns of a schema folder, refused past the sizes the matcher can hold."""

    def __init__(self) -> None:
        self.sizes: dict[str, int] = {}
        self.total = 0

    def add(self, pattern: str, where: str) -> None:
        """Count `pattern`, found at `where`; raise UnusableSchema past one of the limits."""
        if pattern in self.sizes:
            return
        shown = pattern if len(pattern) <= _SHOWN else pattern[:_SHOWN] + "…"
        try:
            size = _pattern_size(_parser.parse(pattern), MAX_PATTERN_SIZE)
        except re.error:  # jsonschema's check of the file refuses it next, naming why
            return
        except OverflowError:  # a repeat count over 2**32 - 1, which `re` cannot hold
            size = MAX_PATTERN_SIZE + 1
        except RecursionError:
            raise UnusableSchema(
                f"{where}: the pattern {shown!r} nests its groups too deeply to be read"
            ) from None
        if size > MAX_PATTERN_SIZE:
            raise UnusableSchema(
                f"{where}: the pattern {shown!r} repeats too much: written out, a pattern may "
                f"come to at most {MAX_PATTERN_SIZE:,} characters, classes and groups"
            )
        if len(self.sizes) == MAX_FOLDER_PATTERNS:
            raise UnusableSchema(
                f"{where}: a schema folder may hold at most {MAX_FOLDER_PATTERNS:,} different "
                "patterns"
            )
        if self.total + size > MAX_FOLDER_PATTERN_SIZE:
            raise UnusableSchema(
                f"{where}: the folder's patterns repeat too much together: written out, they "
                f"may come to at most {MAX_FOLDER_PATTERN_SIZE:,} characters, classes and groups"
            )
        self.sizes[pattern] = size
        self.total += size


def _pattern_size(items: Any, limit: int) -> int:
    """How large parsed pattern `items` is with its repeats written out, or `limit` + 1 if larger.

    `items` is what `re._parser.parse` returns; see MAX_PATTERN_SIZE. A repeat
    of no count (`{0}`) counts as one: its body is compiled all the same.
    Raises RecursionError for groups nested past Python's recursion limit.
    """
    size = 0
    for operation, argument in items:
        if operation in _REPEATS:
            low, high, body = argument
            count = low if high == _constants.MAXREPEAT else high
            size += max(count, 1) * _pattern_size(body, limit)
        elif operation is _constants.SUBPATTERN:
            size += 1 + _pattern_size(argument[3], limit)
        elif operation is _constants.BRANCH:
            size += 1 + sum(_pattern_size(branch, limit) for branch in argument[1])
        elif operation is _constants.ATOMIC_GROUP:
            size += 1 + _pattern_size(argument, limit)
        elif operation in (_constants.ASSERT, _constants.ASSERT_NOT):
            size += 1 + _pattern_size(argument[1], limit)
        elif operation is _constants.GROUPREF_EXISTS:
            _, yes, no = argument
            size += 1 + _pattern_size(yes, limit) + (_pattern_size(no, limit) if no else 0)
        else:
            size += 1
        if size > limit:  # past it, the exact size does not matter: keep the numbers small
            return limit + 1
    return size


_REPEATS = (_constants.MAX_REPEAT, _constants.MIN_REPEAT, _constants.POSSESSIVE_REPEAT)
