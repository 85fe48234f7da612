"""`plancontracts write`: a document of any contract, written by a model, judged, asked again."""

from __future__ import annotations

import argparse
from pathlib import Path

import msgspec

from ..commandkit import (
    EXIT_INVALID,
    EXIT_OK,
    Output,
    add_model_options,
    bounded_int,
    model_choice,
    opened,
    read_at_most,
    require_extra,
    run_trio,
    say,
    seconds,
    user_text,
    writer_extra,
)
from ..commandkit.progress import current_progress, showing_progress
from ..core.contracts import AnyContract
from ..core.errors import Attempt, UsageError, Violation, WriteFailed, printable
from ..core.validation import BUNDLED
from .commands import add_schema_files, schema_files, user_contracts

__all__ = ["register"]

MAX_PROMPT_BYTES = 1024 * 1024
"The longest prompt read from standard input (`-`)."
SHOWN_PER_ATTEMPT = 3
"Violations named in the one line said of a refused attempt; the rest are counted."


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `write`."""
    write = commands.add_parser(
        "write",
        help="write a document of any contract with a model: judged, and asked again if refused",
        usage="%(prog)s CONTRACT PROMPT [--schemas DIR] [options]\n"
        "       %(prog)s --schema SCHEMA PROMPT [options]",
    )
    write.add_argument(
        "words",
        metavar="PROMPT",
        nargs="+",
        type=user_text,
        help="what to write (- reads it from stdin); without --schema, the CONTRACT's name first",
    )
    whose = write.add_mutually_exclusive_group()
    add_schema_files(
        whose, "write a document of this schema file (more --schema: files its references name)"
    )
    whose.add_argument(
        "--schemas", type=Path, metavar="DIR", help="CONTRACT is one of this schema folder"
    )
    write.add_argument("--system", type=user_text, metavar="TEXT", help="the system message")
    write.add_argument(
        "--attempts",
        type=bounded_int(1, 100),
        default=3,
        metavar="N",
        help="most answers asked for, each refused one shown its violations (default 3)",
    )
    write.add_argument(
        "--max-tokens",
        type=bounded_int(0, 1_000_000),
        default=0,
        metavar="N",
        help="most tokens in one answer (default 0: what the context or server leaves)",
    )
    write.add_argument(
        "--budget-tokens",
        type=bounded_int(1, 100_000_000),
        metavar="N",
        help="most tokens written over every attempt",
    )
    write.add_argument(
        "--budget-seconds",
        type=seconds,
        metavar="S",
        help="most seconds for every attempt together",
    )
    write.add_argument(
        "--stream",
        action="store_true",
        help="print each partial value as one JSON line as it grows; the last line is the document",
    )
    add_model_options(write, seed="the model's sampling seed")
    write.set_defaults(run=_write)


def _write(args: argparse.Namespace, out: Output) -> int:
    with showing_progress("write", out):
        return _write_with(args, out)


def _write_with(args: argparse.Namespace, out: Output) -> int:
    contract, prompt = _contract_and_prompt(args)
    require_extra(writer_extra(args), "write")
    from ..model.choice import load_writer
    from ..model.writing import Budget, write

    messages = [] if args.system is None else [{"role": "system", "content": args.system}]
    messages.append({"role": "user", "content": prompt})
    budget = Budget(args.attempts, args.budget_tokens, args.budget_seconds)
    with current_progress().doing("loading the model"):
        writer = load_writer(model_choice(args), needs="writing a document needs one")

    def refused(attempt: Attempt) -> None:
        if attempt.violations:
            say(_refusal(attempt))

    async def written() -> None:
        if not args.stream:
            document = await write(
                contract,
                messages,
                writer=writer,
                budget=budget,
                max_tokens=args.max_tokens,
                seed=args.seed,
                on_attempt=refused,
            )
            out.write(msgspec.json.encode(document).decode() + "\n")
            return
        async with write(
            contract,
            messages,
            writer=writer,
            budget=budget,
            max_tokens=args.max_tokens,
            seed=args.seed,
            on_attempt=refused,
            stream=True,
        ) as partials:
            async for partial in partials:
                shown = partial.document if partial.done else partial.value
                out.write(msgspec.json.encode(shown).decode() + "\n")
                out.flush()

    try:
        run_trio(written)
    except WriteFailed as failure:
        say(printable(str(failure)))
        return EXIT_INVALID
    return EXIT_OK


def _contract_and_prompt(args: argparse.Namespace) -> tuple[AnyContract, str]:
    """The contract the options name and the prompt; UsageError for either missing."""
    words: list[str] = args.words
    contract: AnyContract
    if args.schema is not None:
        contracts, name = schema_files(args.schema)
        contract = contracts[name]
    else:
        name, *words = words
        if args.schemas is not None:
            contract = user_contracts("--schemas", args.schemas)[name]
        else:
            BUNDLED.require(name)
            contract = name
    if len(words) != 1:
        what = "no PROMPT" if not words else f"{len(words)} prompts"
        raise UsageError(f"give one PROMPT after the contract, not {what} (quote it)")
    prompt = words[0]
    if prompt == "-":
        with opened("-") as stream:
            data = read_at_most(stream, MAX_PROMPT_BYTES, option=None)
        if isinstance(data, Violation):
            raise UsageError(f"the prompt on standard input is {data.message}")
        try:
            prompt = data.decode()
        except UnicodeDecodeError:
            raise UsageError("the prompt on standard input is not UTF-8 text") from None
    if not prompt.strip():
        raise UsageError("the PROMPT is empty")
    return contract, prompt


def _refusal(attempt: Attempt) -> str:
    """One line for a refused attempt: its number, its tokens, its first violations."""
    violations = attempt.violations
    named = "; ".join(str(violation) for violation in violations[:SHOWN_PER_ATTEMPT])
    more = len(violations) - SHOWN_PER_ATTEMPT
    rest = f"; and {more} more" if more > 0 else ""
    return printable(
        f"attempt {attempt.number} refused ({attempt.tokens} tokens, {violations.summary()}): "
        f"{named}{rest}"
    )
