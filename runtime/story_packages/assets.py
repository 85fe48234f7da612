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
a call, which then changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from ...generated.story_packages import AssetFile

__all__ = ["AssetHook", "AssetRequest", "RecordingAssets"]

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
        url = f"/generated/{request.package_id}/{request.key}.{extension}"
        return AssetFile(url=url, mime_type=media_type)
