"""The benchmark suite behind ``python bench/run.py``: measure, compare, report.

Every figure is measured next to a baseline in the same run: ``git add`` +
``git commit`` of the one new file in a plain git repository holding the same
rows, the same tag done on one growing JSONL file in git, and Python start-up
(``import machine_git``, ``import pygit2``). Results go to bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from collections.abc import Iterator
from dataclasses import dataclass
from dataclasses import field
from datetime import UTC
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pygit2

import machine_git
from bench import imports
from bench import rowgen
from bench import scanner
from bench import stores
from bench import timing
from bench.corpus import Corpus
from bench.rowgen import Made
from bench.stores import Built
from bench.stores import Disk
from bench.timing import Case
from bench.timing import median
from bench.timing import ms
from bench.timing import paired
from machine_git.core import jsonio
from machine_git.rows import schemas
from machine_git.rows.rowtypes import Row
from machine_git.rows.schemas import KINDS
from machine_git.store import gc
from machine_git.store.objects import MAX_BLOB
from machine_git.store.objects import Objects
from machine_git.store.packread import PackBlobs
from machine_git.store.store import Redaction
from machine_git.store.store import Store
from machine_git.tagging import turns

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"
MB = 1_000_000


PARTS = (
    "commit", "tagging", "diffs", "listings", "reading", "sizes", "depth", "secrets",
    "import",
)  # fmt: skip
# Parts that need no stores: run alone, they skip building them.
_STORELESS = ("secrets", "import")


@dataclass
class Options:
    sizes: list[int]
    work: Path
    keep: bool
    repeat: int
    slow: int
    depth_study: bool
    only: tuple[str, ...] = PARTS
    import_rows: int = imports.ROWS


@dataclass
class Report:
    """Every table of RESULTS.md, filled in as the measurements run."""

    sections: list[str] = field(default_factory=list)
    targets: list[tuple[str, str, bool]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Sections before this index describe the machine and the rows (made in
    # every run); a run of some parts keeps the full run's ones in RESULTS.md.
    setup: int = 0

    def table(
        self, title: str, intro: str, head: list[str], body: list[list[str]]
    ) -> None:
        lines = [f"## {title}", "", intro, ""] if intro else [f"## {title}", ""]
        lines.append("| " + " | ".join(head) + " |")
        lines.append(
            "|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|"
        )
        lines += ["| " + " | ".join(row) + " |" for row in body]
        self.sections.append("\n".join(lines))
        print("\n".join(lines) + "\n", flush=True)

    def target(self, what: str, measured: str, holds: bool) -> None:
        self.targets.append((what, measured, holds))
        print(
            f"target: {what}: {measured} -> {'holds' if holds else 'MISSED'}",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    opts = _options(argv)
    started = time.monotonic()
    load_before = os.getloadavg()
    opts.work.mkdir(parents=True, exist_ok=True)
    os.environ["MACHINE_DATA_DIR"] = str(opts.work / "data")
    os.environ.update(stores.GIT_IDENTITY)
    # Measure what a user runs: an installed package has its bytecode compiled
    # (pip does it); without it every start-up recompiles machine's modules.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run(
        [PYTHON, "-m", "compileall", "-q", str(Path(machine_git.__file__).parent)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    report = Report()
    if set(opts.only) <= set(_STORELESS):
        return _storeless(report, opts, started, load_before)
    print(f"bench: sizes {opts.sizes}, work folder {opts.work}", flush=True)

    corpus = Corpus()
    rowgen.check_reader_agrees(corpus, opts.work)
    builds = {n: _prepare(n, opts, corpus) for n in opts.sizes}
    _speed(corpus, report)
    _rows_table(builds, report)
    sessions = _Sessions(corpus, opts.work / "sessions")
    extra = _Extra(corpus)
    report.setup = len(report.sections)

    if "commit" in opts.only:
        _commit_in_process(builds, extra, report, opts)
    if "tagging" in opts.only:
        _tagging(builds, sessions, extra, report, opts)
    if "diffs" in opts.only:
        _diffs(builds, report, opts)
    if "listings" in opts.only:
        _listings(builds, report, opts)
    if "reading" in opts.only:
        _reading(builds, corpus, report, opts)
    if "sizes" in opts.only:
        _sizes(builds, report)
    if "depth" in opts.only and opts.depth_study and 10_000 in builds:
        _depth_study(builds[10_000], opts, report)
    if "secrets" in opts.only:
        scanner.measure_into(report)
    if "import" in opts.only:
        imports.measure_into(
            report, opts.work, MACHINE, max(3, opts.slow), opts.import_rows
        )

    elapsed = time.monotonic() - started
    if opts.only == PARTS:
        _write(report, opts, elapsed, load_before, os.getloadavg())
    else:
        _write_part(report, opts, elapsed, load_before, os.getloadavg())
    print(f"bench: done in {elapsed / 60:.1f} min; wrote {RESULTS}", flush=True)
    return 0 if all(holds for _, _, holds in report.targets) else 1


def _storeless(
    report: Report, opts: Options, started: float, load: tuple[float, ...]
) -> int:
    """Parts that build no store of the sizes (scanner, import), into RESULTS.md."""
    if "secrets" in opts.only:
        scanner.measure_into(report)
    if "import" in opts.only:
        imports.measure_into(
            report, opts.work, MACHINE, max(3, opts.slow), opts.import_rows
        )
    elapsed = time.monotonic() - started
    _write_part(report, opts, elapsed, load, os.getloadavg())
    print(f"bench: done in {elapsed / 60:.1f} min; wrote {RESULTS}", flush=True)
    return 0 if all(holds for _, _, holds in report.targets) else 1


def _options(argv: list[str] | None) -> Options:
    parser = argparse.ArgumentParser(
        prog="python bench/run.py",
        description="Benchmark machine against git baselines; writes bench/RESULTS.md.",
    )
    parser.add_argument("--sizes", default="1000,10000,100000", help="store sizes")
    parser.add_argument(
        "--work",
        type=Path,
        default=Path(tempfile.gettempdir()) / "machine-bench",
        help="scratch folder (about 3 GB at the default sizes)",
    )
    parser.add_argument(
        "--keep", action="store_true", help="reuse stores built by an earlier run"
    )
    parser.add_argument("--repeat", type=int, default=11, help="rounds of fast cases")
    parser.add_argument("--slow", type=int, default=3, help="rounds of slow cases")
    parser.add_argument(
        "--no-depth-study",
        dest="depth_study",
        action="store_false",
        help="skip the pack depth comparison at N=10000",
    )
    parser.add_argument(
        "--import-rows",
        type=int,
        default=imports.ROWS,
        help="rows of the import measurement",
    )
    parser.add_argument(
        "--only",
        default=",".join(PARTS),
        help=f"measure only these parts ({', '.join(PARTS)}); their tables and "
        "targets replace the same ones in RESULTS.md, the rest stays",
    )
    args = parser.parse_args(argv)
    sizes = sorted(int(x) for x in str(args.sizes).split(","))
    only = tuple(p for p in PARTS if p in str(args.only).split(","))
    unknown = set(str(args.only).split(",")) - set(PARTS)
    if unknown or not only:
        parser.error(f"--only takes some of {', '.join(PARTS)}")
    return Options(
        sizes,
        args.work,
        args.keep,
        args.repeat,
        args.slow,
        args.depth_study,
        only,
        args.import_rows,
    )


# -- commands -------------------------------------------------------------------


def _machine() -> list[str]:
    script = Path(sys.executable).parent / "machine"
    return [str(script)] if script.exists() else [sys.executable, "-m", "machine_git"]


MACHINE = _machine()
PYTHON = sys.executable
# What `machine good` cannot do without: git objects, JSON, schemas (it parses
# its arguments without click: machine_git/entry.py).
LIBRARIES = "import pygit2, orjson, jsonschema_rs"


def _run(*command: str, out: Path | None = None) -> float:
    if out is None:
        return timing.run(command)
    with out.open("wb") as sink:
        return timing.run(command, stdout=sink)


class _Sessions:
    """Fresh Pi session files, one per ``machine good`` run (a new turn each)."""

    def __init__(self, corpus: Corpus, folder: Path) -> None:
        self.corpus = corpus
        self.folder = folder
        self.rng = random.Random(2026)
        self.count = 0
        folder.mkdir(parents=True, exist_ok=True)

    def next(self) -> Path:
        self.count += 1
        spec = rowgen.spec(self.corpus, self.rng, 500_000 + self.count, with_tools=True)
        path = self.folder / f"s{self.count:05d}.jsonl"
        path.write_bytes(rowgen.pi_session(spec))
        return path


class _Extra:
    """More rows of the same mix, for commits made during the measurements."""

    def __init__(self, corpus: Corpus) -> None:
        self.made: Iterator[Made] = rowgen.make_rows(
            corpus, 10**7, seed=77, first=10**6
        )

    def take(self, count: int) -> list[Made]:
        return [next(self.made) for _ in range(count)]


# -- building -----------------------------------------------------------------------


def _prepare(n: int, opts: Options, corpus: Corpus) -> Built:
    marker = opts.work / f"built-{n}.json"
    if opts.keep and marker.exists() and _version_of(marker) == _BUILD_VERSION:
        print(f"bench: reusing the {n}-row stores", flush=True)
        return _load(marker)
    for name in (f"proj-{n}", f"plain-{n}", f"jsonl-{n}"):
        shutil.rmtree(opts.work / name, ignore_errors=True)
    from machine_git.core import paths

    shutil.rmtree(paths.store_path(opts.work / f"proj-{n}"), ignore_errors=True)
    print(f"bench: building {n} rows", flush=True)
    began = time.monotonic()
    built = stores.build(
        n, opts.work, rowgen.make_rows(corpus, n, seed=n), by_tags=n <= 2000
    )
    print(f"bench: built {n} rows in {time.monotonic() - began:.0f} s", flush=True)
    # The first `machine gc`: the store as built -> one pack.
    gc_seconds = _run(*MACHINE, "gc", "--project", str(built.project))
    packed = stores.disk(built.store / "objects")
    marker.write_bytes(
        orjson.dumps(
            {
                "version": _BUILD_VERSION,
                "built": _dump(built),
                "gc_seconds": gc_seconds,
                "packed": packed.__dict__,
            }
        )
    )
    return _load(marker)


_BUILD_VERSION = 4  # bump when the rows or the stores are built differently


def _version_of(marker: Path) -> int:
    try:
        return int(orjson.loads(marker.read_bytes()).get("version", 0))
    except (OSError, ValueError, AttributeError):
        return 0


def _dump(b: Built) -> dict[str, Any]:
    out = dict(b.__dict__)
    out["kinds"] = dict(b.kinds)
    out["built"] = b.built.__dict__
    for key in ("project", "store", "plain", "jsonl"):
        out[key] = str(out[key])
    return out


_FIRST_GC: dict[int, tuple[float, Disk]] = {}


def _load(marker: Path) -> Built:
    data = orjson.loads(marker.read_bytes())
    raw = data["built"]
    from collections import Counter

    built = Built(
        n=raw["n"],
        project=Path(raw["project"]),
        store=Path(raw["store"]),
        plain=Path(raw["plain"]),
        jsonl=Path(raw["jsonl"]),
        how=raw["how"],
        kinds=Counter(raw["kinds"]),
        raw_bytes=raw["raw_bytes"],
        jsonl_bytes=raw["jsonl_bytes"],
        gzip_bytes=raw["gzip_bytes"],
        gzip_each_bytes=raw["gzip_each_bytes"],
        trace_ids=raw["trace_ids"],
        base=raw["base"],
        built=Disk(**raw["built"]),
    )
    _FIRST_GC[built.n] = (data["gc_seconds"], Disk(**data["packed"]))
    return built


def _rows_table(builds: dict[int, Built], report: Report) -> None:
    body = []
    for n, b in builds.items():
        traces = b.kinds.get("traces", 0)
        body.append(
            [
                f"{n:,}",
                ", ".join(
                    f"{k} {b.kinds.get(k, 0):,}" for k in KINDS if b.kinds.get(k)
                ),
                f"{b.raw_bytes / n / 1000:.1f} KB",
                f"{b.jsonl_bytes / MB:.1f} MB",
                f"{b.gzip_bytes / MB:.1f} MB",
                f"{traces:,}",
            ]
        )
    report.table(
        "Rows",
        "Rows are built by `machine_git.rows.rows.build` from generated agent turns "
        "(prose from standard-library docstrings, code and tool outputs from its "
        "source files: reads, diffs, test runs, greps, listings; tool outputs are "
        "log-normal, median 600 bytes). Mix: 75% train, 20% traces with 20 "
        "trajectory records, 5% rejected. A sample of every store is checked "
        "against the schemas, and `machine validate --store` checks them all "
        "below. The Pi reader turns the generated session files into exactly "
        "these turns (checked at start).",
        [
            "N",
            "kinds",
            "average row (canonical JSON)",
            "as JSONL",
            "JSONL gzip -6",
            "trace rows",
        ],
        body,
    )


def _speed(corpus: Corpus, report: Report) -> None:
    """How fast this machine parses JSON and inflates zlib, against perf.md's."""
    import zlib

    made = list(rowgen.make_rows(corpus, 400, seed=5))
    trace = max((m.data for m in made if m.kind == "traces"), key=len)
    packed = [zlib.compress(m.data) for m in made]
    size = sum(len(m.data) for m in made)

    def per_call(work: Callable[[], object], count: int) -> float:
        return min(timing.timer(work)() for _ in range(5)) / count

    loads = per_call(lambda: [orjson.loads(trace) for _ in range(200)], 200)
    inflate = per_call(lambda: [zlib.decompress(z) for z in packed], 1) / size
    start = median(
        timing.rounds({"python": lambda: _run(PYTHON, "-c", "pass")}, 9)["python"]
    )
    report.table(
        "Machine speed",
        "Three figures that perf.md also measured, to compare this machine with the "
        "one the targets came from.",
        ["operation", "this machine", "perf.md"],
        [
            [
                f"orjson.loads of a {len(trace) / 1000:.0f} KB trace row",
                f"{loads * 1e6:.0f} µs ({len(trace) / loads / MB:,.0f} MB/s)",
                "23 µs for 47 KB (2,100 MB/s)",
            ],
            [
                "zlib inflate of rows",
                f"{1 / inflate / MB:,.0f} MB/s",
                "6.2 µs per 2 KB (330 MB/s)",
            ],
            ["`python -c pass`", ms(start), "11-12 ms"],
        ],
    )


# -- the commit alone, in-process -----------------------------------------------------


def _commit_in_process(
    builds: dict[int, Built], extra: _Extra, report: Report, opts: Options
) -> None:
    rounds = 100
    rows_f = [orjson.loads(m.data) for m in extra.take(rounds + 1)]
    rows_n = [orjson.loads(m.data) for m in extra.take(rounds + 1)]
    cases: dict[str, Case] = {}
    for n, b in builds.items():
        cases[f"fsync {n}"] = _committer(b.store, iter(rows_f), fsync=True)
        cases[f"nofsync {n}"] = _committer(b.store, iter(rows_n), fsync=False)
    times = timing.rounds(cases, rounds)
    smallest = min(builds)
    body = []
    for n in builds:
        f, nf = times[f"fsync {n}"], times[f"nofsync {n}"]
        body.append(
            [
                f"{n:,}",
                ms(median(f)),
                f"{paired(f, times[f'fsync {smallest}']):.2f}",
                ms(median(nf)),
                f"{paired(nf, times[f'nofsync {smallest}']):.2f}",
            ]
        )
    report.table(
        "The commit alone (in-process)",
        f"`Store.open` + `turns.commit` of a new row, already scanned for secrets "
        f"as `machine good` passes it (validation, six objects, the ref update), "
        f"median of {rounds} rounds, all sizes interleaved; the same row "
        f"goes into every size's store in a round. libgit2's fsync is on in machine; "
        f"the second pair of columns turns it off to show the data-structure cost. "
        f"What grows: each tag rewrites the trees on its path, and a `rows/ab` "
        f"tree fills from about 4 entries at 1,000 rows to its 256 at about "
        f"65,000 (writing a 256-entry tree costs about 0.5 ms on this machine); "
        f"from there the six objects stay the same size until about 16 million "
        f"rows. The target is judged on `machine good` as a whole process, the "
        f"cost of a tag as a user pays it.",
        [
            "N",
            "with fsync (as shipped)",
            f"paired ratio to N={smallest:,}",
            "without fsync",
            f"paired ratio to N={smallest:,}",
        ],
        body,
    )
    largest = max(builds)
    if largest != smallest:
        _COMMIT_RATIO.extend(
            [
                paired(times[f"fsync {largest}"], times[f"fsync {smallest}"]),
                paired(times[f"nofsync {largest}"], times[f"nofsync {smallest}"]),
            ]
        )


# The in-process commit's ratios (with, without fsync), shown beside the tag target.
_COMMIT_RATIO: list[float] = []


def _committer(store: Path, made: Iterator[Row], fsync: bool) -> Case:
    def case() -> float:
        row = next(made)
        pygit2.settings.enable_fsync_gitdir(fsync)
        try:
            started = time.perf_counter()
            turns.commit(Store.open(store), row, Redaction.SCANNED)
            return time.perf_counter() - started
        finally:
            pygit2.settings.enable_fsync_gitdir(True)

    return case


# -- tagging, whole process ---------------------------------------------------------


def _tagging(
    builds: dict[int, Built],
    sessions: _Sessions,
    extra: _Extra,
    report: Report,
    opts: Options,
) -> None:
    cases: dict[str, Case] = {}
    for n, b in builds.items():
        cases[f"good {n}"] = _good(b, sessions)
        cases[f"git {n}"] = _git_tag(b, extra)
    cases["import machine_git"] = lambda: _run(PYTHON, "-c", "import machine_git")
    cases["import pygit2"] = lambda: _run(PYTHON, "-c", "import pygit2")
    cases["python"] = lambda: _run(PYTHON, "-c", "pass")
    cases["libraries"] = lambda: _run(PYTHON, "-c", LIBRARIES)
    times = timing.rounds(cases, opts.repeat)

    slow: dict[str, Case] = {}
    for n, b in builds.items():
        slow[f"good {n}"] = _good(b, sessions)
        slow[f"jsonl {n}"] = _jsonl_tag(b, extra)
    slow_times = timing.rounds(slow, opts.slow, warmup=0)

    body = []
    for n in builds:
        good, git = times[f"good {n}"], times[f"git {n}"]
        body.append(
            [
                f"{n:,}",
                ms(median(good)),
                ms(median(git)),
                f"{paired(good, git):.2f}",
                ms(median(slow_times[f"jsonl {n}"])),
                f"{paired(slow_times[f'good {n}'], slow_times[f'jsonl {n}']):.3f}",
                f"{paired(good, times['import machine_git']):.2f}",
                f"{paired(good, times['import pygit2']):.2f}",
            ]
        )
    report.table(
        "Tagging: `machine good` as a whole process",
        f"`machine good --session FILE` on a new 20-record Pi session (a train row), "
        f"against the same tag in git: `git add` + `git commit` of the one new file "
        f"in a plain repository with the same rows checked out, and appending the "
        f"row to one growing JSONL file then `git add` + `git commit`. Medians of "
        f"{opts.repeat} rounds ({opts.slow} for the JSONL baseline, paired with "
        f"`machine good` runs of its own); ratios are paired. Start-up floors in "
        f"the same rounds: `python -c pass` {ms(median(times['python']))}, "
        f"`import machine_git` {ms(median(times['import machine_git']))}, "
        f"`import pygit2` {ms(median(times['import pygit2']))}, "
        f"`{LIBRARIES}` {ms(median(times['libraries']))} (paired ratio to `import "
        f"pygit2`: {paired(times['libraries'], times['import pygit2']):.2f}).",
        [
            "N",
            "machine good",
            "git add + commit",
            "ratio",
            "JSONL add + commit",
            "ratio",
            "ratio to import machine_git",
            "ratio to import pygit2",
        ],
        body,
    )
    largest, smallest = max(builds), min(builds)
    # The targets, from a group of their own: the three runs of a round follow
    # each other, so a ratio compares runs made seconds apart, not minutes.
    group: dict[str, Case] = {
        "good": _good(builds[largest], sessions),
        "git": _git_tag(builds[largest], extra),
        "import pygit2": lambda: _run(PYTHON, "-c", "import pygit2"),
        "libraries": lambda: _run(PYTHON, "-c", LIBRARIES),
    }
    if largest != smallest:
        group["good smallest"] = _good(builds[smallest], sessions)
    # Forty rounds at least: a tag's 18 fsyncs make its time spread widely on
    # a shared disk (p10 to p90 of 145 to 300 ms was seen), and the median of
    # the per-round ratios needs rounds to settle.
    close_rounds = max(40, opts.repeat * 4)
    close = timing.rounds(group, close_rounds)
    if largest != smallest:
        flat = paired(close["good"], close["good smallest"])
        commit = (
            f"; the commit alone, in-process: {_COMMIT_RATIO[0]:.2f} with fsync, "
            f"{_COMMIT_RATIO[1]:.2f} without (see below)"
            if _COMMIT_RATIO
            else ""
        )
        report.target(
            f"a tag at {largest:,} rows costs <= 1.1 x a tag at {smallest:,}",
            f"{flat:.2f} (`machine good` as a whole process, "
            f"{ms(median(close['good']))} vs {ms(median(close['good smallest']))}"
            f"{commit})",
            flat <= 1.1,
        )
    vs_git = paired(close["good"], close["git"])
    vs_import = paired(close["good"], close["import pygit2"])
    floor = paired(close["libraries"], close["import pygit2"])
    report.target(
        f"`machine good` at {largest:,} rows <= 0.8 x git add + commit",
        f"{vs_git:.2f} ({ms(median(close['good']))} vs {ms(median(close['git']))})",
        vs_git <= 0.8,
    )
    report.target(
        f"`machine good` at {largest:,} rows <= 1.5 x `python -c 'import pygit2'`",
        f"{vs_import:.2f} ({ms(median(close['good']))} vs "
        f"{ms(median(close['import pygit2']))}, medians of {close_rounds} rounds; "
        f"importing the three libraries it needs, nothing else: {floor:.2f})",
        vs_import <= 1.5,
    )


def _good(b: Built, sessions: _Sessions) -> Case:
    def case() -> float:
        session = sessions.next()
        return _run(
            *MACHINE, "good", "--session", str(session), "--project", str(b.project)
        )

    return case


def _git_tag(b: Built, extra: _Extra) -> Case:
    def case() -> float:
        row = extra.take(1)[0]
        started = time.perf_counter()
        path = stores.write_plain(b.plain, row)
        made = time.perf_counter() - started
        return (
            made
            + _run("git", "-C", str(b.plain), "add", path)
            + _run("git", "-C", str(b.plain), "commit", "-q", "-m", row.change.summary)
        )

    return case


def _jsonl_tag(b: Built, extra: _Extra) -> Case:
    def case() -> float:
        row = extra.take(1)[0]
        started = time.perf_counter()
        stores.append_jsonl(b.jsonl, row)
        made = time.perf_counter() - started
        return (
            made
            + _run("git", "-C", str(b.jsonl), "add", "data.jsonl")
            + _run("git", "-C", str(b.jsonl), "commit", "-q", "-m", row.change.summary)
        )

    return case


# -- diffs ----------------------------------------------------------------------


def _diffs(builds: dict[int, Built], report: Report, opts: Options) -> None:
    cases: dict[str, Case] = {}
    for n, b in builds.items():
        project = str(b.project)
        for changed in (1, 1000):
            older = f"{b.base}~{changed}"
            cases[f"diff {changed} {n}"] = _bind(
                [*MACHINE, "diff", older, b.base, "--project", project]
            )
        cases[f"git {n}"] = _bind(
            ["git", "-C", str(b.store), "diff", "--stat", f"{b.base}~1", b.base]
        )
    cases["import machine_git"] = lambda: _run(PYTHON, "-c", "import machine_git")
    times = timing.rounds(cases, opts.repeat)
    smallest, largest = min(builds), max(builds)
    body = []
    for n in builds:
        one, many = times[f"diff 1 {n}"], times[f"diff 1000 {n}"]
        body.append(
            [
                f"{n:,}",
                ms(median(one)),
                f"{paired(one, times[f'diff 1 {smallest}']):.2f}",
                ms(median(many)),
                ms(median(times[f"git {n}"])),
                f"{paired(one, times['import machine_git']):.2f}",
            ]
        )
    report.table(
        "Diff between versions",
        f"`machine diff OLD NEW` where NEW adds 1 or 1,000 rows to OLD (whole "
        f"process, medians of {opts.repeat} rounds); `git diff --stat` of the "
        f"1-row change in the same store for reference.",
        [
            "N",
            "1 row",
            f"paired ratio to N={smallest:,}",
            "1,000 rows",
            "git diff --stat, 1 row",
            "1 row / import machine_git",
        ],
        body,
    )
    if largest != smallest:
        ratio = paired(times[f"diff 1 {largest}"], times[f"diff 1 {smallest}"])
        report.target(
            f"a 1-row diff at {largest:,} rows <= 2 x a 1-row diff at {smallest:,}",
            f"{ratio:.2f}",
            ratio <= 2,
        )


def _bind(command: list[str], out: Path | None = None) -> Case:
    return lambda: _run(*command, out=out)


# -- listings ---------------------------------------------------------------------


LISTINGS = ("tagged -n 20", "log -n 20", "show ID", "data", "versions")


def _listings(builds: dict[int, Built], report: Report, opts: Options) -> None:
    """Commands that answer with a few lines must not read the whole store."""
    cases: dict[str, Case] = {}
    for n, b in builds.items():
        project = ["--project", str(b.project)]
        _three_versions(b)
        row_id = b.trace_ids[len(b.trace_ids) // 2]
        commands = {
            "tagged -n 20": ["tagged", "-n", "20"],
            "log -n 20": ["log", "-n", "20"],
            "show ID": ["show", row_id],
            "data": ["data"],
            "versions": ["versions"],
        }
        for name, args in commands.items():
            cases[f"{name} {n}"] = _bind([*MACHINE, *args, *project])
    cases["import machine_git"] = lambda: _run(PYTHON, "-c", "import machine_git")
    times = timing.rounds(cases, opts.repeat)
    smallest, largest = min(builds), max(builds)
    body = []
    for n in builds:
        row = [f"{n:,}"]
        for name in LISTINGS:
            took = times[f"{name} {n}"]
            row.append(
                f"{ms(median(took))} ({paired(took, times[f'{name} {smallest}']):.2f})"
            )
        body.append(row)
    floor = ms(median(times["import machine_git"]))
    report.table(
        "Listings",
        f"Whole process, medians of {opts.repeat} rounds, every size and command "
        f"interleaved; in brackets the paired ratio to the same command at "
        f"N={smallest:,}. `tagged` and `log` walk the history from the newest "
        f"commit by date through every parent and stop at 20 (machine_git/"
        f"history.py); `show ID` reads one row; `data` reads the counts cache; "
        f"`versions` lists three versions (near the first commit, halfway, the "
        f"newest), whose counts are kept per commit once counted. Start-up floor "
        f"in the same rounds: `import machine_git` {floor}.",
        ["N", *(f"`machine {name}`" for name in LISTINGS)],
        body,
    )
    if largest != smallest:
        ratios = {
            name: paired(times[f"{name} {largest}"], times[f"{name} {smallest}"])
            for name in LISTINGS
        }
        report.target(
            f"`tagged -n 20`, `log -n 20`, `show`, `data` and `versions` at "
            f"{largest:,} rows each <= 2 x the same at {smallest:,}",
            ", ".join(f"{name} {ratio:.2f}" for name, ratio in ratios.items()),
            all(ratio <= 2 for ratio in ratios.values()),
        )


def _three_versions(b: Built) -> None:
    """Versions near the first commit, halfway and at the newest, named once."""
    listed = subprocess.run(
        ["git", "-C", str(b.store), "tag", "--list", "bench-*"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if len(listed) == 3:
        return
    first = b.n - 10  # commits from the built head back to near the first
    for name, back in (("bench-early", first), ("bench-half", b.n // 2)):
        if name not in listed:
            _run(
                *MACHINE,
                "version",
                name,
                f"{b.base}~{back}",
                "--project",
                str(b.project),
            )
    if "bench-now" not in listed:
        _run(*MACHINE, "version", "bench-now", "--project", str(b.project))


# -- export and validate ------------------------------------------------------------


def _reading(
    builds: dict[int, Built], corpus: Corpus, report: Report, opts: Options
) -> None:
    body = []
    largest = max(builds)
    for n, b in builds.items():
        project = str(b.project)
        out = opts.work / f"export-{n}.jsonl"
        export = [*MACHINE, "export", "--project", project]
        for kind in KINDS:
            export += ["--kind", kind]
        count = _valid_rows(b)
        cases: dict[str, Case] = {
            "export": _bind(export, out),
            "export --no-redact": _bind([*export, "--no-redact"], out),
            "validate": _bind([*MACHINE, "validate", "--store", "--project", project]),
            "git archive": _bind(
                ["git", "-C", str(b.store), "archive", "--format=tar", "main", "rows"]
            ),
        }
        times = timing.rounds(cases, opts.slow)
        size = out.stat().st_size
        tar = _archive_size(b.store)
        export_s = median(times["export"])
        plain_s = median(times["export --no-redact"])
        validate_s = median(times["validate"])
        body.append(
            [
                f"{n:,}",
                f"{count:,}",
                f"{size / MB:.0f} MB",
                f"{ms(export_s)}: {size / MB / export_s:.0f} MB/s",
                f"{ms(plain_s)}: {size / MB / plain_s:.0f} MB/s",
                f"{ms(median(times['git archive']))}: "
                f"{tar / MB / median(times['git archive']):.0f} MB/s",
                f"{ms(validate_s)}: {count / validate_s:,.0f} rows/s",
            ]
        )
        if n == largest:
            report.notes.append(
                f"Export at {n:,} rows: {size / MB / export_s:.0f} MB/s, against "
                f"{tar / MB / median(times['git archive']):.0f} MB/s for git alone "
                "reading the same blobs (`git archive`); the difference is Python "
                "parsing, converting and writing each row."
            )
            report.target(
                f"export of the whole store at {n:,} rows streams >= 50 MB/s",
                f"{size / MB / export_s:.0f} MB/s ({size / MB / plain_s:.0f} MB/s "
                f"with --no-redact; {size / MB:.0f} MB of JSONL)",
                size / MB / export_s >= 50,
            )
            traces, whole, count_t = _validate_traces(b, opts, corpus, report)
            report.target(
                f"validating the store at {n:,} rows runs >= 20,000 trace rows/s",
                f"{traces:,.0f} trace rows/s ({count_t:,} trace rows of this store "
                f"in a store of their own; {whole:,.0f}/s as the whole command, "
                f"start-up included); {count / validate_s:,.0f} rows/s of every "
                f"kind for the whole {n:,}-row store",
                traces >= 20_000,
            )
    report.table(
        "Export and validate the whole store",
        f"`machine export` of every kind (tinker format) to a file, as shipped (rows "
        f"tagged by `machine good` record that they were scanned for secrets, so "
        f"only rows without that record are scanned again) and with `--no-redact`; "
        f"`machine validate --store` (schema, id, path and byte form of every row). "
        f"Whole process, medians of {opts.slow}. `git archive` of `rows/` is git "
        f"reading the same blobs (MB/s of its tar output): the floor for reading "
        f"the store on this machine.",
        [
            "N",
            "rows",
            "export size",
            "machine export",
            "machine export --no-redact",
            "git archive rows/",
            "machine validate --store",
        ],
        body,
    )


def _archive_size(store: Path) -> int:
    done = subprocess.run(
        ["git", "-C", str(store), "archive", "--format=tar", "main", "rows"],
        capture_output=True,
        check=True,
    )
    return len(done.stdout)


def _valid_rows(b: Built) -> int:
    """How many rows the store holds now; raises unless every one is valid."""
    checked = subprocess.run(
        [*MACHINE, "validate", "--store", "--project", str(b.project)],
        capture_output=True,
        text=True,
        check=False,
    )
    verdict = (checked.stdout + checked.stderr).strip().splitlines()[-1]
    if checked.returncode != 0 or not verdict.endswith("all valid"):
        raise RuntimeError(f"the {b.n}-row store does not validate: {verdict}")
    return int(verdict.split()[1])


def _traces_store(b: Built, opts: Options, corpus: Corpus) -> tuple[Path, int]:
    """A store holding only the trace rows of the ``b.n``-row store."""
    from machine_git.core import paths

    name = f"proj-traces-{b.n}"
    marker = opts.work / f"built-traces-{b.n}.json"
    if opts.keep and marker.exists() and _version_of(marker) == _BUILD_VERSION:
        data = orjson.loads(marker.read_bytes())
        return Path(data["project"]), int(data["rows"])
    shutil.rmtree(opts.work / name, ignore_errors=True)
    shutil.rmtree(paths.store_path(opts.work / name), ignore_errors=True)
    made = (m for m in rowgen.make_rows(corpus, b.n, seed=b.n) if m.kind == "traces")
    project, count = stores.build_store_only(name, opts.work, made)
    marker.write_bytes(
        orjson.dumps(
            {"version": _BUILD_VERSION, "project": str(project), "rows": count}
        )
    )
    return project, count


def _validate_traces(
    b: Built, opts: Options, corpus: Corpus, report: Report
) -> tuple[float, float, int]:
    """Trace rows/s of `machine validate --store` on a store of trace rows only.

    In-process (``validate.check_store``, as the command runs it, without the
    start-up) and as the whole command. Then where one trace row's time goes,
    step by step in one process.
    """
    from machine_git.core import paths
    from machine_git.recovery import validate
    from machine_git.store import parallel

    project, count = _traces_store(b, opts, corpus)
    store = Store.open(paths.store_path(project))

    def check() -> float:
        tally = validate.Tally()
        started = time.perf_counter()
        found = list(validate.check_store(store, tally))
        took = time.perf_counter() - started
        if found or tally.rows != count:
            raise RuntimeError(f"the trace store does not validate: {found[:1]}")
        return took

    runs = [check() for _ in range(opts.slow)]
    alone = os.environ.get(parallel.JOBS_ENV)
    os.environ[parallel.JOBS_ENV] = "1"
    try:
        one_process = [check() for _ in range(opts.slow)]
    finally:
        if alone is None:
            del os.environ[parallel.JOBS_ENV]
        else:
            os.environ[parallel.JOBS_ENV] = alone
    command = [*MACHINE, "validate", "--store", "--project", str(project)]
    whole = [_run(*command) for _ in range(opts.slow)]
    # Where a trace row's time goes, one row at a time in one process.
    top = store.rows_tree()
    assert top is not None
    oids = [oid for _, oid in _row_entries(store.repo, top, "rows/")]
    objects = Objects(store.repo)
    packed = PackBlobs(os.path.join(store.repo.path, "objects"))

    def from_pack(oid: pygit2.Oid) -> bytes:
        # As validate reads a row: from the pack, libgit2 for a delta.
        data = packed.blob(oid.raw, MAX_BLOB)
        return store.repo.read(oid)[1] if data is None else data

    with parallel.bulk_reads():
        datas = [store.repo.read(oid)[1] for oid in oids]
        stages = {
            "libgit2": lambda: [len(store.repo.read(oid)[1]) for oid in oids],
            "read": lambda: [len(from_pack(oid)) for oid in oids],
            "checked read": lambda: [
                hashlib.sha1(b"blob %d\0" % len(d) + d).digest() == oid.raw
                for oid, d in ((oid, from_pack(oid)) for oid in oids)
            ],
            "parse": lambda: [len(jsonio.loads(d)) for d in datas],
            "schema": lambda: [schemas.row_problems(jsonio.loads(d)) for d in datas],
            "canonical": lambda: [
                len(jsonio.canonical(jsonio.loads(d))) for d in datas
            ],
        }
        took = {
            name: min(timing.timer(work)() for _ in range(3)) / len(oids)
            for name, work in stages.items()
        }
    deltas = sum(1 for oid in oids if packed.blob(oid.raw, MAX_BLOB) is None)
    spent = {
        "read the blob (pack index and ISA-L inflate; libgit2 for the "
        f"{deltas / len(oids):.0%} stored as deltas)": took["read"],
        "hash it (SHA-1)": took["checked read"] - took["read"],
        "parse (orjson)": took["parse"],
        "schema (jsonschema-rs)": took["schema"] - took["parse"],
        "canonical bytes": took["canonical"] - took["parse"],
    }
    workers = parallel.jobs(objects, parallel.parts(top, "rows/"))
    single = count / median(one_process)
    report.notes.append(
        f"Validating one trace row ({sum(map(len, datas)) / len(datas) / 1000:.1f} KB "
        "on average) in one process: "
        + ", ".join(f"{name} {t * 1e6:.0f} µs" for name, t in spent.items())
        + f". The whole check runs {single:,.0f} trace rows/s in one process "
        f"(MACHINE_JOBS=1) and {count / median(runs):,.0f}/s in {workers} "
        f"(machine_git/store/parallel.py), so this machine's {os.cpu_count()} CPUs "
        f"give at most about {single * (os.cpu_count() or 1):,.0f}/s. Reading "
        "is bound by inflating: ISA-L, about twice zlib's speed (see Machine "
        "speed for zlib, which runs at half the speed of the machine in perf.md "
        "that the target came from); libgit2 (zlib, and a Python callback per "
        f"read) takes {took['libgit2'] * 1e6:.0f} µs for the same blob "
        "(machine_git/store/packread.py)."
    )
    return count / median(runs), count / median(whole), count


def _row_entries(
    repo: pygit2.Repository, tree: pygit2.Tree, prefix: str = ""
) -> Iterator[tuple[str, pygit2.Oid]]:
    for entry in tree:
        path = f"{prefix}{entry.name}"
        if entry.filemode == pygit2.enums.FileMode.TREE:
            yield from _row_entries(repo, repo[entry.id].peel(pygit2.Tree), f"{path}/")
        elif path.startswith("rows/"):
            yield path, entry.id


# -- sizes ------------------------------------------------------------------------


def _sizes(builds: dict[int, Built], report: Report) -> None:
    body = []
    largest = max(builds)
    for n, b in builds.items():
        gc_first, first = _FIRST_GC[n]
        grown = stores.disk(b.store / "objects")
        tags = int(stores.git(b.store, "rev-list", "--count", f"{b.base}..main"))
        loose_per_tag = (grown.allocated - first.allocated) / max(1, tags)
        gc_last = _run(*MACHINE, "gc", "--project", str(b.project))
        final = stores.disk(b.store / "objects")
        rows = n + tags
        gzip_per_row = b.gzip_bytes / n
        ratio = final.allocated / rows / gzip_per_row
        one_by_one = final.allocated / rows / (b.gzip_each_bytes / n)
        loose = (
            f"{b.built.allocated / n / 1000:.1f} KB (the whole store)"
            if b.how.startswith("real")
            else f"{loose_per_tag / 1000:.1f} KB ({tags} tags)"
        )
        body.append(
            [
                f"{n:,}",
                loose,
                f"{first.allocated / n / 1000:.2f} KB",
                f"{gc_first:.1f} s",
                f"{final.allocated / rows / 1000:.2f} KB",
                f"{gc_last:.1f} s",
                f"{gzip_per_row / 1000:.2f} KB",
                f"{ratio:.2f}",
                f"{b.gzip_each_bytes / n / 1000:.2f} KB",
                f"{one_by_one:.2f}",
            ]
        )
        if n == largest:
            report.target(
                f"the packed store at {n:,} rows <= 2 x the gzip-compressed rows",
                f"{ratio:.2f} ({final.allocated / MB:.0f} MB on disk for {rows:,} "
                f"rows and their history; the rows as JSONL, gzip -6: "
                f"{b.gzip_bytes / MB:.0f} MB for {n:,}); {one_by_one:.2f} against the "
                "rows gzipped one by one",
                ratio <= 2,
            )
    report.table(
        "Store size on disk",
        "Allocated bytes of `objects/` per row; every row is one commit, so this "
        "includes the history. Loose: as libgit2 leaves a store (each object at "
        "least one 4 KB block), measured on the store built by real tags and on "
        "the tags this run added to the others. Packed: after `machine gc` on "
        "the store as built, and again at the end of the run. machine packs by "
        "itself too: once about 6700 loose objects pile up (git's gc.auto), a "
        "commit starts a packer in the background (`git repack --geometric=2`, "
        "holding no lock a tag needs), so a store never stays loose.",
        [
            "N",
            "loose, per row",
            "packed, per row",
            "machine gc",
            "packed at the end, per row",
            "machine gc",
            "rows as JSONL gzip -6, per row",
            "packed / gzip",
            "each row gzipped alone",
            "packed / that",
        ],
        body,
    )
    _composition(builds[largest], report)


def _composition(b: Built, report: Report) -> None:
    """What the packed store is made of: bytes per row of each object type."""
    done = subprocess.run(
        [
            "git",
            "-C",
            str(b.store),
            "cat-file",
            "--batch-all-objects",
            "--batch-check=%(objecttype) %(objectsize:disk)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    count: dict[str, int] = {}
    size: dict[str, int] = {}
    for line in done.stdout.splitlines():
        kind, disk = line.split()
        count[kind] = count.get(kind, 0) + 1
        size[kind] = size.get(kind, 0) + int(disk)
    rows = int(stores.git(b.store, "rev-list", "--count", "main"))
    if "blob" in size:
        index = sum(p.stat().st_size for p in b.store.glob("objects/pack/*.idx"))
        report.notes.append(
            f"Size at {b.n:,} rows: the row blobs alone take "
            f"{size['blob'] / rows:,.0f} B per tag, "
            f"{size['blob'] / rows / (b.gzip_each_bytes / b.n):.2f} x each row "
            "gzipped alone and "
            f"{size['blob'] / rows / (b.gzip_bytes / b.n):.2f} x the JSONL gzip: git "
            "compresses each object on its own and deltas a row only against "
            "rows of similar size and name, which random ids and varied rows "
            "rarely give, while gzip shares one window across neighbouring rows. "
            "The blobs and the pack index "
            f"({index / rows:,.0f} B per tag) come to "
            f"{(size['blob'] + index) / rows / (b.gzip_bytes / b.n):.2f} x the "
            "JSONL gzip before any tree or commit: 2 x would leave "
            f"{2 * b.gzip_bytes / b.n - (size['blob'] + index) / rows:,.0f} B per "
            "tag for the history, which takes "
            f"{(size.get('tree', 0) + size.get('commit', 0)) / rows:,.0f} B."
        )
    report.table(
        f"What the packed store holds at N={b.n:,}",
        "Objects of the pack by type (`git cat-file --batch-all-objects`), in bytes "
        "per tag (one commit per row). Each row is a blob compressed on its own; "
        "gzip of the JSONL also compresses across rows (keys, code read in several "
        "turns), which a per-row blob cannot.",
        ["type", "objects", "bytes in the pack", "per tag"],
        [
            [
                kind,
                f"{count[kind]:,}",
                f"{size[kind] / MB:.1f} MB",
                f"{size[kind] / rows:,.0f} B",
            ]
            for kind in sorted(size, key=lambda k: -size[k])
        ],
    )


# -- pack depth ---------------------------------------------------------------------


def _depth_study(b: Built, opts: Options, report: Report) -> None:
    from machine_git.core import paths

    variants = {
        "git default (depth 50)": ["-c", "pack.depth=50"],
        f"machine (depth {gc.PACK_DEPTH})": ["-c", f"pack.depth={gc.PACK_DEPTH}"],
        "no deltas (window 0)": ["-c", "pack.window=0"],
    }
    cases: dict[str, Case] = {}
    sizes: dict[str, tuple[int, float]] = {}
    for index, (name, settings) in enumerate(variants.items()):
        project = opts.work / f"proj-depth-{index}"
        (project / ".git").mkdir(parents=True, exist_ok=True)
        target = paths.store_path(project)
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(b.store, target)
        began = time.monotonic()
        subprocess.run(
            ["git", *settings, "-C", str(target), "repack", "-a", "-d", "-f", "-q"],
            check=True,
        )
        took = time.monotonic() - began
        sizes[name] = (stores.disk(target / "objects").allocated, took)
        export = [*MACHINE, "export", "--project", str(project)]
        for kind in KINDS:
            export += ["--kind", kind]
        out = opts.work / f"export-depth-{index}.jsonl"
        cases[name] = _bind(export, out)
    times = timing.rounds(cases, opts.slow)
    base = next(iter(variants))
    report.table(
        f"Pack depth at N={b.n:,}",
        "The same store repacked from scratch (`git repack -a -d -f`) three ways, "
        "then exported whole (tinker format, every kind). An export reads rows in "
        "tree order; a row deep in a delta chain needs its bases decompressed "
        f"first (perf.md §3). machine packs with pack.depth={gc.PACK_DEPTH}.",
        ["pack", "size", "repack time", "export", f"paired ratio to {base}"],
        [
            [
                name,
                f"{sizes[name][0] / MB:.1f} MB",
                f"{sizes[name][1]:.1f} s",
                ms(median(times[name])),
                f"{paired(times[name], times[base]):.2f}",
            ]
            for name in variants
        ],
    )


# -- writing RESULTS.md ---------------------------------------------------------------


def _machine_table(
    load: tuple[float, ...], load_end: tuple[float, ...], work: Path
) -> list[str]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.0f} GiB"
    except OSError:
        pass
    fs = subprocess.run(
        ["df", "-T", str(work)], capture_output=True, text=True, check=False
    ).stdout.splitlines()
    filesystem = " ".join(fs[-1].split()[:2]) if len(fs) > 1 else "?"
    git_version = subprocess.run(
        ["git", "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    rows = [
        ("CPU", f"{cpu}, {os.cpu_count()} logical CPUs"),
        ("memory", memory),
        ("bench folder", f"{work} ({filesystem})"),
        ("system", f"{platform.system()} {platform.release()}"),
        ("Python", platform.python_version()),
        ("git", git_version),
        ("pygit2 / libgit2", f"{_version('pygit2')} / {pygit2.LIBGIT2_VERSION}"),
        (
            "orjson / jsonschema-rs / click",
            f"{_version('orjson')} / {_version('jsonschema-rs')} / {_version('click')}",
        ),
        ("machine", machine_git.__version__),
        (
            "load average (1 min) at start / end",
            f"{load[0]:.2f} / {load_end[0]:.2f}",
        ),
    ]
    return ["| | |", "|---|---|", *[f"| {k} | {v} |" for k, v in rows]]


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version

    try:
        return version(package)
    except PackageNotFoundError:
        return "?"


def _write_part(
    report: Report,
    opts: Options,
    elapsed: float,
    load: tuple[float, ...],
    load_end: tuple[float, ...],
) -> None:
    """Put the tables and targets of a run of some parts into RESULTS.md.

    Each table replaces the one of the same title (or is added before the
    notes); each target replaces the one of the same text, each note the one
    that starts the same way. A note says which figures came from this run,
    on which machine load.
    """
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    for section in report.sections[report.setup :]:
        title = section.splitlines()[0]
        text = _replace_section(text, title, section)
    for what, measured, holds in report.targets:
        line = f"| {what} | {measured} | {'yes' if holds else '**no**'} |"
        found = [old for old in text.splitlines() if old.startswith(f"| {what} |")]
        if found:
            text = text.replace(found[0], line)
        else:
            text = text.replace(
                "| target | measured | holds |\n|---|---|---|\n",
                f"| target | measured | holds |\n|---|---|---|\n{line}\n",
            )
    rows = [
        r
        for r in text.splitlines()
        if r.startswith("| ") and r.endswith((" | yes |", " | **no** |"))
    ]
    held = sum(1 for r in rows if r.endswith(" | yes |"))
    text = re.sub(
        r"^\d+ of \d+ hold\.$", f"{held} of {len(rows)} hold.", text, flags=re.M
    )
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    note = (
        f"- {', '.join(opts.only)}: measured on their own on {now} "
        f"(`python bench/run.py --only {','.join(opts.only)}`, "
        f"{elapsed / 60:.1f} minutes, load average {load[0]:.2f} / "
        f"{load_end[0]:.2f}); every other table is from the run described above."
    )
    text = text.rstrip() + "\n"
    if "## Notes" not in text:
        text += "\n## Notes\n\n"
    # A note of this run replaces the one that starts the same way: its words
    # before the first figure say what it is about ("Export at ", "Import of ").
    stale = (
        f"- {', '.join(opts.only)}: measured on their own",
        *(f"- {re.split(r'[0-9]', n, maxsplit=1)[0]}" for n in report.notes),
    )
    lines = [x for x in text.splitlines() if not x.startswith(stale)]
    lines += [f"- {n}" for n in report.notes]
    RESULTS.write_text("\n".join(lines).rstrip() + "\n" + note + "\n")


def _replace_section(text: str, title: str, section: str) -> str:
    start = text.find(f"\n{title}\n")
    if start < 0:
        notes = text.find("\n## Notes\n")
        where = notes if notes >= 0 else len(text)
        return text[:where].rstrip() + "\n\n" + section + "\n" + text[where:]
    end = text.find("\n## ", start + 1)
    end = len(text) if end < 0 else end
    return text[:start].rstrip() + "\n\n" + section + "\n" + text[end:]


def _write(
    report: Report,
    opts: Options,
    elapsed: float,
    load: tuple[float, ...],
    load_end: tuple[float, ...],
) -> None:
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    held = sum(1 for _, _, h in report.targets if h)
    lines = [
        "# Benchmark results",
        "",
        f"Written by `python bench/run.py` on {now}, in {elapsed / 60:.1f} minutes "
        f"(sizes {', '.join(f'{n:,}' for n in opts.sizes)}). Do not edit by hand: "
        "rerun the command. Absolute times move between runs on a shared machine; "
        "the paired ratios (the median of per-round ratios, every case of a table "
        "interleaved round by round) are the figures to compare.",
        "",
        "## Machine",
        "",
        *_machine_table(load, load_end, opts.work),
        "",
        "## Targets",
        "",
        f"{held} of {len(report.targets)} hold.",
        "",
        "| target | measured | holds |",
        "|---|---|---|",
        *[f"| {t} | {m} | {'yes' if h else '**no**'} |" for t, m, h in report.targets],
        "",
        *[section + "\n" for section in report.sections],
    ]
    if report.notes:
        lines += ["## Notes", "", *[f"- {note}" for note in report.notes], ""]
    RESULTS.write_text("\n".join(lines).rstrip() + "\n")
