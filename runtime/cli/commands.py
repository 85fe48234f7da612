"""The commands of the contracts themselves: contracts, schema, validate, examples, generate."""

from __future__ import annotations

import argparse
import json
import keyword
import os
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path

import msgspec

from ..commandkit import (
    EXIT_INVALID,
    EXIT_OK,
    EXIT_USAGE,
    FORMATS,
    Outcome,
    Output,
    RulesOption,
    add_format,
    add_max_bytes,
    complain,
    label,
    lines_of,
    opened,
    read_at_most,
    report_for,
    require_extra,
    stdin_at_most_once,
    unreadable,
)
from ..core.contracts import AnyContract, contract_names, contract_schema
from ..core.errors import (
    ContractError,
    MalformedJSON,
    UnusableSchema,
    UsageError,
    Violation,
    Violations,
    printable,
)
from ..core.jsontext import parse
from ..core.rules import Rules
from ..core.schema_sets import load_contracts
from ..core.schema_text import schema_text
from ..core.schema_tree import contract_name_of_file
from ..core.validation import BUNDLED, ContractSet, decode

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser],
             rules_options: Sequence[RulesOption]) -> None:  # fmt: skip
    """Add the contracts' commands; `validate` takes the families' `rules_options`."""
    contracts = commands.add_parser("contracts", help="list the contracts")
    contracts.set_defaults(run=_contracts)

    schema = commands.add_parser(
        "schema",
        help="print a contract's schema, self-contained",
        usage="%(prog)s CONTRACT [--schemas DIR] [--text]\n"
        "       %(prog)s --schema SCHEMA [--text]",
    )
    schema.add_argument("contract", metavar="CONTRACT", nargs="?")
    schema.add_argument(
        "--text", action="store_true", help="print the text shown to a model instead of JSON"
    )
    whose = schema.add_mutually_exclusive_group()
    add_schema_files(whose, "the contract of this file (more --schema: files its references name)")
    whose.add_argument(
        "--schemas", type=Path, metavar="DIR", help="a contract of this schema folder"
    )
    schema.set_defaults(run=_schema)

    validate = commands.add_parser(
        "validate",
        help="validate JSON documents against a contract",
        usage="%(prog)s CONTRACT FILE... [options]\n"
        "       %(prog)s --schema SCHEMA FILE... [options]",
    )
    validate.add_argument(
        "files",
        metavar="FILE",
        nargs="+",
        help="a JSON file, or - for stdin; without --schema, the first is the CONTRACT's name",
    )
    validate.add_argument(
        "--ndjson", action="store_true", help="each line of each FILE is one document"
    )
    add_format(validate, FORMATS)
    add_max_bytes(validate, "documents (or lines)")
    user = validate.add_mutually_exclusive_group()
    add_schema_files(
        user,
        "judge by this schema file, of any JSON Schema draft: it is the contract "
        "(more --schema: files its references name)",
    )
    user.add_argument(
        "--schemas",
        type=Path,
        metavar="DIR",
        help="judge by the contracts of this schema folder (laid out as schemas/) or "
        "generated package, by their schemas alone",
    )
    for option in rules_options:
        option.add(validate)
    validate.set_defaults(
        run=partial(_validate, rules_options=tuple(rules_options)), files_after_options=True
    )

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
    source = generate.add_mutually_exclusive_group()
    source.add_argument("--schemas", type=Path, metavar="DIR", help="the schema folder")
    add_schema_files(
        source, "a schema file, a contract named after the file (repeat for more; needs --out)"
    )
    generate.add_argument(
        "--out", type=Path, metavar="DIR", help="the output folder, a package the generator owns"
    )
    generate.add_argument(
        "--package",
        metavar="NAME",
        help="the dotted name the output is imported by: checks that --out ends in its folders",
    )
    generate.set_defaults(run=_generate)


def add_schema_files(group: argparse._ActionsContainer, help: str) -> None:
    """--schema FILE, repeatable: schema files a user names, read by `schema_files`."""
    group.add_argument("--schema", type=Path, metavar="SCHEMA", action="append", help=help)


def _contracts(args: argparse.Namespace, out: Output) -> int:
    names = contract_names()
    width = max(map(len, names))
    for name in names:
        out.write(f"{name:<{width}}  {contract_schema(name).get('title', '')}\n")
    return EXIT_OK


def _schema(args: argparse.Namespace, out: Output) -> int:
    contract: AnyContract
    if args.schema is not None:
        if args.contract is not None:
            raise UsageError("give a CONTRACT or --schema, not both: the file is the contract")
        contracts, name = schema_files(args.schema)
        contract = contracts[name]
    elif args.contract is None:
        raise UsageError("give the CONTRACT whose schema to print, or --schema SCHEMA")
    elif args.schemas is not None:
        contract = user_contracts("--schemas", args.schemas)[args.contract]
    else:
        contract = args.contract
    if args.text:
        out.write(schema_text(contract))
    else:
        out.write(json.dumps(contract_schema(contract), indent=2, ensure_ascii=False) + "\n")
    return EXIT_OK


# validate -----------------------------------------------------------------------


def _validate(
    args: argparse.Namespace, out: Output, *, rules_options: tuple[RulesOption, ...]
) -> int:
    # The schemas, the contract and the options are usage errors, before any reading.
    if args.schema is not None:
        contracts, contract = schema_files(args.schema)
    else:
        contract, *args.files = args.files
        if not args.files:
            raise UsageError("give the documents to validate after the contract's name")
        schemas = args.schemas
        contracts = BUNDLED if schemas is None else user_contracts("--schemas", schemas)
        contracts.require(contract)
    chosen = [option.rules(args, contract) for option in rules_options]
    rules = next((found for found in chosen if found is not None), None)
    if rules is not None and contracts is not BUNDLED:
        flag = "--schema" if args.schema is not None else "--schemas"
        problem = f"{rules.name} judge plancontracts' own {rules.contract}, not one of {flag}"
        raise UsageError(problem)
    stdin_at_most_once(args.files)
    judge = partial(_judge, contracts, contract, rules)
    report = report_for(args.format, out, ndjson=args.ndjson)
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
        yield Outcome(name, None, why, unreadable=name != "-", malformed=name == "-")
        return
    yield judge(name, None, data)


def _no_folder(path: Path) -> str:
    return "is not a folder" if os.path.lexists(path) else "no such folder"


def schema_files(paths: list[Path]) -> tuple[ContractSet, str]:
    """The contracts of the `--schema` files, and the name of the first: the one judged by.

    Raises `UsageError` for a folder (that is `--schemas`) and for schemas
    that cannot be used.
    """
    for path in paths:
        if path.is_dir():
            raise UsageError(
                printable(f"--schema {path}: is a folder; give --schemas DIR CONTRACT")
            )
    try:
        return load_contracts(*paths), contract_name_of_file(paths[0])
    except UnusableSchema as error:
        raise UsageError(printable(f"--schema {error}")) from None


def user_contracts(flag: str, path: Path) -> ContractSet:
    """The contracts of a schema file or folder a user named, for `validate` and `schema`.

    Raises `UsageError` naming `flag` for schemas that cannot be used.
    """
    if flag == "--schemas" and not path.is_dir():
        raise UsageError(printable(f"{flag} {path}: {_no_folder(path)}"))
    try:
        return load_contracts(path)
    except UnusableSchema as error:
        raise UsageError(printable(f"{flag} {error}")) from None


def _judge(
    contracts: ContractSet,
    contract: str,
    rules: Rules | None,
    name: str,
    line: int | None,
    data: bytes | Violation,
) -> Outcome:
    if isinstance(data, Violation):  # not taken as a document: too large, an empty line
        return Outcome(name, line, Violations((data,)), malformed=True)
    # Parsed apart from judged, as `decode` does, so that the reports tell text
    # that is no JSON (and where it fails) from a document that breaks the contract.
    try:
        value = parse(data)
    except MalformedJSON as error:
        why = Violations((Violation(error.pointer, error.message),))
        return Outcome(name, line, why, text=data, malformed=True, failed_at=error.offset)
    try:
        contracts.convert(contract, value, rules=rules)
    except ContractError as error:
        return Outcome(name, line, error.violations, text=data)
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
    if args.schema and args.out is None:
        raise UsageError("--schema needs --out DIR: the folder of the package to write")
    schemas: Path | list[Path] = args.schema or args.schemas or project / "schemas"
    target = args.out or project / "generated"
    if isinstance(schemas, Path) and not schemas.is_dir():
        raise UsageError(
            f"no schema folder at {schemas}; in an installed copy, give --schemas DIR and --out DIR"
        )
    if args.package is not None:
        _check_package(args.package, target)
    try:
        changed = (generate.check if args.check else generate.write)(schemas, target)
    except generate.OutputFolderError as error:
        raise UsageError(printable(str(error))) from None
    except UnusableSchema as error:  # schemas it cannot use, as `validate --schemas` says
        complain(printable(f"{schemas}: {error}" if isinstance(schemas, Path) else str(error)))
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
