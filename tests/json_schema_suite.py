"""The official JSON-Schema-Test-Suite, judged by plancontracts' two paths.

The suite (github.com/json-schema-org/JSON-Schema-Test-Suite) holds, per
draft, keyword files of *cases*: a schema and *tests*, each a document and
whether the schema accepts it. `python3 dev.py setup` fetches it from PyPI,
where jsonschema's source distribution carries it, at the version of
jsonschema that constraints.txt pins, into build/json-schema-test-suite/.

A case is judged by each path a user has:

- validate: the schema written to a file, read by
  `load_contracts(FILE, resources=REMOTES)`, each document judged by
  `violations` (none: valid);
- generate: the schemas of a keyword file generated into a package
  (`codegen.generate.write`, with the same resources), imported, each
  document decoded by `decode(HANDLE, text)` (ContractError: invalid).

A case *agrees* when every test gets the suite's verdict; it is *wrong*
when one gets the other verdict; *refused* when plancontracts refuses its
schema in one line (UnusableSchema), as it may for a keyword it cannot hold;
*crashed* when anything else is raised, a refusal of several lines included.

The required keyword files of drafts 2020-12, 2019-09 and 7 are run; their
optional/ folders are left out: they hold formats that a draft makes
annotations only, bignum and float edge cases, ECMA-262 regex dialect
details, which the drafts do not require of a validator. REMOTES are the
suite's remotes/ files under the URIs its tests name
(`http://localhost:1234/PATH`), each draft given the files of no other
draft's folder, the way the suite's own runners serve them; nothing is
fetched. A schema or remote that declares no draft (`$schema`) is given the
draft of the folder it is run for, as the suite's runners tell their
validator the draft: without it, plancontracts reads a schema as 2020-12.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import socket
import sys
import traceback
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from plancontracts import ContractError, UnusableSchema, decode, load_contracts, violations
from plancontracts.generated import Contract

ROOT = Path(__file__).resolve().parent.parent
SUITES = ROOT / "build" / "json-schema-test-suite"
"Where `python3 dev.py setup` puts the suite, a folder per version."
REMOTE_BASE = "http://localhost:1234/"
"The URI the suite's tests name its remotes/ folder by."
DRAFTS = {
    "draft2020-12": "https://json-schema.org/draft/2020-12/schema",
    "draft2019-09": "https://json-schema.org/draft/2019-09/schema",
    "draft7": "http://json-schema.org/draft-07/schema#",
}
"The drafts run, by the suite's folder name, with the `$schema` that declares each."
GENERATED_DRAFT = "draft2020-12"
"The draft whose cases are generated too: the one `plancontracts generate` writes models of."
PATHS = ("validate", "generate")
VERDICTS = ("agree", "wrong", "refused", "crashed")
SETUP_HINT = "the JSON-Schema-Test-Suite is not fetched: `python3 dev.py setup` fetches it"


def suite_version() -> str:
    """The suite's version: that of jsonschema in constraints.txt, whose sources carry it."""
    pinned = re.search(r"^jsonschema==(\S+)$", (ROOT / "constraints.txt").read_text(), re.MULTILINE)
    assert pinned is not None, "constraints.txt pins no jsonschema"
    return pinned.group(1)


def suite_folder() -> Path | None:
    """The fetched suite's folder (tests/, remotes/), or None when it was not fetched."""
    folder = SUITES / suite_version()
    return folder if (folder / "tests").is_dir() else None


@dataclass(frozen=True)
class SuiteTest:
    description: str
    data: Any
    valid: bool


@dataclass(frozen=True)
class Case:
    """One case of a keyword file: a schema and the tests of it."""

    draft: str
    file: str
    index: int
    description: str
    schema: Any
    tests: tuple[SuiteTest, ...]

    @property
    def id(self) -> str:
        return f"{self.draft}/{self.file}/{self.index}"

    def declared_schema(self) -> Any:
        """The case's schema, given its draft's `$schema` when it declares none."""
        return _declared(self.schema, self.draft)

    def names_a_remote(self) -> bool:
        return REMOTE_BASE in json.dumps(self.schema)


def cases(folder: Path, draft: str) -> list[Case]:
    """Every case of the draft's required keyword files (optional/ left out), in file order."""
    found = []
    for path in sorted((folder / "tests" / draft).glob("*.json")):
        for index, case in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            tests = tuple(
                SuiteTest(test["description"], test["data"], test["valid"])
                for test in case["tests"]
            )
            found.append(Case(draft, path.name, index, case["description"], case["schema"], tests))
    return found


def remotes(folder: Path, draft: str) -> dict[str, Any]:
    """The suite's remotes/ by URI, as the draft's tests name them: no other draft's folder."""
    root = folder / "remotes"
    others = {path.name for path in root.iterdir() if path.name.startswith("draft")} - {draft}
    found = {}
    for path in sorted(root.rglob("*.json")):
        relative = path.relative_to(root)
        if relative.parts[0] not in others:
            document = json.loads(path.read_text(encoding="utf-8"))
            found[REMOTE_BASE + relative.as_posix()] = _declared(document, draft)
    return found


def _declared(schema: Any, draft: str) -> Any:
    if isinstance(schema, dict) and "$schema" not in schema:
        return {"$schema": DRAFTS[draft], **schema}
    return schema


@dataclass(frozen=True)
class Outcome:
    """A case's verdict on one path, with one line saying why for any but `agree`.

    `details` lists every test that went wrong: its document and both verdicts.
    """

    verdict: str
    reason: str = ""
    details: tuple[str, ...] = ()


def _refused(error: UnusableSchema) -> Outcome:
    message = str(error)
    if "\n" in message or not message:
        return Outcome("crashed", f"a refusal that is not one line: {message!r}")
    return Outcome("refused", message)


def _crashed(doing: str, error: BaseException) -> Outcome:
    where = traceback.extract_tb(error.__traceback__)[-1]
    first = str(error).splitlines()[0] if str(error) else ""
    place = f"{Path(where.filename).name}:{where.lineno}"
    return Outcome("crashed", f"{doing}: {type(error).__name__}: {first} ({place})")


def _verdicts(case: Case, judge: Callable[[Any], bool]) -> Outcome:
    """Each test judged by `judge(data) -> bool` (True: valid), against the suite's verdict."""
    wrong = []
    for test in case.tests:
        try:
            valid = judge(test.data)
        except Exception as error:
            return _crashed(f"judging {json.dumps(test.data)[:200]}", error)
        if valid != test.valid:
            wrong.append(
                f"{test.description!r}: {json.dumps(test.data)[:200]} is "
                f"{'valid' if test.valid else 'invalid'} by the suite, "
                f"{'valid' if valid else 'invalid'} here"
            )
    if wrong:
        return Outcome("wrong", wrong[0], tuple(wrong))
    return Outcome("agree")


class NetworkUsed(BaseException):
    """Something tried the network: the remotes are resources, never fetched.

    A BaseException, so that no `except Exception` on the way takes it for
    a schema that failed.
    """


@contextlib.contextmanager
def no_network() -> Iterator[None]:
    """Any attempt at the network, by urllib or a socket, raises `NetworkUsed`."""

    def refuse(*arguments: object, **options: object) -> Any:
        raise NetworkUsed(f"the network was tried: {arguments[:2]!r}")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(urllib.request, "urlopen", refuse)
        patch.setattr(socket.socket, "connect", refuse)
        patch.setattr(socket.socket, "connect_ex", refuse)
        patch.setattr(socket, "create_connection", refuse)
        patch.setattr(socket, "getaddrinfo", refuse)
        yield


@dataclass
class SuiteRun:
    """The suite's cases judged on both paths, each once, in a scratch folder.

    Generating is the slow part (the code generator and ruff per module), so
    each keyword file's cases are generated together, as the families of one
    package; only when that fails is each case generated alone, to tell which
    are refused.
    """

    folder: Path
    scratch: Path
    _resources: dict[str, dict[str, Any]] = field(default_factory=dict)
    _validated: dict[str, Outcome] = field(default_factory=dict)
    _generated: dict[str, Contract[Any] | Outcome] = field(default_factory=dict)
    _packages: int = 0

    def cases(self, draft: str) -> list[Case]:
        return cases(self.folder, draft)

    def resources(self, draft: str) -> dict[str, Any]:
        if draft not in self._resources:
            self._resources[draft] = remotes(self.folder, draft)
        return self._resources[draft]

    def validate(self, case: Case) -> Outcome:
        """The case judged by `load_contracts(FILE, resources=...)` and `violations`."""
        if case.id not in self._validated:
            with no_network():
                self._validated[case.id] = self._validate(case)
        return self._validated[case.id]

    def _validate(self, case: Case) -> Outcome:
        path = self.schema_file(case)
        try:
            contracts = load_contracts(path, resources=self.resources(case.draft))
        except UnusableSchema as error:
            return _refused(error)
        except Exception as error:
            return _crashed("loading the schema", error)
        (name,) = contracts.names()
        handle = contracts[name]
        return _verdicts(case, lambda data: not violations(handle, data))

    def schema_file(self, case: Case) -> Path:
        """The case's schema, written once as a file of the scratch folder: `case.json`."""
        path = self.scratch / "schemas" / case.draft / case.file.removesuffix(".json")
        path = path / str(case.index) / "case.json"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(case.declared_schema()), encoding="utf-8")
        return path

    def generate(self, case: Case) -> Outcome:
        """The case judged by the package generated from it: `decode(HANDLE, text)`."""
        if case.id not in self._generated:
            with no_network():
                self._generate_file(case)
        generated = self._generated[case.id]
        if isinstance(generated, Outcome):
            return generated
        handle = generated
        with no_network():
            return _verdicts(case, lambda data: _decodes(handle, data))

    def _generate_file(self, case: Case) -> None:
        """Generate the cases of `case`'s keyword file, as few packages as they allow."""
        siblings = [each for each in self.cases(case.draft) if each.file == case.file]
        self._generate_together(siblings, self.resources(case.draft))

    def _generate_together(self, group: list[Case], resources: Mapping[str, Any]) -> None:
        """Generate `group` as one package; if that fails, each half, down to each case alone.

        Halving finds the few schemas a keyword file's package fails on in
        a few runs of the generator, where one run per case would take one
        per case.
        """
        files = [self._generate_input(each) for each in group]
        try:
            package = self._package(files, resources)
        except UnusableSchema as error:
            if len(group) == 1:
                self._generated[group[0].id] = _refused(error)
                return
        except Exception as error:
            if len(group) == 1:
                self._generated[group[0].id] = _crashed("generating", error)
                return
        else:
            for each, path in zip(group, files, strict=True):
                self._generated[each.id] = package.CONTRACTS[path.stem]
            return
        half = len(group) // 2
        self._generate_together(group[:half], resources)
        self._generate_together(group[half:], resources)

    def _generate_input(self, case: Case) -> Path:
        """The case's schema as `case-N.json`, a contract named `case-N`, beside its file's."""
        folder = self.scratch / "generate" / case.draft / case.file.removesuffix(".json")
        path = folder / f"case-{case.index}.json"
        if not path.exists():
            folder.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(case.declared_schema()), encoding="utf-8")
        return path

    def _package(self, files: Sequence[Path], resources: Mapping[str, Any]) -> Any:
        """A package generated from `files` and imported, under a name of its own."""
        from plancontracts.codegen.generate import write

        self._packages += 1
        name = f"json_schema_suite_{self._packages}"
        out = self.scratch / "packages" / name
        write(files, out, resources=resources)
        return _imported(name, out)


def _imported(name: str, folder: Path) -> Any:
    """The package in `folder` imported as `name`, kept in sys.modules as an import keeps it."""
    spec = importlib.util.spec_from_file_location(
        name, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _decodes(handle: Contract[Any], data: Any) -> bool:
    try:
        decode(handle, json.dumps(data))
    except ContractError:
        return False
    return True


# The table ---------------------------------------------------------------------------

ROWS = (
    ("validate", GENERATED_DRAFT, "`load_contracts(FILE)`, `violations`: draft 2020-12"),
    ("generate", GENERATED_DRAFT, "`generate`, then `decode` into the models: draft 2020-12"),
    ("validate", "draft2019-09", "`load_contracts(FILE)`, `violations`: draft 2019-09"),
    ("validate", "draft7", "`load_contracts(FILE)`, `violations`: draft 7"),
)
"The table's rows: a path, a draft, and how the row is labelled."


def outcomes(run: SuiteRun, path: str, draft: str) -> dict[str, Outcome]:
    """Every case of `draft` judged on `path`, by case id."""
    judge = run.validate if path == "validate" else run.generate
    return {case.id: judge(case) for case in run.cases(draft)}


def table(run: SuiteRun) -> str:
    """The table of counts by path, then every case that did not agree, with its reason."""
    lines = [
        "| path | cases agree | wrong verdict | refused | crashed |",
        "|---|---|---|---|---|",
    ]
    disagreeing = []
    for path, draft, label in ROWS:
        found = outcomes(run, path, draft)
        counts = Counter(outcome.verdict for outcome in found.values())
        cells = [f"{counts['agree']} of {len(found)}", *(str(counts[v]) for v in VERDICTS[1:])]
        lines.append(f"| {label} | {' | '.join(cells)} |")
        # The scratch folder differs from run to run: the lines name files inside it.
        disagreeing += [
            f"- {path} {case}: {outcome.verdict}: {outcome.reason}".replace(
                f"{run.scratch}{os.sep}", ""
            )
            for case, outcome in found.items()
            if outcome.verdict != "agree"
        ]
    return "\n".join([*lines, "", *disagreeing]) + "\n"
