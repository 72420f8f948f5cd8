"""A streamed import (importer.load(..., into=folder)): rows go into a pack as
they are read; memory follows one row, not the file; all or nothing."""

from __future__ import annotations

import hashlib
import tracemalloc
from pathlib import Path

import orjson
import pytest

from machine_git.core.errors import ImportConflictError
from machine_git.core.errors import ImportProblemsError
from machine_git.export import importer
from machine_git.rows import rows
from machine_git.store import bulk
from machine_git.store.store import BULK
from machine_git.store.store import Store
from tests import helpers

ROW = 20_000  # bytes of text in each generated row
FIXED = 2_000_000  # buffers of any import: chunks, the trees, the pack index


def row_id(n: int) -> str:
    return hashlib.sha1(b"%d" % n).hexdigest()[:12]


def rows_file(path: Path, count: int, answer: str = "hello", pad: int = ROW) -> Path:
    with path.open("wb") as f:
        for n in range(count):
            messages = [
                {"role": "user", "content": f"question {n} " + "q" * pad},
                {"role": "assistant", "content": answer},
            ]
            f.write(orjson.dumps(helpers.train_row(row_id(n), messages=messages)))
            f.write(b"\n")
    return path


def packs(store: Path) -> list[str]:
    return sorted(p.name for p in (store / "objects" / "pack").glob("*"))


def test_a_streamed_import_holds_one_row_at_a_time_not_the_file(
    tmp_path: Path,
) -> None:
    count = 800
    path = rows_file(tmp_path / "big.jsonl", count)
    size = path.stat().st_size  # 16 MB
    store = Store.create(tmp_path / "store", tmp_path / "project")
    warm = rows_file(tmp_path / "warm.jsonl", BULK + 1, pad=10)  # loads modules
    importer.commit(
        Store.create(tmp_path / "w", None), importer.load(warm, into=tmp_path)
    )

    tracemalloc.start()
    try:
        loaded = importer.load(path, into=tmp_path / "beside")
        done = importer.commit(store, loaded)
        _, streamed = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        held = importer.load(path)  # the whole file's rows, in memory
        _, whole = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert done.count == count and len(held.rows) == count
    # Fixed buffers, one row at a time, and under 2 KB a row (id, kind, blob
    # id, line number, its tree entry): far below the file, which holding
    # the rows exceeds.
    assert streamed < FIXED + 2 * ROW + 2000 * count < size / 4
    assert whole > size
    assert list(tmp_path.joinpath("beside").iterdir()) == []  # the pack moved in
    assert not list((store.path / "machine").glob(f"{bulk.MARK}*"))  # written
    for n in (0, count - 1):
        row = store.read_row(row_id(n))
        assert row is not None and row["kind"] == "train"
        assert row["messages"] == held.rows[n]["messages"]  # type: ignore[typeddict-item]


def test_a_streamed_import_writes_what_the_whole_one_writes(tmp_path: Path) -> None:
    path = rows_file(tmp_path / "f.jsonl", 100, pad=10)
    trees = []
    for name, into in (("a", tmp_path / "beside"), ("b", None)):
        store = Store.create(tmp_path / name, tmp_path / "project")
        done = importer.commit(store, importer.load(path, into=into))
        assert done.count == 100
        assert store.head is not None
        trees.append(store.head.tree_id)
    assert trees[0] == trees[1]


def test_a_bad_last_line_writes_nothing_and_leaves_no_pack(tmp_path: Path) -> None:
    path = rows_file(tmp_path / "f.jsonl", 100, pad=10)
    with path.open("ab") as f:
        f.write(b'{"messages": 3}\n')
    store = Store.create(tmp_path / "store", tmp_path / "project")
    head, before = store.head, packs(store.path)
    with pytest.raises(ImportProblemsError):
        importer.load(path, into=tmp_path / "beside")
    assert list(tmp_path.joinpath("beside").iterdir()) == []
    assert (store.head, packs(store.path)) == (head, before)


def test_a_conflict_writes_nothing_and_the_same_file_again_adds_nothing(
    tmp_path: Path,
) -> None:
    beside = tmp_path / "beside"
    path = rows_file(tmp_path / "f.jsonl", 100, pad=10)
    store = Store.create(tmp_path / "store", tmp_path / "project")
    importer.commit(store, importer.load(path, into=beside))
    head, before = store.head, packs(store.path)

    other = rows_file(tmp_path / "g.jsonl", 100, answer="other", pad=10)
    with pytest.raises(ImportConflictError):
        importer.commit(store, importer.load(other, into=beside))
    assert list(beside.iterdir()) == []
    assert (store.head, packs(store.path)) == (head, before)

    again = importer.commit(store, importer.load(path, into=beside))
    assert (again.count, again.present, again.commit) == (0, 100, None)
    assert list(beside.iterdir()) == []
    assert store.head == head
    assert store.read_row(row_id(7)) is not None
    assert rows.row_path(row_id(7)).startswith("rows/")
