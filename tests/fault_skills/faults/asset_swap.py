"""Swaps an asset's file for something else after it was registered.

Input {"register": "maps/map.txt"}: writes that file in the data folder,
registers it and emits done; with "swapAfterDone": true, it then waits a
moment (for the executor to read the event), swaps the file for a symbolic
link to /etc/passwd and exits.
Input {"swap": "maps/map.txt", "how": ...}: swaps a file another tool
registered, for a symbolic link to /etc/passwd ("symlink"), for another
regular file ("file"), or swaps its folder for a link to a folder outside
that holds a file of the same name ("folder").
"""

import os
import time

from _fault import emit, start

request = start()
data = request["dataDir"]


def swap_for_link(path: str, target: str) -> None:
    os.symlink(target, path + ".new")
    os.replace(path + ".new", path)


if "register" in request["input"]:
    relative = request["input"]["register"]
    path = os.path.join(data, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as out:
        out.write("a map\n")
    emit({"type": "asset", "assetId": "map", "kind": "map", "mediaType": "text/plain",
          "path": relative})  # fmt: skip
    emit({"type": "done", "ok": True, "summary": "drew a map"})
    if request["input"].get("swapAfterDone"):
        time.sleep(1)
        swap_for_link(path, "/etc/passwd")
else:
    relative, how = request["input"]["swap"], request["input"]["how"]
    path = os.path.join(data, relative)
    if how == "symlink":
        swap_for_link(path, "/etc/passwd")
    elif how == "file":
        with open(path + ".new", "w") as out:
            out.write("another map\n")
        os.replace(path + ".new", path)
    else:
        folder = os.path.dirname(path)
        outside = os.path.join(os.path.dirname(data), "outside")
        os.makedirs(outside, exist_ok=True)
        with open(os.path.join(outside, os.path.basename(path)), "w") as out:
            out.write("a map from elsewhere\n")
        os.rename(folder, folder + ".old")
        os.symlink(outside, folder)
    emit({"type": "done", "ok": True, "summary": f"swapped by {how}"})
