"""``machine import`` of many rows against ``git fast-import`` of the same files.

The floor is git writing the same row files (the bytes machine stores, at
their ``rows/ab/cd/<id>.json`` paths) into a fresh repository as one commit
with ``git fast-import``, git's fastest way in. ``machine import`` does more
on the way: it parses, validates and scans every row for secrets, deflating
each into a temporary pack as it comes (bulk.Stream: memory follows one row,
not the file), then builds the trees and puts the one pack in place
(machine_git/store/bulk.py). The scan runs in a worker process and the
deflating in a second thread (machine_git/secrets/workers.py), so with two
free cores the three overlap; on a busy machine the CPU time decides, so it
is reported too (user + system, the worker's included).
Both run as whole processes into a fresh store or repository, interleaved
round by round. ``python bench/run.py --only import`` measures only this.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO
from typing import Protocol

from bench import rowgen
from bench import timing
from bench.corpus import Corpus
from bench.timing import median
from bench.timing import paired
from machine_git.core import paths
from machine_git.export import importer
from machine_git.rows import rows
from machine_git.secrets import redaction
from machine_git.store.store import Store

TITLE = "Import"
ROWS = 20_000
LIMIT = 1.5  # machine import <= 1.5 x git fast-import of the same files (issue 34)
MB = 1_000_000


class _Report(Protocol):
    notes: list[str]

    def table(
        self, title: str, intro: str, head: list[str], body: list[list[str]]
    ) -> None: ...

    def target(self, what: str, measured: str, holds: bool) -> None: ...


def target_text(count: int) -> str:
    return (
        f"`machine import` of {count:,} rows <= {LIMIT:g} x `git fast-import` of "
        "the same row files as one commit"
    )


def measure_into(
    report: _Report, work: Path, machine: list[str], repeat: int, count: int = ROWS
) -> None:
    """Measure imports of ``count`` rows; add the target, table and notes."""
    folder = work / "import"
    source, stream, size = _inputs(folder, count)
    project = folder / "project"
    (project / ".git").mkdir(parents=True, exist_ok=True)
    peaks: dict[str, int] = {}
    cpu: dict[str, list[float]] = {}
    cases: dict[str, Callable[[], float]] = {
        "floor": _fast_import(stream, folder / "floor.git", peaks, cpu),
        "import": _import(machine, source, project, [], peaks, cpu),
        "no-redact": _import(machine, source, project, ["--no-redact"], peaks, cpu),
    }
    times = timing.rounds(cases, repeat, warmup=0)
    floor, full, bare = times["floor"], times["import"], times["no-redact"]
    ratio = paired(full, floor)
    phases = _phases(source, folder / "phases")
    scan_share = phases["scan"] / (phases["load"] + phases["commit"])
    report.target(
        target_text(count),
        f"{ratio:.2f} ({median(full):.1f} s vs {median(floor):.1f} s for "
        f"{size / MB:.0f} MB; the secret scan is {scan_share:.0%} of machine's "
        "own work)",
        ratio <= LIMIT,
    )
    report.table(
        TITLE,
        f"`machine import FILE` of {count:,} rows (bench/rowgen.py's mix) into a "
        "new store, whole process, against `git fast-import` of the same row "
        "files (the bytes machine stores, at their paths) into a new bare "
        f"repository as one commit. Medians of {repeat} rounds, interleaved; "
        "ratios are paired. machine checks every row against the schemas and "
        "scans it for secrets, streaming it into a temporary pack, and commits "
        "nothing unless every line is valid (README, 'Bulk writes'); "
        "`--no-redact` skips the scan. Peak memory is the largest maximum "
        "resident set of the process and its scan worker (a fork: most of its "
        "pages are the parent's; about 100 MB of it is machine's start-up, "
        "whatever the file).",
        [
            "rows",
            "JSONL",
            "git fast-import",
            "machine import",
            "ratio",
            "machine import --no-redact",
            "ratio",
            "peak memory, import / fast-import",
        ],
        [
            [
                f"{count:,}",
                f"{size / MB:.0f} MB",
                f"{median(floor):.1f} s",
                f"{median(full):.1f} s",
                f"{ratio:.2f}",
                f"{median(bare):.1f} s",
                f"{paired(bare, floor):.2f}",
                f"{peaks['import'] / 1024:.0f} MB / {peaks['floor'] / 1024:.0f} MB",
            ]
        ],
    )
    report.notes.append(
        f"Import of {count:,} rows in one process, by step (CPU seconds, one "
        f"round): reading, parsing and checking every line {phases['load']:.2f} s, "
        f"of which the secret scan {phases['scan']:.2f} s; the commit (blobs, "
        f"trees, the pack: deflate is most of it) {phases['commit']:.2f} s. The "
        f"scan is {scan_share:.0%} of the work: `machine import` runs it in a "
        "worker process beside the one that checks and writes (past the first "
        "256 rows; MACHINE_JOBS=1 keeps it in one), and deflates in a second "
        "thread (bench/RESULTS.md, 'Secret scanner', for its speed per KB)."
    )
    cpu_ratio = paired(cpu["import"], cpu["floor"])
    report.notes.append(
        f"Import CPU time (user + system, the scan's worker included), medians "
        f"of {repeat} rounds: `machine import` {median(cpu['import']):.1f} s, "
        f"`--no-redact` {median(cpu['no-redact']):.1f} s, `git fast-import` "
        f"{median(cpu['floor']):.1f} s; paired ratio {cpu_ratio:.2f} (no-redact "
        f"{paired(cpu['no-redact'], cpu['floor']):.2f}). The wall-clock ratio "
        "falls below the CPU ratio only when a second core is free: on a machine "
        "whose cores are busy with other work, the CPU ratio is what it shows."
    )


def _inputs(folder: Path, count: int) -> tuple[Path, Path, int]:
    """The rows as a JSONL file, and as a fast-import stream of their files."""
    source, stream = folder / "rows.jsonl", folder / "rows.fast-import"
    marker = folder / f"made-{count}"
    if not marker.exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        print(f"bench: making {count:,} rows to import", flush=True)
        with source.open("wb") as lines, stream.open("wb") as files:
            files.write(
                b"commit refs/heads/main\n"
                b"committer machine <machine@localhost> 1767600000 +0000\n"
                b"data 7\nimport\n"
            )
            for made in rowgen.make_rows(Corpus(), count, seed=2027):
                lines.write(made.line)
                path = rows.row_path(made.id)
                files.write(f"M 100644 inline {path}\ndata {len(made.data)}\n".encode())
                files.write(made.data + b"\n")
        marker.touch()
    return source, stream, source.stat().st_size


def _fast_import(
    stream: Path, target: Path, peaks: dict[str, int], cpu: dict[str, list[float]]
) -> Callable[[], float]:
    def case() -> float:
        shutil.rmtree(target, ignore_errors=True)
        subprocess.run(["git", "init", "-q", "--bare", str(target)], check=True)
        with stream.open("rb") as f:
            command = ["git", "-C", str(target), "fast-import", "--quiet"]
            return _timed(command, f, peaks, cpu, "floor")

    return case


def _import(
    machine: list[str],
    source: Path,
    project: Path,
    options: list[str],
    peaks: dict[str, int],
    cpu: dict[str, list[float]],
) -> Callable[[], float]:
    name = "import" if not options else "no-redact"

    def case() -> float:
        shutil.rmtree(paths.store_path(project), ignore_errors=True)
        command = [*machine, "import", str(source), "--project", str(project), *options]
        return _timed(command, None, peaks, cpu, name)

    return case


def _timed(
    command: list[str],
    stdin: IO[bytes] | None,
    peaks: dict[str, int],
    cpu: dict[str, list[float]],
    name: str,
) -> float:
    """Seconds ``command`` takes; its peak memory (KB) goes into ``peaks``,
    its CPU seconds (its children's included) into ``cpu``."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        command,
        stdin=stdin if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    error = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {error.decode().strip()}")
    peaks[name] = max(peaks.get(name, 0), usage.ru_maxrss)
    cpu.setdefault(name, []).append(usage.ru_utime + usage.ru_stime)
    return elapsed


def _phases(source: Path, folder: Path) -> dict[str, float]:
    """CPU seconds of an import's steps, in this process."""
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "project").mkdir(parents=True)
    started = time.process_time()
    plain = importer.load(source, redact=False)
    scan_started = time.process_time()
    for row in plain.rows:
        redaction.redact_row(row)
    scan = time.process_time() - scan_started
    load = time.process_time() - started
    store = Store.create(folder / "store", folder / "project")
    started = time.process_time()
    importer.commit(store, plain)
    commit = time.process_time() - started
    shutil.rmtree(folder, ignore_errors=True)
    return {"load": load, "scan": scan, "commit": commit}
