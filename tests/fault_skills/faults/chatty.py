"""Writes many big events that only inform, then ends as its input says.

Input: {"count": N, "bytes": S, "type": "ui_event" or "log", "ok": true or false}.
Each of the N lines is exactly S bytes long (newline not counted).
"""

import sys

from _fault import emit, start

request = start()
settings = request["input"]
if settings["type"] == "ui_event":
    head = '{"version":"0","type":"ui_event","event":"noise","payload":{"text":"'
else:
    head = '{"version":"0","type":"log","level":"debug","message":"noise","fields":{"text":"'
tail = '"}}\n'
line = head + "x" * (settings["bytes"] - len(head) - len(tail) + 1) + tail
for _ in range(settings["count"]):
    sys.stdout.write(line)
sys.stdout.flush()
emit({"type": "done", "ok": settings["ok"], "summary": f"{settings['count']} events written"})
