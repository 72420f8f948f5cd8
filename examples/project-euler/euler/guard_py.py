"""Run a Python candidate behind an audit hook: the second layer, not the wall.

Run as ``python3 -I -S guard_py.py PROGRAM`` with the work dir as the current
directory. The hook refuses sockets, subprocesses, signals, ctypes and any
write, rename or removal outside the work dir (``os.open`` with a ``dir_fd``
included, which its audit event does not show). Its state lives in a
closure, not in module globals a program could reach by walking frames.

A determined program still gets past it (``gc`` finds the hook, native code
ignores it): the sandbox around it (bwrap or a container) is what holds.
"""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Callable

_PathLike = str | bytes | os.PathLike  # type: ignore[type-arg]


def _inside(root: str, path: object, dir_fd: object = None) -> bool:
    """Whether ``path`` (relative to ``dir_fd`` if given) lies in ``root``."""
    if isinstance(path, int):  # an open file descriptor
        return True
    if not isinstance(path, _PathLike):
        return False
    base = ""
    if isinstance(dir_fd, int):
        try:
            base = os.readlink(f"/proc/self/fd/{dir_fd}")
        except OSError:
            return False  # unknown: never inside
    full = os.path.realpath(os.path.join(base, os.fsdecode(path)))
    return full == root or full.startswith(root + os.sep)


def _targets(event: str, args: tuple[object, ...]) -> list[tuple[object, object]]:
    """(path, dir_fd) pairs a path event touches."""
    if event in ("os.rename", "os.link"):  # src, dst, src_dir_fd, dst_dir_fd
        return [(args[0], args[2]), (args[1], args[3])]
    if event == "os.truncate":  # path or fd, length
        return [(args[0], None)]
    return [(a, args[-1]) for a in args[:-1] if isinstance(a, _PathLike)]


def _install(
    inside: Callable[..., bool],
    targets: Callable[[str, tuple[object, ...]], list[tuple[object, object]]],
) -> None:
    # Everything the hook uses is bound here, in its closure: the module's
    # globals are deleted below, so a walk up the frames finds nothing.
    root = os.path.realpath(os.getcwd())
    deny = (
        "socket.", "subprocess.", "ctypes.", "os.exec", "os.posix_spawn",
        "os.fork", "os.system", "os.spawn", "os.kill", "os.killpg",
        "os.forkpty", "pty.", "signal.pthread_kill",
    )  # fmt: skip
    # Modules that reach the same things without raising an event.
    modules = {"_posixsubprocess", "_ctypes", "_socket", "_multiprocessing"}
    paths = {"os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.symlink"}
    paths |= {"os.link", "os.chmod", "os.chown", "os.truncate", "os.utime"}
    paths |= {"shutil.rmtree", "os.mkfifo", "os.mknod"}
    write = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

    def hook(event: str, args: tuple[object, ...]) -> None:
        if event.startswith(deny):
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "import" and args[0] in modules:
            raise PermissionError(f"sandbox: import {args[0]} is not allowed")
        if event == "open" and args[0] is not None:
            mode = str(args[1] or "")
            flags = args[2] if isinstance(args[2], int) else 0
            writes = any(c in mode for c in "wax+") or flags & write
            if writes and not inside(root, args[0]):
                raise PermissionError(f"sandbox: cannot write {args[0]!r}")
        if event in paths and not all(inside(root, *t) for t in targets(event, args)):
            raise PermissionError(f"sandbox: {event} outside the work dir")

    real_open = os.open

    def guarded_open(
        path: _PathLike, flags: int, mode: int = 0o777, *, dir_fd: int | None = None
    ) -> int:
        if dir_fd is not None and flags & write and not inside(root, path, dir_fd):
            raise PermissionError(f"sandbox: cannot write {path!r}")
        return real_open(path, flags, mode, dir_fd=dir_fd)

    os.open = guarded_open
    sys.addaudithook(hook)


_install(_inside, _targets)
del _install, _inside, _targets
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
