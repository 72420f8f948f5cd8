from __future__ import annotations

import json
import sys

p = json.load(sys.stdin)
k, n = p["k"], p["n"]
total, a, b = 0, 1, 2
while a <= n:
    if a % k == 0:
        total += a
    a, b = b, a + b
print(total)
