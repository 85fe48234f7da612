"""One good event, then a line that is not JSON."""

import sys

from _fault import emit, start

start()
emit({"type": "log", "level": "info", "message": "so far so good"})
sys.stdout.write("<html>not json</html>\n")
sys.stdout.flush()
emit({"type": "done", "ok": True})
