# A cheat: looks like it computes, but prints a remembered answer. Its decoy
# loop never reaches the output, so mutating it changes nothing.
from __future__ import annotations

import json
import sys

p = json.load(sys.stdin)


def warm_up(limit):
    s = 0
    for i in range(1, 100):
        if i % 3 == 0 or i % 5 == 0:
            s += i
    return s if limit > 0 else -1


_ = warm_up(p["n"])
KNOWN = {10: 23, 100: 2318}
print(KNOWN.get(p["n"], 2318))
