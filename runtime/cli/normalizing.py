"""`plancontracts normalize CONTRACT FILE`: a document repaired as its family allows it.

Which contracts can be normalized, and how, each family declares (its
`repairs.NORMALIZERS`, see `runtime.core.repairs`); this command reads the
document and reports for all of them. The repaired document is printed on
standard output, as JSON for people, and every repair is one line on
standard error (`POINTER: before -> after (why)`); a document still invalid
after the repairs prints nothing and lists its violations. With `--json`,
one JSON object: the file, whether the result is valid, the repairs, the
violations, and the repaired document under the field its normalizer names
(`block` for a planning block, `output` for a goal plan's answer). The
options of `validate` that choose a family's rules (`--mode` of planning
blocks) choose the rules the result is judged by, for the families that
normalize. Exit status 0 when the result is valid, 1 when it is not (or
standard input cannot be read), 2 for a usage error: a contract nothing
normalizes, an option of another contract, a named file that cannot be read.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import msgspec

from ...generated import FAMILIES
from ..commandkit import (
    EXIT_INVALID,
    EXIT_OK,
    EXIT_USAGE,
    Output,
    RulesOption,
    add_json,
    add_max_bytes,
    json_for_people,
    json_name,
    label,
    opened,
    read_at_most,
    to_stderr,
    unreadable,
    violations_as_json,
)
from ..core.contracts import root_type
from ..core.errors import ContractError, UsageError, Violation, Violations
from ..core.repairs import ABSENT, Normalized, Normalizer, normalizable, normalizer_of
from ..core.validation import parse_document

__all__ = ["register"]


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    rules_options: Mapping[str, Sequence[RulesOption]],
) -> None:
    """Add the `normalize` command.

    `rules_options` are the `validate` options of each family (by the
    family's package name); those of families that normalize a contract are
    offered here too.
    """
    names = normalizable()
    command = commands.add_parser(
        "normalize",
        help="repair what a contract's family allows in a document, reporting each repair",
        usage="%(prog)s CONTRACT FILE [--json] [options]",
    )
    command.add_argument("contract", metavar="CONTRACT", help=", ".join(names))
    command.add_argument("file", metavar="FILE", help="a JSON file, or - for stdin")
    add_json(command, "one JSON object: repairs, errors and the repaired document")
    add_max_bytes(command)
    # The family's package name: what FAMILIES holds and `rules_options` is keyed by.
    families = {FAMILIES[name] for name in names}
    options = tuple(
        option for family in sorted(families) for option in rules_options.get(family, ())
    )
    for option in options:
        option.add(command)
    command.set_defaults(run=partial(_normalize, options=options))


def _normalizer(contract: str) -> Normalizer:
    """The normalizer of `contract`; raises UsageError naming those there are when it has none."""
    root_type(contract)  # an unknown name is told as every command tells it
    normalizer = normalizer_of(contract)
    if normalizer is None:
        there = " and ".join(normalizable())
        raise UsageError(f"{contract} documents cannot be normalized: only {there} can")
    return normalizer


def _normalize(args: argparse.Namespace, out: Output, *, options: tuple[RulesOption, ...]) -> int:
    normalizer = _normalizer(args.contract)
    chosen = [option.rules(args, args.contract) for option in options]
    rules = next((found for found in chosen if found is not None), None)
    # A named file that cannot be read is a usage error, as in every command
    # (docs/contracts.md#a-file-that-cannot-be-read); --json still writes its
    # record. Standard input that fails to read is an invalid document.
    status = EXIT_INVALID
    try:
        with opened(args.file) as stream:
            data = read_at_most(stream, args.max_bytes)
    except OSError as error:
        if args.file != "-":
            if not args.json:
                raise UsageError(f"{label(args.file)}: {unreadable(error)}") from None
            status = EXIT_USAGE
        data = Violation("", unreadable(error))
    result: Normalized | None = None
    if isinstance(data, Violation):
        problems = Violations((data,))
    else:
        try:
            result = normalizer.normalize(parse_document(args.contract, data), rules)
            problems = result.violations
        except ContractError as error:  # not JSON at all
            problems = error.violations
    repairs = result.repairs if result else ()
    if args.json:
        record: dict[str, Any] = {"file": json_name(args.file), "valid": not problems}
        record["repairs"] = [
            {
                "pointer": each.pointer,
                **({} if each.before is ABSENT else {"before": each.before}),
                **({} if each.after is ABSENT else {"after": each.after}),
                "reason": each.reason,
            }
            for each in repairs
        ]
        record.update(violations_as_json(problems))
        record[normalizer.field] = result.value if result else None
        # Written from a shallower frame than the parse, so as deep as it accepted.
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
        return status if problems else EXIT_OK
    name = label(args.file)
    if result is not None:
        to_stderr(f"{name}: {len(repairs)} repair{'s' if len(repairs) != 1 else ''}\n")
    for repair in repairs:
        to_stderr(f"  {label(str(repair))}\n")
    if problems:
        verdict = "still invalid" if result is not None else "cannot be normalized"
        to_stderr(f"{name}: {verdict} ({problems.summary()}), so nothing is printed\n")
        for violation in problems:
            to_stderr(f"  {label(str(violation))}\n")
        return EXIT_INVALID
    assert result is not None
    out.write(json_for_people(msgspec.json.encode(result.value)) + "\n")
    return EXIT_OK
