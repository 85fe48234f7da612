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

import json
import urllib.request
from collections import Counter
from pathlib import Path

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
    ("validate", "draft2019-09"): 4,
    ("validate", "draft7"): 0,
}
"""How many cases each path may refuse, per draft (suite 4.26.0: 368 cases of draft 2020-12,
361 of 2019-09, 254 of 7): on both paths, the vocabulary cases, whose `$schema` is a
meta-schema of the suite's own; in 2019-09, two remotes whose `$id` is not their URI."""

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
