"""Asset generation, a pluggable hook: portraits, backgrounds and music for the draft.

The tools never make files themselves. `proposeCharacter` asks the hook for
a portrait, `finalizeNode` for a background and music, and `updateElement`
with `regenerateImage` for the image again; each request carries the asset's
kind, its key (the character id, the location's `location`, its `mood`), its
prompts and the premise's art style. The hook answers where the file is
served, as the package's `AssetFile`.

The default hook, `RecordingAssets`, makes no file: it records each request
and answers the path where a generator would serve it,
`/generated/<package id>/<key>.png` (or `.wav` for music), so that a draft
planned without a generator still has every asset key. A real generator is
any callable of the same shape; it raises `AssetGenerationError` to refuse
a call, which then changes nothing. `asset_files.FileAssets` is the one that
writes files, under a folder that stands for `/generated/`.

`asset_file(url, folder)` is where a served path's file is under that
folder: the one mapping both writing a file (`FileAssets`) and checking that
a package's files are there (`missing_assets`) use.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

import msgspec

from ...generated.story_packages import AssetFile, StoryPackage
from ..core.errors import Violation, shown

__all__ = [
    "GENERATED",
    "AssetHook",
    "AssetRequest",
    "RecordingAssets",
    "asset_file",
    "asset_urls",
    "missing_assets",
]

AssetKind = Literal["portrait", "background", "music"]


@dataclass(frozen=True)
class AssetRequest:
    """One asset to make."""

    package_id: str
    "The draft's package id: the files of one package belong together."
    kind: AssetKind
    "`portrait` (a character's), `background` or `music` (a location's)."
    key: str
    "The asset's key in the package's assets: a character id, a `location` or a `mood`."
    prompts: tuple[tuple[str, float], ...]
    "The prompts with their weights: one of weight 1 for an image, one to four for music."
    art_style: str
    "The premise's art style, which every image shares."
    again: bool = False
    """True when the draft already has a file under this key: a step made again
    (`finalizeNode` once more, `regenerateImage`) asks for it anew."""


AssetHook = Callable[[AssetRequest], AssetFile]
"Makes one asset and answers where it is served; raises `AssetGenerationError` when it cannot."


_FILES: dict[AssetKind, tuple[str, str]] = {
    "portrait": ("png", "image/png"),
    "background": ("png", "image/png"),
    "music": ("wav", "audio/wav"),
}


@dataclass
class RecordingAssets:
    """The default hook: records every request, makes no file, answers the file's planned path."""

    requests: list[AssetRequest] = field(default_factory=list)
    "Every request, oldest first."

    def __call__(self, request: AssetRequest) -> AssetFile:
        self.requests.append(request)
        extension, media_type = _FILES[request.kind]
        return AssetFile(url=served_path(request, extension), mime_type=media_type)


GENERATED = "/generated/"
"The server path the generated files are served under: an assets folder stands for it."


def served_path(request: AssetRequest, extension: str) -> str:
    """Where the file of `request` is served: `/generated/<package id>/<key>.<extension>`."""
    return f"{GENERATED}{request.package_id}/{request.key}.{extension}"


def asset_file(url: str, folder: Path) -> Path | None:
    """The file under `folder` that serves `url`, where `folder` stands for `/generated/`.

    `/generated/<package id>/<key>.png` is `folder/<package id>/<key>.png`
    (percent-escapes decoded, a query or fragment dropped). A URL with a
    scheme or a host (`https://cdn.example/a.png`) is served from elsewhere:
    None. Raises ValueError, in one line, for a path no file of `folder` can
    serve: outside `/generated/`, with an empty, `.` or `..` segment or a NUL,
    or one that leads outside `folder` through a link.
    """
    parts = urlsplit(url)
    if parts.scheme or parts.netloc:
        return None
    path = unquote(parts.path)
    if not path.startswith(GENERATED):
        raise ValueError(f"not under {GENERATED}, which the assets folder serves")
    segments = path[len(GENERATED) :].split("/")
    # Decoded first: `%2e%2e` is `..` to a server as much as `..` is.
    if any(each in ("", ".", "..") for each in segments):
        raise ValueError("an empty, . or .. segment: no file of the assets folder")
    if "\0" in path:
        raise ValueError("holds a NUL: no file has such a name")
    file = folder.joinpath(*segments)
    root = os.path.realpath(folder)
    if os.path.commonpath([root, os.path.realpath(file)]) != root:
        raise ValueError("leads outside the assets folder through a link")
    return file


def asset_urls(package: Any) -> Iterator[tuple[str, str]]:
    """The JSON Pointer and URL of every asset file a parsed package names, in document order.

    Reads the value whatever else is wrong with it, as rules do: what is not
    where the schema puts it, or not a string, is left out.
    """
    assets = package.get("assets") if isinstance(package, dict) else None
    if not isinstance(assets, dict):
        return
    for kind in ("backgrounds", "characters", "music"):
        files = assets.get(kind)
        if not isinstance(files, dict):
            continue
        for key, file in files.items():
            url = file.get("url") if isinstance(file, dict) else None
            if isinstance(url, str):
                yield f"/assets/{kind}/{_escaped(key)}/url", url


def _escaped(key: str) -> str:
    """`key` as one JSON Pointer token (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


def missing_asset_violations(package: Any, folder: Path) -> Iterator[Violation]:
    """A violation, at the URL's JSON Pointer, for every asset URL of a parsed package with no file.

    A URL with no file under `folder`, one naming what is not a regular
    file, or a path no file of `folder` serves (see `asset_file`) is one;
    a URL served from elsewhere (`https://...`) is not looked for.
    """
    for pointer, url in asset_urls(package):
        try:
            file = asset_file(url, folder)
        except ValueError as error:
            yield Violation(pointer, f"{shown(url, 200)}: {error}")
            continue
        if file is None:
            continue
        try:
            regular = file.is_file()
        except OSError:  # a name too long, a folder not searchable: no file to serve
            regular = False
        if not regular:
            what = "is not a file" if os.path.lexists(file) else "has no file"
            yield Violation(pointer, f"{shown(url, 200)} {what} {shown(str(file), 200)}")


def missing_assets(package: StoryPackage, folder: Path) -> list[Violation]:
    """Every asset URL of `package` with no file under `folder`, as `missing_asset_violations` says.

    Each violation's pointer is the URL's in the package, such as
    `/assets/characters/ines/url`; an empty list when every file is there.
    """
    return list(missing_asset_violations(msgspec.to_builtins(package), folder))
