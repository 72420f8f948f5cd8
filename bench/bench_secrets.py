"""Benchmark the secret scanner on a 48 KB agent trace row (20 tool calls).

Run from the repository root::

    python bench/bench_secrets.py

It prints the time ``redaction.redact_row`` takes on one trace row as machine
stores it (best of several runs, CPU time of this one process, so one core),
the import cost of ``machine_git.secrets`` on top of what it imports, and a
reference timing of plain Python so numbers from different machines compare.
``python bench/run.py --only secrets`` puts the same figures in
bench/RESULTS.md, beside the target: at most 2 ms per 48 KB trace row.
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
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from machine_git.secrets import redaction  # noqa: E402

TARGET_MS = 2.0  # per 48 KB trace row, one core (issue 15)


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


_COMMANDS = (
    "cat src/app/settings.py",
    "npm ci && npm test -- --runInBand",
    "git log -n 40 --stat",
    "python -m pytest -q tests/",
    "grep -rn 'def handle_' src/ | head -50",
    "cat .env",
)


def make_trace(seed: int = 7, total: int = 48 * 1024, records: int = 20) -> list[str]:
    """Deterministic tool outputs: code, a lockfile, git log, test output, .env."""
    rng = random.Random(seed)
    makers = [_stdlib_code, _lockfile, _git_log, _pytest_out, _stdlib_code, _env_dump]
    size = total // records
    return [makers[i % len(makers)](rng, size) for i in range(records)]


def make_row(seed: int = 7) -> dict[str, Any]:
    """A traces row as machine stores it: 20 bash calls (JSON arguments) and results."""
    outputs = make_trace(seed)
    stamp = "2026-12-01T10:00:00.000Z"
    records: list[dict[str, Any]] = [
        {"role": "user", "content": "Find out why the build fails.", "timestamp": stamp}
    ]
    for i, output in enumerate(outputs):
        call = {
            "id": f"call_{i:04d}",
            "name": "bash",
            "args": json.dumps({"command": _COMMANDS[i % len(_COMMANDS)]}),
        }
        records.append(
            {
                "role": "assistant",
                "content": None,
                "timestamp": stamp,
                "tool_calls": [call],
            }
        )
        records.append(
            {
                "role": "tool",
                "tool_call_id": call["id"],
                "content": output,
                "timestamp": stamp,
            }
        )
    records.append(
        {"role": "assistant", "content": "The lockfile is stale.", "timestamp": stamp}
    )
    return {
        "id": "0123456789ab",
        "kind": "traces",
        "tag": "good",
        "created_at": stamp,
        "note": None,
        "source": {"host": "pi", "session_id": "bench", "entry_ids": ["a", "b"]},
        "trajectory": records,
    }


_IMPORT_PROBE = """
import time, re, math, bisect, collections, machine_git.core.errors
t = time.perf_counter()
import machine_git.secrets
print((time.perf_counter() - t) * 1e6)
"""


def import_cost_us(runs: int = 7) -> float:
    """Best import time of the package itself, its dependencies already loaded.

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


def _best_cpu(work: Callable[[], object], number: int, repeat: int) -> float:
    """Best seconds of CPU (this process, so one core) per call of ``work``."""
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        for _ in range(number):
            work()
        best = min(best, (time.process_time() - started) / number)
    return best


class Measured(NamedTuple):
    """What bench/run.py reports about the scanner."""

    row_bytes: int
    records: int
    per_row_s: float
    import_us: float
    reference_s: float
    found: dict[str, int]


def measure(number: int = 30, repeat: int = 9) -> Measured:
    """The scanner's cost on one 48 KB trace row, and the reference timing."""
    row = make_row()
    nbytes = len(json.dumps(row).encode())
    redaction.redact_row(row)  # compile the patterns this row needs
    per_row = _best_cpu(lambda: redaction.redact_row(row), number, repeat)
    reference = _best_cpu(lambda: sum(range(100_000)), 20, repeat)
    _, found = redaction.redact_row(row)
    return Measured(
        nbytes, len(row["trajectory"]), per_row, import_cost_us(), reference, found
    )


def main() -> None:
    m = measure()
    print(f"row: {m.records} trajectory records, {m.row_bytes / 1024:.1f} KB of JSON")
    print(
        f"redact_row: {m.per_row_s * 1e3:.2f} ms per row, one core "
        f"(target {TARGET_MS:.0f} ms), {m.per_row_s * 1e6 / (m.row_bytes / 1024):.1f}"
        " us per KB"
    )
    print(f"import machine_git.secrets: {m.import_us:.0f} us (deps preloaded)")
    print(f"reference sum(range(100_000)): {m.reference_s * 1e6:.0f} us")
    print(f"found: {m.found}")


if __name__ == "__main__":
    main()
