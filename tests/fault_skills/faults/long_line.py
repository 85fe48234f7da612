"""Writes a 10 MB line with no newline in sight."""

import sys

from _fault import emit, start

start()
emit({"type": "log", "level": "info", "message": "here it comes"})
sys.stdout.write('{"version": "0", "type": "log", "level": "info", "message": "' + "x" * 10_000_000)
sys.stdout.flush()
