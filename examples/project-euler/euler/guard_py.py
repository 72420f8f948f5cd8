"""Run a Python candidate behind an audit hook (the sandbox's language guard).

Copied into the sandbox's work dir and run as ``python3 -I guard_py.py
PROGRAM``. The hook refuses sockets, name resolution, subprocesses, ctypes and
any write, rename or removal outside the work dir. It is a second layer:
native code could bypass it, the namespaces (or Docker) around it do not
depend on it.
"""

from __future__ import annotations

import os
import runpy
import sys

ROOT = os.path.realpath(os.getcwd())
_DENY: tuple[str, ...] = (
    "socket.",
    "subprocess.",
    "ctypes.",
    "os.exec",
    "os.posix_spawn",
    "os.fork",
)
_DENY = (*_DENY, "os.system", "os.spawn", "os.kill", "os.forkpty", "pty.")
_PATHS = {"os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.symlink", "os.link"}
_PATHS |= {"os.chmod", "os.chown", "os.truncate", "os.utime", "shutil.rmtree"}
_WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def _inside(path: object) -> bool:
    if isinstance(path, int):
        return True
    if not isinstance(path, str | bytes | os.PathLike):
        return False
    full = os.path.realpath(os.fsdecode(path))
    return full == ROOT or full.startswith(ROOT + os.sep)


def _hook(event: str, args: tuple[object, ...]) -> None:
    if event.startswith(_DENY):
        raise PermissionError(f"sandbox: {event} is not allowed")
    if event == "open" and args[0] is not None:
        mode, flags = str(args[1] or ""), args[2] if isinstance(args[2], int) else 0
        writes = any(c in mode for c in "wax+") or flags & _WRITE
        if writes and not _inside(args[0]):
            raise PermissionError(f"sandbox: cannot write {args[0]}")
    if event in _PATHS and not all(
        _inside(a) for a in args if isinstance(a, str | bytes | os.PathLike)
    ):
        raise PermissionError(f"sandbox: {event} outside the work dir")


program = sys.argv[1]
sys.argv = sys.argv[1:]
sys.addaudithook(_hook)
runpy.run_path(program, run_name="__main__")
