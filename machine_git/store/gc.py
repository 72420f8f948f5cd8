"""Packing the store: loose objects into packs, by hand or in the background.

libgit2 never packs (perf.md §2). Every tag leaves six loose objects, at least
one 4 KB block each on disk whatever their size, and an export of a loose
store reads each tree from its own file. Packing is git's job, and it runs
off the tag path: after a commit, autopack.py tests what ``git gc --auto``
would and, about once every thousand tags, starts this module as a
detached process (``python -m machine_git.store.gc --background``).

Packing is incremental: ``git repack --geometric=2`` packs the loose objects
and joins only the packs that are small next to the rest, so its cost
follows what is new, not the whole history (a full ``git gc`` of a million
rows takes minutes). It holds the gc lock, never the writer lock: repack
adds a pack before removing what it replaces and leaves refs alone, so
commits can go on while it runs, and no tag waits for it. ``machine gc
--full`` is ``git gc`` (every object into one pack, refs packed, old
unreachable objects pruned) and holds the writer lock too.

Every file git wrote gets mode 0600 (folders 0700): git writes packs
read-only (0400), and the store's promise is 0600.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

import pygit2

from machine_git.core import env
from machine_git.core.errors import ConcurrentUpdateError
from machine_git.core.errors import DiskFullError
from machine_git.core.errors import ReadOnlyStoreError
from machine_git.core.errors import StoreError
from machine_git.core.progress import QUIET
from machine_git.core.progress import Progress
from machine_git.store import autopack
from machine_git.store.disk import private_umask
from machine_git.store.layout import WORK
from machine_git.store.locking import LOCK_TIMEOUT_ENV
from machine_git.store.locking import flock_within

if TYPE_CHECKING:
    from machine_git.store.store import Store

# Settings for every git run here. Reflogs are the store's audit trail of who
# moved the branch and when: git gc would expire entries after 90 days.
# Delta chains are kept short. An export reads rows in tree order, and a row
# at the end of a 50-deep chain needs every base before it inflated first:
# perf.md §3 saw a 10x slower read on such a pack. On the benchmark's rows,
# depth 10 exports as fast as git's 50 for 3% more disk, and no deltas at all
# would take 3.5x the disk (bench/RESULTS.md, "Pack depth").
PACK_DEPTH = 10
_SETTINGS = (
    "gc.reflogExpire=never",
    "gc.reflogExpireUnreachable=never",
    "gc.autoDetach=false",
    f"pack.depth={PACK_DEPTH}",
)


class Usage:
    """Objects and bytes of a store, as ``git count-objects -v`` reports them."""

    # A plain class, not a dataclass: this module loads on every commit.
    def __init__(self, loose: int, loose_bytes: int, packs: int, pack_bytes: int):
        self.loose = loose
        self.loose_bytes = loose_bytes
        self.packs = packs
        self.pack_bytes = pack_bytes

    @property
    def total_bytes(self) -> int:
        return self.loose_bytes + self.pack_bytes

    def as_dict(self) -> dict[str, int]:
        return {
            "loose": self.loose,
            "loose_bytes": self.loose_bytes,
            "packs": self.packs,
            "pack_bytes": self.pack_bytes,
        }


class Packed:
    """What :func:`pack` did; ``removed``: leftovers of killed writers."""

    def __init__(
        self,
        before: Usage,
        after: Usage,
        seconds: float,
        removed: list[str],
        pruned: int = 0,
        images: int = 0,
    ) -> None:
        self.before = before
        self.after = after
        self.seconds = seconds
        self.removed = removed
        self.pruned = pruned  # contexts no row names any more, dropped first
        self.images = images  # images no row names any more, dropped with them


loose_estimate = autopack.loose_estimate
pack_count = autopack.pack_count


def auto_limit(store: Store) -> int:
    """The store's ``gc.auto`` (0 or less: never pack automatically)."""
    return autopack.setting(store.repo, "gc.auto", autopack.AUTO_DEFAULT)


def needs_packing(store: Store) -> bool:
    """True when ``git gc --auto`` would pack (autopack.needs_packing)."""
    return autopack.needs_packing(store.path, store.repo)


# Incremental: pack the loose objects, and join a pack into the next only
# while it holds at least half as many objects (git's geometric progression),
# so a store holds a few packs of growing size and a pack holds what is new.
_REPACK = ("repack", "-d", "-l", "--geometric=2")


def pack(store: Store, progress: Progress = QUIET, full: bool = False) -> Packed:
    """``machine gc``: pack what is new, then drop the contexts no row names
    any more (one commit).

    Leftovers of killed writers go first, under the writer lock
    (:func:`remove_leftovers`): a stale ``packed-refs.lock`` would stop git
    itself. The packing holds the gc lock only (waiting for a background
    packer to finish), unless ``full``: ``git gc``, which packs refs, under
    the writer lock. Pruning reads every row, so it comes after the packing a
    damaged store may need. ``progress`` shows git's own (counting,
    compressing, writing objects).
    """
    with store.locked():
        removed = remove_leftovers(store.path)
    with packer_lock(store.path):
        if full:
            with store.locked():
                before, after, seconds = _run(store.path, progress, "gc")
        else:
            before, after, seconds = _run(store.path, progress, *_REPACK)
    pruned = prune_contexts(store)  # a commit: it takes the writer lock itself
    dropped_images = prune_images(store)
    return Packed(before, after, seconds, removed, pruned, dropped_images)


def _run(path: Path, progress: Progress, *args: str) -> tuple[Usage, Usage, float]:
    # Whether git failed on damage is recovery's question: the command asks
    # it (recovery.diagnosis.damage_or).
    try:
        before = usage(path)
        started = time.monotonic()
        if progress is QUIET:
            _git(path, *args, "--quiet" if args[0] == "gc" else "-q")
        else:
            _git_shown(path, progress, *args)
        seconds = time.monotonic() - started
        return before, usage(path), seconds
    finally:
        make_private(path)


@contextlib.contextmanager
def packer_lock(path: Path) -> Iterator[None]:
    """Hold the gc lock, waiting for a background packer (not the tags)."""
    lock_path = path / WORK / autopack.GC_LOCK
    try:
        with private_umask():
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as e:
        raise _error(path, e.errno, e.strerror or str(e)) from None
    try:
        timeout = env.seconds(LOCK_TIMEOUT_ENV, 600.0)
        if not flock_within(fd, timeout):
            raise ConcurrentUpdateError(
                f"another machine process has been packing the store for "
                f"{timeout:.0f}s ({lock_path})"
            )
        yield
    finally:
        os.close(fd)


def background(path: Path, lock_fd: int | None) -> int:
    """The detached packer a commit starts (autopack.py): pack if still needed.

    ``lock_fd`` is the gc lock the commit took and handed over; run by hand,
    the lock is taken here, and if another packer holds it there is nothing
    to do. Takes no writer lock. Exit 0 if nothing failed.
    """
    with contextlib.suppress(OSError):
        os.nice(10)  # a packer yields the CPU to whoever is working
    if lock_fd is None:
        with autopack.gc_lock(path) as fd:
            return 0 if fd is None else background(path, fd)
    try:
        repo = pygit2.Repository(str(path))
        if not autopack.needs_packing(path, repo):
            return 0
        _git(path, *_REPACK, "-q")
    except (StoreError, pygit2.GitError, OSError):
        return 1  # the next commit, or machine gc, tries again
    finally:
        make_private(path)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m machine_git.store.gc --background [--lock-fd N] STORE``."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m machine_git.store.gc")
    parser.add_argument("--background", action="store_true", required=True)
    parser.add_argument("--lock-fd", type=int, default=None)
    parser.add_argument("store", type=Path)
    args = parser.parse_args(argv)
    return background(args.store, args.lock_fd)


def prune_contexts(store: Store) -> int:
    """Remove (as one commit) the contexts no row at the newest commit names.

    A context is stored once for all the rows that share it, so deleting a
    row never deletes its context; this is where one no row uses goes. Its
    bytes stay in history, as every removed row's do.
    """
    from machine_git.core import jsonio
    from machine_git.rows import context
    from machine_git.store.change import Change
    from machine_git.store.change import Redaction

    dropped: list[str] = []

    def plan(snap: Any) -> Any:
        stored = context.stored_ids(snap.tree)
        if not stored:
            return None
        named: set[str] = set()
        for _, data in store.iter_row_blobs(snap.commit):
            value = jsonio.loads(data).get(context.FIELD)
            if isinstance(value, str):
                named.add(value)
        dropped[:] = sorted(stored - named)
        if not dropped:
            return None
        return Change(
            summary=f"gc: drop {len(dropped)} contexts no row names",
            files={context.path_of(sha): None for sha in dropped},
            trailers={"Action": "gc-contexts"},
            redaction=Redaction.KEPT,
        )

    store.write(plan)
    return len(dropped)


def prune_images(store: Store) -> int:
    """Remove (as one commit) the images no row at the newest commit names.

    Like contexts: an image is stored once for every row that shows it, so
    it goes here, when the last row naming it is gone.
    """
    from machine_git.core import jsonio
    from machine_git.rows import images
    from machine_git.store.change import Change
    from machine_git.store.change import Redaction

    dropped: list[str] = []

    def plan(snap: Any) -> Any:
        stored = images.stored_ids(snap.tree)
        if not stored:
            return None
        named: set[str] = set()
        for _, data in store.iter_row_blobs(snap.commit):
            if b'"images"' in data:
                named |= images.named(jsonio.loads(data))
        dropped[:] = sorted(stored - named)
        if not dropped:
            return None
        return Change(
            summary=f"gc: drop {len(dropped)} images no row names",
            files={images.path_of(sha): None for sha in dropped},
            trailers={"Action": "gc-images"},
            redaction=Redaction.KEPT,
        )

    store.write(plan)
    return len(dropped)


# Temp files and locks of writers that were killed. How we know a file is
# no live writer's: this runs under machine's writer lock, and every machine
# write (the only libgit2 writer of a store) holds that lock, so libgit2's
# temp objects belong to dead machine processes; a minute's margin covers a
# writer outside machine we do not know of. git itself takes no machine lock:
# `git push` into the store runs receive-pack, and someone may run git gc by
# hand. Its temp objects, packs and quarantine folders are written as the
# data arrives, and its locks live for the instant of an update, so a file
# untouched for an hour belongs to no live writer (git's own gc waits two
# weeks, and only runs if nothing is damaged).
LIBGIT2_STALE = 60.0
GIT_STALE = 3600.0
_LIBGIT2_TEMP = ("tmp_object_git2_",)
_GIT_TEMP = ("tmp_obj_", "tmp_pack_", "tmp_idx_", "tmp_rev_", "tmp_mtimes_")


def remove_leftovers(path: Path, now: float | None = None) -> list[str]:
    """Remove the temp files and locks killed writers left; their store paths.

    Call with the writer lock held. Looks in ``objects/`` (temp objects,
    temp packs, receive-pack's ``incoming-*`` quarantine folders), and for
    ``*.lock`` files in ``refs/``, ``logs/`` and the store's top folder.
    """
    from machine_git.store import bulk

    moment = time.time() if now is None else now
    # A bulk write's temp files are only ever written under the lock we hold.
    removed = [str(p.relative_to(path)) for p in bulk.clean(path / "objects")]
    # A whole pack a writer killed before its branch moved: removed if
    # nothing reaches it, before git repack or gc would explode it.
    removed += [str(p.relative_to(path)) for p in bulk.settle(path)]
    for target, age in _leftovers(path):
        if moment - _newest_mtime(target) < age:
            continue  # maybe a live writer's: leave it
        with contextlib.suppress(OSError):
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            else:
                target.unlink()
            removed.append(str(target.relative_to(path)))
    return sorted(removed)


def _leftovers(path: Path) -> Iterator[tuple[Path, float]]:
    objects = path / "objects"
    for folder in (objects, objects / "pack", *objects.glob("[0-9a-f][0-9a-f]")):
        with contextlib.suppress(OSError):
            for entry in folder.iterdir():
                if entry.name.startswith(_LIBGIT2_TEMP):
                    yield entry, LIBGIT2_STALE
                elif entry.name.startswith(_GIT_TEMP) or (
                    folder == objects and entry.name.startswith("incoming-")
                ):
                    yield entry, GIT_STALE
    for top in (path / "refs", path / "logs"):
        for entry in top.rglob("*.lock"):
            yield entry, GIT_STALE
    for entry in path.glob("*.lock"):
        yield entry, GIT_STALE
    # machine's own: a counts cache being written (by a reader, without the
    # lock), and the fetch of `machine recover --from` (slow networks).
    for entry in (path / "machine").glob("*.tmp"):
        yield entry, LIBGIT2_STALE
    for entry in (path / "machine").glob("restore-*"):
        yield entry, GIT_STALE


def _newest_mtime(target: Path) -> float:
    """When ``target`` (or anything in it, for a folder) last changed."""
    try:
        newest = target.lstat().st_mtime
    except OSError:
        return time.time()  # gone already: treat as live, leave it
    if target.is_dir() and not target.is_symlink():
        for folder, _, files in os.walk(target):
            for name in files:
                with contextlib.suppress(OSError):
                    newest = max(newest, os.lstat(os.path.join(folder, name)).st_mtime)
    return newest


def usage(path: Path) -> Usage:
    """Loose and packed objects of the store at ``path``."""
    out = _git(path, "count-objects", "-v")
    values: dict[str, int] = {}
    for line in out.splitlines():
        key, _, value = line.partition(":")
        with contextlib.suppress(ValueError):
            values[key.strip()] = int(value.strip())
    return Usage(
        loose=values.get("count", 0),
        loose_bytes=1024 * values.get("size", 0),
        packs=values.get("packs", 0),
        pack_bytes=1024 * values.get("size-pack", 0),
    )


def make_private(path: Path) -> None:
    """Folders 0700; files 0600, or 0700 if executable (hook scripts)."""
    for folder, names, files in os.walk(path):
        for name in names:
            _chmod(os.path.join(folder, name), 0o700)
        for name in files:
            target = os.path.join(folder, name)
            try:
                mode = os.lstat(target).st_mode
            except OSError:
                continue  # removed under us (a concurrent git)
            _chmod(target, 0o700 if mode & 0o100 else 0o600, mode)


def _chmod(target: str, wanted: int, mode: int | None = None) -> None:
    with contextlib.suppress(OSError):
        if mode is None:
            mode = os.lstat(target).st_mode
        if mode & 0o7777 != wanted:
            os.chmod(target, wanted)


def _command(path: Path, *args: str) -> list[str]:
    command = ["git"]
    for setting in _SETTINGS:
        command += ["-c", setting]
    return [*command, "-C", str(path), *args]


def _git_shown(path: Path, progress: Progress, *args: str) -> None:
    """:func:`_git` for a command that prints nothing, its progress shown."""
    from machine_git.core import gitprogress

    old = os.umask(0o077)
    try:
        status, lines = gitprogress.run(_command(path, *args), progress)
    except FileNotFoundError:
        raise StoreError("packing the store needs git on the PATH") from None
    except OSError as e:
        raise _error(path, e.errno, e.strerror or str(e)) from None
    finally:
        os.umask(old)
    if status != 0:
        raise _git_failed(path, lines, status)


def _git_failed(path: Path, lines: list[str], status: int) -> StoreError:
    lines = [x for x in lines if x.strip()]
    # git says why first ("fatal: loose object ... is corrupt"), then
    # what gave up ("fatal: failed to run repack").
    first = next((x for x in lines if x.startswith(("fatal:", "error:"))), None)
    return _error(path, None, first or (lines[-1] if lines else f"exit {status}"))


def _git(path: Path, *args: str) -> str:
    import subprocess  # only when packing: not on the path of every commit

    command = _command(path, *args)
    old = os.umask(0o077)  # whatever git creates starts private
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise StoreError("packing the store needs git on the PATH") from None
    except OSError as e:
        raise _error(path, e.errno, e.strerror or str(e)) from None
    finally:
        os.umask(old)
    if done.returncode != 0:
        raise _git_failed(path, done.stderr.splitlines(), done.returncode)
    return done.stdout


def _error(path: Path, code: int | None, text: str) -> StoreError:
    text = " ".join(text.split())
    if code in (errno.ENOSPC, errno.EDQUOT) or "No space left" in text:
        return DiskFullError(f"{path}: no space left on the device to pack the store")
    if code in (errno.EROFS, errno.EACCES, errno.EPERM) or (
        "Read-only file system" in text or "Permission denied" in text
    ):
        return ReadOnlyStoreError(f"{path}: the store is read-only ({text})")
    return StoreError(f"{path}: git could not pack the store: {text}")


if __name__ == "__main__":
    raise SystemExit(main())
