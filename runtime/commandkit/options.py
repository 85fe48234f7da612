"""Options written once, for every command that takes them, and their value types."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..core.rules import Rules
from ..model.choice import ModelChoice

# The choice of a model is light to import; the client (runtime.model.served) is not.
from ..model.resolution import API_KEY_VARIABLE as API_KEY
from ..model.resolution import RESPONSE_FORMATS, ServerSettings, chosen_server
from ..model.resolution import SERVER_VARIABLE as SERVER

DEFAULT_SERVER = ServerSettings()

__all__ = [
    "DEFAULT_MAX_BYTES",
    "MAX_BYTES_LIMIT",
    "RulesOption",
    "add_format",
    "add_json",
    "add_max_bytes",
    "add_model_options",
    "add_skill_options",
    "bounded_int",
    "model_choice",
    "positive_int",
    "seconds",
    "server_address",
    "user_text",
    "uses_server",
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


def add_format(command: argparse.ArgumentParser, formats: tuple[str, ...]) -> None:
    """--format FORMAT (one of `formats`, the first by default), and --json for `--format json`.

    Both set `format`, so a command reads one value; given together they
    are a usage error, even when they agree.
    """
    chosen = command.add_mutually_exclusive_group()
    chosen.add_argument(
        "--format",
        choices=formats,
        default=formats[0],
        help=f"how to print the verdicts (default {formats[0]})",
    )
    chosen.add_argument(
        "--json",
        action="store_const",
        const="json",
        dest="format",
        help="the same as --format json",
    )


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
    """The options choosing and asking the model, for the commands that write with one.

    --model, --seed (helped by `seed`), --no-download and --gpu-layers for a
    local model; --server, --served-model, --response-format, --in-flight
    and --server-timeout for a model server. `model_choice` reads them.
    """
    command.add_argument(
        "--model",
        metavar="PATH|NAME",
        help="a GGUF file, phi-3.5, gemma3-270m or owner/repo/file.gguf",
    )
    command.add_argument("--seed", type=int, metavar="N", help=seed)
    command.add_argument(
        "--no-download", action="store_true", help="never download the default model"
    )
    command.add_argument(
        "--gpu-layers",
        type=bounded_int(-1, 100_000),
        metavar="N",
        help="layers of a local model to run on the GPU, -1 for all "
        "(default: all when llama-cpp-python was built with GPU support, else none)",
    )
    served = command.add_argument_group(
        "model server", f"an OpenAI-compatible server instead of a local model (or ${SERVER})"
    )
    served.add_argument(
        "--server",
        type=server_address,
        metavar="URL",
        help=f"the server's address, such as http://127.0.0.1:8080 (API key: ${API_KEY})",
    )
    served.add_argument(
        "--served-model", metavar="NAME", help="the served model (default: the first it lists)"
    )
    served.add_argument(
        "--response-format",
        choices=RESPONSE_FORMATS,
        default=DEFAULT_SERVER.response_format,
        help="how the decoding profile is sent: json_schema (vLLM, llama-server) or "
        "json_object (llama-cpp-python's server) (default json_schema)",
    )
    served.add_argument(
        "--in-flight",
        type=bounded_int(1, 1024),
        default=DEFAULT_SERVER.in_flight,
        metavar="N",
        help=f"most requests out at once; more wait (default {DEFAULT_SERVER.in_flight})",
    )
    served.add_argument(
        "--server-timeout",
        type=seconds,
        default=DEFAULT_SERVER.timeout,
        metavar="S",
        help=f"seconds one request may take (default {DEFAULT_SERVER.timeout:g})",
    )


def model_choice(args: argparse.Namespace) -> ModelChoice:
    """The model the options of `add_model_options` choose."""
    return ModelChoice(
        model=args.model,
        download=not args.no_download,
        gpu_layers=args.gpu_layers,
        server=ServerSettings(
            url=args.server,
            model=args.served_model,
            in_flight=args.in_flight,
            timeout=args.server_timeout,
            response_format=args.response_format,
        ),
    )


def uses_server(args: argparse.Namespace) -> bool:
    """Whether the options choose a server: --server, or $PLANCONTRACTS_SERVER without --model."""
    return chosen_server(args.model, args.server) is not None


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


def user_text(value: str) -> str:
    """Text a user wrote (a goal, an objective, a premise, an input), as an argument's value.

    Accepts any string Python decoded from the command line; raises
    argparse.ArgumentTypeError where it holds bytes that are not UTF-8. Python
    hands such bytes over as lone surrogates (surrogateescape), which no contract
    or model can hold: refused here, at parsing, before any model loads. File
    names do not use this type: on Linux they may be any bytes.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise argparse.ArgumentTypeError(
            f"is not UTF-8 text (byte {error.start + 1} of the argument as Python read it)"
        ) from None
    return value


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


def server_address(text: str) -> str:
    """An http or https address of a model server, as an option's value."""
    from ..model.served import api_base

    try:
        api_base(text)
    except ImportError:  # no httpx: the command says which extra to install
        return text
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def seconds(text: str) -> float:
    """A number of seconds, more than 0 and less than a day, as an option's value."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < 86400:
        raise argparse.ArgumentTypeError(f"must be more than 0 and less than a day: {value}")
    return value
