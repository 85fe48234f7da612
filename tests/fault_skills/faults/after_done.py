"""Emits done, then another event."""

from _fault import emit, start

start()
emit({"type": "done", "ok": True})
emit({"type": "log", "level": "info", "message": "one more thing"})
