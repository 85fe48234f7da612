"""Emits a successful done, then exits 3: the exit status wins."""

import sys

from _fault import emit, start

start()
emit({"type": "done", "ok": True})
print("something went wrong after done", file=sys.stderr)
sys.exit(3)
