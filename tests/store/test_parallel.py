from __future__ import annotations

import contextlib
import hashlib
import os
import zlib
from pathlib import Path
from typing import Any

import pygit2
import pytest

from machine_git.core import jsonio
from machine_git.core import paths
from machine_git.core.errors import StoreError
from machine_git.core.errors import UsageError
from machine_git.export import export
from machine_git.recovery import validate
from machine_git.rows import rows
from machine_git.rows.schemas import KINDS
from machine_git.store import parallel
from machine_git.store.objects import CorruptObjectError
from machine_git.store.objects import Objects
from machine_git.store.store import Change
from machine_git.store.store import Store
from tests import helpers


def many_rows(count: int) -> list[dict[str, Any]]:
    """Rows of every kind with ids spread over the rows/ab fan-out."""
    out = []
    for n in range(count):
        row_id = hashlib.sha256(str(n).encode()).hexdigest()[:12]
        if n % 3 == 0:
            row = helpers.traces_row(row_id)
        elif n % 3 == 1:
            row = helpers.train_row(
                row_id,
                messages=[
                    {"role": "user", "content": f"question {n}"},
                    {"role": "assistant", "content": f"answer {n}"},
                ],
            )
        else:
            row = helpers.train_row(row_id, kind="rejected", tag="bad")
        out.append(row)
    return out


@pytest.fixture
def store(project: Path) -> Store:
    made = Store.create(paths.store_path(project), project)
    files: dict[str, bytes | None] = {
        rows.row_path(r["id"]): jsonio.canonical(r) for r in many_rows(60)
    }
    made.write(lambda snap: Change("60 rows", files))
    return made


def exported(store: Store, jobs: str, monkeypatch: pytest.MonkeyPatch) -> bytes:
    monkeypatch.setenv(parallel.JOBS_ENV, jobs)
    tally = export.Tally()
    head = store.head
    assert head is not None
    out = b"".join(export.lines(store, head, "openai", KINDS, tally))
    assert (tally.rows, tally.skipped) == (60, 0)
    return out


def test_an_export_in_worker_processes_is_the_same_bytes(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    alone = exported(store, "1", monkeypatch)
    assert alone.count(b"\n") == 60
    assert exported(store, "3", monkeypatch) == alone


def plant(store: Store, path: str, data: bytes) -> None:
    """Commit ``data`` at ``path`` behind machine's back (as a raw push would)."""
    repo = store.repo
    head = repo.references["refs/heads/main"].peel(pygit2.Commit)
    index = pygit2.Index()
    index.read_tree(head.tree)
    index.add(
        pygit2.IndexEntry(path, repo.create_blob(data), pygit2.enums.FileMode.BLOB)
    )
    sig = pygit2.Signature("t", "t@example.com")
    repo.create_commit(
        "refs/heads/main", sig, sig, "x\n", index.write_tree(repo), [head.id]
    )


def test_validate_in_worker_processes_finds_the_same_problems_in_order(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    plant(store, "rows/00/00/000000000002.json", b'{"id": "000000000002"}')
    plant(
        store,
        "rows/ff/ff/ffffffffffff.json",
        jsonio.line(helpers.train_row("ffffffffffff")),
    )
    plant(store, "rows/stray.txt", b"not a row")

    def check(jobs: str) -> tuple[list[str], int]:
        monkeypatch.setenv(parallel.JOBS_ENV, jobs)
        tally = validate.Tally()
        return [str(f) for f in validate.check_store(store, tally)], tally.rows

    found, count = check("1")
    assert count == 63
    assert found[0] == (
        "rows/00/00/000000000002.json:1: $.kind: unknown kind None "
        "(expected one of train, traces, rejected, observed)"
    )
    assert found[-2:] == [
        "rows/ff/ff/ffffffffffff.json:1: $: not canonical JSON (sorted keys, indent 2)",
        "rows/stray.txt:1: $: not a row path (rows/ab/cd/<12 hex>.json)",
    ]
    assert check("2") == (found, count)


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5"])
def test_a_bad_jobs_setting_is_one_clear_error(
    store: Store, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(parallel.JOBS_ENV, value)
    head = store.head
    assert head is not None
    with pytest.raises(UsageError) as caught:
        list(export.lines(store, head, "tinker", KINDS, export.Tally()))
    assert str(caught.value) == (
        f"MACHINE_JOBS={value!r}: expected a whole number >= 1"
    )


def test_small_stores_are_read_in_one_process_large_ones_in_several(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(parallel.JOBS_ENV, raising=False)
    monkeypatch.setattr(parallel, "_cores", lambda: 4)
    top = store.rows_tree()
    assert top is not None
    pieces = parallel.parts(top, "rows/")
    assert parallel.jobs(Objects(store.repo), pieces) == 1  # 60 rows
    monkeypatch.setattr(parallel, "MIN_ROWS", 50)
    assert parallel.jobs(Objects(store.repo), pieces) == 4
    monkeypatch.setattr(parallel, "_cores", lambda: 1)
    assert parallel.jobs(Objects(store.repo), pieces) == 1
    # An explicit setting wins, but never more workers than parts.
    monkeypatch.setenv(parallel.JOBS_ENV, "100")
    assert parallel.jobs(Objects(store.repo), pieces[:3]) == 3


def parts_of(store: Store) -> list[parallel.Part]:
    top = store.rows_tree()
    assert top is not None
    return parallel.parts(top, "rows/")


def die(objects: Objects, path: str, oid: pygit2.Oid, is_tree: bool) -> int:
    if path.startswith("rows/"):
        os._exit(3)  # as the OOM killer would end a worker
    return 0


def test_a_worker_that_dies_is_one_error_not_a_hang(store: Store) -> None:
    pieces = parts_of(store)
    with pytest.raises(StoreError) as caught:
        list(parallel.run(Objects(store.repo), pieces, die, 2))
    assert str(caught.value) == (
        "a process reading the store died (out of memory, or killed); nothing was "
        "finished: rerun, or set MACHINE_JOBS=1"
    )


def fail(objects: Objects, path: str, oid: pygit2.Oid, is_tree: bool) -> int:
    raise StoreError(f"{path}: broken")


def test_an_error_in_a_worker_comes_back_as_itself(store: Store) -> None:
    pieces = parts_of(store)
    with pytest.raises(StoreError) as caught:
        list(parallel.run(Objects(store.repo), pieces, fail, 2))
    assert str(caught.value) == f"{pieces[0][0]}: broken"


def test_loose_objects_are_hashed_even_in_bulk_reads(store: Store) -> None:
    # bulk_reads turns libgit2's re-hashing off (for packed objects); a loose
    # one is read by the guard (objects.py), which always hashes it.
    repo = store.repo
    real = repo.create_blob(b"the real row\n")
    other = zlib.compress(b"blob 14\x00a swapped row\n")
    loose = Path(repo.path) / "objects" / str(real)[:2] / str(real)[2:]
    loose.chmod(0o600)
    loose.write_bytes(other)  # a whole, valid object: under the wrong name

    for bulk in (False, True):
        with parallel.bulk_reads() if bulk else contextlib.nullcontext():
            with pytest.raises(CorruptObjectError, match="does not match"):
                repo.read(real)
            with pytest.raises(CorruptObjectError, match="does not match"):
                Objects(repo).blob(real)
