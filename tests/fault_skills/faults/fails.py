"""Reports failure through the protocol: an error event, then done with ok false."""

from _fault import emit, start

start()
emit({"type": "error", "errorCode": "wet_torch", "errorMessage": "the torch is soaked"})
emit({"type": "done", "ok": False})
