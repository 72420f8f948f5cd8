"""``validate --store`` on a store of trace rows: two versions of machine, paired.

Run from the repository root::

    git archive <commit> machine_git | tar -x -C /tmp/before
    python bench/bench_validate.py --before /tmp/before            # 5 rounds
    python bench/bench_validate.py --before /tmp/before --rounds 9

The store holds the trace rows of the benchmark's 100,000-row run (bench/
rowgen.py, seed 100,000: about 20,000 rows; built once into ``--work``, about
3 minutes). Each round runs, for the two versions in alternating order (each
its own process, ``PYTHONPATH`` naming its ``machine_git``): ``check_store``
in process (best of 2), once with MACHINE_JOBS=1 and once with 2 workers, and
the whole ``machine validate --store`` command, with wall and CPU time
(the process and its workers). It prints medians and the paired ratios (the
median of the rounds' before/after ratios), the load average, and whether
the command's output and exit code were the same. Results: bench/RESULTS.md,
section "validate --store: trace rows/s".
"""

from __future__ import annotations

import argparse
import ast
import functools
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

_MACHINE = (sys.executable, "-m", "machine_git")
ROWS = 100_000  # the run whose trace rows the store holds
# One version's check_store in process: (wall, cpu) of each of 2 runs.
_IN_PROCESS = """
import resource, sys, time
from pathlib import Path
from machine_git.core import paths
from machine_git.recovery import validate
from machine_git.store.store import Store
store = Store.open(paths.store_path(Path(sys.argv[1])))
def cpu():
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
out = []
for _ in range(2):
    tally = validate.Tally()
    c, t = cpu(), time.perf_counter()
    found = list(validate.check_store(store, tally))
    out.append((time.perf_counter() - t, cpu() - c, tally.rows, len(found)))
print(repr(out))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="a machine_git")
    parser.add_argument("--after", type=Path, default=ROOT, help="default: this")
    parser.add_argument("--work", type=Path, default=Path("/tmp/machine-bench"))
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    project, count = _store(args.work)
    versions = {"before": args.before.resolve(), "after": args.after.resolve()}
    print(f"{count:,} trace rows; load average {_load()}")
    for jobs in ("1", "2"):
        in_process = functools.partial(_in_process, project=project, jobs=jobs)
        times = _rounds(versions, args.rounds, in_process)
        _show(f"check_store, MACHINE_JOBS={jobs}", times, count)
    outputs: dict[str, set[tuple[int, bytes, bytes]]] = {}
    times = _rounds(
        versions, args.rounds, lambda name, v: _command(name, v, project, outputs)
    )
    _show("machine validate --store (whole command)", times, count)
    same = outputs["before"] == outputs["after"] and len(outputs["after"]) == 1
    print(f"output and exit code the same in every round: {same}")
    print(f"load average at the end {_load()}")
    return 0


def _store(work: Path) -> tuple[Path, int]:
    from bench import rowgen
    from bench import stores
    from bench.corpus import Corpus

    project = work / f"proj-traces-{ROWS}"
    marker = work / f"validate-traces-{ROWS}.txt"
    if marker.exists():
        return project, int(marker.read_text())
    work.mkdir(parents=True, exist_ok=True)
    made = rowgen.make_rows(Corpus(), ROWS, seed=ROWS)
    project, count = stores.build_store_only(
        project.name, work, (m for m in made if m.kind == "traces")
    )
    marker.write_text(str(count))
    return project, count


Sample = tuple[float, float]  # wall, CPU seconds


def _rounds(
    versions: dict[str, Path], rounds: int, run: Callable[[str, Path], Sample]
) -> dict[str, list[Sample]]:
    times: dict[str, list[Sample]] = {name: [] for name in versions}
    for n in range(rounds):
        order = list(versions.items())
        for name, path in order if n % 2 == 0 else reversed(order):
            times[name].append(run(name, path))
    return times


def _env(version: Path, jobs: str | None = None) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(version))
    if jobs is not None:
        env["MACHINE_JOBS"] = jobs
    return env


def _in_process(_: str, version: Path, project: Path, jobs: str) -> Sample:
    done = subprocess.run(
        [sys.executable, "-c", _IN_PROCESS, str(project)],
        env=_env(version, jobs),
        cwd=project.parent,  # not the repository root: its machine_git would win
        capture_output=True,
        text=True,
        check=True,
    )
    runs = ast.literal_eval(done.stdout.strip())
    if any(found for *_, found in runs):
        raise RuntimeError(f"the trace store does not validate with {version}")
    wall, cpu, _, _ = min(runs)
    return wall, cpu


def _command(
    name: str,
    version: Path,
    project: Path,
    outputs: dict[str, set[tuple[int, bytes, bytes]]],
) -> Sample:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [*_MACHINE, "validate", "--store", "--project", str(project)],
        env=_env(version),
        cwd=project.parent,
        capture_output=True,
        check=False,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    outputs.setdefault(name, set()).add((done.returncode, done.stdout, done.stderr))
    return wall, cpu


def _show(what: str, times: dict[str, list[Sample]], count: int) -> None:
    print(what)
    for name, samples in times.items():
        wall = statistics.median(s[0] for s in samples)
        cpu = statistics.median(s[1] for s in samples)
        print(
            f"  {name}: {count / wall:,.0f} rows/s wall, "
            f"{cpu / count * 1e6:.0f} µs CPU a row"
        )
    pairs = list(zip(times["before"], times["after"], strict=True))
    wall_ratio = statistics.median(b[0] / a[0] for b, a in pairs)
    cpu_ratio = statistics.median(b[1] / a[1] for b, a in pairs)
    print(f"  paired speed-up: wall {wall_ratio:.2f}, CPU {cpu_ratio:.2f}")


def _load() -> str:
    return " / ".join(f"{x:.1f}" for x in os.getloadavg())


if __name__ == "__main__":
    sys.exit(main())
