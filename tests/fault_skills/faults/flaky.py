"""Fails on its first two attempts, then succeeds."""

from _fault import emit, start

request = start()
emit({"type": "done", "ok": request["attempt"] >= 3, "summary": f"attempt {request['attempt']}"})
