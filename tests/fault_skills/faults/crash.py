"""Dies from a signal halfway through its output."""

import os
import signal

from _fault import emit, start

start()
emit({"type": "log", "level": "info", "message": "about to crash"})
os.kill(os.getpid(), signal.SIGSEGV)
