"""The `plancontracts` command.

Exit status: 0 when everything checked is valid, 1 when a document is invalid
or cannot be read, 2 when the command line itself is wrong. `execute` exits 0
when the plan succeeds, 1 when it fails, 2 when it is rejected before any
tool runs. An interrupted command (Ctrl-C) exits 130; one stopped by SIGTERM
or SIGHUP exits 128 + the signal's number. Either way every script is stopped
first. A closed standard input (for `-`) or standard output, or output that
cannot be written (a full disk), ends any command with one line on standard
error and exit status 1.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, Protocol, TextIO

import msgspec

from plancontracts.generated.tool_plans import ExecutionResult, Plan
from plancontracts.runtime.contracts import contract_names, contract_schema, root_type
from plancontracts.runtime.errors import (
    ContractError,
    UnknownContractError,
    Violation,
    Violations,
    printable,
)
from plancontracts.runtime.planning_blocks import (
    ABSENT,
    PLANNING_BLOCK,
    Normalized,
    decode_block,
    normalize_block,
)
from plancontracts.runtime.planning_mechanics import ABILITIES, AVERAGE_SCORE, Mode, mode_of
from plancontracts.runtime.schema_text import schema_text
from plancontracts.runtime.validation import decode, parse_document

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
MAX_BYTES_LIMIT = 1024 * 1024 * 1024
"The largest --max-bytes: documents are read whole into memory, and parsed there."
_CHUNK = 1024 * 1024


class UsageError(Exception):
    """The command line is wrong; the message says how."""


class StreamError(Exception):
    """Standard input or output is closed or cannot be used; the message says which."""


class Output(Protocol):
    """Where a command writes its results: standard output, as `_StandardOutput` wraps it."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command with `argv` (default: `sys.argv[1:]`) and return its exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if sys.stdout is None:  # started with standard output closed (`>&-`)
            raise StreamError("standard output is closed")
        out = _StandardOutput(sys.stdout)
        with _stops.installed():
            status: int = args.run(args, out)
        out.flush()
        return status
    except (UsageError, UnknownContractError) as error:
        parser.exit(EXIT_USAGE, f"plancontracts: error: {error}\n")
    except KeyboardInterrupt:
        return _stopped("interrupted", 130)
    except Stopped as stop:
        return _stopped(f"stopped by {signal.Signals(stop.signum).name}", 128 + stop.signum)
    except StreamError as error:
        if not isinstance(error.__cause__, BrokenPipeError):  # the reader of `| head` knows
            _complain(str(error))
        if sys.stdout is not None:
            # Whatever is left in its buffer would fail again at exit, with a
            # traceback-like warning: send it to /dev/null instead.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_INVALID


def _complain(message: str) -> None:
    """Write `message` as the command's one error line on standard error."""
    _say(f"error: {printable(message)}")


def _say(line: str) -> None:
    """Write `plancontracts: line` on standard error, if there is one to write to.

    After SIGHUP the terminal may be gone, and a command may start with
    standard error closed: then the exit status alone tells.
    """
    if sys.stderr is not None:
        with suppress(OSError, ValueError):
            sys.stderr.write(f"plancontracts: {line}\n")
            sys.stderr.flush()


class _StandardOutput:
    """Standard output, whose failures to write end the command as a `StreamError`."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str, /) -> int:
        try:
            return self.stream.write(text)
        except OSError as error:
            raise StreamError(f"cannot write to standard output: {_reason(error)}") from error

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as error:
            raise StreamError(f"cannot write to standard output: {_reason(error)}") from error


def _standard_input() -> TextIO:
    """Standard input, or a `StreamError` when the command was started with it closed (`<&-`)."""
    if sys.stdin is None:
        raise StreamError("standard input is closed")
    return sys.stdin


def _reason(error: OSError) -> str:
    return (error.strerror or str(error)).lower()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="plancontracts",
        description="Schema-first contracts for LLM planning systems.",
    )
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

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
    validate.add_argument("--json", action="store_true", help="print one JSON object per document")
    validate.add_argument(
        "--max-bytes",
        type=_byte_limit,
        default=DEFAULT_MAX_BYTES,
        metavar="N",
        help=f"refuse documents (or lines) larger than N bytes (default {DEFAULT_MAX_BYTES}, "
        f"at most {MAX_BYTES_LIMIT})",
    )
    validate.add_argument(
        "--mode",
        choices=("think", "story"),
        help="planning-block only: judge in Think mode (stricter) or Story mode (the default)",
    )
    validate.set_defaults(run=_validate)

    normalize = commands.add_parser(
        "normalize",
        help="repair what the planning protocol allows in a planning block, reporting each repair",
    )
    normalize.add_argument("contract", metavar="CONTRACT", help="planning-block")
    normalize.add_argument("file", metavar="FILE", help="a JSON file, or - for stdin")
    normalize.add_argument(
        "--mode",
        choices=("think", "story"),
        default="story",
        help="the mode to judge the result in",
    )
    normalize.add_argument(
        "--json", action="store_true", help="print one JSON object: repairs, errors and the block"
    )
    normalize.add_argument(
        "--max-bytes",
        type=_byte_limit,
        default=DEFAULT_MAX_BYTES,
        metavar="N",
        help=f"refuse a document larger than N bytes (default {DEFAULT_MAX_BYTES}, "
        f"at most {MAX_BYTES_LIMIT})",
    )
    normalize.set_defaults(run=_normalize)

    examples = commands.add_parser(
        "examples", help="validate the example documents bundled with every contract"
    )
    examples.set_defaults(run=_examples)

    execute = commands.add_parser(
        "execute", help="run a plan with skills and print its execution result"
    )
    execute.add_argument("plan", metavar="PLAN", help="a plan JSON file, or - for stdin")
    execute.add_argument(
        "--skills",
        type=Path,
        action="append",
        metavar="DIR",
        help="a folder of skill folders (repeatable; default: the bundled skills)",
    )
    execute.add_argument(
        "--json", action="store_true", help="print the execution-result document itself"
    )
    execute.add_argument(
        "--data",
        type=Path,
        metavar="DIR",
        help="where skills keep their data, one folder per skill "
        "(default: $XDG_DATA_HOME/plancontracts/skills)",
    )
    execute.add_argument(
        "--concurrency", type=_positive_int, metavar="N", help="most tools at once (default: CPUs)"
    )
    execute.add_argument(
        "--timeout", type=_seconds, default=60.0, metavar="S", help="plan deadline (default 60)"
    )
    execute.add_argument(
        "--grace",
        type=_seconds,
        default=5.0,
        metavar="S",
        help="wait between SIGTERM and SIGKILL when stopping a script (default 5)",
    )
    execute.set_defaults(run=_execute)

    plan = commands.add_parser(
        "plan", help="write a plan for player input with the local model (or the patterns)"
    )
    plan.add_argument(
        "inputs", metavar="TEXT", nargs="+", help="player input; - reads one input per line"
    )
    plan.add_argument(
        "--execute",
        action="store_true",
        help="run each plan with the replan loop and print the narration (traces on stderr)",
    )
    play = commands.add_parser("play", help="play turn after turn, reading actions from stdin")
    for command in (plan, play):
        _model_options(command, seed="sampling seed, for repeatable plans")
        command.add_argument(
            "--skills",
            type=Path,
            action="append",
            metavar="DIR",
            help="a folder of skill folders (repeatable; default: the bundled skills)",
        )
        command.add_argument(
            "--data", type=Path, metavar="DIR", help="where skills keep their data (as execute)"
        )
    plan.set_defaults(run=_plan)
    play.set_defaults(run=_play)

    think = commands.add_parser(
        "think", help="write a planning block for a situation with the local model"
    )
    think.add_argument(
        "situations",
        metavar="SITUATION",
        nargs="+",
        help="the situation; a THINK: prefix means Think mode; - reads one per line",
    )
    think.add_argument(
        "--mode",
        choices=("think", "story"),
        default="story",
        help="Think mode (the planning check is rolled) or Story mode (the default)",
    )
    for ability in ABILITIES:
        think.add_argument(
            f"--{ability.lower()}",
            type=_ability_score,
            default=AVERAGE_SCORE,
            metavar="N",
            help=f"the character's {ability} score, 1 to 30 (default {AVERAGE_SCORE})",
        )
    _model_options(think, seed="seed of the sampling and the roll")
    think.set_defaults(run=_think)

    generate = commands.add_parser("generate", help="regenerate generated/ from schemas/")
    generate.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if generated/ is stale"
    )
    generate.add_argument("--schemas", type=Path, metavar="DIR", help="the schema folder")
    generate.add_argument("--out", type=Path, metavar="DIR", help="the generated/ folder")
    generate.set_defaults(run=_generate)
    return parser


def _model_options(command: argparse.ArgumentParser, *, seed: str) -> None:
    """--model, --seed (helped by `seed`) and --no-download, for the commands that load a model."""
    command.add_argument(
        "--model",
        metavar="PATH|NAME",
        help="a GGUF file, phi-3.5, gemma3-270m or owner/repo/file.gguf",
    )
    command.add_argument("--seed", type=int, metavar="N", help=seed)
    command.add_argument(
        "--no-download", action="store_true", help="never download the default model"
    )


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value}")
    return value


def _byte_limit(text: str) -> int:
    value = _positive_int(text)
    if value > MAX_BYTES_LIMIT:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_BYTES_LIMIT} (1 GiB): {value}")
    return value


def _ability_score(text: str) -> int:
    value = _positive_int(text)
    if value > 30:
        raise argparse.ArgumentTypeError(f"an ability score is 1 to 30, not {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < 86400:
        raise argparse.ArgumentTypeError(f"must be more than 0 and less than a day: {value}")
    return value


# contracts, schema ------------------------------------------------------------


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


@dataclass(frozen=True)
class Outcome:
    """The verdict on one document."""

    file: str
    line: int | None
    violations: Violations

    @property
    def valid(self) -> bool:
        return not self.violations


def _validate(args: argparse.Namespace, out: Output) -> int:
    root_type(args.contract)  # an unknown contract is a usage error, before any reading
    if args.mode and args.contract != PLANNING_BLOCK:
        raise UsageError(f"--mode applies to {PLANNING_BLOCK} only, not {args.contract}")
    _stdin_at_most_once(args.files)
    judge = partial(_judge, args.contract, args.mode or "story")
    report = _JsonReport(out) if args.json else _TextReport(out, ndjson=args.ndjson)
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
        with _opened(name) as stream:
            if ndjson:
                for number, line in _lines(stream, limit):
                    yield judge(name, number, line)
                return
            data = _read_at_most(stream, limit)
    except OSError as error:
        yield Outcome(name, None, Violations((Violation("", _unreadable(error)),)))
        return
    yield judge(name, None, data)


def _read_at_most(stream: BinaryIO, limit: int) -> bytes | Violation:
    """The whole stream, or the violation that says it is larger than `limit` bytes.

    Read in chunks, so memory grows with what the stream holds, not with `limit`.
    """
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = stream.read(min(_CHUNK, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        return Violation("", f"larger than {limit} bytes (see --max-bytes)")
    return b"".join(chunks)


def _opened(name: str) -> AbstractContextManager[BinaryIO]:
    """The file to read, or standard input for `-` (left open afterwards)."""
    if name == "-":
        return nullcontext(_standard_input().buffer)
    return Path(name).open("rb")


def _judge(
    contract: str, mode: Mode, name: str, line: int | None, data: bytes | Violation
) -> Outcome:
    if isinstance(data, Violation):
        return Outcome(name, line, Violations((data,)))
    try:
        if contract == PLANNING_BLOCK:
            decode_block(data, mode)
        else:
            decode(contract, data)
    except ContractError as error:
        return Outcome(name, line, error.violations)
    return Outcome(name, line, Violations())


def _lines(stream: BinaryIO, limit: int) -> Iterator[tuple[int, bytes | Violation]]:
    """Numbered lines of an NDJSON stream, each read in at most `limit` + 1 bytes of memory.

    A line longer than `limit` is refused; the rest of it is skipped if it
    ends within `limit` more bytes, and otherwise the stream is read no
    further (it may never end: /dev/zero), which the line's violation says.
    """
    number = 0
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        number += 1
        if len(line) > limit and not line.endswith(b"\n"):
            too_long = f"line longer than {limit} bytes (see --max-bytes)"
            if not _skipped_to_line_end(stream, limit):
                ending = f"and it does not end within {limit} bytes more: the rest is not read"
                yield number, Violation("", f"{too_long}, {ending}")
                return
            yield number, Violation("", too_long)
        elif not line.strip():
            yield number, Violation("", "empty line: expected one JSON document per line")
        else:
            yield number, line


def _skipped_to_line_end(stream: BinaryIO, limit: int) -> bool:
    """Whether the current line ends (or the stream does) within `limit` more bytes, read past."""
    skipped = 0
    while skipped <= limit:
        rest = stream.readline(limit + 1 - skipped)
        if not rest or rest.endswith(b"\n"):
            return True
        skipped += len(rest)
    return False


def _unreadable(error: OSError) -> str:
    if isinstance(error, IsADirectoryError):
        return "is a directory, not a JSON file"
    if isinstance(error, FileNotFoundError):
        return "no such file"
    return f"cannot read: {(error.strerror or str(error)).lower()}"


def _label(name: str) -> str:
    text = "<stdin>" if name == "-" else name
    return printable(text)


class _TextReport:
    def __init__(self, out: Output, *, ndjson: bool) -> None:
        self.out = out
        self.ndjson = ndjson
        self.valid = self.invalid = 0
        self.file_valid = self.file_invalid = 0

    def add(self, outcome: Outcome) -> None:
        where = _label(outcome.file) + (f":{outcome.line}" if outcome.line else "")
        if outcome.valid:
            self.valid += 1
            self.file_valid += 1
            if not self.ndjson:
                self.out.write(f"{where}: valid\n")
            return
        self.invalid += 1
        self.file_invalid += 1
        self.out.write(f"{where}: invalid ({outcome.violations.summary()})\n")
        for violation in outcome.violations:
            self.out.write(f"  {_label(str(violation))}\n")
        self.out.flush()

    def end_file(self, name: str) -> None:
        if self.ndjson:
            total = self.file_valid + self.file_invalid
            self.out.write(
                f"{_label(name)}: {total} document{'s' if total != 1 else ''}, "
                f"{self.file_invalid} invalid\n"
            )
        self.file_valid = self.file_invalid = 0

    def finish(self) -> int:
        total = self.valid + self.invalid
        self.out.write(
            f"{total} document{'s' if total != 1 else ''} checked: "
            f"{self.valid} valid, {self.invalid} invalid\n"
        )
        return EXIT_INVALID if self.invalid else EXIT_OK


class _JsonReport:
    def __init__(self, out: Output) -> None:
        self.out = out
        self.invalid = 0

    def add(self, outcome: Outcome) -> None:
        record: dict[str, object] = {"file": _json_name(outcome.file), "valid": outcome.valid}
        if outcome.line is not None:
            record["line"] = outcome.line
        record.update(_as_json(outcome.violations))
        self.out.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.out.flush()
        self.invalid += not outcome.valid

    def end_file(self, name: str) -> None:
        return None

    def finish(self) -> int:
        return EXIT_INVALID if self.invalid else EXIT_OK


# normalize ----------------------------------------------------------------------


def _normalize(args: argparse.Namespace, out: Output) -> int:
    root_type(args.contract)
    if args.contract != PLANNING_BLOCK:
        raise UsageError(f"only {PLANNING_BLOCK} documents can be normalized, not {args.contract}")
    try:
        with _opened(args.file) as stream:
            data = _read_at_most(stream, args.max_bytes)
    except OSError as error:
        data = Violation("", _unreadable(error))
    result: Normalized | None = None
    if isinstance(data, Violation):
        problems = Violations((data,))
    else:
        try:
            result = normalize_block(parse_document(PLANNING_BLOCK, data), args.mode)
            problems = result.violations
        except ContractError as error:  # not JSON at all
            problems = error.violations
    repairs = result.repairs if result else ()
    if args.json:
        record: dict[str, Any] = {"file": _json_name(args.file), "valid": not problems}
        record["repairs"] = [
            {
                "pointer": r.pointer,
                **({} if r.before is ABSENT else {"before": r.before}),
                "after": r.after,
                "reason": r.reason,
            }
            for r in repairs
        ]
        record.update(_as_json(problems))
        record["block"] = result.block if result else None
        # Written from a shallower frame than the parse, so as deep as it accepted.
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
        return EXIT_INVALID if problems else EXIT_OK
    label = _label(args.file)
    if result is not None:
        count = f"{len(repairs)} repair{'s' if len(repairs) != 1 else ''}"
        sys.stderr.write(f"{label}: {count}\n")
    for repair in repairs:
        sys.stderr.write(f"  {_label(str(repair))}\n")
    if problems:
        verdict = "still invalid" if result is not None else "cannot be read"
        sys.stderr.write(f"{label}: {verdict} ({problems.summary()}), so nothing is printed\n")
        for violation in problems:
            sys.stderr.write(f"  {_label(str(violation))}\n")
        return EXIT_INVALID
    assert result is not None
    out.write(json.dumps(result.block, indent=2, ensure_ascii=False) + "\n")
    return EXIT_OK


def _as_json(violations: Violations) -> dict[str, Any]:
    """The `errors` of a JSON report, and `more_errors: true` when the list is cut."""
    errors = [{"pointer": v.pointer, "message": v.message} for v in violations]
    return {"errors": errors} if violations.complete else {"errors": errors, "more_errors": True}


def _json_name(name: str) -> str:
    """A file name for a JSON report, its bytes that are not UTF-8 escaped as text mode does.

    Python reads such bytes of a name as lone surrogates (U+DC80 to U+DCFF),
    which UTF-8 cannot encode: they are written as the text `\\udcXX`.
    """
    return "".join(f"\\u{ord(ch):04x}" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in name)


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
            out.write(f"      {_label(problem)}\n")
        failures += bool(problems) or not examples
    out.write(f"\n{len(names)} contracts, {total} examples: ")
    out.write("all valid.\n" if not failures else f"{failures} contracts failed.\n")
    return EXIT_INVALID if failures else EXIT_OK


# execute ------------------------------------------------------------------------


def _execute(args: argparse.Namespace, out: Output) -> int:
    from plancontracts.runtime.executor import Limits, default_data_root, execute_plan
    from plancontracts.runtime.trace import render_trace

    plan = _read_plan(args.plan)
    if isinstance(plan, Outcome):
        sys.stderr.write(f"{_label(args.plan)}: not a usable plan, so nothing ran:\n")
        for violation in plan.violations:
            sys.stderr.write(f"  {_label(str(violation))}\n")
        return EXIT_USAGE
    skills = _skills(args)
    concurrency = {"max_concurrency": args.concurrency} if args.concurrency else {}
    limits = Limits(plan_timeout=args.timeout, shutdown_grace=args.grace, **concurrency)
    result: ExecutionResult = _run_trio(
        partial(
            execute_plan,
            plan,
            skills=skills,
            limits=limits,
            data_root=args.data or default_data_root(),
        )
    )
    if args.json:
        out.write(msgspec.json.format(msgspec.json.encode(result)).decode() + "\n")
    else:
        out.write(render_trace(result))
    if result.error:
        return EXIT_USAGE
    return EXIT_OK if result.success else EXIT_INVALID


def _read_plan(name: str) -> Plan | Outcome:
    """The plan in file `name` (or stdin for -), or the outcome that says why there is none."""
    try:
        with _opened(name) as stream:
            data = _read_at_most(stream, DEFAULT_MAX_BYTES)
    except OSError as error:
        data = Violation("", _unreadable(error))
    if isinstance(data, Violation):
        return Outcome(name, None, Violations((data,)))
    try:
        plan: Plan = decode("plan", data)
    except ContractError as error:
        return Outcome(name, None, error.violations)
    return plan


# plan ---------------------------------------------------------------------------


def _plan(args: argparse.Namespace, out: Output) -> int:
    _stdin_at_most_once(args.inputs)
    for text in args.inputs:
        if not text.strip():
            raise UsageError(f"an empty player input: {_label(text)!r}")
    planner = _planner(args)
    for player_input in _texts(args.inputs):
        if args.execute:
            _turn(planner, player_input, args, out, state={})
        else:
            plan = _run_trio(partial(planner.plan, player_input, seed=args.seed))
            out.write(msgspec.json.encode(plan).decode() + "\n")
        out.flush()
    return EXIT_OK


def _stdin_at_most_once(names: list[str]) -> None:
    """Check, before any work, that standard input is named at most once and is open if named."""
    if names.count("-") > 1:
        raise UsageError("standard input (-) can be read only once")
    if "-" in names:
        _standard_input()


def _texts(arguments: list[str]) -> Iterator[str]:
    """Each argument, or for `-` each line of standard input, stripped; blank ones skipped."""
    for argument in arguments:
        for text in _standard_lines() if argument == "-" else [argument]:
            if text.strip():
                yield text.strip()


def _standard_lines() -> Iterator[str]:
    """The lines of standard input; a failure to read it ends the command as a `StreamError`."""
    stream = _standard_input()
    while True:
        try:
            line = stream.readline()
        except OSError as error:
            raise StreamError(f"cannot read standard input: {_reason(error)}") from error
        if not line:
            return
        yield line


def _play(args: argparse.Namespace, out: Output) -> int:
    _standard_input()  # closed: say so before the model loads
    planner = _planner(args)
    state: dict[str, Any] = {}
    choices: list[str] = []
    out.write("Type what you do; an empty line or end of input ends the game.\n")
    lines = _standard_lines()
    while True:
        out.write("> ")
        out.flush()
        line = next(lines, "")
        if not line.strip():
            out.write("\n")
            return EXIT_OK
        text = line.strip()
        # isdigit() alone admits digits int() refuses, such as "²".
        if text.isascii() and text.isdigit() and 1 <= int(text) <= len(choices):
            text = choices[int(text) - 1]
            out.write(f"({text})\n")
        choices = _turn(planner, text, args, out, state)


def _planner(args: argparse.Namespace) -> Any:
    from plancontracts.runtime.planner import Planner

    return Planner.start(args.model, download=not args.no_download, skills=_skills(args))


def _skills(args: argparse.Namespace) -> Any:
    """The skills of `--skills` (default: the bundled ones), warning of each one skipped."""
    from plancontracts.runtime.skills import bundled_skills, discover_skills

    skills = discover_skills(args.skills) if args.skills else bundled_skills()
    for problem in skills.problems:
        sys.stderr.write(f"plancontracts: warning: {_label(problem)}\n")
    return skills


def _turn(
    planner: Any, text: str, args: argparse.Namespace, out: Output, state: dict[str, Any]
) -> list[str]:
    """Play one turn: narration, a trace per attempt, and the choices offered (returned)."""
    from plancontracts.generated.tool_plans import UiEvent
    from plancontracts.runtime.executor import default_data_root, merge_patch
    from plancontracts.runtime.narrator import play_turn
    from plancontracts.runtime.trace import render_trace

    offered: list[str] = []

    def on_ui_event(tool_id: str, event: UiEvent) -> None:
        payload = event.payload if isinstance(event.payload, dict) else {}
        found = payload.get("choices") if event.event == "narrative_choice" else None
        if isinstance(found, list):
            offered.extend(str(choice) for choice in found)

    turn = _run_trio(
        partial(
            play_turn,
            text,
            planner,
            state=state,
            data_root=args.data or default_data_root(),
            on_ui_event=on_ui_event,
            seed=args.seed,
        )
    )
    for attempt in turn.attempts:
        sys.stderr.write(render_trace(attempt.result))
    out.write(printable(turn.narration) + "\n")
    for number, choice in enumerate(offered, 1):
        out.write(f"  {number}. {printable(choice)}\n")
    merge_patch(state, turn.state)
    return offered


class Stopped(BaseException):
    """SIGTERM or SIGHUP arrived: the command stops, as Ctrl-C stops it.

    A BaseException, as KeyboardInterrupt is, so that no `except Exception`
    on the way takes it for an error to handle.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _stopped(why: str, status: int) -> int:
    """Say why the command stopped and return `status`, or exit with it at once.

    Every script is stopped by now. A model generation cut short may still run
    in its thread until its next token, seconds away while it reads a prompt;
    the interpreter's teardown would free llama.cpp under it and crash, so
    then the process exits here, without that teardown.
    """
    from plancontracts.runtime.generation import generating

    _say(why)
    if generating():
        if sys.stdout is not None:
            with suppress(OSError, ValueError):
                sys.stdout.flush()
        os._exit(status)
    return status


class _StopSignals:
    """SIGTERM and SIGHUP as `Stopped`: raised at once in plain code, held while trio runs.

    Inside trio, `_run_trio`'s signal receiver takes them and cancels the
    work; a signal that comes just before the receiver opens or just after it
    closes is held here and raised once trio has returned, because raising
    it in the middle of trio's own machinery would break it.
    """

    def __init__(self) -> None:
        self.holding = False
        self.held: int | None = None

    @contextmanager
    def installed(self) -> Iterator[None]:
        previous = {signum: signal.signal(signum, self._handle) for signum in _STOP_SIGNALS[1:]}
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _handle(self, signum: int, frame: object) -> None:
        if not self.holding:
            raise Stopped(signum)
        if self.held is None:
            self.held = signum


_stops = _StopSignals()


def _run_trio(function: Any) -> Any:
    """Run the async `function` with trio and return what it returns.

    SIGINT, SIGTERM and SIGHUP cancel it: every script's process group is
    stopped (SIGTERM, the grace, then SIGKILL) and a worker thread's model
    generation is told to stop; then KeyboardInterrupt (for SIGINT) or
    `Stopped` is raised.
    """
    import trio

    caught: list[int] = []

    async def guarded() -> Any:
        with trio.open_signal_receiver(*_STOP_SIGNALS) as signals:
            work = trio.CancelScope()
            if _stops.held is not None:  # it came before the receiver was open
                work.cancel()

            async def watch() -> None:
                # Signals that come while the work stops are taken here too,
                # so that none interrupts the stopping.
                async for signum in signals:
                    caught.append(signum)
                    work.cancel()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch)
                with work:
                    outcome = await function()
                nursery.cancel_scope.cancel()
        return None if work.cancelled_caught else outcome

    _stops.holding = True
    try:
        outcome = trio.run(guarded)
    except BaseExceptionGroup as group:
        # The nurseries inside are a detail: Ctrl-C reported from inside them,
        # or one exception, is raised as itself.
        _, rest = group.split(KeyboardInterrupt)
        if rest is None:
            raise KeyboardInterrupt from None
        error: BaseException = group
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        raise error from None
    finally:
        _stops.holding = False
    held, _stops.held = _stops.held, None
    first = caught[0] if caught else held
    if first == signal.SIGINT:
        raise KeyboardInterrupt
    if first is not None:
        raise Stopped(first)
    return outcome


# think --------------------------------------------------------------------------


def _think(args: argparse.Namespace, out: Output) -> int:
    from plancontracts.runtime.generation import GenerationFailed
    from plancontracts.runtime.thinking import NoModel, Thinker

    _stdin_at_most_once(args.situations)
    for text in args.situations:
        if text != "-" and not mode_of(text, args.mode)[1]:
            raise UsageError(f"an empty situation: {_label(text)!r}")
    try:
        thinker = Thinker.start(args.model, download=not args.no_download)
    except NoModel as error:
        sys.stderr.write(f"plancontracts: {error}\n")
        return EXIT_INVALID
    abilities = {ability: getattr(args, ability.lower()) for ability in ABILITIES}
    status = EXIT_OK
    for situation in _texts(args.situations):
        think = partial(thinker.think, situation, args.mode, abilities=abilities, seed=args.seed)
        try:
            thought = _run_trio(think)
        except (GenerationFailed, ValueError) as failure:  # ValueError: an empty situation
            sys.stderr.write(f"plancontracts: no block for {_label(situation[:80])!r}: ")
            sys.stderr.write(f"{_label(str(failure))}\n")
            status = EXIT_INVALID
            continue
        out.write(msgspec.json.encode(thought.block).decode() + "\n")
        out.flush()
    return status


# generate -----------------------------------------------------------------------


def _generate(args: argparse.Namespace, out: Output) -> int:
    from plancontracts.codegen import generate
    from plancontracts.codegen.schemas import SchemaTreeError

    project = Path(generate.__file__).resolve().parent.parent
    schemas = args.schemas or project / "schemas"
    target = args.out or project / "generated"
    if not schemas.is_dir():
        raise UsageError(
            f"no schema folder at {schemas}; in an installed copy, give --schemas DIR and --out DIR"
        )
    try:
        changed = (generate.check if args.check else generate.write)(schemas, target)
    except SchemaTreeError as error:
        sys.stderr.write(f"plancontracts: {error}\n")
        return EXIT_INVALID
    if args.check:
        for relative in changed:
            out.write(f"stale: {target / relative}\n")
        out.write(f"{target} is {'stale' if changed else 'up to date'}\n")
        return EXIT_INVALID if changed else EXIT_OK
    for relative in changed:
        out.write(f"wrote {target / relative}\n")
    out.write(f"{target}: {len(changed)} file{'s' if len(changed) != 1 else ''} changed\n")
    return EXIT_OK
