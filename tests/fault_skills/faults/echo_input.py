"""Reports what it received: input and dependencies, as state.

Dependencies are reported as [id, output] pairs: in a state patch a null would
delete its key instead of showing.
"""

from _fault import emit, start

request = start()
emit(
    {
        "type": "state_patch",
        "patch": {
            "received": {
                request["toolId"]: {
                    "input": request["input"],
                    "dependencies": sorted(request["dependencies"].items()),
                }
            }
        },
    }
)
emit({"type": "ui_event", "event": "narrative_choice", "payload": {"choices": ["left", "right"]}})
emit({"type": "done", "ok": True, "summary": f"echoed {request['toolId']}"})
