from __future__ import annotations

import os
import time
from pathlib import Path

import pygit2
import pytest

from machine_git.core.errors import ConcurrentUpdateError
from machine_git.store import gc
from machine_git.store.store import Store
from machine_git.store.store import private_objects
from tests import helpers
from tests.conftest import git


def row_ids(count: int) -> list[str]:
    return [f"{n:012x}" for n in range(0xA00000000000, 0xA00000000000 + count)]


def modes(store: Path) -> set[tuple[str, int]]:
    """(kind, mode) of everything in the store: what the privacy promise is about."""
    found = set()
    for folder, names, files in os.walk(store):
        found |= {("dir", os.stat(Path(folder, n)).st_mode & 0o777) for n in names}
        found |= {("file", os.stat(Path(folder, n)).st_mode & 0o777) for n in files}
    return found


def objects_17(count: int) -> list[bytes]:
    """``count`` blob contents whose ids start with 17: the folder git counts."""
    found: list[bytes] = []
    n = 0
    while len(found) < count:
        data = f"filler {n}\n".encode()
        if str(pygit2.hash(data)).startswith("17"):
            found.append(data)
        n += 1
    return found


def test_pack_moves_every_loose_object_into_one_private_pack(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    for row_id in row_ids(5):
        helpers.commit_row(store, helpers.train_row(row_id))
    loose = int(git(store.path, "count-objects").split()[0])
    assert loose == 3 + 5 * 6  # init: blob, tree, commit; a tag: six objects

    done = gc.pack(store)

    assert (done.before.loose, done.before.packs) == (loose, 0)
    assert (done.after.loose, done.after.packs) == (0, 1)
    assert git(store.path, "fsck", "--strict") == ""
    assert git(store.path, "rev-list", "--count", "main") == "6\n"
    reopened = Store.open(store.path)
    assert [reopened.read_row(i)["id"] for i in row_ids(5)] == row_ids(5)  # type: ignore[index]
    # git writes packs 0400; the store's promise is 0600 files, 0700 folders.
    assert modes(store.path) == {("dir", 0o700), ("file", 0o600)}


def test_pack_keeps_old_reflog_entries(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    helpers.commit_row(store, helpers.train_row(row_ids(1)[0]))
    log = store.path / "logs" / "refs" / "heads" / "main"
    first, *rest = log.read_text().splitlines()
    # The same entry, dated 2001: git gc expires reachable entries after 90 days.
    who, _, what = first.partition("\t")
    dated = " ".join([*who.split()[:-2], "1000000000", "+0000"]) + "\t" + what
    log.write_text("\n".join([dated, first, *rest]) + "\n")
    before = git(store.path, "reflog", "show", "main")
    assert len(before.splitlines()) == 3

    gc.pack(store)

    assert git(store.path, "reflog", "show", "main") == before


def test_a_commit_packs_the_store_once_loose_objects_pass_gc_auto(
    tmp_path: Path,
) -> None:
    store = Store.create(tmp_path / "s")
    store.repo.config["gc.auto"] = "256"  # more than one object in objects/17
    with private_objects(store) as created:
        created += [store.repo.create_blob(d) for d in objects_17(3)]
    assert gc.needs_packing(store)
    assert gc.usage(store.path).packs == 0

    helpers.commit_row(store, helpers.train_row(row_ids(1)[0]))

    after = gc.usage(store.path)
    assert after.packs == 1
    # The unreachable fillers stay loose (git prunes them after two weeks);
    # everything the branch reaches is in the pack.
    loose = {p.parent.name + p.name for p in store.path.glob("objects/??/*")}
    assert loose == {str(pygit2.hash(d)) for d in objects_17(3)}
    assert git(store.path, "fsck", "--strict", "--no-dangling") == ""
    assert modes(store.path) == {("dir", 0o700), ("file", 0o600)}


@pytest.mark.parametrize("setting", ["0", str(256 * 20)])
def test_no_packing_below_gc_auto_or_with_it_off(tmp_path: Path, setting: str) -> None:
    store = Store.create(tmp_path / "s")
    store.repo.config["gc.auto"] = setting
    with private_objects(store) as created:
        created += [store.repo.create_blob(d) for d in objects_17(3)]

    helpers.commit_row(store, helpers.train_row(row_ids(1)[0]))

    assert not gc.needs_packing(store)
    assert gc.usage(store.path).packs == 0


def test_pack_waits_for_the_writer_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store.create(tmp_path / "s")
    helpers.commit_row(store, helpers.train_row(row_ids(1)[0]))
    monkeypatch.setenv("MACHINE_LOCK_TIMEOUT", "0.2")
    with store.locked(), pytest.raises(ConcurrentUpdateError) as caught:
        gc.pack(store)
    lock = store.path / "machine" / "lock"
    assert str(caught.value) == f"another machine process has held {lock} for 0s"
    assert gc.usage(store.path).packs == 0


def test_loose_estimate_counts_one_folder_times_256(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    in_17 = len(list(store.path.glob("objects/17/*")))
    with private_objects(store) as created:
        created += [store.repo.create_blob(d) for d in objects_17(2)]
    assert gc.loose_estimate(store.path) == 256 * (in_17 + 2)


# -- leftovers of killed writers -----------------------------------------------


def leave(store: Path, name: str, age: float, folder: bool = False) -> Path:
    """A file (or folder holding one) a writer left, last touched ``age`` s ago."""
    path = store / name
    path.parent.mkdir(parents=True, exist_ok=True)
    target = path / "pack-x.pack" if folder else path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(b"half written")
    stamp = time.time() - age
    os.utime(target, (stamp, stamp))
    os.utime(path, (stamp, stamp))
    return path


def test_leftovers_of_dead_writers_go_and_live_writers_keep_theirs(
    tmp_path: Path,
) -> None:
    store = Store.create(tmp_path / "s").path
    dead = [
        leave(store, "objects/tmp_object_git2_a1B2c3", 120),  # libgit2: a minute
        leave(store, "objects/17/tmp_obj_x1Y2z3", 7200),  # git: an hour
        leave(store, "objects/pack/tmp_pack_q9W8e7", 7200),
        leave(store, "objects/incoming-Ab12Cd", 7200, folder=True),
        leave(store, "refs/heads/main.lock", 7200),
        leave(store, "packed-refs.lock", 7200),
        leave(store, "machine/stats.json.4242.tmp", 120),
    ]
    live = [
        leave(store, "objects/tmp_object_git2_zzzzzz", 5),
        leave(store, "objects/pack/tmp_pack_live01", 600),  # a push, still coming
        leave(store, "objects/incoming-Live01", 600, folder=True),
        leave(store, "refs/tags/v1.lock", 600),
    ]
    # A folder whose own time is old but whose content was just written.
    busy = leave(store, "objects/incoming-Busy01", 7200, folder=True)
    (busy / "pack-x.pack").write_bytes(b"more")
    live.append(busy)

    removed = gc.remove_leftovers(store)

    assert removed == sorted(str(p.relative_to(store)) for p in dead)
    assert [p.exists() for p in dead] == [False] * len(dead)
    assert [p.exists() for p in live] == [True] * len(live)


def test_pack_removes_leftovers_first_so_a_stale_lock_does_not_stop_git(
    tmp_path: Path,
) -> None:
    store = Store.create(tmp_path / "s")
    helpers.commit_row(store, helpers.train_row(row_ids(1)[0]))
    leave(store.path, "packed-refs.lock", 7200)  # git gc's pack-refs would fail
    leave(store.path, "objects/tmp_object_git2_a1B2c3", 120)

    done = gc.pack(store)

    assert done.removed == ["objects/tmp_object_git2_a1B2c3", "packed-refs.lock"]
    assert (done.after.loose, done.after.packs) == (0, 1)
