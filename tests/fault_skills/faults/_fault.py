"""Shared by the fault scripts: read the request, note this process for the tests."""

import json
import os
import sys
from typing import Any


def start() -> dict[str, Any]:
    """Read the tool request and record this process's pid in the data folder."""
    request: dict[str, Any] = json.loads(sys.stdin.buffer.read())
    note_pid(request, os.getpid())
    return request


def note_pid(request: dict[str, Any], pid: int) -> None:
    with open(os.path.join(request["dataDir"], "pids"), "a") as pids:
        pids.write(f"{pid}\n")


def emit(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"version": "0", **event}) + "\n")
    sys.stdout.flush()
