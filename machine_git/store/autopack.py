"""Packing after a commit, off the tag path: a cheap test, then a detached process.

libgit2 never packs (perf.md §2), so every commit ends with :func:`after_commit`:
it counts one of the 256 ``objects/xx`` folders and the packs, as ``git gc
--auto`` does, and only when there are too many (about once every thousand
tags with git's default ``gc.auto`` of 6700) starts ``python -m
machine_git.store.gc --background`` in its own session and returns at once.
That process packs with ``git repack --geometric`` (gc.py), so its cost
follows what is new, and it holds only the gc lock, never the writer lock:
tags go on while it packs, and none waits for it.

The gc lock is taken here and handed to the child as an open file, so a
second tag right after the first sees it held and starts nothing: at most one
packer runs per store. The store imports this module and never gc.py.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pygit2

from machine_git.store.disk import private_umask
from machine_git.store.layout import WORK

AUTO_DEFAULT = 6700  # git's own default for gc.auto
PACK_LIMIT_DEFAULT = 50  # and for gc.autoPackLimit
_SAMPLE = "17"  # the folder git counts: 1/256 of the loose objects, on average
GC_LOCK = "gc.lock"  # in machine's folder; held by whoever packs
BACKGROUND_MODULE = "machine_git.store.gc"


def loose_estimate(path: Path) -> int:
    """Loose objects in the store at ``path``, estimated from one folder."""
    try:
        with os.scandir(path / "objects" / _SAMPLE) as entries:
            return 256 * sum(1 for e in entries if len(e.name) == 38)
    except OSError:
        return 0


def pack_count(path: Path) -> int:
    """Packs in the store at ``path`` (each has an index; .keep ones too)."""
    try:
        with os.scandir(path / "objects" / "pack") as entries:
            return sum(1 for e in entries if e.name.endswith(".idx"))
    except OSError:
        return 0


def setting(repo: pygit2.Repository, key: str, default: int) -> int:
    """An integer from the store's git config; ``default`` if unset or unread."""
    try:
        value = repo.config[key]
    except (KeyError, pygit2.GitError):  # unset, or a config git cannot read
        return default
    try:
        return int(str(value)) if value is not None else default
    except ValueError:
        return default


def needs_packing(path: Path, repo: pygit2.Repository) -> bool:
    """True when ``git gc --auto`` would pack: git's own test, in Python.

    Too many loose objects, or too many packs: every bulk write (an import,
    a big pull) adds a pack (bulk.py), and they are joined once there are
    more than ``gc.autoPackLimit`` (50).
    """
    # Counting comes first: it is a few microseconds, reading the config is not.
    count = loose_estimate(path) // 256
    packs = pack_count(path)
    if count == 0 and packs < 2:
        return False
    limit = setting(repo, "gc.auto", AUTO_DEFAULT)
    if limit <= 0:
        return False  # git gc --auto does nothing at all then
    pack_limit = setting(repo, "gc.autoPackLimit", PACK_LIMIT_DEFAULT)
    if 0 < pack_limit < packs:
        return True
    return count > (limit + 255) // 256


def after_commit(path: Path, repo: pygit2.Repository) -> bool:
    """Start a background packer if the store needs one; True if it started.

    Best effort and never waits: the commit is done and reported as done.
    """
    if not needs_packing(path, repo):
        return False
    with gc_lock(path) as fd:
        if fd is None:
            return False  # a packer runs already
        return _spawn(path, fd)


@contextlib.contextmanager
def gc_lock(path: Path) -> Iterator[int | None]:
    """The gc lock's file, flocked, or None if another process holds it."""
    try:
        with private_umask():
            fd = os.open(path / WORK / GC_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        yield None
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield None
            return
        yield fd
    finally:
        os.close(fd)  # the child's copy, if any, keeps the lock


def _spawn(path: Path, fd: int) -> bool:
    import subprocess  # once in a thousand tags: not on the path of every commit

    command = [
        sys.executable,
        "-m",
        BACKGROUND_MODULE,
        "--background",
        "--lock-fd",
        str(fd),
        str(path),
    ]
    try:
        subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(fd,),  # only the gc lock: never the writer lock
            start_new_session=True,  # not killed with the terminal's command
            cwd=path,
        )
    except OSError:
        return False
    return True
