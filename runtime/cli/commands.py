"""The commands of the contracts themselves: contracts, schema, validate, examples, generate."""

from __future__ import annotations

import argparse
import json
import keyword
import os
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import msgspec

from ..commandkit import (
    EXIT_INVALID,
    EXIT_OK,
    EXIT_USAGE,
    JsonReport,
    Outcome,
    Output,
    Report,
    RulesOption,
    TextReport,
    add_json,
    add_max_bytes,
    complain,
    label,
    lines_of,
    opened,
    read_at_most,
    require_extra,
    stdin_at_most_once,
    unreadable,
)
from ..core.contracts import contract_names, contract_schema
from ..core.errors import (
    ContractError,
    UnusableSchema,
    UsageError,
    Violation,
    Violations,
    printable,
)
from ..core.rules import Rules
from ..core.schema_text import schema_text
from ..core.validation import BUNDLED, ContractSet, decode

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser],
             rules_options: Sequence[RulesOption]) -> None:  # fmt: skip
    """Add the contracts' commands; `validate` takes the families' `rules_options`."""
    contracts = commands.add_parser("contracts", help="list the contracts")
    contracts.set_defaults(run=_contracts)

    schema = commands.add_parser("schema", help="print a contract's schema")
    schema.add_argument("contract", metavar="CONTRACT")
    schema.add_argument(
        "--text", action="store_true", help="print the text shown to a model instead of JSON"
    )
    schema.set_defaults(run=_schema)

    validate = commands.add_parser("validate", help="validate JSON documents against a contract")
    validate.add_argument("contract", metavar="CONTRACT")
    validate.add_argument("files", metavar="FILE", nargs="+", help="a JSON file, or - for stdin")
    validate.add_argument(
        "--ndjson", action="store_true", help="each line of each FILE is one document"
    )
    add_json(validate, "one JSON object per document")
    add_max_bytes(validate, "documents (or lines)")
    validate.add_argument(
        "--schemas",
        type=Path,
        metavar="DIR",
        help="judge by the contracts of this schema folder (laid out as schemas/), "
        "by their schemas alone",
    )
    for option in rules_options:
        option.add(validate)
    validate.set_defaults(run=partial(_validate, rules_options=tuple(rules_options)))

    examples = commands.add_parser(
        "examples", help="validate the example documents bundled with every contract"
    )
    examples.set_defaults(run=_examples)

    generate = commands.add_parser(
        "generate", help="write typed models of a schema folder (default: schemas/ to generated/)"
    )
    generate.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if the output is stale"
    )
    generate.add_argument("--schemas", type=Path, metavar="DIR", help="the schema folder")
    generate.add_argument(
        "--out", type=Path, metavar="DIR", help="the output folder, a package the generator owns"
    )
    generate.add_argument(
        "--package",
        metavar="NAME",
        help="the dotted name the output is imported by: checks that --out ends in its folders",
    )
    generate.set_defaults(run=_generate)


def _contracts(args: argparse.Namespace, out: Output) -> int:
    names = contract_names()
    width = max(map(len, names))
    for name in names:
        out.write(f"{name:<{width}}  {contract_schema(name).get('title', '')}\n")
    return EXIT_OK


def _schema(args: argparse.Namespace, out: Output) -> int:
    if args.text:
        out.write(schema_text(args.contract))
    else:
        out.write(json.dumps(contract_schema(args.contract), indent=2, ensure_ascii=False) + "\n")
    return EXIT_OK


# validate -----------------------------------------------------------------------


def _validate(
    args: argparse.Namespace, out: Output, *, rules_options: tuple[RulesOption, ...]
) -> int:
    # The schema folder, the contract and the options are usage errors, before any reading.
    contracts = BUNDLED if args.schemas is None else _schema_folder(args.schemas)
    contracts.require(args.contract)
    chosen = [option.rules(args, args.contract) for option in rules_options]
    rules = next((found for found in chosen if found is not None), None)
    if rules is not None and args.schemas is not None:
        raise UsageError(
            f"{rules.name} judge plancontracts' own {rules.contract}, not one of --schemas"
        )
    stdin_at_most_once(args.files)
    judge = partial(_judge, contracts, args.contract, rules)
    report: Report = JsonReport(out) if args.json else TextReport(out, ndjson=args.ndjson)
    for name in args.files:
        for outcome in _outcomes(judge, name, args.ndjson, args.max_bytes):
            report.add(outcome)
        report.end_file(name)
    return report.finish()


def _outcomes(
    judge: Callable[[str, int | None, bytes | Violation], Outcome],
    name: str,
    ndjson: bool,
    limit: int,
) -> Iterator[Outcome]:
    try:
        with opened(name) as stream:
            if ndjson:
                for number, line in lines_of(stream, limit):
                    yield judge(name, number, line)
                return
            data = read_at_most(stream, limit)
    except OSError as error:
        # A named file not read is a usage error; standard input that fails is a document.
        why = Violations((Violation("", unreadable(error)),))
        yield Outcome(name, None, why, unreadable=name != "-")
        return
    yield judge(name, None, data)


def _schema_folder(folder: Path) -> ContractSet:
    """The contracts of a schema folder laid out as schemas/ is, judged by their schemas alone.

    Bundling needs only the schema tree, never the model generator. Raises
    `UsageError` for a folder the code generator could not read either.
    """
    from ..core.schema_tree import SchemaTree, walk

    try:
        tree = SchemaTree(folder)
        bundles = {name: tree.bundle(contract) for name, contract in tree.contracts.items()}
        for name, bundle in bundles.items():
            for pointer, node in walk(bundle):
                _check_patterns(node, f"{tree.contracts[name].path}#{pointer}")
    except UnusableSchema as error:
        raise UsageError(printable(f"--schemas {folder}: {error}")) from None
    return ContractSet(bundles, pattern_seconds=PATTERN_SECONDS)


PATTERN_SECONDS = 2.0
"""How long the patterns of a `--schemas` folder may take to judge one document: a pattern
such as `^(a|a)*$` takes days on a string of 40 characters."""


def _check_patterns(node: dict[str, Any], where: str) -> None:
    """Raise UnusableSchema for a pattern of `node` that the matcher cannot compile."""
    import regex

    from ..core.patterns import compiled

    pattern = node.get("pattern")
    patterns = [pattern] if isinstance(pattern, str) else []
    for each in [*patterns, *node.get("patternProperties", {})]:
        try:
            compiled(each)
        except regex.error as error:
            problem = f"{where}: the pattern {each!r} cannot be used: {error}"
            raise UnusableSchema(problem) from None


def _judge(
    contracts: ContractSet,
    contract: str,
    rules: Rules | None,
    name: str,
    line: int | None,
    data: bytes | Violation,
) -> Outcome:
    if isinstance(data, Violation):
        return Outcome(name, line, Violations((data,)))
    try:
        contracts.decode(contract, data, rules=rules)
    except ContractError as error:
        return Outcome(name, line, error.violations)
    return Outcome(name, line, Violations())


# examples -----------------------------------------------------------------------


def _examples(args: argparse.Namespace, out: Output) -> int:
    """Decode every bundled example, then encode the typed object and decode it again."""
    names = contract_names()
    width = max(map(len, names))
    out.write("Each contract's bundled examples, decoded into typed objects and back:\n\n")
    failures = total = 0
    for name in names:
        examples = contract_schema(name).get("examples", [])
        problems: list[str] = []
        for index, example in enumerate(examples):
            try:
                typed = decode(name, json.dumps(example))
                if decode(name, msgspec.json.encode(typed)) != typed:
                    problems.append(f"example {index + 1} changed in a round trip")
            except ContractError as error:
                problems += [f"example {index + 1}: {violation}" for violation in error.violations]
        total += len(examples)
        verdict = "valid, round trip exact" if not problems else "INVALID"
        count = f"{len(examples)} example{'s' if len(examples) != 1 else ''}"
        out.write(f"  {name:<{width}}  {count:<10}  {verdict}\n")
        for problem in problems:
            out.write(f"      {label(problem)}\n")
        failures += bool(problems) or not examples
    out.write(f"\n{len(names)} contracts, {total} examples: ")
    out.write("all valid.\n" if not failures else f"{failures} contracts failed.\n")
    return EXIT_INVALID if failures else EXIT_OK


# generate -----------------------------------------------------------------------


def _generate(args: argparse.Namespace, out: Output) -> int:
    require_extra("codegen", "generate")
    from ...codegen import generate

    project = Path(generate.__file__).resolve().parent.parent
    schemas = args.schemas or project / "schemas"
    target = args.out or project / "generated"
    if not schemas.is_dir():
        raise UsageError(
            f"no schema folder at {schemas}; in an installed copy, give --schemas DIR and --out DIR"
        )
    if args.package is not None:
        _check_package(args.package, target)
    try:
        changed = (generate.check if args.check else generate.write)(schemas, target)
    except generate.OutputFolderError as error:
        raise UsageError(printable(str(error))) from None
    except UnusableSchema as error:  # a folder it cannot use, as `validate --schemas` says
        complain(f"{schemas}: {error}")
        return EXIT_USAGE
    if args.check:
        for relative in changed:
            out.write(f"stale: {target / relative}\n")
        out.write(f"{target} is {'stale' if changed else 'up to date'}\n")
        return EXIT_INVALID if changed else EXIT_OK
    for relative in changed:
        out.write(f"wrote {target / relative}\n")
    out.write(f"{target}: {len(changed)} file{'s' if len(changed) != 1 else ''} changed\n")
    return EXIT_OK


def _check_package(name: str, out: Path) -> None:
    """Refuse a --package that is not a dotted module name, or that --out cannot be imported as.

    The generated package imports its own modules relatively, so it works
    under whatever name it is imported by; `from NAME import ...` finds it
    when --out is the folder NAME's parts name, below a folder on the path.
    """
    parts = name.split(".")
    if not all(part.isidentifier() and not keyword.iskeyword(part) for part in parts):
        raise UsageError(printable(f"--package {name!r} is not a dotted Python module name"))
    folders = Path(os.path.abspath(out)).parts  # `..` undone, symbolic links kept
    if folders[-len(parts) :] != tuple(parts):
        raise UsageError(
            printable(
                f"--package {name} is imported from a folder {'/'.join(parts)}, "
                f"and --out {out} is not one"
            )
        )
