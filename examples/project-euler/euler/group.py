"""The sandbox's processes seen from outside: whose they are, how much they hold.

Every run gets an unprivileged host uid of its own when the harness runs as
root (``BASE_UID`` + a slot held with a lock file), so the kernel's per-user
process limit (RLIMIT_NPROC, which never binds root) counts exactly that
run's tasks, and "every process of this uid" is exactly the run's group:
what the memory watchdog adds up and what is killed when the run ends.
Without root the uid is the user's own (bwrap needs no privilege), and the
group is the launcher's descendants instead.

Membership is read from ``/proc/<pid>/status`` (the real uid, which a
process cannot hide; the owner of ``/proc/<pid>`` changes when a process
makes itself non-dumpable).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import signal
import stat
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# Far above real users and the usual /etc/subuid ranges (100000-1065535).
BASE_UID = 1_500_000_000
SLOTS = 256
_LOCKS = Path(tempfile.gettempdir(), "euler-uid-slots")


class AccountError(Exception):
    """No uid could be set aside for a run."""


@dataclass(frozen=True)
class Account:
    uid: int
    gid: int
    # True when no other process runs as this uid: the run's group is then
    # "every process of uid", and RLIMIT_NPROC counts only the run.
    exclusive: bool


@contextlib.contextmanager
def account() -> Iterator[Account]:
    """A uid for one run; everything left running as it is killed afterwards."""
    if os.geteuid() != 0:
        yield Account(os.getuid(), os.getgid(), exclusive=False)
        return
    fd, slot = _claim()
    uid = BASE_UID + slot
    try:
        kill_all(Account(uid, uid, exclusive=True))  # left by a killed harness
        yield Account(uid, uid, exclusive=True)
    finally:
        try:
            kill_all(Account(uid, uid, exclusive=True))
        finally:
            os.close(fd)  # releases the slot


def _claim() -> tuple[int, int]:
    _LOCKS.mkdir(mode=0o700, exist_ok=True)
    info = os.lstat(_LOCKS)
    # A lock dir another user made (or a link) could hand two runs one uid.
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o077:
        raise AccountError(f"{_LOCKS} is not a private directory of root")
    start = random.randrange(SLOTS)
    for i in range(SLOTS):
        slot = (start + i) % SLOTS
        fd = os.open(_LOCKS / str(slot), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return fd, slot
    raise AccountError(f"all {SLOTS} sandbox uids are in use")


@dataclass(frozen=True)
class _Task:
    pid: int
    ppid: int
    uid: int
    threads: int


def _tasks() -> Iterator[_Task]:
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as f:
                text = f.read()
        except OSError:  # gone, or not ours to read
            continue
        fields = dict(line.split(b":", 1) for line in text.splitlines() if b":" in line)
        if fields.get(b"State", b"").strip()[:1] in (b"Z", b"X"):
            continue  # exited, holds nothing; its parent (or init) reaps it
        try:
            yield _Task(
                int(name),
                int(fields[b"PPid"]),
                int(fields[b"Uid"].split()[0]),
                int(fields.get(b"Threads", b"1")),
            )
        except (KeyError, ValueError, IndexError):
            continue


def members(acct: Account, root: int | None) -> list[int]:
    """The pids of the run's group: all of its uid, or ``root``'s descendants."""
    own = [t for t in _tasks() if t.uid == acct.uid]
    if acct.exclusive:
        return [t.pid for t in own]
    if root is None:
        return []
    children: dict[int, list[int]] = {}
    for t in own:
        children.setdefault(t.ppid, []).append(t.pid)
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def tasks_of(uid: int) -> int:
    """Tasks (threads count, as RLIMIT_NPROC counts them) ``uid`` runs now."""
    return sum(t.threads for t in _tasks() if t.uid == uid)


def memory(acct: Account, root: int | None) -> int:
    """Bytes the group holds: proportional set size, so shared pages count once."""
    return sum(_pss(pid) for pid in members(acct, root))


def _pss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    try:  # no smaps_rollup (old kernel, or not ours to read): resident set size
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def kill_all(acct: Account, root: int | None = None, wait: float = 5.0) -> bool:
    """SIGKILL the group until none of it is left; False if some still runs."""
    deadline = time.monotonic() + wait
    while True:
        pids = members(acct, root)
        if not pids:
            return True
        if time.monotonic() > deadline:
            return False
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)
