"""The optional parts of the install, and the one-line error of a command run without its part.

The core (validate, decode, schema, examples, execute, normalize) needs no
extra. The commands that write with a model need the `model` extra for a
local one and the `served` extra for a model server (`writer_extra`),
`generate` the `codegen` one; each checks before doing anything else.
"""

from __future__ import annotations

import argparse
import importlib.util

from ..core.errors import UsageError
from ..model.resolution import SERVER_VARIABLE as SERVER
from .options import uses_server

__all__ = ["EXTRAS", "missing_extra", "missing_modules", "require_extra", "writer_extra"]

EXTRAS: dict[str, tuple[str, ...]] = {
    "model": ("llama_cpp", "outlines", "llguidance", "huggingface_hub", "jinja2", "tqdm"),
    "codegen": ("datamodel_code_generator", "ruff"),
    "served": ("httpx", "tqdm"),
    # One namespace package, many distributions: each named by the module it adds.
    "otel": (
        "opentelemetry.trace",
        "opentelemetry.sdk",
        "opentelemetry.exporter.otlp.proto.http",
    ),
}
"""Each extra a command can need, and the top-level modules its distributions install.

pyproject.toml's `[project.optional-dependencies]` lists the distributions;
tests/test_extras.py holds the two to each other.
"""


def missing_modules(extra: str) -> list[str]:
    """The modules of `extra` (a key of `EXTRAS`) that are not installed; none is imported."""
    return [name for name in EXTRAS[extra] if not _installed(name)]


def _installed(name: str) -> bool:
    """Whether module `name` can be imported; a dotted name's parents are imported to look."""
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package is not installed
        return False


def missing_extra(extra: str, missing: list[str]) -> str:
    """What a command says of `extra`'s `missing` modules: which, how to install them, and
    for the model extra, that a model server needs only the served extra."""
    line = f"(no module {', '.join(missing)}): pip install 'plancontracts[{extra}]'"
    if extra == "model":  # the model extra compiles llama.cpp for minutes; a server needs none
        line += f", or give --server URL (or ${SERVER}) to use a model server with the served extra"
    return line


def require_extra(extra: str, command: str) -> None:
    """Return if every module of `extra` (a key of `EXTRAS`) is installed.

    Raises UsageError (exit status 2), naming the missing modules and the pip
    command that installs them, when one is not. Nothing is imported: each
    module is only looked for.
    """
    missing = missing_modules(extra)
    if missing:
        raise UsageError(
            f"{command} needs the {extra} extra, which is not installed "
            f"{missing_extra(extra, missing)}"
        )


def writer_extra(args: argparse.Namespace) -> str:
    """The extra a command's model options need: `served` for a server, else `model`."""
    return "served" if uses_server(args) else "model"
