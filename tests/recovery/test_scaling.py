"""No path is quadratic in the history: the reflog and history helpers at 10k and 100k.

A store used for a year has a reflog line per tag. Each helper is timed on a
store of 10,000 commits and on one of 100,000, in the same run, and the ratio
of the two must stay near 10 (linear): above 15 it grows faster than the
history. A ratio, not a time, and of CPU time, not wall time: on a machine
shared by many, waiting for a core is most of the wall time and none of the
work. The best of a few interleaved runs is taken on each side.
"""

from __future__ import annotations

import gc
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pygit2
import pytest

from machine_git.history import history
from machine_git.recovery import diagnosis
from machine_git.recovery.intact import Checker
from machine_git.store import reflog
from machine_git.store.layout import REFLOG
from machine_git.store.objects import objects_only
from machine_git.store.store import Store

SMALL, LARGE = 10_000, 100_000
LIMIT = 15.0  # 100k against 10k; linear is 10
_EPOCH = 1_700_000_000


@dataclass
class Built:
    path: Path
    commits: list[str]  # oldest first


def build(path: Path, n: int) -> Built:
    """A machine store of ``n`` commits, one reflog line each, as tags leave it.

    The commits come from ``git fast-import`` (n tags would take minutes);
    each changes one file, so each has its own tree and blob. The reflog is written
    the way git writes it, a line per move of the branch.
    """
    store = Store.create(path)
    first = str(store.repo.references["refs/heads/main"].target)
    marks = path.parent / f"marks-{n}"
    stream = bytearray()
    for i in range(n):
        message = f"tag row {i:012x}\n".encode()
        stream += (
            f"commit refs/heads/main\nmark :{i + 1}\n"
            f"committer Dev <dev@example.com> {_EPOCH + i} +0000\n"
            f"data {len(message)}\n"
        ).encode() + message
        if i == 0:
            stream += f"from {first}\n".encode()
        body = f"{i}\n".encode()
        stream += f"M 100644 inline r.json\ndata {len(body)}\n".encode()
        stream += body + b"\n"
    subprocess.run(
        ["git", "-C", str(path), "fast-import", "--quiet", f"--export-marks={marks}"],
        input=bytes(stream),
        check=True,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1"},
    )
    ids = dict(line.split(" ") for line in marks.read_text().splitlines())
    commits = [ids[f":{i + 1}"] for i in range(n)]
    # fast-import moved the branch once; a tag at a time moves it n times.
    lines = (path / REFLOG).read_text().splitlines(keepends=True)[:1]
    old = first
    for i, new in enumerate(commits):
        lines.append(
            f"{old} {new} machine <machine@localhost> {_EPOCH + i} +0000"
            f"\tcommit: tag row {i:012x}\n"
        )
        old = new
    with (path / REFLOG).open("w") as log:
        log.writelines(lines)
    return Built(path, commits)


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Built]:
    root = tmp_path_factory.mktemp("scaling")
    return {n: build(root / f"store-{n}", n) for n in (SMALL, LARGE)}


def timed(action: Callable[[], object]) -> float:
    gc.collect()  # the garbage of the run before is not this run's cost
    # Python's own collector runs at moments that depend on what else the
    # process allocated (other tests, under xdist): it is not the helper's cost.
    gc.disable()
    try:
        started = time.process_time()
        action()
        return time.process_time() - started
    finally:
        gc.enable()


def ratio(stores: dict[int, Built], action: Callable[[Built], object]) -> float:
    """The best large run over the best small run, the two interleaved so a
    busy spell (caches shared with other processes) lands on both sizes."""
    small: list[float] = []
    large: list[float] = []
    for _ in range(3):
        small += [timed(lambda: action(stores[SMALL])) for _ in range(2)]
        large.append(timed(lambda: action(stores[LARGE])))
    return min(large) / min(small)


def test_the_stores_have_a_reflog_line_per_commit(stores: dict[int, Built]) -> None:
    for n, built in stores.items():
        entries = reflog.reflog(built.path)
        assert len(entries) == n + 1  # and the store's first commit
        assert [e.new for e in entries[1:]] == built.commits
        assert not diagnosis.diagnose(built.path).damaged


def _been_at(built: Built) -> list[str]:
    entries = reflog.reflog(built.path)
    found = reflog.commits_been_at(built.commits[-1], entries)
    assert len(found) == len(built.commits) + 1
    return found


def test_reading_the_reflog_is_linear(stores: dict[int, Built]) -> None:
    assert ratio(stores, _been_at) < LIMIT


def test_the_steps_a_recover_undoes_are_linear(stores: dict[int, Built]) -> None:
    def undone(built: Built) -> None:
        steps = reflog.undone_steps(reflog.newest_first(built.path), built.commits[0])
        assert len(steps) == len(built.commits) - 1

    assert ratio(stores, undone) < LIMIT


@pytest.mark.parametrize("deep", [False, True], ids=["commits", "trees"])
def test_whole_histories_of_every_commit_are_linear(
    stores: dict[int, Built], deep: bool
) -> None:
    # What diagnosis asks of a damaged store: for every commit the branch has
    # been at (one per reflog line), does its whole history read?
    def every(built: Built) -> None:
        checker = Checker(objects_only(built.path), None, deep)
        # Oldest first: the most work for a checker that remembers nothing.
        assert all(checker.whole(c) for c in reversed(_been_at(built)))

    assert ratio(stores, every) < LIMIT


def test_validate_store_diagnosis_is_linear(stores: dict[int, Built]) -> None:
    def diagnose(built: Built) -> None:
        found = diagnosis.diagnose(built.path)
        assert not found.damaged and found.intact is not None
        assert found.intact.commit == built.commits[-1]

    assert ratio(stores, diagnose) < LIMIT


def test_walking_the_history_is_linear(stores: dict[int, Built]) -> None:
    def walk(built: Built) -> None:
        repo = pygit2.Repository(str(built.path))
        head = repo[built.commits[-1]].peel(pygit2.Commit)
        assert sum(1 for _ in history.commits(repo, head)) == len(built.commits) + 1

    assert ratio(stores, walk) < LIMIT


def test_the_reflog_read_from_its_end_is_the_reflog_reversed(tmp_path: Path) -> None:
    # Lines of every odd kind, some long enough to cross the 64 KB blocks
    # the file is read in: the same entries, newest first, either way.
    a, b, c = "a" * 40, "b" * 40, "c" * 40
    lines = [
        f"{a} {b} Dev <d@x> 1700000000 +0000\tcommit: plain",
        "not a reflog line at all",
        "",
        f"{b} {c} Dev <d@x> notatime +0000\tcommit: bad time",
        f"{c} {a} Dev <d@x> 1700000001 +0000\tcommit: " + "long é " * 20_000,
        f"{a} {c} Dev <d@x> 1700000002 +0000\tcommit: a\u2028split by str.splitlines",
        f"{c} {b} Dev <d@x> 1700000003 +0000\tcommit: crlf\r",
    ]
    data = "\n".join(lines).encode() + b"\n" + f"{b} {a} D <d> 5 +0000\tx".encode()
    data = data.replace(b"plain", b"pl\xffain")  # invalid UTF-8 reads as U+FFFD
    for ending in (b"", b"\n"):
        path = tmp_path / ending.hex()
        (path / REFLOG).parent.mkdir(parents=True)
        (path / REFLOG).write_bytes(data + ending)
        oldest = reflog.reflog(path)
        assert len(oldest) == 6
        assert oldest[0].message == "commit: pl\ufffdain"
        assert list(reflog.newest_first(path)) == oldest[::-1]
    assert list(reflog.newest_first(tmp_path / "nothing")) == []


def test_a_healthy_store_is_diagnosed_without_reading_its_whole_reflog(
    tmp_path: Path,
) -> None:
    import tracemalloc

    built = build(tmp_path / "store", 1_000)
    # A long past: 150,000 older moves between commits it has, before the
    # lines the last 1,000 tags wrote.
    log = built.path / REFLOG
    lines = log.read_bytes().splitlines(keepends=True)
    commits = built.commits
    past = [
        f"{commits[i % 1000]} {commits[(i + 1) % 1000]} D <d@x> {_EPOCH} +0000"
        f"\tcommit: an old tag {i}\n".encode()
        for i in range(150_000)
    ]
    log.write_bytes(b"".join(lines[:1] + past + lines[1:]))
    size = log.stat().st_size
    tracemalloc.start()
    try:
        found = diagnosis.diagnose(built.path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not found.damaged and found.intact is not None
    assert found.intact.commit == commits[-1] and found.undone == []
    # Reading it whole held about a file's size again and again; the end of
    # it is one block.
    assert peak < size / 4, (peak, size)
