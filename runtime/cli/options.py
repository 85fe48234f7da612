"""Options written once, for every command that takes them, and their value types."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..core.rules import Rules

__all__ = [
    "DEFAULT_MAX_BYTES",
    "MAX_BYTES_LIMIT",
    "RulesOption",
    "add_json",
    "add_max_bytes",
    "add_model_options",
    "add_skill_options",
    "bounded_int",
    "positive_int",
    "seconds",
]

DEFAULT_MAX_BYTES = 16 * 1024 * 1024
MAX_BYTES_LIMIT = 1024 * 1024 * 1024
"The largest --max-bytes: documents are read whole into memory, and parsed there."


@dataclass(frozen=True)
class RulesOption:
    """An option a family adds to `validate`, choosing the rules its contracts are judged by.

    `add` adds the option to the parser; `rules` reads it for the contract
    being validated: the rules chosen, None for the family's default, or a
    `UsageError` when the option does not apply to that contract.
    """

    add: Callable[[argparse.ArgumentParser], None]
    rules: Callable[[argparse.Namespace, str], Rules | None]


def add_json(command: argparse.ArgumentParser, what: str) -> None:
    """--json, which prints `what` instead of text."""
    command.add_argument("--json", action="store_true", help=f"print {what}")


def add_max_bytes(command: argparse.ArgumentParser, what: str = "a document") -> None:
    """--max-bytes: refuse `what` larger than N bytes, without reading the rest of it."""
    command.add_argument(
        "--max-bytes",
        type=bounded_int(1, MAX_BYTES_LIMIT),
        default=DEFAULT_MAX_BYTES,
        metavar="N",
        help=f"refuse {what} larger than N bytes (default {DEFAULT_MAX_BYTES}, "
        f"at most {MAX_BYTES_LIMIT})",
    )


def add_model_options(command: argparse.ArgumentParser, *, seed: str) -> None:
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


def add_skill_options(command: argparse.ArgumentParser) -> None:
    """--skills (repeatable) and --data, for the commands that run skills."""
    command.add_argument(
        "--skills",
        type=Path,
        action="append",
        metavar="DIR",
        help="a folder of skill folders (repeatable; default: the bundled skills)",
    )
    command.add_argument(
        "--data",
        type=Path,
        metavar="DIR",
        help="where skills keep their data, one folder per skill "
        "(default: $XDG_DATA_HOME/plancontracts/skills)",
    )


def positive_int(text: str) -> int:
    """A whole number of at least 1, as an option's value."""
    value = _whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value}")
    return value


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """The option value type of whole numbers from `low` to `high`."""

    def parse(text: str) -> int:
        value = _whole_number(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be {low} to {high}: {value}")
        return value

    return parse


def _whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def seconds(text: str) -> float:
    """A number of seconds, more than 0 and less than a day, as an option's value."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < 86400:
        raise argparse.ArgumentTypeError(f"must be more than 0 and less than a day: {value}")
    return value
