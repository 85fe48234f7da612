"""Closes its standard output early, then keeps running past the deadline."""

import os
import time

from _fault import emit, start

start()
emit({"type": "log", "level": "info", "message": "closing"})
os.close(1)
while True:
    time.sleep(1)
