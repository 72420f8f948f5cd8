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

_PathLike = str | bytes | os.PathLike  # type: ignore[type-arg]


def _install() -> None:
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

    def base_of(dir_fd: object) -> str:
        if not isinstance(dir_fd, int):
            return ""
        try:
            return os.readlink(f"/proc/self/fd/{dir_fd}")
        except OSError:
            return "/nonexistent"  # unknown: never inside

    def inside(path: object, dir_fd: object = None) -> bool:
        if isinstance(path, int):  # an open file descriptor
            return True
        if not isinstance(path, _PathLike):
            return False
        full = os.path.realpath(os.path.join(base_of(dir_fd), os.fsdecode(path)))
        return full == root or full.startswith(root + os.sep)

    def targets(event: str, args: tuple[object, ...]) -> list[tuple[object, object]]:
        """(path, dir_fd) pairs an event touches."""
        if event in ("os.rename", "os.link"):  # src, dst, src_dir_fd, dst_dir_fd
            return [(args[0], args[2]), (args[1], args[3])]
        if event == "os.truncate":  # path or fd, length
            return [(args[0], None)]
        return [(a, args[-1]) for a in args[:-1] if isinstance(a, _PathLike)]

    def hook(event: str, args: tuple[object, ...]) -> None:
        if event.startswith(deny):
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "import" and args[0] in modules:
            raise PermissionError(f"sandbox: import {args[0]} is not allowed")
        if event == "open" and args[0] is not None:
            mode = str(args[1] or "")
            flags = args[2] if isinstance(args[2], int) else 0
            writes = any(c in mode for c in "wax+") or flags & write
            if writes and not inside(args[0]):
                raise PermissionError(f"sandbox: cannot write {args[0]!r}")
        if event in paths and not all(inside(*t) for t in targets(event, args)):
            raise PermissionError(f"sandbox: {event} outside the work dir")

    real_open = os.open

    def guarded_open(
        path: _PathLike, flags: int, mode: int = 0o777, *, dir_fd: int | None = None
    ) -> int:
        if dir_fd is not None and flags & write and not inside(path, dir_fd):
            raise PermissionError(f"sandbox: cannot write {path!r}")
        return real_open(path, flags, mode, dir_fd=dir_fd)

    os.open = guarded_open  # type: ignore[assignment]
    sys.addaudithook(hook)


_install()
del _install
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
