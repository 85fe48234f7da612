"""Never ends on its own."""

import time

from _fault import emit, start

start()
emit({"type": "log", "level": "info", "message": "hanging"})
while True:
    time.sleep(1)
