"""Emits an event with protocol version 1."""

import json
import sys

from _fault import start

start()
sys.stdout.write(json.dumps({"version": "1", "type": "done", "ok": True}) + "\n")
