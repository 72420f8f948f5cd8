"""Packing the store: loose objects into packs, by hand or after a commit.

libgit2 never packs (perf.md §2). Every tag leaves six loose objects, at least
one 4 KB block each on disk whatever their size, and an export of a loose
store reads each tree from its own file. Packing is git's job: ``machine gc``
runs ``git gc``, and after each commit :func:`auto` estimates the loose
objects the way ``git gc --auto`` does (by counting one of the 256
``objects/xx`` folders) and runs ``git gc --auto`` only when there are too
many, about once every thousand tags with git's default ``gc.auto`` of 6700.

Both hold the store's writer lock, so no machine process commits while git
repacks, and both give every file git wrote mode 0600 (folders 0700): git
writes packs read-only (0400), and the store's promise is 0600.

This module must not import :mod:`machine_git.store.store` at run time: the store
calls :func:`auto` after a commit.
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

from machine_git.core.errors import DiskFullError
from machine_git.core.errors import ReadOnlyStoreError
from machine_git.core.errors import StoreError
from machine_git.core.progress import QUIET
from machine_git.core.progress import Progress

if TYPE_CHECKING:
    from machine_git.store.store import Store

AUTO_DEFAULT = 6700  # git's own default for gc.auto
PACK_LIMIT_DEFAULT = 50  # and for gc.autoPackLimit
_SAMPLE = "17"  # the folder git counts: 1/256 of the loose objects, on average

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


def loose_estimate(path: Path) -> int:
    """Loose objects in the store at ``path``, estimated from one folder."""
    try:
        with os.scandir(path / "objects" / _SAMPLE) as entries:
            return 256 * sum(1 for e in entries if len(e.name) == 38)
    except OSError:
        return 0


def auto_limit(store: Store) -> int:
    """The store's ``gc.auto`` (0 or less: never pack automatically)."""
    return _setting(store, "gc.auto", AUTO_DEFAULT)


def _setting(store: Store, key: str, default: int) -> int:
    try:
        value = store.repo.config[key]
    except (KeyError, pygit2.GitError):  # unset, or a config git cannot read
        return default
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def pack_count(path: Path) -> int:
    """Packs in the store at ``path`` (each has an index; .keep ones too)."""
    try:
        with os.scandir(path / "objects" / "pack") as entries:
            return sum(1 for e in entries if e.name.endswith(".idx"))
    except OSError:
        return 0


def needs_packing(store: Store) -> bool:
    """True when ``git gc --auto`` would pack: git's own test, in Python.

    Too many loose objects, or too many packs: every bulk write (an import,
    a big pull) adds a pack (bulk.py), and git gc --auto joins them once
    there are more than ``gc.autoPackLimit`` (50).
    """
    # Counting comes first: it is a few microseconds, reading the config is not.
    count = loose_estimate(store.path) // 256
    packs = pack_count(store.path)
    if count == 0 and packs < 2:
        return False
    limit = auto_limit(store)
    if limit <= 0:
        return False  # git gc --auto does nothing at all then
    pack_limit = _setting(store, "gc.autoPackLimit", PACK_LIMIT_DEFAULT)
    if 0 < pack_limit < packs:
        return True
    return count > (limit + 255) // 256


def auto(store: Store) -> bool:
    """Pack if there are too many loose objects; called with the lock held.

    Best effort: the commit before it has succeeded and is reported as done,
    so a failure here (no git, a full disk) is left for the next commit or
    ``machine gc`` to retry. True if git ran.
    """
    if not needs_packing(store):
        return False
    try:
        _git(store.path, "gc", "--auto", "--quiet")
    except StoreError:
        return False
    finally:
        make_private(store.path)
    return True


def pack(store: Store, progress: Progress = QUIET) -> Packed:
    """``machine gc``: pack every object into one pack, under the writer lock,
    then drop the contexts no row names any more (one commit).

    Leftovers of killed writers go first (:func:`remove_leftovers`): a stale
    ``packed-refs.lock`` would stop git gc itself. Pruning reads every row, so
    it comes after the packing a damaged store may need. ``progress`` shows
    git's own (counting, compressing, writing objects).
    """
    with store.locked():
        removed = remove_leftovers(store.path)
        try:
            before = usage(store.path)
            started = time.monotonic()
            if progress is QUIET:
                _git(store.path, "gc", "--quiet")
            else:
                _git_shown(store.path, progress, "gc")
            seconds = time.monotonic() - started
            after = usage(store.path)
        except StoreError:
            # Whether git failed on damage is recovery's question: the
            # command asks it (recovery.diagnosis.damage_or).
            raise
        finally:
            make_private(store.path)
    pruned = prune_contexts(store)  # a commit: it takes the writer lock itself
    dropped_images = prune_images(store)
    return Packed(before, after, seconds, removed, pruned, dropped_images)


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
