"""Scale tiers: stores as a year of use leaves them, at 1k, 100k and 1M rows.

    python -m bench.scale --sizes 1000,100000          # minutes
    python -m bench.scale --sizes 1000000              # on demand, never in CI: hours

Each store has one commit per row and one reflog line per commit (bench/stores.py),
as real tags leave it. For every command the table gives wall time and the peak of
both kinds of resident memory of the command's whole process tree (git children
included), sampled from /proc: anonymous (heap: what grows with the data held) and
file-backed (mapped pack pages: shared, dropped by the kernel under pressure).

Printed as a Markdown table to paste into bench/RESULTS.md. Times are single runs on
whatever machine this is: on a shared machine the CPU time (the command and the git
it waited for) is the steadier figure; the load average is printed with each row.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

_PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class Measured:
    seconds: float
    cpu: float  # user + system, the command and the children it waited for
    anon: int  # peak bytes, summed over the process tree
    mapped: int


def _tree(pid: int) -> list[int]:
    found = [pid]
    for p in found:
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    found += [int(c) for c in f.read().split()]
        except OSError:
            continue
    return found


def _resident(pid: int) -> tuple[int, int]:
    anon = mapped = 0
    for p in _tree(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("RssAnon:"):
                        anon += int(line.split()[1]) * 1024
                    elif line.startswith(("RssFile:", "RssShmem:")):
                        mapped += int(line.split()[1]) * 1024
        except OSError:
            continue
    return anon, mapped


def measure(command: list[str], cwd: Path | None = None) -> Measured:
    """Run ``command``; its time and the peaks of its tree's anon and mapped RSS."""
    started = time.perf_counter()
    child = subprocess.Popen(
        command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    anon = mapped = 0
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        a, m = _resident(child.pid)
        anon, mapped = max(anon, a), max(mapped, m)
        time.sleep(0.01)
    seconds = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    child.returncode = code
    assert child.stderr is not None
    err = child.stderr.read().decode(errors="replace")
    if code not in (0, 1):  # validate exits 1 for invalid rows
        raise RuntimeError(f"{' '.join(command)}: exit {code}: {err}")
    return Measured(seconds, usage.ru_utime + usage.ru_stime, anon, mapped)


def _mb(n: int) -> str:
    return f"{n / 1024 / 1024:.0f}"


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench import rowgen
    from bench import stores
    from bench.corpus import Corpus
    from machine_git.core import paths

    parser = argparse.ArgumentParser(prog="python -m bench.scale")
    parser.add_argument("--sizes", default="1000,100000")
    parser.add_argument("--work", type=Path, default=Path("/tmp/machine-bench-scale"))
    parser.add_argument("--tags", type=int, default=200, help="tags between two gcs")
    parser.add_argument("--repeat", type=int, default=7, help="rounds per command")
    opts = parser.parse_args(argv)
    # The stores live in the work folder, never in the user's ~/.machine.
    os.environ["MACHINE_DATA_DIR"] = str(opts.work / "data")
    machine = [sys.executable, "-m", "machine_git"]
    corpus = Corpus()
    sizes = [int(x) for x in opts.sizes.split(",")]
    projects: dict[int, Path] = {}
    for n in sizes:
        name = f"scale-{n}"
        project = opts.work / name
        if not paths.store_path(project).exists():
            opts.work.mkdir(parents=True, exist_ok=True)
            started = time.perf_counter()
            made = rowgen.make_rows(corpus, n, seed=n)
            stores.build_store_only(name, opts.work, made)  # repacked, as gc would
            print(f"built {n:,} rows in {time.perf_counter() - started:.0f} s")
        projects[n] = project
    _per_command(projects, machine, corpus, opts)
    print()
    print("| rows | command | seconds | CPU s | peak anon MB | peak mapped MB | load |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for n, project in projects.items():
        name = project.name
        where = ["--project", str(project)]
        steps: list[tuple[str, list[str]]] = [
            ("validate --store", [*machine, "validate", "--store", *where]),
            ("gc (first)", [*machine, "gc", *where]),
            ("data", [*machine, "data", *where]),
            ("log -n 20", [*machine, "log", "-n", "20", *where]),
            (
                "export",
                [*machine, "export", "-o", str(opts.work / f"{name}.jsonl"), *where],
            ),
        ]
        for label, command in steps:
            _row(n, label, measure(command, project))
        _tag(project, corpus, opts.tags, n)
        _row(
            n, f"gc after {opts.tags} tags", measure([*machine, "gc", *where], project)
        )
        _row(n, "gc --full", measure([*machine, "gc", "--full", *where], project))
    return 0


def _per_command(
    projects: dict[int, Path], machine: list[str], corpus: object, opts: object
) -> None:
    """Every daily command at every tier, interleaved round by round.

    The ratio against the smallest tier is the median of per-round ratios, so
    the load of this shared machine cancels out of it (bench/timing.py).
    """
    import json
    import random

    from bench import rowgen
    from bench import timing

    folder = Path(opts.work) / "sessions"  # type: ignore[attr-defined]
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(2027)
    made = [0]

    def session() -> Path:
        made[0] += 1
        spec = rowgen.spec(corpus, rng, 900_000 + made[0], with_tools=True)  # type: ignore[arg-type]
        path = folder / f"s{made[0]:05d}.jsonl"
        path.write_bytes(rowgen.pi_session(spec))
        return path

    cases: dict[str, timing.Case] = {}
    for n, project in projects.items():
        where = ["--project", str(project)]
        listed = subprocess.run(
            [*machine, "tagged", "-n", "1", "--json", *where],
            check=True,
            capture_output=True,
        )
        row_id = json.loads(listed.stdout)[0]["id"]
        commands = {
            "tagged -n 20": ["tagged", "-n", "20"],
            "log -n 20": ["log", "-n", "20"],
            "show ID": ["show", row_id],
            "data": ["data"],
            "versions": ["versions"],
            "1-row diff": ["diff"],
        }
        for label, args in commands.items():
            command = [*machine, *args, *where]
            cases[f"{label}|{n}"] = lambda c=command: timing.run(c)  # type: ignore[misc]

        def good(where: list[str] = where) -> float:
            return timing.run([*machine, "good", "--session", str(session()), *where])

        cases[f"good|{n}"] = good
    times = timing.rounds(cases, opts.repeat)  # type: ignore[attr-defined]
    smallest = min(projects)
    print(f"Per-command medians of {opts.repeat} interleaved rounds; ratio = paired")  # type: ignore[attr-defined]
    print(f"median of per-round ratios against {smallest:,} rows.")
    print()
    print("| command | " + " | ".join(f"{n:,} rows" for n in projects) + " | ratios |")
    print("|---|" + "---:|" * len(projects) + "---|")
    for label in [
        "good",
        "tagged -n 20",
        "log -n 20",
        "show ID",
        "data",
        "versions",
        "1-row diff",
    ]:
        medians = [timing.ms(timing.median(times[f"{label}|{n}"])) for n in projects]
        base = times[f"{label}|{smallest}"]
        ratios = [
            f"{n:,}: {timing.paired(times[f'{label}|{n}'], base):.2f}"
            for n in projects
            if n != smallest
        ]
        print(f"| {label} | " + " | ".join(medians) + " | " + ", ".join(ratios) + " |")


def _tag(project: Path, corpus: object, count: int, n: int) -> None:
    """``count`` real commits on top, through the store's one write path."""
    from bench import rowgen
    from machine_git.core import paths
    from machine_git.store.store import Store

    store = Store.open(paths.store_path(project))
    for row in rowgen.make_rows(corpus, count, seed=n + 7, first=n):  # type: ignore[arg-type]

        def plan(snap: object, row: rowgen.Made = row) -> object:
            return row.change

        store.write(plan)  # type: ignore[arg-type]


def _row(n: int, label: str, m: Measured) -> None:
    load = os.getloadavg()[0]
    print(
        f"| {n:,} | {label} | {m.seconds:.2f} | {m.cpu:.2f} | {_mb(m.anon)} "
        f"| {_mb(m.mapped)} "
        f"| {load:.1f} |",
        flush=True,
    )


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
