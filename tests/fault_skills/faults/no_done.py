"""Exits 0 without a done event."""

from _fault import emit, start

start()
emit({"type": "log", "level": "info", "message": "I forgot something"})
