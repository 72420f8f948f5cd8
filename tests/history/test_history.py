"""The one history walker: every parent, newest date first, incremental."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pygit2
import pytest
from pygit2 import Commit
from pygit2 import Oid

from machine_git.core import jsonio
from machine_git.export import importer
from machine_git.history import history
from machine_git.rows import rows
from machine_git.store.store import BRANCH
from machine_git.store.store import Change
from machine_git.store.store import Store
from tests import helpers


class Graph:
    """Commits made by hand, each at a chosen time, in one bare repository."""

    def __init__(self, path: Path) -> None:
        self.repo = pygit2.init_repository(str(path), bare=True)
        self.ids: dict[str, Oid] = {}

    def add(self, name: str, when: int, *parents: str) -> Oid:
        sig = pygit2.Signature("t", "t@example.com", when, 0)
        tree = self.repo.TreeBuilder().write()
        oid = self.repo.create_commit(
            None, sig, sig, f"{name}\n", tree, [self.ids[p] for p in parents]
        )
        self.ids[name] = oid
        return oid

    def order(self, start: str) -> list[str]:
        head = self.repo[self.ids[start]].peel(Commit)
        names = {oid: name for name, oid in self.ids.items()}
        return [names[c.id] for c in history.commits(self.repo, head)]


def test_every_parent_is_walked_newest_date_first(tmp_path: Path) -> None:
    g = Graph(tmp_path / "g")
    g.add("root", 100)
    g.add("b1", 150, "root")
    g.add("a1", 200, "root")
    g.add("b2", 300, "b1")
    g.add("merge", 400, "a1", "b2")
    assert g.order("merge") == ["merge", "b2", "a1", "b1", "root"]


def test_commits_of_one_second_come_children_first(tmp_path: Path) -> None:
    g = Graph(tmp_path / "g")
    g.add("root", 100)
    g.add("a1", 100, "root")
    g.add("b1", 100, "root")
    g.add("b2", 100, "b1")
    g.add("b3", 100, "b2")
    g.add("merge", 100, "a1", "b3")
    order = g.order("merge")
    assert order == ["merge", "a1", "b3", "b2", "b1", "root"]
    # A queue by date alone would give root before b2 and b1 here.
    for name, oid in g.ids.items():
        for parent in g.repo[oid].peel(Commit).parent_ids:
            parent_name = next(n for n, o in g.ids.items() if o == parent)
            assert order.index(name) < order.index(parent_name)


def test_a_parent_with_a_later_date_still_follows_its_child(tmp_path: Path) -> None:
    # Clocks disagree between machines: a commit can be dated before its parent.
    g = Graph(tmp_path / "g")
    g.add("root", 500)
    g.add("child", 100, "root")
    g.add("head", 300, "child")
    assert g.order("head") == ["head", "child", "root"]


def test_the_walk_reads_only_what_it_yields(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    g = Graph(tmp_path / "g")
    g.add("c0", 1000)
    for n in range(1, 300):
        g.add(f"c{n}", 1000 + n, f"c{n - 1}")
    reads: list[Oid] = []
    real = history._commit

    def counted(repo: pygit2.Repository, oid: Oid) -> Commit:
        reads.append(oid)
        return real(repo, oid)

    monkeypatch.setattr(history, "_commit", counted)
    head = g.repo[g.ids["c299"]].peel(Commit)
    first = []
    for commit in history.commits(g.repo, head):
        first.append(commit.message.strip())
        if len(first) == 20:
            break
    assert first == [f"c{n}" for n in range(299, 279, -1)]
    assert len(reads) == 20  # the 19 parents yielded, and the next one queued


def put(store: Store, row: dict[str, Any], summary: str, **trailers: str) -> None:
    path = rows.row_path(row["id"])
    store.write(
        lambda snap: Change(summary, {path: jsonio.canonical(row)}, dict(trailers))
    )


def merge_in(store: Store, other: Store) -> None:
    """Merge ``other``'s branch into ``store`` as ``machine pull`` does (both trees)."""
    theirs = other.repo.references[BRANCH].peel(Commit)
    # Make the other store's objects readable here, then merge the trees.
    store.repo.odb.add_disk_alternate(str(other.path / "objects"))
    ours = store.head
    assert ours is not None
    files: dict[str, bytes | None] = {}
    for path, data in other.iter_row_blobs(theirs):
        files[path] = data
    store.merge(
        theirs.id, lambda snap: Change("merge other", files, {"Action": "merge"})
    )


@pytest.fixture
def merged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Store, list[str]]:
    """A store with its own tags, an import, and another store's tags merged.

    Every commit is dated the same second (the clock pinned), so the order
    among them is topology alone, whenever the test runs.
    """

    def pinned(name: str, email: str) -> pygit2.Signature:
        return pygit2.Signature(name, email, 1_800_000_000, 0)

    monkeypatch.setattr("machine_git.store.store.Signature", pinned)
    ours = Store.create(tmp_path / "ours")
    theirs = Store.create(tmp_path / "theirs")
    put(ours, helpers.train_row("a1a1a1a1a1a1"), "tag a1", Row="a1a1a1a1a1a1")
    put(theirs, helpers.train_row("b1b1b1b1b1b1"), "tag b1", Row="b1b1b1b1b1b1")
    put(theirs, helpers.train_row("b2b2b2b2b2b2"), "tag b2", Row="b2b2b2b2b2b2")
    data = tmp_path / "more.jsonl"
    data.write_bytes(
        b"".join(
            jsonio.line(helpers.train_row(f"c{n}c{n}c{n}c{n}c{n}c{n}")) for n in (1, 2)
        )
    )
    importer.commit(ours, importer.load(data))
    merge_in(ours, theirs)
    put(ours, helpers.train_row("a2a2a2a2a2a2"), "tag a2", Row="a2a2a2a2a2a2")
    return ours, ["a2a2a2a2a2a2"]


def test_recent_lists_rows_however_they_came(merged: tuple[Store, list[str]]) -> None:
    store, _ = merged
    found = [r["id"] for r in history.recent(store, 10)]
    # All made in the same second, so by topology: the newest tag, the import
    # (its rows by id), then the two sides of the merge, first parent first.
    assert found == [
        "a2a2a2a2a2a2",
        "c1c1c1c1c1c1",
        "c2c2c2c2c2c2",
        "b2b2b2b2b2b2",
        "a1a1a1a1a1a1",
        "b1b1b1b1b1b1",
    ]
    assert [r["id"] for r in history.recent(store, 2)] == found[:2]


def test_log_of_one_row_follows_the_side_that_changed_it(
    merged: tuple[Store, list[str]],
) -> None:
    store, _ = merged
    head = store.head
    assert head is not None
    life = history.log(store, head, row_id="b1b1b1b1b1b1")
    # The tag on the other side, not the merge that only took it.
    assert [e.summary for e in life] == ["tag b1"]
    actions = [e.action for e in history.log(store, head)]
    # One init: both stores were made in the same second by the same author
    # (the clock is pinned), so their first commits are one commit. Then 2
    # tags of ours, the import, 2 tags of theirs and the merge.
    assert sorted(actions) == ["commit"] * 4 + ["import", "init", "merge"]
