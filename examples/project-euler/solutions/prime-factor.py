from __future__ import annotations

import json
import sys

n = json.load(sys.stdin)["n"]
d, largest = 2, 1
while d * d <= n:
    while n % d == 0:
        n //= d
        largest = d
    d += 1
print(n if n > 1 else largest)
