"""Writes a file in its data folder and registers it as an asset."""

import os

from _fault import emit, start

request = start()
with open(os.path.join(request["dataDir"], "map.txt"), "w") as out:
    out.write("a map\n")
emit(
    {"type": "asset", "assetId": "map", "kind": "map", "mediaType": "text/plain", "path": "map.txt"}
)
emit({"type": "done", "ok": True})
