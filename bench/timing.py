"""Timing: whole processes and in-process calls, interleaved round by round.

The machine this runs on may be shared and noisy (perf.md saw ±20% between
calls). Every case of a group runs once per round, in a rotated order, so
drift hits all of them alike; a ratio is the median of the per-round ratios
("paired"), which is the figure to trust, next to the medians.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import IO

Case = Callable[[], float]
"""Runs the thing once and returns how long it took, in seconds."""


class CommandFailed(RuntimeError):
    """A benchmarked command exited non-zero: the figures would be meaningless."""


def run(
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    stdout: IO[bytes] | int = subprocess.DEVNULL,
) -> float:
    """Seconds ``command`` takes, start to exit; raises if it fails."""
    started = time.perf_counter()
    done = subprocess.run(
        list(command),
        env=dict(env) if env is not None else None,
        cwd=cwd,
        stdout=stdout,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        error = done.stderr.decode(errors="replace").strip().splitlines()
        raise CommandFailed(
            f"{' '.join(command)} exited {done.returncode}: "
            f"{error[-1] if error else '(no output)'}"
        )
    return elapsed


def timer(work: Callable[[], object]) -> Case:
    """A case that times ``work()`` in this process."""

    def case() -> float:
        started = time.perf_counter()
        work()
        return time.perf_counter() - started

    return case


def rounds(
    cases: Mapping[str, Case], repeat: int, warmup: int = 1
) -> dict[str, list[float]]:
    """Run every case once per round, ``repeat`` rounds; warm-up rounds dropped.

    Before each case, untimed, the kernel writes out what earlier cases left
    dirty (``sync``): otherwise a baseline that writes an 11 MB git index
    makes the next case's fsync pay for it.
    """
    names = list(cases)
    times: dict[str, list[float]] = {name: [] for name in names}
    for index in range(warmup + repeat):
        shift = index % len(names)
        for name in names[shift:] + names[:shift]:
            os.sync()
            took = cases[name]()
            if index >= warmup:
                times[name].append(took)
    return times


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def paired(a: Sequence[float], b: Sequence[float]) -> float:
    """Median over rounds of a/b: the ratio that drift cancels out of."""
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 10 else f"{seconds:.1f} s"
