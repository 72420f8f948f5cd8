"""Building the benchmark's stores and its baseline repositories.

For each size N there are three repositories holding the same N rows:

- the machine store. At the smallest size it is built by real tags through
  ``Store.write`` (so it is loose, as libgit2 leaves a store); at the larger
  sizes by ``git fast-import``, one commit per row with the message and tree
  ``machine good`` makes (perf.md did the same), since N real tags would take
  minutes;
- a plain git repository, a clone of the store with the rows checked out, for
  the ``git add`` + ``git commit`` baseline;
- a git repository holding the rows as one JSONL file, for the baseline that
  rewrites one growing file.

Rows are generated once and streamed to all three, and to gzip for the size
reference, so memory stays flat at 100,000 rows.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import zlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

import orjson
import pygit2

from bench.rowgen import Made
from machine_git.core import paths
from machine_git.rows import rows
from machine_git.rows import schemas
from machine_git.store import gc
from machine_git.store.store import Change
from machine_git.store.store import Snapshot
from machine_git.store.store import Store

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Dev",
    "GIT_AUTHOR_EMAIL": "dev@example.com",
    "GIT_COMMITTER_NAME": "Dev",
    "GIT_COMMITTER_EMAIL": "dev@example.com",
}
_SAMPLE_EVERY = 50  # rows checked against the schemas while building


@dataclass(frozen=True)
class Disk:
    """Bytes of a folder: as ``ls`` sums them and as the disk allocates them."""

    apparent: int
    allocated: int
    files: int


@dataclass
class Built:
    """One size's repositories and what went into them."""

    n: int
    project: Path
    store: Path
    plain: Path
    jsonl: Path
    how: str
    kinds: Counter[str] = field(default_factory=Counter)
    raw_bytes: int = 0
    jsonl_bytes: int = 0
    gzip_bytes: int = 0  # the rows as one JSONL file, gzip -6
    gzip_each_bytes: int = 0  # each row's canonical JSON gzipped on its own
    trace_ids: list[str] = field(default_factory=list)
    base: str = ""  # the store's head once built
    built: Disk = Disk(0, 0, 0)


def disk(folder: Path) -> Disk:
    apparent = allocated = files = 0
    for root, _, names in os.walk(folder):
        for name in names:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            apparent += st.st_size
            allocated += st.st_blocks * 512
            files += 1
    return Disk(apparent, allocated, files)


def git(where: Path, *args: str, stdin: bytes | None = None) -> str:
    done = subprocess.run(
        ["git", "-C", str(where), *args],
        input=stdin,
        capture_output=True,
        env={**os.environ, **GIT_IDENTITY},
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr.decode().strip()}")
    return done.stdout.decode()


def build(n: int, work: Path, made: Iterable[Made], by_tags: bool) -> Built:
    """The store, the plain repository and the JSONL repository for ``n`` rows."""
    project = work / f"proj-{n}"
    (project / ".git").mkdir(parents=True, exist_ok=True)
    location = paths.store_path(project)
    store = Store.create(location, project)
    out = Built(
        n=n,
        project=project,
        store=location,
        plain=work / f"plain-{n}",
        jsonl=work / f"jsonl-{n}",
        how="real tags (Store.write)" if by_tags else "git fast-import + repack -f",
    )
    out.jsonl.mkdir(parents=True)
    git(out.jsonl, "init", "-q", "-b", "main")
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)  # gzip framing
    with (out.jsonl / "data.jsonl").open("wb") as dataset:

        def account(row: Made) -> Made:
            out.kinds[row.kind] += 1
            out.raw_bytes += len(row.data)
            out.jsonl_bytes += len(row.line)
            out.gzip_bytes += len(packer.compress(row.line))
            out.gzip_each_bytes += len(gzip.compress(row.data, 6, mtime=0))
            dataset.write(row.line)
            if row.kind == "traces":
                out.trace_ids.append(row.id)
            if sum(out.kinds.values()) % _SAMPLE_EVERY == 1:
                problems = schemas.row_problems(orjson.loads(row.data))
                if problems:
                    raise AssertionError(
                        f"bench row {row.id} is invalid: {problems[0]}"
                    )
            return row

        stream = (account(row) for row in made)
        if by_tags:
            _tag_all(store, stream)
        else:
            _fast_import(location, stream)
        out.gzip_bytes += len(packer.flush())
    gc.make_private(location)
    out.base = git(location, "rev-parse", "main").strip()
    out.built = disk(location / "objects")
    git(out.jsonl, "add", "data.jsonl")
    git(out.jsonl, "commit", "-q", "-m", f"{n} rows")
    # The plain repository shares the store's objects; its index and work
    # tree (N files) are its own, which is what `git add` and `git commit` pay.
    subprocess.run(
        ["git", "clone", "-q", "--shared", str(location), str(out.plain)], check=True
    )
    return out


def build_store_only(name: str, work: Path, made: Iterable[Made]) -> tuple[Path, int]:
    """A machine store of ``made`` alone (no baselines): its project and rows."""
    project = work / name
    (project / ".git").mkdir(parents=True, exist_ok=True)
    location = paths.store_path(project)
    Store.create(location, project)
    count = 0

    def counted(row: Made) -> Made:
        nonlocal count
        count += 1
        return row

    _fast_import(location, (counted(row) for row in made))
    gc.make_private(location)
    return project, count


def _tag_all(store: Store, made: Iterable[Made]) -> None:
    # Real commits, without fsync and without auto-packing while building:
    # this store is measured loose, then packed by `machine gc`.
    store.repo.config["gc.auto"] = "0"
    pygit2.settings.enable_fsync_gitdir(False)
    try:
        for row in made:

            def plan(snap: Snapshot, row: Made = row) -> Change:
                return row.change

            store.write(plan)
    finally:
        pygit2.settings.enable_fsync_gitdir(True)
        del store.repo.config["gc.auto"]


def _fast_import(location: Path, made: Iterable[Made]) -> None:
    parent = git(location, "rev-parse", "main").strip()
    marks = location / "machine" / "bench-marks"
    importer = subprocess.Popen(
        [
            "git",
            "-C",
            str(location),
            "fast-import",
            "--quiet",
            f"--depth={gc.PACK_DEPTH}",
            f"--export-marks={marks}",
        ],
        stdin=subprocess.PIPE,
    )
    assert importer.stdin is not None
    first = True
    moves: list[tuple[int, str]] = []  # (time, summary) of each commit, in order
    for row in made:
        message = row.change.message().encode()
        stamp = int(row.when.timestamp())
        moves.append((stamp, row.change.message().split("\n", 1)[0]))
        head = (
            "commit refs/heads/main\n"
            f"mark :{len(moves)}\n"
            f"author Dev <dev@example.com> {stamp} +0000\n"
            f"committer machine <machine@localhost> {stamp} +0000\n"
            f"data {len(message)}\n"
        ).encode()
        start = f"from {parent}\n".encode() if first else b""
        first = False
        importer.stdin.write(
            head
            + message
            + b"\n"
            + start
            + f"M 100644 inline {rows.row_path(row.id)}\n".encode()
            + f"data {len(row.data)}\n".encode()
            + row.data
            + b"\n"
        )
    importer.stdin.close()
    if importer.wait() != 0:
        raise RuntimeError("git fast-import failed")
    _reflog_per_commit(location, parent, moves, marks)
    # fast-import deltas each blob against the one before it in the stream;
    # a store grown by tags gets its deltas from git's own search when it is
    # packed. Repack from scratch so the base is what git would have made.
    git(location, "-c", f"pack.depth={gc.PACK_DEPTH}", "repack", "-a", "-d", "-f", "-q")


def _reflog_per_commit(
    location: Path, parent: str, moves: list[tuple[int, str]], marks: Path
) -> None:
    """The branch's reflog as real use leaves it: one line per tag.

    fast-import moves the branch once; a store used for a year has a line
    for every commit, and recover, restore and ``validate --store`` read
    them all (issue 34 found a quadratic path only such a reflog shows).
    """
    ids = dict(line.split(" ") for line in marks.read_text().splitlines())
    marks.unlink()
    log = location / "logs" / "refs" / "heads" / "main"
    kept = log.read_text().splitlines(keepends=True)[:1]  # the store's init
    old = parent
    with log.open("w") as out:
        out.writelines(kept)
        for n, (stamp, summary) in enumerate(moves, 1):
            new = ids[f":{n}"]
            out.write(
                f"{old} {new} machine <machine@localhost> {stamp} +0000"
                f"\tcommit: {summary}\n"
            )
            old = new


def write_plain(plain: Path, row: Made) -> str:
    """The baseline tag's first step: the row's file in the work tree."""
    path = rows.row_path(row.id)
    target = plain / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(row.data)
    return path


def append_jsonl(jsonl: Path, row: Made) -> None:
    """The other baseline: the dataset is one JSONL file that grows by a line."""
    with (jsonl / "data.jsonl").open("ab") as dataset:
        dataset.write(row.line)
