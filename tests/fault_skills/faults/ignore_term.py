"""Ignores SIGTERM and hangs, so only SIGKILL ends it."""

import signal
import time

from _fault import emit, start

signal.signal(signal.SIGTERM, signal.SIG_IGN)
start()
emit({"type": "log", "level": "info", "message": "try to stop me"})
while True:
    time.sleep(1)
