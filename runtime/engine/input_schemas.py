"""Input schemas: loaded once with every reference resolved, inputs checked in bounded time.

An input schema resolves its `$ref`s only to files of its skill folder, all
read and checked when it is loaded; checking an input later reads nothing
and stops at the deadline it is given. Discovery loads a script's schema
this way, and so does `script_io.run_script`, so a script checks its input
by the same rules whoever starts it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote, urljoin, urlsplit

if TYPE_CHECKING:
    from jsonschema.protocols import Validator
    from referencing import Resource
    from referencing._core import Resolver

from ..core.errors import TooLarge
from ..core.jsontext import parse
from ..core.patterns import OutOfTime, compiled, deadline, matches, time_left
from .skill_files import inside, read_regular_file, reason

__all__ = ["MAX_INPUT_SCHEMA_BYTES", "InputProblem", "check_input", "input_validator"]

MAX_INPUT_SCHEMA_BYTES = 1 << 20
"What an input schema and the files it refers to may hold together."


@dataclass(frozen=True)
class InputProblem:
    """Why a call's input is refused, as `check_input` finds it."""

    code: Literal["invalid_input", "input_too_deep", "input_check_timeout"]
    "`invalid_input`: the schema refuses it; the others: it could not be checked."
    pointer: str | None
    "Where in the input, for `invalid_input`."
    message: str
    "One line, naming the schema's complaint or why checking stopped."


def check_input(
    validator: Validator, schema: str, value: Any, *, seconds: float, until: str
) -> InputProblem | None:
    """Why `value` is not valid against `validator` (the input schema `schema`), or None.

    `validator` is one `input_validator` made. Checking stops after about
    `seconds` (`until` names that moment, for the message): every pattern is
    matched with what is left of it, and every `$ref` followed checks it, so
    no schema and input can take longer. An input nested deeper than
    Python's recursion allows is a problem too. Raises nothing else.
    """
    from jsonschema.exceptions import best_match

    try:
        with deadline(seconds):
            problem = best_match(validator.iter_errors(value))
    except RecursionError:
        return InputProblem(
            "input_too_deep", None, f"input nests too deeply to be checked against {schema}"
        )
    except OutOfTime as out:
        matching = f" (matching the pattern {out.pattern!r})" if out.pattern else ""
        return InputProblem(
            "input_check_timeout",
            None,
            f"checking the input against {schema} ran out of time before {until}{matching}",
        )
    if problem is None:
        return None
    where = "/" + "/".join(map(str, problem.absolute_path))
    return InputProblem("invalid_input", where, f"input {where}: {problem.message}")


def input_validator(root: Path, name: str) -> Validator:
    """A validator for the input schema `root / name`, with every reference it makes resolved.

    The schema's base URI is its file's, so relative references name files
    beside it. Every `$ref` and `$dynamicRef` the schema can reach is
    resolved here, following references into the files they name: only
    regular files inside `root` (symbolic links resolved), all together
    within `MAX_INPUT_SCHEMA_BYTES`, each read once. The validator holds them
    all and never reads or fetches anything. It matches patterns with
    `regex`, whose matching can be stopped; `patternProperties` is refused,
    as jsonschema matches its patterns with `re` in three keywords, where no
    time limit can apply.

    Raises OSError or ValueError naming the first problem: the schema or a
    file it reaches is unreadable, not JSON, not a JSON Schema, nests too
    deeply, or a reference is refused or points to nothing.
    """
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    files = _SchemaFiles(root)
    file = files.inside(name)
    schema = files.load(file)
    try:
        Draft202012Validator.check_schema(schema)
        if isinstance(schema, dict):
            # Resolved against its file's URI, a schema's own `$id` (if any) still sets its base.
            schema = {**schema, "$id": urljoin(file.as_uri(), schema.get("$id", ""))}
        # attrs' `retrieve` field is not visible to mypy as an argument.
        retrieving: Registry[Any] = Registry(retrieve=files.retrieve)  # type: ignore[call-arg]
        resolver = retrieving.resolver_with_root(DRAFT202012.create_resource(schema))
        files.check_references(resolver, schema)
    except SchemaError as error:
        raise ValueError(error.message) from None
    except RecursionError:
        raise ValueError("it nests too deeply") from None
    registry: Registry[Any] = Registry().with_resources(files.read.items())
    return _validator_class()(schema, registry=registry)


class _SchemaFiles:
    """The files an input schema reaches: read once each, within one byte budget."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.left = MAX_INPUT_SCHEMA_BYTES
        self.read: dict[str, Resource[Any]] = {}
        "The files referred to, by URI."

    def inside(self, name: str) -> Path:
        """`name` resolved in the skill folder. Raises ValueError if it leaves it, or loops."""
        try:
            return inside(self.root, name)
        except ValueError as error:
            raise ValueError(f"it {error}") from None

    def load(self, file: Path) -> Any:
        """The JSON value in `file`. Raises OSError or ValueError naming what is wrong."""
        try:
            data = read_regular_file(file, self.left)
        except TooLarge:
            raise TooLarge(
                f"the input schema and the files it refers to hold more than "
                f"{MAX_INPUT_SCHEMA_BYTES} bytes"
            ) from None
        self.left -= len(data)
        return parse(data)

    def retrieve(self, uri: str) -> Resource[Any]:
        """The file at `uri`, which must be a `file:` URI inside the skill folder.

        Raises OSError or ValueError naming why not; nothing else is read or
        fetched, whatever the scheme.
        """
        from referencing.jsonschema import DRAFT202012

        known = self.read.get(uri)
        if known is not None:
            return known
        parts = urlsplit(uri)
        if parts.scheme != "file" or parts.netloc not in ("", "localhost") or parts.query:
            raise ValueError("only files of the skill folder can be referred to")
        file = self.inside(unquote(parts.path))
        resource = self.read[uri] = DRAFT202012.create_resource(self.load(file))
        return resource

    def check_references(self, resolver: Resolver[Any], schema: Any) -> None:
        """Resolve every reference that validating against `schema` can follow.

        Walks the schema's subschemas (as jsonschema descends into them) and
        the subschemas of every reference's target, each once. A target that
        is not a subschema already walked is checked against the
        metaschema: it may sit under a keyword the metaschema leaves free, or
        in another file. Patterns are compiled on the way.

        Raises ValueError naming the first reference that cannot be
        resolved, with why, or the first pattern keyword that cannot be used.
        """
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError
        from referencing.exceptions import Unresolvable
        from referencing.jsonschema import DRAFT202012

        walked: set[int] = set()
        starts = [(resolver, schema)]
        while starts:
            references: list[tuple[Resolver[Any], str, str]] = []
            resolver, start = starts.pop()
            pending = [(resolver, DRAFT202012.create_resource(start))]
            while pending:
                resolver, resource = pending.pop()
                node = resource.contents
                if not isinstance(node, dict):
                    continue  # true or false: nothing to follow
                if id(node) in walked:
                    continue
                walked.add(id(node))
                resolver = resolver.in_subresource(resource)
                _check_dialect(node)
                _check_pattern_keywords(node)
                references += [
                    (resolver, keyword, node[keyword])
                    for keyword in ("$ref", "$dynamicRef")
                    if isinstance(node.get(keyword), str)
                ]
                pending += [(resolver, sub) for sub in resource.subresources()]
            for resolver, keyword, reference in references:
                try:
                    target = resolver.lookup(reference)
                except Unresolvable as error:
                    raise ValueError(f"{keyword} {reference!r}{_unresolvable(error)}") from None
                except ValueError as error:  # a URI that cannot be parsed
                    raise ValueError(f"{keyword} {reference!r}: {error}") from None
                if isinstance(target.contents, dict) and id(target.contents) in walked:
                    continue
                try:
                    Draft202012Validator.check_schema(target.contents)
                except SchemaError as error:
                    raise ValueError(f"{keyword} {reference!r}: {error.message}") from None
                starts.append((target.resolver, target.contents))


def _unresolvable(error: Exception) -> str:
    """Why a reference did not resolve, as the end of `$ref '...'`."""
    from referencing.exceptions import Unretrievable

    # A retrieval that failed comes wrapped twice: Unresolvable from Unretrievable from
    # what `_SchemaFiles.retrieve` raised.
    if isinstance(error.__cause__, Unretrievable) and error.__cause__.__cause__ is not None:
        return f": {reason(error.__cause__.__cause__)}"
    return " points to nothing"


_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def _check_dialect(node: dict[str, Any]) -> None:
    """Refuse a `$schema` other than draft 2020-12's, and remove that one from `node`.

    jsonschema validates a subschema that names its dialect with its own
    class for that dialect: ours, which bounds the time patterns and
    references take, would be left behind. Every schema here is 2020-12.
    """
    dialect = node.pop("$schema", _DIALECT)
    if dialect != _DIALECT:
        raise ValueError(
            f"$schema {dialect!r} is not supported: input schemas are JSON Schema draft 2020-12"
        )


def _check_pattern_keywords(node: dict[str, Any]) -> None:
    if "patternProperties" in node:
        raise ValueError(
            "patternProperties is not supported, as its patterns cannot be matched with a time "
            "limit; propertyNames with a pattern can say which keys are allowed"
        )
    pattern = node.get("pattern")
    if isinstance(pattern, str):
        import regex  # here: a script whose schema has no pattern is spared its import

        try:
            compiled(pattern)
        except regex.error as error:
            raise ValueError(f"the pattern {pattern!r} cannot be used: {error}") from None


@cache
def _validator_class() -> type[Validator]:
    """Draft 2020-12 validation, with a time limit on `pattern` and on every reference followed.

    Recursion through references is the only way a schema multiplies the
    work an input takes; patterns are the other way one check can run long.
    """
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError
    from jsonschema.validators import extend

    def match_on_time(
        validator: Validator, pattern: str, instance: Any, schema: Any
    ) -> Iterator[ValidationError]:
        if validator.is_type(instance, "string") and not matches(pattern, instance):
            yield ValidationError(f"{instance!r} does not match {pattern!r}")

    def on_time(keyword: Any) -> Any:
        def follow(validator: Validator, reference: str, instance: Any, schema: Any) -> Any:
            time_left(None)
            yield from keyword(validator, reference, instance, schema)

        return follow

    keywords = Draft202012Validator.VALIDATORS
    extended: type[Validator] = extend(  # type: ignore[no-untyped-call]  # untyped in its stubs
        Draft202012Validator,
        {
            "pattern": match_on_time,
            "$ref": on_time(keywords["$ref"]),
            "$dynamicRef": on_time(keywords["$dynamicRef"]),
        },
    )
    return extended
