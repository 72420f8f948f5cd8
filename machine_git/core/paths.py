"""Where things live: the project, its private store, and safe names inside it."""

from __future__ import annotations

import errno
import hashlib
import re
import stat
from pathlib import Path
from typing import NamedTuple

from machine_git.core.errors import FileWriteError
from machine_git.core.errors import MachineError
from machine_git.core.errors import UsageError

DATA_DIR_ENV = "MACHINE_DATA_DIR"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_MAX_NAME = 100


class Project(NamedTuple):
    """A project: its folder, and whether ``--project`` chose it (not the cwd)."""

    root: Path
    chosen: bool = False

    @property
    def store_path(self) -> Path:
        """Where the project's store is (or will be)."""
        return store_path(self.root)


def project_root(start: Path | None = None) -> Path:
    """The git top level that holds ``start`` (default: cwd), else ``start``.

    Walks up looking for ``.git`` (a directory, or a file in a worktree or
    submodule) instead of running git: it costs microseconds, not a process.
    """
    try:
        here = (start or Path.cwd()).resolve()
    except FileNotFoundError:
        raise UsageError(
            "the current folder no longer exists; cd somewhere or pass --project"
        ) from None
    for candidate in (here, *here.parents):
        if (candidate / ".git").exists():
            return candidate
    return here


def new_store_notice(root: Path, chosen: bool, created: bool) -> str | None:
    """The line to show when a store was just created for a folder outside git.

    Outside a git repository the project is the current folder, so each
    subfolder would silently get a store of its own: say which folder was
    taken, once, when its store is created (never when ``--project`` chose
    it, nor on later commands).
    """
    if not created or chosen or (root / ".git").exists():
        return None
    return (
        f"note: no git repository here, so {root} is the project; its store was "
        f"created at {store_path(root)} (pass --project DIR to choose another folder)"
    )


def data_dir() -> Path:
    """The base folder of every store: ``$MACHINE_DATA_DIR`` or ``~/.machine``.

    Set, it must name an absolute folder (``~`` is expanded): a relative one
    would resolve against the current folder, so a command run from a
    subfolder would find another (empty) store; set but empty would
    silently mean ``~/.machine``. Both are one-line errors.
    """
    import os

    value = os.environ.get(DATA_DIR_ENV)
    if value is None:
        return default_data_dir()
    if not value.strip():
        raise UsageError(
            f"{DATA_DIR_ENV} is set but empty; unset it (stores then live in "
            "~/.machine) or give an absolute folder"
        )
    path = Path(value).expanduser()
    if not path.is_absolute():
        raise UsageError(
            f"{DATA_DIR_ENV}={value!r} is a relative path; give an absolute "
            f"folder (e.g. {Path(value).resolve()})"
        )
    return path.resolve()


def default_data_dir() -> Path:
    """``~/.machine``; a function so tests can forbid it."""
    return Path.home() / ".machine"


def store_name(project: Path) -> str:
    """``<project-name>-<hash>``: readable, and unique per absolute path."""
    absolute = str(project.resolve())
    digest = hashlib.sha256(absolute.encode()).hexdigest()[:10]
    name = _UNSAFE.sub("-", project.resolve().name).strip("-.") or "root"
    return f"{name[:60]}-{digest}"


def store_path(project: Path) -> Path:
    """The store folder of ``project``."""
    return data_dir() / store_name(project)


def check_name(value: str, what: str) -> str:
    """Refuse names that could leave their folder: ``/``, ``..``, NUL, long."""
    if not value:
        raise UsageError(f"{what} is empty")
    if "\x00" in value:
        raise UsageError(f"{what} contains a NUL byte")
    if len(value) > _MAX_NAME:
        raise UsageError(f"{what} is longer than {_MAX_NAME} characters")
    if "/" in value or "\\" in value or value in {".", ".."} or value.startswith("."):
        raise UsageError(f"{what} {value!r} may not contain '/' or start with '.'")
    if _UNSAFE.search(value):
        raise UsageError(
            f"{what} {value!r} may only use letters, digits, '.', '_', '-'"
        )
    return value


def check_out_path(value: str, *, devices: bool = False) -> Path:
    """An output file named by the user: no NUL, not a folder, a FIFO or a socket.

    A write into a FIFO waits for a reader that may never come. ``devices``
    also allows a character device (``/dev/null``, ``/dev/stdout`` on a
    terminal), where appending a line makes sense; a whole-file write that
    renames a temporary file over it (``export -o``) must not replace one.
    """
    if not value or "\x00" in value:
        raise UsageError("output path is empty or contains a NUL byte")
    path = Path(value).expanduser()
    try:
        mode = path.stat().st_mode
    except OSError:
        return path  # a new file (or one the write will say why it cannot make)
    if stat.S_ISDIR(mode):
        raise UsageError(f"output path {value!r} is a directory")
    if stat.S_ISREG(mode) or (devices and stat.S_ISCHR(mode)):
        return path
    from machine_git.core import inputs

    raise UsageError(
        f"output path {value!r} is not a regular file ({inputs.kind_of(mode)})"
    )


def write_error(path: Path, e: OSError) -> MachineError:
    """The one line for a failed write of a file outside the store.

    A path that does not lead anywhere is the user's to fix (usage); a full
    disk, a size limit or permissions are I/O (FileWriteError).
    """
    if e.errno in (errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.ENXIO):
        return UsageError(f"cannot write {path}: {e.strerror}")
    why = _WHY.get(e.errno or 0, e.strerror or str(e))
    return FileWriteError(f"cannot write {path}: {why}; nothing was written")


_WHY = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file size limit reached",
}
