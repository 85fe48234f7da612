"""Behaves: a log line, a state patch, done."""

from _fault import emit, start

request = start()
emit({"type": "log", "level": "info", "message": "working"})
emit({"type": "state_patch", "patch": {"ok": {request["toolId"]: request["attempt"]}}})
emit({"type": "done", "ok": True, "summary": "fine"})
