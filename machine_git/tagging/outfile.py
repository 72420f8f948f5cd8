"""``--out``: a row appended to a JSONL file instead of the store, whole or not at all.

The file is the user's, so the write is careful: one line at a time (writers
of one file take turns), cut back to its old size if the line does not fit,
and never a wait on something that is not a file (a FIFO is refused; a
character device such as ``/dev/null`` takes the line as it is).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from machine_git.core import inputs
from machine_git.core import jsonio
from machine_git.core import paths
from machine_git.core.errors import FileWriteError
from machine_git.core.errors import UsageError
from machine_git.rows import schemas
from machine_git.store.locking import flock_within

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Row


def append(path: Path, row: Row) -> None:
    """Append ``row`` as one line of a JSONL file (created 0600): all or nothing.

    On any failure (a full disk, a size limit, Ctrl-C) the file is cut back
    to the size it had, so it never ends in half a line. Writers of one file
    take turns (an flock), so cutting back never takes another's line. A
    character device (/dev/null, /dev/stdout) gets the line as it is; a FIFO
    is refused, never waited on.
    """
    schemas.check_row(row, "the row is invalid")  # no store here to check it
    line = jsonio.line(row)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_NOCTTY
    try:
        fd = os.open(path, flags | os.O_CLOEXEC, 0o600)
    except OSError as e:
        raise paths.write_error(path, e) from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode):
            _append_whole(fd, path, line)
        elif stat.S_ISCHR(mode):
            os.set_blocking(fd, True)
            try:
                _write_all(fd, line)
            except OSError as e:
                raise paths.write_error(path, e) from None
        else:
            raise UsageError(
                f"output path {str(path)!r} is not a regular file "
                f"({inputs.kind_of(mode)})"
            )
    finally:
        os.close(fd)


def _append_whole(fd: int, path: Path, line: bytes) -> None:
    _lock(fd, path)
    before = os.fstat(fd).st_size
    try:
        _write_all(fd, line)
        os.fsync(fd)  # a full disk can surface only here (delayed allocation)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, before)
            os.fsync(fd)
        if isinstance(e, OSError):
            raise paths.write_error(path, e) from None
        raise


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _lock(fd: int, path: Path, wait: float = 10.0) -> None:
    try:
        held = not flock_within(fd, wait)
    except OSError:
        return  # no locks on this filesystem: append unguarded
    if held:
        raise FileWriteError(f"cannot write {path}: another process holds it locked")
