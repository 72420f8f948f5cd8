"""``machine good`` with a warm scanner against ``import pygit2`` (issue 34).

``python -m bench.bench_warm [ROUNDS]``: paired, interleaved rounds of whole
processes, each tagging a new turn (a copy of the Pi fixture with its own
session id and a planted token, so every tag scans and redacts) into one
store:

- ``warm``: ``machine good --session FILE`` with the warm scanner running;
- ``cold``: the same with ``MACHINE_SECRETS_DAEMON=0`` (each process loads
  the engine's rules, as before the daemon);
- ``no-redact``: ``machine good --no-redact`` (no scan at all);
- ``pygit2``: ``python -c 'import pygit2'``, the floor.
"""

from __future__ import annotations

import itertools
import os
import sys
import tempfile
import time
from pathlib import Path

import orjson

from bench import timing
from machine_git.secrets import engine
from machine_git.secrets import warm

FIXTURE = Path(__file__).parent.parent / "tests/fixtures/pi/sessions/basic.jsonl"
TOKEN = "ghp_R8kqZ2vW0xYt5LmN3pQa7sDf1GhJ9cBe"


def _session(folder: Path, n: int) -> Path:
    raw = FIXTURE.read_bytes().splitlines()
    lines = [orjson.loads(x) for x in raw if x.strip()]
    lines[0]["id"] = f"{lines[0]['id'][:-8]}{n:08d}"
    for line in reversed(lines):
        message = line.get("message") or {}
        if message.get("role") == "user":
            message["content"][0]["text"] += f" token {TOKEN}{n:04d}"
            break
    path = folder / f"s{n}.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(x) for x in lines) + b"\n")
    return path


def main(repeat: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="machine-bench-warm-"))
    project = work / "proj"
    (project / ".git").mkdir(parents=True)
    base = {**os.environ, "MACHINE_DATA_DIR": str(work / "data")}
    cold = {**base, warm.SWITCH_ENV: "0"}
    numbers = itertools.count()
    good = [sys.executable, "-m", "machine_git", "good", "--session"]

    def tag(env: dict[str, str], *extra: str) -> timing.Case:
        def case() -> float:
            session = _session(work, next(numbers))
            return timing.run([*good, str(session), *extra], env=env, cwd=project)

        return case

    timing.run([*good, str(_session(work, next(numbers)))], env=base, cwd=project)
    path = warm.socket_path(engine.cache_dir(), engine.gates_digest())
    assert path is not None
    while warm.ask(path, warm.STATUS, 2.0) is None:  # the first tag started it
        time.sleep(0.05)
    cases = {
        "warm": tag(base),
        "cold": tag(cold),
        "no-redact": tag(base, "--no-redact"),
        "pygit2": lambda: timing.run([sys.executable, "-c", "import pygit2"]),
    }
    load = os.getloadavg()
    times = timing.rounds(cases, repeat)
    after = os.getloadavg()
    for name, values in times.items():
        ratio = timing.paired(values, times["pygit2"])
        median = timing.ms(timing.median(values))
        print(f"{name:10} median {median:>9}  {ratio:.2f}x pygit2")
    ratio = timing.paired(times["warm"], times["no-redact"])
    print(f"warm / no-redact (paired): {ratio:.2f}")
    print(f"load average {load[0]:.2f} before, {after[0]:.2f} after; {repeat} rounds")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
