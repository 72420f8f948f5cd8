"""Benchmark the secret scanner on a 48 KB agent trace (20 tool records).

Run from the repository root::

    python bench/bench_secrets.py

It prints the time ``redact`` takes per trace (best of several runs), the
import cost of ``machine_git.secrets`` on top of what it imports, and a
reference timing of plain Python so numbers from different machines compare.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from machine_git.secrets import JSON  # noqa: E402
from machine_git.secrets import redact  # noqa: E402


def _stdlib_code(rng: random.Random, size: int) -> str:
    """A slice of real Python source from the standard library."""
    sources = [json.__file__, random.__file__, timeit.__file__, subprocess.__file__]
    text = Path(rng.choice(sources)).read_text(encoding="utf-8")
    start = rng.randrange(0, max(1, len(text) - size))
    return text[start : start + size]


def _lockfile(rng: random.Random, size: int) -> str:
    parts: list[str] = []
    i = 0
    while sum(map(len, parts)) < size:
        digest = base64.b64encode(hashlib.sha512(f"pkg{i}".encode()).digest())
        parts.append(
            f'    "node_modules/pkg-{i}": {{\n'
            f'      "version": "1.{i}.{rng.randrange(20)}",\n'
            f'      "resolved": "https://registry.npmjs.org/pkg-{i}/-/pkg-{i}.tgz",\n'
            f'      "integrity": "sha512-{digest.decode()}",\n'
            f'      "gitHead": "{hashlib.sha1(f"pkg{i}".encode()).hexdigest()}"\n'
            "    },\n"
        )
        i += 1
    return "".join(parts)[:size]


def _git_log(rng: random.Random, size: int) -> str:
    parts: list[str] = []
    i = 0
    while sum(map(len, parts)) < size:
        sha = hashlib.sha1(f"c{i}{rng.random()}".encode()).hexdigest()
        parts.append(f"commit {sha}\nAuthor: Dev <dev@example.com>\n\n    Fix #{i}\n\n")
        i += 1
    return "".join(parts)[:size]


def _pytest_out(rng: random.Random, size: int) -> str:
    parts: list[str] = []
    i = 0
    while sum(map(len, parts)) < size:
        parts.append(
            f"tests/test_module_{i}.py::test_handles_case_{rng.randrange(99)} PASSED"
            f"   [{i % 100:3d}%]\n"
        )
        i += 1
    return "".join(parts)[:size]


def _env_dump(rng: random.Random, size: int) -> str:
    head = (
        "$ cat .env\n"
        "OPENAI_API_KEY=sk-proj-" + "Tq9Zx3Lp7Wm2Rv8Nb4Kc6Yd1Hs5Gf0Ja" + "\n"
        "DATABASE_URL=postgres://app:Vq7#pLm2@db.internal:5432/app\n"
        "DEBUG=true\n"
    )
    return (head + _stdlib_code(rng, size))[:size]


def make_trace(seed: int = 7, total: int = 48 * 1024, records: int = 20) -> list[str]:
    """Deterministic tool outputs: code, a lockfile, git log, test output, .env."""
    rng = random.Random(seed)
    makers = [_stdlib_code, _lockfile, _git_log, _pytest_out, _stdlib_code, _env_dump]
    size = total // records
    return [makers[i % len(makers)](rng, size) for i in range(records)]


_IMPORT_PROBE = """
import time, re, math, dataclasses, collections, machine_git.errors
t = time.perf_counter()
import machine_git.secrets
print((time.perf_counter() - t) * 1e6)
"""


def import_cost_us(runs: int = 7) -> float:
    """Best import time of the module itself, its dependencies already loaded.

    Bytecode goes to a temporary cache (as an installed package has its .pyc),
    so compiling the source is not counted and nothing is written to the repo.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    best = float("inf")
    with tempfile.TemporaryDirectory() as cache:
        env["PYTHONPYCACHEPREFIX"] = cache
        for i in range(runs + 1):
            done = subprocess.run(
                [sys.executable, "-c", _IMPORT_PROBE],
                capture_output=True,
                text=True,
                check=True,
                cwd=ROOT,
                env=env,
            )
            if i:  # the first run fills the bytecode cache
                best = min(best, float(done.stdout))
    return best


def main() -> None:
    trace = make_trace()
    records: list[JSON] = [{"role": "tool", "content": text} for text in trace]
    row: JSON = {"id": "bench", "records": records}
    nbytes = sum(len(text.encode()) for text in trace)

    number, repeat = 50, 7
    best = min(timeit.repeat(lambda: redact(row), number=number, repeat=repeat))
    per_trace = best / number
    reference = min(timeit.repeat(lambda: sum(range(100_000)), number=20, repeat=5))
    _, counts = redact(row)

    print(f"trace: {len(trace)} records, {nbytes / 1024:.1f} KB")
    print(f"redact: {per_trace * 1e6:.0f} us per trace (best of {repeat} x {number})")
    print(f"        {per_trace * 1e6 / (nbytes / 1024):.1f} us per KB")
    print(f"import machine_git.secrets: {import_cost_us():.0f} us (deps preloaded)")
    print(f"reference sum(range(100_000)): {reference / 20 * 1e6:.0f} us")
    print(f"found: {counts}")


if __name__ == "__main__":
    main()
