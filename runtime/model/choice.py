"""Which writer a command or a program gets: the one module that chooses and loads one.

    choice = ModelChoice("gemma3-270m", download=False)     # or ModelChoice() for the defaults
    writer = load_writer(choice, needs="planning blocks need one")   # a Writer, or NoModel

A `ModelChoice` is what the user asked for: a model (`--model`), whether the
default may be downloaded, how many layers go to a GPU, and a model server
(`--server` and how it is asked). The resolution order: an explicit server,
an explicit model, the `PLANCONTRACTS_SERVER` environment variable, then
the local candidates of `resolution.py` (`PLANCONTRACTS_MODEL`, the cache, a
download, the packaged model). The server client (`served.py`) and the
local model (`local.py`) are imported only when chosen: neither imports
the other, and both are `Writer`s (`writer.py`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..core.errors import NoModel, NotAModel, UsageError
from .resolution import ServerSettings, candidates, check_gguf, chosen_server, named
from .writer import Writer, say_on_stderr

__all__ = ["ModelChoice", "load_first_writer", "load_writer"]


@dataclass(frozen=True)
class ModelChoice:
    """The model a user asked for; every field has the default a command has without options."""

    model: str | None = None
    "A GGUF file, `phi-3.5`, `gemma3-270m` or `owner/repo/file.gguf`; None: the resolution order."
    download: bool = True
    "Whether the default model may be downloaded when it is not in the cache."
    gpu_layers: int | None = None
    "Layers of a local model on the GPU, -1 for all; None: all where the build can offload."
    server: ServerSettings = field(default_factory=ServerSettings)
    "Where a model server is (None: `PLANCONTRACTS_SERVER`, if set) and how it is asked."


def load_first_writer(
    choice: ModelChoice = ModelChoice(),
    *,
    environ: Mapping[str, str] | None = None,
    say: Callable[[str], None] = say_on_stderr,
) -> Writer | None:
    """The first writer of the resolution order that works, or None; each step said in one line.

    A local candidate that is not a GGUF model, or that llama.cpp cannot
    load, is reported and the next one tried; a server that was asked for
    and does not answer raises NoModel (falling back to a local model would
    hide it); a model named by `choice.model` that is not found or cannot be
    loaded raises UsageError (exit status 2), for the same reason.
    """
    environ = os.environ if environ is None else environ
    chosen = chosen_server(choice.model, choice.server.url, environ)
    if chosen is not None:
        from .served import ServedModel

        url, source = chosen
        return ServedModel.connect(choice.server, url=url, source=source, environ=environ, say=say)
    from .local import LocalModel, where_it_runs

    if choice.model:
        # A model the user named is the one they want: another in its place would hide the
        # typo or the wrong file, so nothing else is tried (as for a server named).
        reasons: list[str] = []
        found = named(choice.model, "--model", choice.download, reasons.append)
        if found is None:
            why = reasons[-1].removeprefix("model: ") if reasons else "not found"
            raise UsageError(why)
        try:
            check_gguf(found.path)
            writer = LocalModel.load(found.path, gpu_layers=choice.gpu_layers)
        except (NotAModel, ValueError) as error:
            raise UsageError(f"{found.path} (--model) cannot be used: {error}") from None
        for line in reasons:  # held until now: a name that fails is one line, the error's
            say(line)
        say(f"model: loaded {found.path.name} {where_it_runs(choice.gpu_layers)}")
        return writer
    for candidate in candidates(choice.model, download=choice.download, environ=environ, say=say):
        try:
            check_gguf(candidate.path)
            writer = LocalModel.load(candidate.path, gpu_layers=choice.gpu_layers)
        except (NotAModel, ValueError) as error:
            say(f"model: {candidate.path} cannot be used: {error}")
            continue
        say(f"model: loaded {candidate.path.name} {where_it_runs(choice.gpu_layers)}")
        return writer
    return None


def load_writer(
    choice: ModelChoice = ModelChoice(),
    *,
    needs: str = "the work needs one",
    say: Callable[[str], None] = say_on_stderr,
) -> Writer:
    """`load_first_writer`, for work that cannot go on without a model.

    Raises NoModel when none loads, its message saying that `needs` (such
    as `planning blocks need one`) and how to get a model.
    """
    writer = load_first_writer(choice, say=say)
    if writer is None:
        raise NoModel(
            f"no model could be loaded, and {needs}; install the small model "
            "(pip install 'plancontracts[small-model]'), give --model, or give --server"
        )
    return writer
