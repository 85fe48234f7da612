"""The official JSON-Schema-Test-Suite gets its verdicts from both of a user's paths.

Every case of draft 2020-12's required keyword files is judged by
`load_contracts(FILE)` with `violations`, and by the package `generate`
writes with `decode`; those of drafts 2019-09 and 7 by the first path (their
schemas say their draft). A case passes when each of its tests gets the
suite's verdict, or when plancontracts refuses its schema in one line
(UnusableSchema); a wrong verdict or any other exception fails it, naming
the case, the document and both verdicts. How many cases may be refused is
bounded below. tests/json_schema_suite.py says how cases are run, and where
the suite comes from; `python3 dev.py bench suite` prints the table
of docs/contracts.md.
"""

from __future__ import annotations

import importlib.util
import io
import json
import tarfile
import urllib.request
from collections import Counter
from pathlib import Path
from types import ModuleType
from unittest.mock import ANY

import pytest
from commands import cli
from json_schema_suite import (
    DRAFTS,
    GENERATED_DRAFT,
    ROOT,
    SETUP_HINT,
    Case,
    NetworkUsed,
    Outcome,
    SuiteRun,
    cases,
    no_network,
    outcomes,
    suite_folder,
    suite_version,
    table,
)

from plancontracts import UnusableSchema, load_contracts

pytestmark = pytest.mark.slow

MOST_REFUSED = {
    ("validate", "draft2020-12"): 2,
    ("generate", "draft2020-12"): 2,
    ("validate", "draft2019-09"): 2,
    ("validate", "draft7"): 0,
}
"""How many cases each path may refuse, per draft (suite 4.26.0: 368 cases of draft 2020-12,
361 of 2019-09, 254 of 7): on both paths, the vocabulary cases, whose `$schema` is a
meta-schema of the suite's own."""

_FOLDER = suite_folder()
_ALL = [] if _FOLDER is None else [case for draft in DRAFTS for case in cases(_FOLDER, draft)]


def _id(case: Case) -> str:
    return case.id


@pytest.fixture(scope="session")
def suite(tmp_path_factory: pytest.TempPathFactory) -> SuiteRun:
    """One run of the suite for the session: each case judged once on each path."""
    if _FOLDER is None:
        pytest.skip(SETUP_HINT)
    return SuiteRun(_FOLDER, tmp_path_factory.mktemp("json-schema-suite"))


def _failure(case: Case, path: str, outcome: Outcome) -> str:
    lines = [f"{case.id} ({case.description}) on the {path} path: {outcome.verdict}"]
    lines += [f"  {line}" for line in outcome.details or (outcome.reason,)]
    lines.append(f"  schema: {json.dumps(case.declared_schema())[:2000]}")
    return "\n".join(lines)


@pytest.mark.skipif(_FOLDER is None, reason=SETUP_HINT)
@pytest.mark.parametrize("case", _ALL, ids=_id)
def test_a_case_gets_the_suites_verdicts_or_a_one_line_refusal(suite: SuiteRun, case: Case) -> None:
    paths = ["validate", "generate"] if case.draft == GENERATED_DRAFT else ["validate"]
    for path in paths:
        outcome = suite.validate(case) if path == "validate" else suite.generate(case)
        assert outcome.verdict in ("agree", "refused"), _failure(case, path, outcome)


def _cli_sample() -> list[Case]:
    """The first case of each draft 2020-12 keyword file whose schema names no remote."""
    firsts: dict[str, Case] = {}
    for case in _ALL:
        if case.draft == GENERATED_DRAFT and not case.names_a_remote():
            firsts.setdefault(case.file, case)
    return list(firsts.values())


@pytest.mark.skipif(_FOLDER is None, reason=SETUP_HINT)
@pytest.mark.parametrize("case", _cli_sample(), ids=_id)
def test_validate_schema_gives_the_suites_verdict_as_its_exit_status(
    suite: SuiteRun, case: Case, tmp_path: Path
) -> None:
    """`plancontracts validate --schema FILE DOC`: exit 0 valid, 1 invalid, 2 refused."""
    schema = suite.schema_file(case)
    refused = suite.validate(case).verdict == "refused"
    for number, test in enumerate(case.tests):
        document = tmp_path / f"document-{number}.json"
        document.write_text(json.dumps(test.data), encoding="utf-8")
        with no_network():
            done = cli("validate", "--schema", str(schema), str(document))
        expected = 2 if refused else 0 if test.valid else 1
        assert done.returncode == expected, (
            f"{case.id} {test.description!r}: {json.dumps(test.data)} exited "
            f"{done.returncode}, not {expected}\n{done.stdout}{done.stderr}"
        )
        if refused:
            assert len(done.stderr.splitlines()) == 1, done.stderr


@pytest.mark.skipif(_FOLDER is None, reason=SETUP_HINT)
@pytest.mark.parametrize(("path", "draft"), list(MOST_REFUSED))
def test_the_suite_refuses_no_more_cases_than_counted(
    suite: SuiteRun, path: str, draft: str
) -> None:
    counts = Counter(outcome.verdict for outcome in outcomes(suite, path, draft).values())
    assert counts["refused"] <= MOST_REFUSED[path, draft], table(suite)


@pytest.mark.skipif(_FOLDER is None, reason=SETUP_HINT)
def test_the_table_in_the_docs_is_the_one_the_suite_gives(suite: SuiteRun) -> None:
    measured = table(suite).split("\n\n")[0]
    docs = (ROOT / "docs" / "contracts.md").read_text(encoding="utf-8")
    assert measured in docs, (
        f"docs/contracts.md shows another table; `python3 dev.py bench suite` prints:\n{measured}"
    )
    words = " ".join(docs.split())  # the version may be wrapped onto the next line
    assert f"jsonschema {suite_version()}" in words, "docs/contracts.md names another suite version"


def test_a_remote_is_never_fetched(tmp_path: Path) -> None:
    """A reference to a remote the resources do not hold is refused, and nothing is fetched."""
    schema = tmp_path / "remote.json"
    schema.write_text(json.dumps({"$ref": "http://localhost:1234/integer.json"}))
    with no_network(), pytest.raises(UnusableSchema):
        load_contracts(schema)


def test_the_network_guard_stops_a_fetch() -> None:
    with no_network(), pytest.raises(NetworkUsed):
        urllib.request.urlopen("http://localhost:1234/integer.json")


# Fetching the suite (dev.py setup) ---------------------------------------------------


def _dev() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dev", ROOT / "dev.py")
    assert spec is not None
    assert spec.loader is not None
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)
    return dev


def _source_archive(path: Path, members: dict[str, bytes]) -> None:
    """A jsonschema source archive holding `members` by name, as PyPI serves one."""
    with tarfile.open(path, "w:gz") as archive:
        for name, data in members.items():
            member = tarfile.TarInfo(name)
            member.size = len(data)
            archive.addfile(member, io.BytesIO(data))


@pytest.fixture
def dev_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """dev.py with its project folder `tmp_path`, pinning jsonschema 9.9."""
    dev = _dev()
    (tmp_path / "constraints.txt").write_text("jsonschema==9.9\n")
    monkeypatch.setattr(dev, "ROOT", tmp_path)
    monkeypatch.setattr(dev, "CONSTRAINTS", tmp_path / "constraints.txt")
    monkeypatch.setattr(dev, "SCHEMA_SUITE", tmp_path / "build" / "json-schema-test-suite")
    return dev


def test_setup_keeps_only_the_suite_of_the_pinned_version_and_fetches_it_once(
    dev_in: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[tuple[object, ...]] = []

    def download(*arguments: object) -> None:
        asked.append(arguments)
        dest = Path(str(arguments[arguments.index("--dest") + 1]))
        members = {
            "jsonschema-9.9/json/tests/draft7/type.json": b"[]",
            "jsonschema-9.9/json/remotes/integer.json": b"{}",
            "jsonschema-9.9/jsonschema/validators.py": b"",
        }
        _source_archive(dest / "jsonschema-9.9.tar.gz", members)

    monkeypatch.setattr(dev_in, "pip", download)
    dev_in.fetch_schema_suite()
    dev_in.fetch_schema_suite()
    suite = tmp_path / "build" / "json-schema-test-suite"
    wanted = ("download", "--no-binary", ":all:", "--no-deps", "--dest", ANY, "jsonschema==9.9")
    assert asked == [wanted]
    kept = sorted(path.relative_to(suite).as_posix() for path in suite.rglob("*") if path.is_file())
    assert kept == ["9.9/remotes/integer.json", "9.9/tests/draft7/type.json"]


def test_an_interrupted_fetch_leaves_no_suite_and_the_next_setup_fetches_it(
    dev_in: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*arguments: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(dev_in, "pip", interrupted)
    with pytest.raises(KeyboardInterrupt):
        dev_in.fetch_schema_suite()
    suite = tmp_path / "build" / "json-schema-test-suite"
    assert list(suite.iterdir()) == []

    def download(*arguments: object) -> None:
        dest = Path(str(arguments[arguments.index("--dest") + 1]))
        _source_archive(dest / "jsonschema-9.9.tar.gz", {"jsonschema-9.9/json/a.json": b"{}"})

    monkeypatch.setattr(dev_in, "pip", download)
    dev_in.fetch_schema_suite()
    assert [path.name for path in suite.iterdir()] == ["9.9"]


def test_an_archive_member_that_would_land_outside_the_suite_stops_the_setup(
    dev_in: ModuleType, tmp_path: Path
) -> None:
    archive = tmp_path / "jsonschema-9.9.tar.gz"
    _source_archive(archive, {"jsonschema-9.9/json/../../escaped.json": b"{}"})
    with pytest.raises(SystemExit, match="unexpected member"):
        dev_in.extract_suite(archive, tmp_path / "out")
    assert not (tmp_path / "escaped.json").exists()
