"""Emits done twice."""

from _fault import emit, start

start()
emit({"type": "done", "ok": True})
emit({"type": "done", "ok": False})
