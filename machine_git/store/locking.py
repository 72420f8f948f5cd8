"""The store's writer lock: an ``flock`` the kernel drops when the process dies.

So a killed writer never leaves a lock behind. The lock is a file of
machine's own folder, so it can be held even on a store git cannot open
(recover takes it).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from machine_git.core import env
from machine_git.core.errors import ConcurrentUpdateError
from machine_git.store.disk import os_error
from machine_git.store.disk import private_umask
from machine_git.store.layout import WORK

LOCK_TIMEOUT_ENV = "MACHINE_LOCK_TIMEOUT"


@contextlib.contextmanager
def writer_lock(path: Path) -> Iterator[None]:
    """Hold the writer lock of the store at ``path``, even one git cannot open."""
    lock_path = path / WORK / "lock"
    try:
        with private_umask():
            (path / WORK).mkdir(exist_ok=True, mode=0o700)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as e:
        raise os_error(path, e) from None
    try:
        _acquire(fd, lock_path)
        yield
    finally:
        os.close(fd)  # closing drops the flock


def clear_stale_ref_lock(path: Path) -> None:
    """Remove the branch's ``.lock`` left by a writer that died (lock held)."""
    # libgit2 writes refs/heads/main.lock for the instant of a ref update.
    # We hold the flock, so no machine process is updating the ref; a lock
    # that outlives a short grace period belongs to a writer that died.
    lock = path / "refs" / "heads" / "main.lock"
    deadline = time.monotonic() + 1.0
    while lock.exists():
        if time.monotonic() > deadline:
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()
            break
        time.sleep(0.02)


def _acquire(fd: int, lock_path: Path) -> None:
    timeout = env.seconds(LOCK_TIMEOUT_ENV, 60.0)
    if not flock_within(fd, timeout):
        raise ConcurrentUpdateError(
            f"another machine process has held {lock_path} for {timeout:.0f}s"
        )


def flock_within(fd: int, seconds: float) -> bool:
    """Take an exclusive flock on ``fd``; False if it stays held ``seconds``.

    Polled (not a blocking flock) so that no holder can make us wait forever.
    OSError from a filesystem without locks is the caller's to judge.
    """
    deadline = time.monotonic() + seconds
    delay = 0.002
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
