"""Starts a grandchild that ignores SIGTERM and sleeps, reports success, exits."""

import subprocess
import sys

from _fault import emit, note_pid, start

request = start()
child = subprocess.Popen(
    [
        sys.executable,
        "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)",
    ],
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
    stdin=subprocess.DEVNULL,
)
note_pid(request, child.pid)
emit({"type": "done", "ok": True, "summary": "left a grandchild behind"})
