"""Writes 20 KiB of chatter to standard error, then dies of an exception."""

import sys

from _fault import emit, start

start()
emit({"type": "log", "level": "info", "message": "chatty"})
for number in range(1000):
    sys.stderr.write(f"déjà vu, line {number:04d}\n")
raise ValueError("the reason is on the last line")
