"""Bulk commits: many files become one pack, written directly (bulk.py)."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pygit2
import pytest

from machine_git.core import jsonio
from machine_git.core.errors import MachineError
from machine_git.rows import rows
from machine_git.store import bulk
from machine_git.store import gc
from machine_git.store import packs
from machine_git.store.objects import open_repository
from machine_git.store.store import BRANCH
from machine_git.store.store import Change
from machine_git.store.store import Snapshot
from machine_git.store.store import Store
from machine_git.store.store import configure
from tests import helpers
from tests.conftest import git
from tests.store.test_gc import wait_for_packer

MANY = 200  # rows in a bulk change (above store._BULK files)


def row_ids(count: int, start: int = 0) -> list[str]:
    # Spread over the fan-out like real ids: many trees on the paths.
    return [
        hashlib.sha1(b"%d" % n).hexdigest()[:12] for n in range(start, start + count)
    ]


def many_rows(count: int = MANY, start: int = 0) -> dict[str, bytes | None]:
    return {
        rows.row_path(i): jsonio.canonical(helpers.train_row(i))
        for i in row_ids(count, start)
    }


def loose_objects(store: Path) -> set[str]:
    return {p.parent.name + p.name for p in (store / "objects").glob("??/*")}


def commit(store: Store, files: dict[str, bytes | None], summary: str) -> pygit2.Oid:
    def plan(snap: Snapshot) -> Change:
        return Change(summary, files, trailers={"Action": "import"})

    oid = store.write(plan)
    assert oid is not None
    return oid


@pytest.fixture
def store(tmp_path: Path) -> Store:
    (tmp_path / "p").mkdir()
    return Store.create(tmp_path / "store", tmp_path / "p")


def test_a_change_of_many_files_is_one_private_pack_and_no_loose_object(
    store: Store,
) -> None:
    before = loose_objects(store.path)
    files = many_rows()
    oid = commit(store, files, f"import {MANY} rows")

    assert loose_objects(store.path) == before
    [pack] = (store.path / "objects" / "pack").glob("pack-*.pack")
    index = pack.with_suffix(".idx")
    assert {p.name for p in pack.parent.iterdir()} == {pack.name, index.name}
    for file in (pack, index):
        assert oct(file.stat().st_mode & 0o777) == oct(0o600)
    git(store.path, "fsck", "--strict", "--no-dangling")
    # One commit, every row at its path, as git reads it.
    assert git(store.path, "rev-parse", "main").strip() == str(oid)
    assert git(store.path, "rev-list", "--count", "main").strip() == "2"
    listed = git(store.path, "ls-tree", "-r", "--name-only", "main").split()
    assert set(files) <= set(listed)
    some = sorted(files)[7]
    assert git(store.path, "cat-file", "blob", f"main:{some}").encode() == files[some]
    # The pack holds exactly the new objects: the blobs, the trees on their
    # paths, and the commit.
    verified = git(store.path, "verify-pack", "-v", str(index)).splitlines()
    types = [line.split()[1] for line in verified if len(line.split()) >= 5]
    assert types.count("commit") == 1
    assert types.count("blob") == MANY
    assert types[0] == "commit"  # commit first, as an export asks


def test_the_index_is_what_git_builds_from_the_pack(store: Store) -> None:
    commit(store, many_rows(), "import")
    [pack] = (store.path / "objects" / "pack").glob("pack-*.pack")
    rebuilt = store.path / "rebuilt.idx"
    subprocess.run(
        ["git", "index-pack", "-o", str(rebuilt), str(pack)],
        check=True,
        capture_output=True,
    )
    assert rebuilt.read_bytes() == pack.with_suffix(".idx").read_bytes()
    [checked] = packs.check(store.path / "objects")
    assert checked.problem is None


def test_offsets_past_two_gigabytes_go_to_the_large_offset_table(
    tmp_path: Path,
) -> None:
    entries = [
        (bytes([0x10]) + bytes(19), 11, 12),
        (bytes([0x20]) + bytes(19), 22, 3 << 30),
        (bytes([0x30]) + bytes(19), 33, 5 << 30),
    ]
    index = tmp_path / "pack-x.idx"
    index.write_bytes(bulk._index(entries, bytes(20)))
    names, crcs, offsets = packs.read_index(index)
    assert names == [raw.hex() for raw, _, _ in entries]
    assert crcs == [11, 22, 33]
    assert offsets == [12, 3 << 30, 5 << 30]


def test_an_open_store_reads_what_a_bulk_commit_wrote(store: Store) -> None:
    reader = Store.open(store.path)  # opened (and read) before the pack exists
    assert reader.read_row(row_ids(1)[0]) is None
    commit(store, many_rows(), "import")
    for row_id in row_ids(MANY)[::37]:
        assert reader.read_row(row_id, reader.head) == helpers.train_row(row_id)


def test_the_reflog_says_what_libgit2_says_for_a_commit(store: Store) -> None:
    commit(store, many_rows(), "import 200 rows from x.jsonl")
    last = store.repo.references[BRANCH].log()
    entry = next(iter(last))
    assert entry.message == "commit: import 200 rows from x.jsonl"
    assert entry.committer.name == "machine"


def test_changes_and_deletions_of_many_rows_in_one_pack(store: Store) -> None:
    commit(store, many_rows(), "import")
    files: dict[str, bytes | None] = dict.fromkeys(list(many_rows())[:100])
    files.update(many_rows(50, start=MANY))
    commit(store, files, "rewrite")
    listed = git(store.path, "ls-tree", "-r", "--name-only", "main").split()
    assert len([p for p in listed if p.startswith("rows/")]) == MANY - 100 + 50
    assert len(list((store.path / "objects" / "pack").glob("pack-*.idx"))) == 2
    git(store.path, "fsck", "--strict", "--no-dangling")


def test_the_same_rows_again_make_no_commit_and_no_pack(store: Store) -> None:
    first = commit(store, many_rows(), "import")
    assert store.write(lambda snap: Change("again", many_rows())) is None
    assert store.head is not None and store.head.id == first
    assert len(list((store.path / "objects" / "pack").glob("pack-*.pack"))) == 1


def test_a_branch_moved_by_someone_else_is_planned_again(store: Store) -> None:
    # A push into the store (outside machine's lock) lands between the plan
    # and the ref update: the compare-and-swap sees it and machine retries.
    outside = commit(store, many_rows(1, start=5000), "small")
    parent = git(store.path, "rev-parse", "main~1").strip()
    git(store.path, "update-ref", BRANCH, parent)
    planned: list[str] = []

    def plan(snap: Snapshot) -> Change:
        planned.append(str(snap.commit.id) if snap.commit else "")
        if len(planned) == 1:
            git(store.path, "update-ref", BRANCH, str(outside))
        return Change("import", many_rows())

    oid = store.write(plan)
    assert planned == [parent, str(outside)]
    assert git(store.path, "rev-parse", f"{oid}^").strip() == str(outside)
    git(store.path, "fsck", "--strict")


def test_a_bulk_commit_on_an_unborn_branch_creates_it(tmp_path: Path) -> None:
    repo = pygit2.init_repository(
        str(tmp_path / "bare"), bare=True, initial_head="main"
    )
    configure(repo, None)  # machine's settings: a reflog for the branch
    store = Store(tmp_path / "bare", open_repository(tmp_path / "bare"))
    with store.locked():
        oid = store._write_locked(lambda snap: Change("import", many_rows()))
    assert git(store.path, "rev-parse", "main").strip() == str(oid)
    assert "commit (initial): import" in git(store.path, "reflog", "main")


def test_what_a_killed_bulk_write_left_is_removed_and_never_damage(
    store: Store,
) -> None:
    commit(store, many_rows(), "import")
    folder = store.path / "objects" / "pack"
    [whole] = folder.glob("pack-*.pack")
    # A kill between the renames: the pack is in place, its index is not.
    (folder / "pack-ab.pack").write_bytes(whole.read_bytes())
    (folder / f"{bulk.TEMP}pack-ab.idx").write_bytes(b"index")
    # A kill while writing: a temporary pack.
    (folder / f"{bulk.TEMP}1_2.pack").write_bytes(b"PACK")
    assert bulk.interrupted(folder / "pack-ab.pack")
    assert not bulk.interrupted(whole)
    assert [p.path for p in packs.check(store.path / "objects")] == [whole]
    removed = gc.remove_leftovers(store.path)
    assert removed == [
        "objects/pack/pack-ab.pack",
        f"objects/pack/{bulk.TEMP}1_2.pack",
        f"objects/pack/{bulk.TEMP}pack-ab.idx",
    ]
    assert sorted(os.listdir(folder)) == sorted([whole.name, f"{whole.stem}.idx"])


def test_the_next_bulk_write_cleans_up_first(store: Store) -> None:
    folder = store.path / "objects" / "pack"
    folder.mkdir(exist_ok=True)
    (folder / f"{bulk.TEMP}9_9.pack").write_bytes(b"PACK")
    commit(store, many_rows(), "import")
    assert not list(folder.glob(f"{bulk.TEMP}*"))


def test_many_bulk_writes_are_joined_by_gc_auto(store: Store) -> None:
    store.repo.config["gc.autoPackLimit"] = "3"
    for n in range(4):
        commit(store, many_rows(40, start=1000 * n), f"import {n}")
    # The fourth pack went over the limit: a packer in the background joined
    # them (four packs of the same size: geometric repacking makes them one).
    wait_for_packer(store.path)
    assert gc.pack_count(store.path) == 1
    assert not gc.needs_packing(store)
    git(store.path, "fsck", "--strict", "--no-dangling")


def test_a_bulk_write_whose_branch_update_fails_removes_its_pack(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 25: a full disk at the branch update left the whole pack behind.
    packs_before = sorted((store.path / "objects" / "pack").iterdir())
    head = store.head

    def full(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Store, "_move_branch", full)
    with pytest.raises(MachineError, match="no space left on the device; nothing was"):
        commit(store, many_rows(), "import")
    assert sorted((store.path / "objects" / "pack").iterdir()) == packs_before
    assert store.head == head
    monkeypatch.undo()
    commit(store, many_rows(), "import")
    assert len(list((store.path / "objects" / "pack").glob("pack-*.pack"))) == 1
    git(store.path, "fsck", "--full", "--strict")


def test_a_lost_race_leaves_one_pack_per_commit_made(store: Store) -> None:
    # The branch moved under the bulk write: its pack goes before the retry.
    outside = commit(store, many_rows(1, start=5000), "small")
    parent = git(store.path, "rev-parse", "main~1").strip()
    git(store.path, "update-ref", BRANCH, parent)
    moved: list[bool] = []
    real = Store._move_branch

    def racing(self: Store, *args: object) -> None:
        if not moved:
            moved.append(True)
            git(store.path, "update-ref", BRANCH, str(outside))
        real(self, *args)  # type: ignore[arg-type]

    Store._move_branch = racing  # type: ignore[method-assign,assignment]
    try:
        commit(store, many_rows(), "import")
    finally:
        Store._move_branch = real  # type: ignore[method-assign]
    assert len(list((store.path / "objects" / "pack").glob("pack-*.pack"))) == 1
    git(store.path, "fsck", "--full", "--strict")


KILLED_WRITER = """
import os, signal, sys
from pathlib import Path
from machine_git.store.store import Change, Store
from tests.store.test_bulk import many_rows

store = Store.open(Path(sys.argv[1]))
real = Store._move_branch

def killed(self, *args):
    if sys.argv[2] == "after":
        real(self, *args)
    os.kill(os.getpid(), signal.SIGKILL)

Store._move_branch = killed
rows = many_rows(start=int(sys.argv[3]))
store.write(lambda snap: Change("import", rows, trailers={"Action": "import"}))
"""


def killed_bulk_write(store: Store, when: str, start: int = 0) -> str:
    """A real writer killed just before (or just after) its branch moves,
    after its pack is renamed into place; the pack's name."""
    before = set((store.path / "objects" / "pack").glob("pack-*.pack"))
    done = subprocess.run(
        [sys.executable, "-c", KILLED_WRITER, str(store.path), when, str(start)],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
        capture_output=True,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    [pack] = set((store.path / "objects" / "pack").glob("pack-*.pack")) - before
    name = pack.stem.removeprefix("pack-")
    assert (store.path / "machine" / f"{bulk.MARK}{name}").exists()
    return name


def test_gc_removes_the_pack_of_a_writer_killed_before_its_branch_moved(
    store: Store,
) -> None:
    # Issue 25: git exploded such a pack into one loose file per object.
    commit(store, many_rows(3, start=7000), "small")
    head = store.head
    name = killed_bulk_write(store, "before")
    assert store.head == head
    packed = gc.pack(store)
    assert f"objects/pack/pack-{name}.pack" in packed.removed
    assert f"objects/pack/pack-{name}.idx" in packed.removed
    folder = store.path / "objects" / "pack"
    assert not list(folder.glob(f"pack-{name}.*"))
    assert not list((store.path / "machine").glob(f"{bulk.MARK}*"))
    assert gc.usage(store.path).loose < 20  # not hundreds of exploded objects
    assert store.head == head
    git(store.path, "fsck", "--full", "--strict")
    # The rows are not in the store, and the next import writes them again.
    commit(store, many_rows(), "import")
    git(store.path, "fsck", "--full", "--strict")


def test_the_next_write_removes_the_pack_before_it_stages(store: Store) -> None:
    name = killed_bulk_write(store, "before")
    # The same rows again: their blobs are in the dead writer's pack, so
    # the pack must go before the write decides what the store has.
    oid = commit(store, many_rows(), "import")
    # One pack: the new write's (the same name if the commit is the same,
    # made in the same second), and main names its commit.
    [pack] = (store.path / "objects" / "pack").glob("pack-*.pack")
    assert pack_commit(store, pack.stem.removeprefix("pack-")) == str(oid)
    assert name  # the dead writer's was removed first, or it would be two
    assert not list((store.path / "machine").glob(f"{bulk.MARK}*"))
    git(store.path, "fsck", "--full", "--strict")
    listed = git(store.path, "ls-tree", "-r", "--name-only", "main").split()
    assert set(many_rows()) <= set(listed)


def pack_commit(store: Store, name: str) -> str:
    index = store.path / "objects" / "pack" / f"pack-{name}.idx"
    listed = git(store.path, "verify-pack", "-v", str(index)).splitlines()
    return next(line.split()[0] for line in listed if " commit " in line)


def test_a_pack_whose_objects_are_reachable_is_kept(store: Store) -> None:
    folder = store.path / "objects" / "pack"
    # Killed after the branch moved: the pack holds main's commit.
    name = killed_bulk_write(store, "after")
    with store.locked():
        assert bulk.settle(store.path) == []
    assert (folder / f"pack-{name}.pack").exists()
    assert (folder / f"pack-{name}.idx").exists()
    assert not list((store.path / "machine").glob(f"{bulk.MARK}*"))
    assert git(store.path, "rev-parse", "main").strip() == pack_commit(store, name)
    # Killed before, but a ref made by hand reaches its commit.
    other = killed_bulk_write(store, "before", start=MANY)
    git(store.path, "update-ref", "refs/tags/kept", pack_commit(store, other))
    with store.locked():
        assert bulk.settle(store.path) == []
    assert (folder / f"pack-{other}.pack").exists()
    assert not list((store.path / "machine").glob(f"{bulk.MARK}*"))
    git(store.path, "fsck", "--full", "--strict")
