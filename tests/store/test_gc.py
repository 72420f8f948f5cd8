from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pygit2
import pytest

from machine_git.core import paths
from machine_git.core.errors import ConcurrentUpdateError
from machine_git.rows import rows
from machine_git.store import autopack
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


def wait_for_packer(store: Path, seconds: float = 120.0) -> None:
    """Until no packer holds the gc lock (a background one started by a commit)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with autopack.gc_lock(store) as fd:
            if fd is not None:
                return
        time.sleep(0.05)
    raise AssertionError("the background packer still runs")


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
    wait_for_packer(store.path)

    after = gc.usage(store.path)
    assert after.packs == 1
    # Geometric repacking packs every loose object, the unreachable fillers too
    # (git prunes what no ref reaches only in a full gc, after two weeks).
    assert list(store.path.glob("objects/??/*")) == []
    assert not gc.needs_packing(store)
    assert git(store.path, "fsck", "--strict", "--no-dangling") == ""
    assert modes(store.path) == {("dir", 0o700), ("file", 0o600)}


# -- tags never wait for a packer ----------------------------------------------


def held_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put a git on the PATH that, when it packs, holds until the test says so.

    It is the real git: it only waits before packing, so a packer can be
    caught in the middle, and marks each start in ``marks/started``.
    """
    real = shutil.which("git")
    assert real is not None
    marks = tmp_path / "marks"
    marks.mkdir()
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "git"
    script.write_text(
        "#!/bin/sh\n"
        'case "$*" in *" repack "*|*" gc"*)\n'
        f'  echo x >> "{marks}/started"; i=0\n'
        f'  while [ ! -e "{marks}/release" ] && [ $i -lt 1200 ]; do\n'
        "    sleep 0.05; i=$((i+1)); done;;\n"
        "esac\n"
        f'exec "{real}" "$@"\n'
    )
    script.chmod(0o700)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return marks


def wait_for(path: Path, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def loose_store(location: Path) -> Store:
    """A store that needs packing: gc.auto 256, three loose objects in objects/17."""
    store = Store.create(location)
    store.repo.config["gc.auto"] = "256"
    with private_objects(store) as created:
        created += [store.repo.create_blob(d) for d in objects_17(3)]
    assert gc.needs_packing(store)
    return store


BY_HAND = {
    "machine gc": ["-m", "machine_git", "gc"],
    "packer by hand": ["-m", "machine_git.store.gc", "--background", "."],
}


@pytest.mark.parametrize("how", [*BY_HAND, "after a commit"])
def test_tags_go_on_while_the_store_is_packed(
    tmp_path: Path, project: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    marks = held_git(tmp_path, monkeypatch)
    store = loose_store(paths.store_path(project))
    monkeypatch.setenv("MACHINE_LOCK_TIMEOUT", "5")  # a tag that waited would fail
    packer: subprocess.Popen[bytes] | None = None
    if how in BY_HAND:
        where = store.path if how == "packer by hand" else project
        packer = subprocess.Popen([sys.executable, *BY_HAND[how]], cwd=where)
    else:
        helpers.commit_row(store, helpers.train_row(row_ids(1)[0]))  # starts it
    wait_for(marks / "started")

    # git is packing, and holds until released: every tag now must finish
    # without it. Each one's packing test says yes (the loose objects are
    # still there), and none starts a second packer.
    ids = row_ids(6)[1:]
    for row_id in ids:
        helpers.commit_row(store, helpers.train_row(row_id))
    with autopack.gc_lock(store.path) as fd:
        assert fd is None  # the packer still runs: no tag waited for it
    assert (marks / "started").read_text() == "x\n"

    (marks / "release").touch()
    if packer is not None:
        assert packer.wait(timeout=120) == 0
    wait_for_packer(store.path)
    assert gc.usage(store.path).packs == 1
    assert git(store.path, "fsck", "--strict", "--no-dangling") == ""
    tagged = sorted(str(rows.id_of_path(p)) for p, _ in store.iter_row_blobs())
    assert tagged == sorted(ids if packer else row_ids(6))
    assert modes(store.path) == {("dir", 0o700), ("file", 0o600)}


def test_the_store_module_never_imports_gc() -> None:
    # The tag path only starts a packer; it never loads the packing code.
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, machine_git.store.store; "
            "print('machine_git.store.gc' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == "False\n"


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
