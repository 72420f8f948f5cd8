"""The store is private, and a write that fails on the disk says why in one line.

Folders are 0700 and files 0600, whoever creates them (machine or libgit2,
which writes loose objects read-only); a full disk, a file size limit or a
read-only store is a one-line StoreError naming the store, never a traceback.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from pygit2 import Oid

from machine_git.core.errors import DiskFullError
from machine_git.core.errors import ReadOnlyStoreError
from machine_git.core.errors import StoreError
from machine_git.store.damage import damaged

if TYPE_CHECKING:
    from machine_git.store.store import Store


def chmod_objects(path: Path, oids: list[Oid]) -> None:
    """Give the loose objects ``oids`` of the store at ``path`` mode 0600."""
    # libgit2 writes loose objects read-only (0444 less the umask); the store's
    # promise is 0600 files, so set it on what we just wrote (a few syscalls).
    for oid in oids:
        hexid = str(oid)
        obj = path / "objects" / hexid[:2] / hexid[2:]
        with contextlib.suppress(FileNotFoundError):
            if obj.stat().st_mode & 0o777 != 0o600:
                obj.chmod(0o600)


@contextlib.contextmanager
def private_objects(store: Store) -> Iterator[list[Oid]]:
    """Write objects with a private umask, then give each mode 0600."""
    created: list[Oid] = []
    with private_umask():
        yield created
    chmod_objects(store.path, created)


@contextlib.contextmanager
def private_umask() -> Iterator[None]:
    """New folders 0700 and files 0600, whoever creates them (us or libgit2)."""
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


def os_error(path: Path, e: OSError) -> StoreError:
    """The StoreError for a write to the store at ``path`` that failed."""
    if e.errno is None:
        # pygit2 raises libgit2's OS errors as OSError with only a message.
        return git_error(path, e)
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFullError(
            f"{path}: no space left on the device; nothing was written"
        )
    if e.errno == errno.EFBIG:  # a file size limit (ulimit -f) is a full disk too
        return DiskFullError(f"{path}: file size limit reached; nothing was written")
    if e.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return ReadOnlyStoreError(f"{path}: the store is read-only ({e.strerror})")
    return StoreError(f"{path}: {e.strerror or e}")


def git_error(path: Path, e: Exception) -> StoreError:
    """The StoreError for a write libgit2 refused (its errors carry only text)."""
    text = str(e)
    if "corrupt" in text:  # libgit2: "corrupted loose reference file: HEAD"
        return damaged(path, f"git refused the write: {text}")
    if "No space left" in text or "Disk quota exceeded" in text:
        return DiskFullError(
            f"{path}: no space left on the device; nothing was written"
        )
    if "File too large" in text:
        return DiskFullError(f"{path}: file size limit reached; nothing was written")
    if "Read-only file system" in text or "Permission denied" in text:
        return ReadOnlyStoreError(f"{path}: the store is read-only ({text})")
    return StoreError(f"{path}: git refused the write: {text}")
