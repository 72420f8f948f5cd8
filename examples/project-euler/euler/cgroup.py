"""A cgroup (v2) for one run's group, when one is delegated to the harness.

``EULER_CGROUP`` names a cgroup v2 directory the harness may make children
in, with ``memory`` and ``pids`` enabled in its ``cgroup.subtree_control``
(a systemd unit with ``Delegate=yes``, or one an administrator made for
it). Each run then gets a child of its own with ``memory.max`` =
``Limits.group_memory`` (and no swap), ``pids.max`` = ``Limits.processes``
and ``memory.oom.group`` = 1, joined before the limits are set and the uid
dropped: the kernel holds the group's memory and process limits exactly,
and the harness's memory watchdog is not needed. When the run ends the
cgroup is killed whole and removed.

Without ``EULER_CGROUP`` no cgroup is touched: a process can only create
children in a cgroup it has no processes in, so the harness's own is no
place for them, and moving itself would change the cgroups of whatever runs
it. The per-run uid's RLIMIT_NPROC and the memory watchdog hold the group
instead (group.py).
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from euler.sandbox import Limits

ENV = "EULER_CGROUP"


class CgroupError(Exception):
    """EULER_CGROUP names no usable cgroup."""


@functools.cache
def parent() -> Path | None:
    """The delegated cgroup runs get children in, or None when none is set."""
    name = os.environ.get(ENV, "")
    if not name:
        return None
    path = Path(name)
    try:
        enabled = (path / "cgroup.subtree_control").read_text().split()
    except OSError as e:
        raise CgroupError(f"{ENV}={name}: {e.strerror}") from None
    if not {"memory", "pids"} <= set(enabled):
        raise CgroupError(
            f"{ENV}={name}: memory and pids are not in its cgroup.subtree_control"
        )
    return path


@contextlib.contextmanager
def scope(limits: Limits) -> Iterator[Path | None]:
    """A fresh child cgroup with the group's limits (None without EULER_CGROUP)."""
    top = parent()
    if top is None:
        yield None
        return
    path = top / f"euler-{secrets.token_hex(6)}"
    path.mkdir()
    try:
        settings = {
            "memory.max": limits.group_memory,
            "memory.swap.max": 0,
            "pids.max": limits.processes,
            "memory.oom.group": 1,  # one OOM kill ends the whole group
        }
        for name, value in settings.items():
            if name != "memory.swap.max" or (path / name).exists():
                (path / name).write_text(f"{value}\n")
        yield path
    finally:
        kill(path)
        for _ in range(100):  # removable once the kernel has reaped the group
            try:
                path.rmdir()
                break
            except OSError:
                time.sleep(0.02)


def join(path: Path) -> list[str]:
    """A command prefix that moves itself into ``path`` before going on."""
    return ["/bin/sh", "-c", 'echo 0 > "$0" && exec "$@"', str(path / "cgroup.procs")]


def oom_killed(path: Path) -> bool:
    """Whether the kernel killed something in the group for memory."""
    try:
        events = dict(
            line.split() for line in (path / "memory.events").read_text().splitlines()
        )
    except (OSError, ValueError):
        return False
    return int(events.get("oom_kill", "0")) > 0


def kill(path: Path) -> None:
    """SIGKILL every process in the cgroup and wait until it is empty."""
    if (path / "cgroup.kill").exists():  # Linux 5.14+
        with contextlib.suppress(OSError):
            (path / "cgroup.kill").write_text("1\n")
    for _ in range(250):
        try:
            pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
        except OSError:
            return
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)
