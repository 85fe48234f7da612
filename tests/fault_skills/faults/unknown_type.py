"""Emits an event of a type the protocol does not have."""

from _fault import emit, start

start()
emit({"type": "log", "level": "info", "message": "fine"})
emit({"type": "teleport", "destination": "moon"})
emit({"type": "done", "ok": True})
