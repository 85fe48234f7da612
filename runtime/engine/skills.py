"""Skill discovery, and resolution of a plan's `toolPath` to a declared script.

A skills folder holds one folder per skill: `<folder>/<name>/skill.json` (a
`skill-manifest`), the prompt file it names (`prompt.md` by default), and the
scripts it declares. A plan runs a script as `skills/<name>/<script path>`.

Discovery never fails on a bad skill: it skips the skill (or only the broken
script, when the manifest does not mark it `required`) and records why in
`SkillSet.problems`, which the CLI prints as warnings.

Every file discovery reads (a manifest, a prompt, an input schema and the
files it refers to) must be a regular file within a size limit: a FIFO, a
socket, a device or a folder is refused without being opened for reading.
An input schema resolves its `$ref`s only to files of its skill folder, all
read and checked at discovery; checking an input later reads nothing and
stops at the deadline it is given.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote, urljoin, urlsplit

if TYPE_CHECKING:
    from jsonschema.protocols import Validator
    from referencing import Resource
    from referencing._core import Resolver

from ...generated.tool_plans import RetryPolicy, SkillManifest, SkillScript
from ..core.errors import ContractError
from ..core.jsontext import parse
from ..core.validation import decode

__all__ = [
    "InputProblem",
    "Script",
    "Skill",
    "SkillSet",
    "UnusableScript",
    "bundled_skills",
    "discover_skills",
]

MAX_MANIFEST_BYTES = 1 << 20
MAX_PROMPT_BYTES = 64 << 10
MAX_INPUT_SCHEMA_BYTES = MAX_MANIFEST_BYTES
"What an input schema and the files it refers to may hold together."


@dataclass(frozen=True)
class Script:
    """One declared script of a discovered skill, ready to run."""

    skill: str
    tool_path: str
    "How plans name it: `skills/<skill>/<path>`."
    file: Path
    "The script file, resolved; it lies inside the skill folder."
    skill_folder: Path
    "The skill folder, resolved: the script's working directory."
    declaration: SkillScript
    input_validator: Validator | None = field(compare=False)
    "Checks a call's input against the script's input schema, when the manifest names one."
    retry_policy: RetryPolicy | None
    "The skill manifest's retry policy, for calls that set none."

    def check_input(self, value: Any, *, seconds: float) -> InputProblem | None:
        """Why `value` is not a valid input for this script, or None when it is.

        A script without an input schema takes any input. Checking stops
        after about `seconds` (the time left before the plan's deadline):
        every pattern is matched with what is left of it, and every `$ref`
        followed checks it, so no schema and input can take longer. An input
        nested deeper than Python's recursion allows is a problem too.
        Raises nothing else.
        """
        if self.input_validator is None:
            return None
        from jsonschema.exceptions import best_match

        schema = self.declaration.input_schema
        deadline = _DEADLINE.set(time.monotonic() + seconds)
        try:
            problem = best_match(self.input_validator.iter_errors(value))
        except RecursionError:
            return InputProblem(
                "input_too_deep", None, f"input nests too deeply to be checked against {schema}"
            )
        except _OutOfTime as out:
            matching = f" (matching the pattern {out.pattern!r})" if out.pattern else ""
            return InputProblem(
                "input_check_timeout",
                None,
                f"checking the input against {schema} ran out of time before the plan's "
                f"deadline{matching}",
            )
        finally:
            _DEADLINE.reset(deadline)
        if problem is None:
            return None
        where = "/" + "/".join(map(str, problem.absolute_path))
        return InputProblem("invalid_input", where, f"input {where}: {problem.message}")


@dataclass(frozen=True)
class InputProblem:
    """Why a call's input is refused, as `Script.check_input` finds it."""

    code: Literal["invalid_input", "input_too_deep", "input_check_timeout"]
    "`invalid_input`: the schema refuses it; the others: it could not be checked."
    pointer: str | None
    "Where in the input, for `invalid_input`."
    message: str
    "One line, naming the schema's complaint or why checking stopped."


@dataclass(frozen=True)
class Skill:
    name: str
    folder: Path
    manifest: SkillManifest
    prompt: str
    "The text of the skill's prompt file; empty when it has none."
    scripts: Mapping[str, Script]
    "The usable scripts, by tool path."
    unusable: Mapping[str, str] = field(default_factory=dict)
    "Why each declared script that is not usable is not, by tool path."


@dataclass(frozen=True)
class SkillSet:
    """The skills found in some folders, and why others were skipped."""

    skills: Mapping[str, Skill] = field(default_factory=dict)
    problems: tuple[str, ...] = ()

    def resolve(self, tool_path: str, disabled: Iterable[str] = ()) -> Script:
        """The script a plan's `toolPath` names.

        Raises UnusableScript, naming what is wrong: a path outside `skills/`,
        an unknown or disabled skill, a script its manifest does not declare,
        or one it declares that discovery found unusable (and why).
        """
        parts = tool_path.split("/", 2)
        if len(parts) < 3 or parts[0] != "skills":
            raise UnusableScript(
                tool_path, "a script path is written skills/<skill name>/<script path>"
            )
        skill = self.skills.get(parts[1])
        if skill is None:
            known = ", ".join(sorted(self.skills)) or "none"
            raise UnusableScript(tool_path, f"no skill named {parts[1]!r} (skills: {known})")
        if skill.name in set(disabled):
            raise UnusableScript(tool_path, f"the skill {skill.name!r} is disabled for this plan")
        if tool_path in skill.unusable:
            raise UnusableScript(
                tool_path,
                f"the skill {skill.name!r} declares this script but it is not usable: "
                f"{skill.unusable[tool_path]}",
            )
        script = skill.scripts.get(tool_path)
        if script is None:
            declared = ", ".join(sorted(skill.scripts)) or "none"
            raise UnusableScript(
                tool_path,
                f"the skill {skill.name!r} declares no such script (declared: {declared})",
            )
        return script


class UnusableScript(LookupError):
    """A `toolPath` that names no usable script."""

    def __init__(self, tool_path: str, reason: str) -> None:
        super().__init__(f"{tool_path}: {reason}")
        self.tool_path = tool_path
        self.reason = reason


def discover_skills(folders: Iterable[Path | str]) -> SkillSet:
    """Find the skills in each folder of skill folders, in the order given.

    A skill name found twice keeps its first folder. A missing folder, an
    invalid manifest (or one that is no regular file), a manifest whose name
    differs from its folder, a required script that is unusable, and a skill
    that depends on a skill not found are problems: the skill is skipped and
    the problem recorded. A script that is not required and unusable (missing,
    leaving the skill folder, or with an unusable input schema) is left out,
    with its problem recorded and kept in `Skill.unusable`; a prompt file
    that cannot be read is not used. Each problem is one line.
    """
    skills: dict[str, Skill] = {}
    problems: list[str] = []
    for folder in map(Path, folders):
        if not folder.is_dir():
            problems.append(f"{folder}: not a folder of skills")
            continue
        for candidate in sorted(folder.iterdir()):
            # Whatever is there is judged, a manifest that is no file included.
            if not os.path.lexists(candidate / "skill.json"):
                continue
            skill = _load_skill(candidate, problems)
            if skill is None:
                continue
            if skill.name in skills:
                problems.append(
                    f"{candidate}: skipped, the skill {skill.name!r} was already found in "
                    f"{skills[skill.name].folder}"
                )
                continue
            skills[skill.name] = skill
    # A skill is usable only if the skills it depends on are; drop until stable.
    changed = True
    while changed:
        changed = False
        for skill in list(skills.values()):
            missing = [name for name in skill.manifest.dependencies if name not in skills]
            if missing:
                del skills[skill.name]
                problems.append(
                    f"{skill.folder}: skipped, it depends on skills not found: {', '.join(missing)}"
                )
                changed = True
    return SkillSet(skills, tuple(problems))


@cache
def bundled_skills() -> SkillSet:
    """The example skills that ship with plancontracts, discovered once per process."""
    from ...skills import BUNDLED_SKILLS

    return discover_skills([BUNDLED_SKILLS])


def _load_skill(folder: Path, problems: list[str]) -> Skill | None:
    where = folder / "skill.json"
    try:
        manifest: SkillManifest = decode(
            "skill-manifest", _read_regular_file(where, MAX_MANIFEST_BYTES)
        )
    except (OSError, ValueError, ContractError) as error:
        problems.append(f"{where}: skipped, {_reason(error)}")
        return None
    if manifest.name != folder.name:
        problems.append(
            f"{where}: skipped, the manifest names the skill {manifest.name!r} "
            f"but its folder is {folder.name!r}"
        )
        return None
    root = folder.resolve()
    prompt = ""
    try:
        prompt_file = _inside(root, manifest.prompt)
    except ValueError as error:
        problems.append(f"{where}: the prompt file {manifest.prompt} {error}")
    else:
        # A skill may have no prompt; one that is there must be readable.
        if os.path.lexists(prompt_file):
            try:
                prompt = _read_regular_file(prompt_file, MAX_PROMPT_BYTES).decode("utf-8")
            except (OSError, ValueError) as error:
                problems.append(f"{prompt_file}: prompt not used, {_reason(error)}")
    scripts: dict[str, Script] = {}
    unusable: dict[str, str] = {}
    for declaration in manifest.scripts:
        try:
            script = _load_script(manifest, root, declaration)
        except _ScriptProblem as problem:
            if declaration.required:
                problems.append(f"{where}: skipped, its required script {problem}")
                return None
            problems.append(f"{where}: script not usable, {problem}")
            unusable[_tool_path(manifest, declaration)] = str(problem)
            continue
        scripts[script.tool_path] = script
    return Skill(manifest.name, root, manifest, prompt, scripts, unusable)


class _ScriptProblem(Exception):
    pass


def _load_script(manifest: SkillManifest, root: Path, declaration: SkillScript) -> Script:
    try:
        file = _inside(root, declaration.path)
    except ValueError as error:
        raise _ScriptProblem(f"{declaration.path} {error}") from None
    if not file.is_file():
        raise _ScriptProblem(f"{declaration.path} is not a file")
    if file.suffix != ".py" and not os.access(file, os.X_OK):
        raise _ScriptProblem(f"{declaration.path} is not executable (and not a .py file)")
    input_validator = None
    if declaration.input_schema:
        try:
            input_validator = _input_validator(root, declaration.input_schema)
        except (OSError, ValueError) as error:
            raise _ScriptProblem(
                f"{declaration.path}: its input schema {declaration.input_schema} is unusable: "
                f"{_reason(error)}"
            ) from None
    retry_policy = manifest.retry_policy or None
    return Script(
        manifest.name,
        _tool_path(manifest, declaration),
        file,
        root,
        declaration,
        input_validator,
        retry_policy,
    )


def _tool_path(manifest: SkillManifest, declaration: SkillScript) -> str:
    return f"skills/{manifest.name}/{declaration.path}"


def _inside(root: Path, relative: str) -> Path:
    """`root / relative` resolved, symbolic links included.

    Raises ValueError when it leaves `root`, or loops through links; its
    message says which, to follow the name of the file.
    """
    try:
        path = (root / relative).resolve()
    except RuntimeError:  # how Python before 3.13 reports a loop of links
        raise ValueError("is a loop of symbolic links") from None
    if not path.is_relative_to(root):
        raise ValueError("leaves the skill folder")
    return path


# Reading files ------------------------------------------------------------------------

_KINDS = {
    stat.S_IFDIR: "a folder",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


class _TooLarge(ValueError):
    pass


def _read_regular_file(path: Path, limit: int) -> bytes:
    """The contents of `path`, which must be a regular file of at most `limit` bytes.

    Anything else is refused before it is opened: opening a FIFO for reading
    waits for a writer, and a device may do anything. The file is opened
    without waiting (`O_NONBLOCK`) and checked again, in case it was
    replaced in between. Raises OSError when it cannot be read, `_TooLarge`
    past `limit` and ValueError for a file that is not regular, each naming
    what is wrong.
    """
    _require_regular(os.stat(path).st_mode)
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with open(descriptor, "rb") as file:
        _require_regular(os.fstat(descriptor).st_mode)
        # A file that grows while it is read is cut at the limit: one byte more is enough to tell.
        data = file.read(limit + 1)
    if len(data) > limit:
        raise _TooLarge(f"larger than {limit} bytes")
    return data


def _require_regular(mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = _KINDS.get(stat.S_IFMT(mode), "an unknown kind of file")
        raise ValueError(f"not a regular file ({kind})")


def _reason(error: BaseException) -> str:
    """`error` as the end of a one-line problem: OSErrors without their errno and path."""
    if isinstance(error, OSError) and error.strerror:
        return error.strerror[0].lower() + error.strerror[1:]
    if isinstance(error, ContractError):
        return f"not a valid {error.contract}: {'; '.join(map(str, error.violations))}"
    return str(error)


# Input schemas ------------------------------------------------------------------------


def _input_validator(root: Path, name: str) -> Validator:
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
            return _inside(self.root, name)
        except ValueError as error:
            raise ValueError(f"it {error}") from None

    def load(self, file: Path) -> Any:
        """The JSON value in `file`. Raises OSError or ValueError naming what is wrong."""
        try:
            data = _read_regular_file(file, self.left)
        except _TooLarge:
            raise _TooLarge(
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
        return f": {_reason(error.__cause__.__cause__)}"
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
    import regex

    if "patternProperties" in node:
        raise ValueError(
            "patternProperties is not supported, as its patterns cannot be matched with a time "
            "limit; propertyNames with a pattern can say which keys are allowed"
        )
    pattern = node.get("pattern")
    if isinstance(pattern, str):
        try:
            regex.compile(pattern, regex.VERSION0)
        except regex.error as error:
            raise ValueError(f"the pattern {pattern!r} cannot be used: {error}") from None


# Checking inputs in bounded time ------------------------------------------------------

_DEADLINE: ContextVar[float | None] = ContextVar("input check deadline", default=None)
"When the input check under way must stop, on the monotonic clock; None: no limit."


class _OutOfTime(Exception):
    def __init__(self, pattern: str | None) -> None:
        super().__init__(pattern)
        self.pattern = pattern
        "The pattern being matched when time ran out, if one was."


_LONGEST_MATCH = 1e9
"Seconds: `regex` overflows past about 1e17 and times out at once; 31 years is no limit here."


def _time_left(pattern: str | None) -> float | None:
    """Seconds left before `_DEADLINE` (None without one), for `regex`; `_OutOfTime` at it."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise _OutOfTime(pattern)
    return min(left, _LONGEST_MATCH)


@cache
def _validator_class() -> type[Validator]:
    """Draft 2020-12 validation, with a time limit on `pattern` and on every reference followed.

    Recursion through references is the only way a schema multiplies the
    work an input takes; patterns are the other way one check can run long.
    """
    import regex
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError
    from jsonschema.validators import extend

    def match_on_time(
        validator: Validator, pattern: str, instance: Any, schema: Any
    ) -> Iterator[ValidationError]:
        if not validator.is_type(instance, "string"):
            return
        try:
            found = regex.search(pattern, instance, regex.VERSION0, timeout=_time_left(pattern))
        except TimeoutError:
            raise _OutOfTime(pattern) from None
        if found is None:
            yield ValidationError(f"{instance!r} does not match {pattern!r}")

    def on_time(keyword: Any) -> Any:
        def follow(validator: Validator, reference: str, instance: Any, schema: Any) -> Any:
            _time_left(None)
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
