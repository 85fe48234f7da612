"""Writes one state patch per depth asked for, each line nesting exactly that deep.

Input: {"kind": "array" or "object", "depths": [3, 4, ...]}. The patch for depth
d sets key "<kind><d>" (array986, say), so the two kinds never merge; the line's
own object and the patch object are two of its d levels. The text is built by
hand: json.dumps would hit Python's recursion limit.
"""

import sys

from _fault import emit, start

request = start()
kind = request["input"]["kind"]
for depth in request["input"]["depths"]:
    inner = depth - 2
    arrays = "[" * inner + "]" * inner
    value = arrays if kind == "array" else '{"a":' * inner + "1" + "}" * inner
    line = f'{{"version":"0","type":"state_patch","patch":{{"{kind}{depth}":{value}}}}}\n'
    sys.stdout.write(line)
    sys.stdout.flush()
emit({"type": "done", "ok": True, "summary": f"{kind} patches written"})
