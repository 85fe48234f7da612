"""Asset files made for real: placeholders made in code, or a command the user names.

`FileAssets(folder)` is an asset hook (see `assets`) that writes a file for
every asset a draft asks for, under `folder`, which stands for the server
path `/generated/`: the file of `/generated/<package id>/<key>.svg` is
`folder/<package id>/<key>.svg` (`assets.asset_file`, the one mapping that
writing and checking share). By default it makes a placeholder in code: an
SVG image showing the kind, key, art style and prompt (XML-escaped) for a
portrait or a background, and half a second of silence as a WAV file for
music. Given an `AssetCommand`, it runs the user's program instead, once
per asset, with a timeout, and takes the PNG (images) or WAV (music) the
program wrote.

A file that is already there is kept, not made again: a call refused after
its first asset was made, and tried again, does not pay for that asset
twice. A step asking anew for a key the draft already has (`finalizeNode`
once more, `updateElement` with `regenerateImage`) makes it again, and
`overwrite=True` makes every file again.

The command-line glue lives here too: `add_asset_options` adds `--assets`,
`--asset-command`, `--asset-timeout` and `--overwrite-assets` to a command
that drafts a package, `asset_hook_from` reads them, and `ASSETS_OPTION` is
`validate story-package --assets DIR`.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import hashlib
import io
import json
import os
import selectors
import shlex
import shutil
import signal
import stat
import string
import subprocess
import textwrap
import time
import wave
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from ...generated import STORY_PACKAGE
from ...generated.story_packages import AssetFile
from ..commandkit import RulesOption, bounded_int, label, reason
from ..core.errors import AssetGenerationError, UsageError, Violation, printable, shown
from ..core.files import kind_of, replace_file
from ..core.rules import Rules
from .assets import AssetKind, AssetRequest, asset_file, missing_asset_violations, served_path
from .rules import STORY_PACKAGE_RULES

__all__ = [
    "ASSETS_OPTION",
    "AssetCommand",
    "FileAssets",
    "add_asset_options",
    "asset_hook_from",
    "placeholder_image",
    "silent_music",
]


# Placeholders -------------------------------------------------------------------------------

_IMAGE_SIZES: dict[AssetKind, tuple[int, int]] = {"portrait": (600, 800), "background": (1280, 720)}
"Width and height of a placeholder: a portrait stands, a background lies, as a scene's do."

_FONT = 24
"The prompt's font size in pixels; a line holds about width / (0.6 x size) characters."

_MARGIN = 40

_SILENCE_MS = 500
_SAMPLE_RATE = 8000
"Half a second of 16-bit mono silence at 8 kHz: 8 KB, a valid WAV every player opens."


def placeholder_image(request: AssetRequest) -> bytes:
    """An SVG image standing in for the portrait or background `request` asks for.

    It shows the kind and key, the art style and the prompts' text, wrapped
    to the picture and cut where the picture ends (so any prompt makes an
    image of bounded size), escaped for XML; characters XML cannot hold
    (NUL, other controls, lone surrogates) become U+FFFD. Its background's
    hue comes from the key, so two placeholders side by side differ.
    """
    width, height = _IMAGE_SIZES.get(request.kind, _IMAGE_SIZES["background"])
    columns = max(1, (width - 2 * _MARGIN) * 10 // (_FONT * 6))
    rows = max(1, (height - 3 * _MARGIN - 2 * _FONT) // (_FONT * 5 // 4))
    text = " ".join(prompt for prompt, _ in request.prompts)
    # Only what fits is read: wrapping a prompt of any length costs about one picture of text.
    shown_at_most = columns * rows
    lines = textwrap.wrap(text[: shown_at_most + 1], columns) or [""]
    if len(lines) > rows or len(text) > shown_at_most:
        lines = lines[:rows]
        lines[-1] = lines[-1][: columns - 1] + "\u2026"
    hue = int.from_bytes(hashlib.sha256(request.key.encode()).digest()[:2]) % 360
    spans = "".join(
        f'<tspan x="{_MARGIN}" dy="{_FONT * 5 // 4}">{_xml(line)}</tspan>' for line in lines
    )
    heading = _xml(f"{request.kind} {request.key} \u00b7 {request.art_style}"[: columns * 2])
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">'
        f"<title>{_xml(f'placeholder {request.kind} {request.key}')}</title>"
        f'<rect width="100%" height="100%" fill="hsl({hue}, 35%, 30%)"/>'
        f'<text x="{_MARGIN}" y="{_MARGIN + _FONT}" font-family="sans-serif" '
        f'font-size="{_FONT}" font-weight="bold" fill="#ffffff">{heading}</text>'
        f'<text x="{_MARGIN}" y="{_MARGIN + 2 * _FONT}" font-family="sans-serif" '
        f'font-size="{_FONT}" fill="#f0f0f0">{spans}</text>'
        "</svg>\n"
    ).encode()


def _xml(text: str) -> str:
    """`text` as XML character data: escaped, and what XML 1.0 cannot hold made U+FFFD."""
    return escape("".join(ch if _xml_char(ch) else "\ufffd" for ch in text))


def _xml_char(ch: str) -> bool:
    code = ord(ch)
    if code < 0x20:
        return ch in "\t\n\r"
    return not (0xD800 <= code <= 0xDFFF or code in (0xFFFE, 0xFFFF))


def silent_music() -> bytes:
    """Half a second of silence as a WAV file: 16-bit mono PCM at 8 kHz."""
    frames = _SAMPLE_RATE * _SILENCE_MS // 1000
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as audio:
        audio.setnchannels(1)
        audio.setsampwidth(2)
        audio.setframerate(_SAMPLE_RATE)
        audio.writeframes(bytes(2 * frames))
    return buffer.getvalue()


# A command that makes the file ----------------------------------------------------------------

PLACEHOLDERS = {
    "kind": "portrait, background or music",
    "key": "the asset's key: a character id, a location's `location`, its `mood`",
    "prompt": "the prompt; for music, the prompts joined by '; '",
    "prompts": 'the weighted prompts as JSON: [{"text": ..., "weight": ...}]',
    "style": "the premise's art style",
    "package": "the package id",
    "out": "the file to write: a PNG for an image, a WAV for music",
}
"What `--asset-command` may name in braces, substituted in each argument alone."

DEFAULT_TIMEOUT = 300
"Seconds one asset's command may take: an image model on a CPU takes a minute or two."
MAX_TIMEOUT = 3600

_TAIL = 4096
"The last bytes of the command's output, kept to say why it failed: the rest is read and dropped."

_POLL = 0.2
"Seconds between two looks at whether the program has ended, while its output is quiet."

_SIGNATURES: dict[AssetKind, tuple[str, str, str]] = {
    "portrait": ("png", "image/png", "PNG image"),
    "background": ("png", "image/png", "PNG image"),
    "music": ("wav", "audio/wav", "WAV file"),
}
"What a command writes for each kind: extension, media type, and its name in a message."


def _is_format(kind: AssetKind, head: bytes) -> bool:
    if kind == "music":
        return head[:4] == b"RIFF" and head[8:12] == b"WAVE"
    return head[:8] == b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class AssetCommand:
    """A program run once per asset, its arguments a template of `PLACEHOLDERS` in braces."""

    arguments: tuple[str, ...]
    "The program and its arguments, as `shlex.split` reads the user's command."
    timeout: float = DEFAULT_TIMEOUT
    "Seconds one asset may take before the program (and what it started) is killed."

    @classmethod
    def parse(cls, text: str, timeout: float = DEFAULT_TIMEOUT) -> AssetCommand:
        """The command of `text`, split as a POSIX shell would, never run through one.

        Raises ValueError, in one line, for text `shlex` cannot split, no
        program, a program named by a placeholder, a brace not closed or
        doubled (`{{` is a brace), a placeholder not in `PLACEHOLDERS`, or no
        `{out}` anywhere.
        """
        try:
            arguments = tuple(shlex.split(text))
        except ValueError as error:
            raise ValueError(f"cannot be split as a shell would: {error}") from None
        if not arguments:
            raise ValueError("names no program")
        if any(True for _ in _fields(arguments[0])):
            # A prompt is story text (a model's, in build and drive): it must not choose what runs.
            raise ValueError(
                f"the program {shown(arguments[0])} is a placeholder, or holds one: "
                "name the program itself, and give placeholders as its arguments"
            )
        named: set[str] = set()
        for argument in arguments:
            named.update(_fields(argument))
        if "out" not in named:
            raise ValueError("never names {out}, the file the program is to write")
        return cls(arguments, timeout)

    def argv(self, values: Mapping[str, str]) -> list[str]:
        """The arguments with each placeholder replaced by its value, in one pass.

        A value is never read for placeholders again: a prompt holding `{out}` stays as written.
        """
        return [
            "".join(
                literal + ("" if name is None else values[name])
                for literal, name in _pieces(argument)
            )
            for argument in self.arguments
        ]

    def make(self, request: AssetRequest, out: Path) -> None:
        """Run the program for `request` to write the file `out`; raises `AssetGenerationError`.

        The program gets no standard input, and its output (both streams) is
        read and only its last `_TAIL` bytes kept, for the error. It runs in a
        session of its own, so that when it ends, passes the timeout or is
        interrupted, what it started and left running is killed with it
        (nothing it started writes `out` later). It fails when it cannot start,
        exits other than 0, is killed by a signal, passes the timeout,
        or leaves no file at `out` in the format of the asset's kind.
        """
        extension, _, what = _SIGNATURES[request.kind]
        values = {
            "kind": request.kind,
            "key": request.key,
            "prompt": "; ".join(prompt for prompt, _ in request.prompts),
            "prompts": json.dumps(
                [{"text": t, "weight": w} for t, w in request.prompts], ensure_ascii=False
            ),
            "style": request.art_style,
            "package": request.package_id,
            "out": str(out.absolute()),
        }
        status, tail = _run(self.argv(values), self.timeout)
        program = shown(self.arguments[0])
        if status is None:
            raise AssetGenerationError(
                f"the asset command {program} took more than {self.timeout:g} seconds: killed"
            )
        if status != 0:
            said = _last_line(tail)
            how = f"was killed by signal {-status}" if status < 0 else f"exited {status}"
            raise AssetGenerationError(
                f"the asset command {program} {how}" + (f": {said}" if said else "")
            )
        head = _head(out, f"the asset command {program} exited 0 but wrote")
        if not _is_format(request.kind, head):
            raise AssetGenerationError(
                f"the asset command {program} wrote no {what} at {shown(str(out))} "
                f"(it begins {shown(head.decode('latin-1'), 20)}); a .{extension} is expected"
            )


def _head(out: Path, wrote: str) -> bytes:
    """The first bytes of the regular file `out`; an `AssetGenerationError` says what is there.

    Opened never through a link and without waiting (a FIFO would block a
    read forever): a link, a folder or a FIFO the program left is no asset.
    """
    where = shown(str(out))
    try:
        descriptor = os.open(out, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise AssetGenerationError(f"{wrote} no file at {where}") from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise AssetGenerationError(f"{wrote} a link at {where}, not a file") from None
        raise AssetGenerationError(f"cannot read {where}: {reason(error)}") from None
    # Its kind is asked before it is read as a file: Python refuses to open a folder's descriptor.
    try:
        mode = os.fstat(descriptor).st_mode
    except BaseException:
        os.close(descriptor)
        raise
    if not stat.S_ISREG(mode):
        os.close(descriptor)
        raise AssetGenerationError(f"{wrote} {kind_of(mode)} at {where}, not a file")
    with os.fdopen(descriptor, "rb") as made:
        return made.read(12)


def _pieces(argument: str) -> Iterator[tuple[str, str | None]]:
    """The literal text and placeholder name of each piece of `argument`; raises ValueError."""
    try:
        parsed = list(string.Formatter().parse(argument))
    except ValueError as error:  # "Single '}' encountered", "expected '}' before end of string"
        raise ValueError(f"{shown(argument)}: {error} (a brace is written {{{{ or }}}})") from None
    for literal, name, spec, conversion in parsed:
        if name is not None and (name not in PLACEHOLDERS or spec or conversion):
            known = ", ".join(f"{{{each}}}" for each in PLACEHOLDERS)
            raise ValueError(f"{shown(argument)}: no placeholder {{{name}}} (known: {known})")
        yield literal, name


def _fields(argument: str) -> Iterator[str]:
    return (name for _, name in _pieces(argument) if name is not None)


def _run(argv: list[str], timeout: float) -> tuple[int | None, bytes]:
    """Run `argv` to its end or `timeout`: its exit status (None: timed out) and output's tail.

    Raises `AssetGenerationError` when the program cannot start. However it
    ends (on its own, on a timeout, or on any exception, Ctrl-C included) the
    program's whole session is killed, and the program reaped, before this
    returns or raises.
    """
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as error:
        raise AssetGenerationError(
            f"cannot run the asset command {shown(argv[0])}: {reason(error)}"
        ) from None
    except ValueError:  # a NUL, or a lone surrogate the file system's encoding cannot write
        raise AssetGenerationError(
            f"the asset command {shown(argv[0])} cannot be given its arguments: "
            "one holds a NUL or a character that is not text"
        ) from None
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    tail = bytearray()
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while (left := deadline - time.monotonic()) > 0:
                # In short waits: a program that has ended while something it started
                # (in the background) keeps the output open is not waited on to the timeout.
                if not selector.select(min(left, _POLL)):
                    if _ended(process):
                        break
                    continue
                chunk = os.read(process.stdout.fileno(), 65536)
                if not chunk:  # every writer closed the output: the program is ending
                    break
                tail += chunk
                del tail[:-_TAIL]
        while not _ended(process):
            if time.monotonic() >= deadline:
                _kill(process)
                return None, bytes(tail)
            time.sleep(min(_POLL / 4, max(0.0, deadline - time.monotonic())))
        _kill(process)  # what it left running in the background: still its group, never reused
        status = process.returncode
        assert status is not None
        return status, bytes(tail)
    except BaseException:
        _kill(process)
        raise
    finally:
        process.stdout.close()


def _ended(process: subprocess.Popen[bytes]) -> bool:
    """Whether `process` has ended, left unreaped: its id, its group's, stays its own till then."""
    return os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _kill(process: subprocess.Popen[bytes]) -> None:
    """Kill the session `process` leads, and reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _last_line(output: bytes) -> str:
    """The last line of `output` with text on it, printable and at most 200 characters."""
    lines = output.decode(errors="replace").strip().splitlines()
    last = printable(lines[-1].strip()) if lines else ""
    return last if len(last) <= 200 else last[:199] + "\u2026"


# The hook -------------------------------------------------------------------------------------


@dataclass
class FileAssets:
    """The hook that writes every asset's file under `folder`, which stands for `/generated/`.

    Without `command`, images are SVG placeholders (`image/svg+xml`) and
    music a silent WAV; with one, its PNG (`image/png`) or WAV (`audio/wav`).
    A file already there is kept unless the step asks anew for a key the
    draft has, or `overwrite` is True. A file that cannot be made raises
    `AssetGenerationError`, which refuses the call: the draft is unchanged.
    """

    folder: Path
    command: AssetCommand | None = None
    overwrite: bool = False
    written: list[Path] = field(default_factory=list)
    "The files made, oldest first."
    kept: list[Path] = field(default_factory=list)
    "The files found already there and kept, oldest first."

    def __call__(self, request: AssetRequest) -> AssetFile:
        if self.command is not None:
            extension, media_type, _ = _SIGNATURES[request.kind]
        elif request.kind == "music":
            extension, media_type = "wav", "audio/wav"
        else:
            extension, media_type = "svg", "image/svg+xml"
        url = served_path(request, extension)
        try:
            file = asset_file(url, self.folder)
        except ValueError as error:
            raise AssetGenerationError(f"{shown(url, 200)}: {error}") from None
        assert file is not None, "a served path is always local"
        made = AssetFile(url=url, mime_type=media_type)
        if file.is_file() and not (self.overwrite or request.again):
            self.kept.append(file)
            return made
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
            if self.command is not None:
                self._commanded(request, file)
            elif request.kind == "music":
                replace_file(file, silent_music())
            else:
                replace_file(file, placeholder_image(request))
        except OSError as error:
            raise AssetGenerationError(
                f"cannot write {shown(str(file))}: {reason(error)}"
            ) from None
        self.written.append(file)
        return made

    def _commanded(self, request: AssetRequest, file: Path) -> None:
        """Let the command write a hidden file beside `file`, renamed over it once it is right.

        The hidden name keeps the extension, for programs that choose the
        format by it; a failed command leaves no file and the old one whole.
        """
        assert self.command is not None
        part = file.with_name(f".{file.stem}.{os.urandom(8).hex()}{file.suffix}")
        try:
            self.command.make(request, part)
            os.replace(part, file)
        finally:
            _remove(part)


def _remove(path: Path) -> None:
    """Remove what a failed command left at `path`: a file, link, FIFO or folder, if any.

    Errors are not raised: the command's own failure is what the call reports.
    """
    with contextlib.suppress(OSError):
        if stat.S_ISDIR(os.lstat(path).st_mode):
            shutil.rmtree(path)
        else:
            path.unlink()


# The command line -----------------------------------------------------------------------------


def add_asset_options(command: argparse.ArgumentParser) -> None:
    """--assets DIR, --asset-command CMD, --asset-timeout SECONDS and --overwrite-assets."""
    group = command.add_argument_group("asset files")
    group.add_argument(
        "--assets",
        type=Path,
        metavar="DIR",
        help="an existing folder, served as /generated/, where a file is written for every "
        "asset the draft asks for (DIR/<package id>/<key>.svg or .wav; by default a "
        "placeholder: an SVG showing the prompt, half a second of silent WAV)",
    )
    names = ", ".join(f"{{{each}}}" for each in PLACEHOLDERS)
    group.add_argument(
        "--asset-command",
        metavar="CMD",
        help=f"make each asset with this program instead, split as a shell would, never "
        f"run by one; {names} are replaced in each argument; it writes a PNG (images) "
        "or a WAV (music) at {out}",
    )
    group.add_argument(
        "--asset-timeout",
        type=bounded_int(1, MAX_TIMEOUT),
        metavar="SECONDS",
        help=f"the most one asset's command may take, 1 to {MAX_TIMEOUT} "
        f"(default {DEFAULT_TIMEOUT}); then it is killed and the call refused",
    )
    group.add_argument(
        "--overwrite-assets",
        action="store_true",
        help="make every asset's file again; by default a file already there is kept",
    )


def asset_hook_from(args: argparse.Namespace) -> FileAssets | None:
    """The hook `add_asset_options`' options ask for; None without --assets (no file is made).

    Raises `UsageError` for a folder that is not there, a command that
    cannot be read or whose program is not found, and for the other options
    given without --assets.
    """
    if args.assets is None:
        for given, flag in (
            (args.asset_command is not None, "--asset-command"),
            (args.asset_timeout is not None, "--asset-timeout"),
            (args.overwrite_assets, "--overwrite-assets"),
        ):
            if given:
                raise UsageError(f"{flag} needs --assets DIR, the folder the files go to")
        return None
    if not args.assets.is_dir():
        raise UsageError(f"--assets {label(str(args.assets))}: not an existing folder")
    if args.asset_command is None:
        if args.asset_timeout is not None:
            raise UsageError("--asset-timeout bounds --asset-command: give the command too")
        return FileAssets(args.assets, overwrite=args.overwrite_assets)
    timeout = DEFAULT_TIMEOUT if args.asset_timeout is None else args.asset_timeout
    try:
        command = AssetCommand.parse(args.asset_command, timeout)
    except ValueError as error:
        raise UsageError(f"--asset-command: {error}") from None
    program = command.arguments[0]
    if not any(True for _ in _fields(program)) and shutil.which(program) is None:
        raise UsageError(f"--asset-command: no program {shown(program)} (not on PATH)")
    return FileAssets(args.assets, command, args.overwrite_assets)


def _add_assets_check(validate: argparse.ArgumentParser) -> None:
    validate.add_argument(
        "--assets",
        type=Path,
        metavar="DIR",
        help=f"{STORY_PACKAGE.name} only: also report every asset URL with no file in DIR, "
        "the folder served as /generated/",
    )


def _assets_rules(args: argparse.Namespace, contract: str) -> Rules | None:
    folder: Path | None = args.assets
    if folder is None:
        return None
    if contract != STORY_PACKAGE.name:
        raise UsageError(f"--assets applies to {STORY_PACKAGE.name} only, not {contract}")
    if not folder.is_dir():
        raise UsageError(f"--assets {label(str(folder))}: not an existing folder")

    def find(value: Any) -> Iterator[Violation]:
        return chain(STORY_PACKAGE_RULES.find(value), missing_asset_violations(value, folder))

    return Rules(STORY_PACKAGE.name, f"{STORY_PACKAGE_RULES.name} and the files in {folder}", find)


ASSETS_OPTION = RulesOption(_add_assets_check, _assets_rules)
"`validate story-package --assets DIR`: the package's rules, and a file for every asset URL."
