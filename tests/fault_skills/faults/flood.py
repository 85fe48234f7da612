"""Emits events without end."""

from _fault import emit, start

start()
while True:
    emit({"type": "log", "level": "debug", "message": "more"})
