"""Registers an asset through a symbolic link that leaves the skill folder."""

import os

from _fault import emit, start

request = start()
link = os.path.join(request["dataDir"], "escape.png")
if not os.path.lexists(link):
    os.symlink("/etc/hostname", link)
emit(
    {
        "type": "asset",
        "assetId": "a1",
        "kind": "image",
        "mediaType": "image/png",
        "path": "escape.png",
    }
)
emit({"type": "done", "ok": True})
