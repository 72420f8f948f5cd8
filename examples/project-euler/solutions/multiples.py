from __future__ import annotations

import json
import sys

p = json.load(sys.stdin)
a, b, n = p["a"], p["b"], p["n"]
total = 0
for k in range(1, n):
    if k % a == 0 or k % b == 0:
        total += k
print(total)
