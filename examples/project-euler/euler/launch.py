"""Inside the sandbox, before the candidate: read-only mounts, limits, exec.

Run as ``python3 -I launch.py LIMITS_JSON WORKDIR MOUNTS -- ARGV...`` (by
sandbox.py, possibly inside fresh user, network, mount and pid namespaces).
With MOUNTS=1 every mount but the work dir becomes read-only; this only works
in a private mount namespace, where it is invisible outside. Then resource
limits are set (RLIMIT_NPROC as a number of tasks beyond those the user
already runs) and the candidate replaces this process.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND = 32, 1024, 2048, 4096
MS_REC, MS_PRIVATE, MS_RELATIME, MS_STRICTATIME = 16384, 1 << 18, 1 << 21, 1 << 24
# Flags the kernel locks on mounts inherited into a user namespace: a remount
# must repeat them or it is refused.
_KEEP = {
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME,
    "relatime": MS_RELATIME,
    "strictatime": MS_STRICTATIME,
}


def _mount(libc: ctypes.CDLL, src: str | None, target: str, flags: int) -> None:
    enc = [None if s is None else s.encode() for s in (src, target)]
    if libc.mount(enc[0], enc[1], None, flags, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def _mountpoints() -> list[tuple[str, int]]:
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            point = fields[4].encode().decode("unicode_escape")
            flags = 0
            for option in fields[5].split(","):
                flags |= _KEEP.get(option, 0)
            found.append((point, flags))
    return found


def read_only_except(workdir: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    _mount(libc, None, "/", MS_REC | MS_PRIVATE)
    _mount(libc, workdir, workdir, MS_BIND | MS_REC)
    for point, flags in _mountpoints():
        if point == workdir or point.startswith(workdir.rstrip("/") + "/"):
            continue
        try:
            _mount(libc, None, point, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
        except OSError:
            # A mount we cannot remount (already covered, or special) must
            # still refuse writes; if it does not, refuse to run at all.
            if os.access(point, os.W_OK) and not _read_only(point):
                raise


def _read_only(point: str) -> bool:
    return bool(os.statvfs(point).f_flag & os.ST_RDONLY)


def _tasks_of_user() -> int:
    """Threads the real uid runs now (RLIMIT_NPROC counts all of them)."""
    uid, count = str(os.getuid()), 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        if fields.get("Uid", "").split()[:1] == [uid]:
            count += int(fields.get("Threads", "1"))
    return count


def main() -> None:
    limits, workdir, mounts = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
    argv = sys.argv[sys.argv.index("--") + 1 :]
    if mounts == "1":
        try:
            read_only_except(workdir)
        except OSError as e:
            sys.stderr.write(f"sandbox: {e}\n")
            sys.exit(125)
    # The process limit is per user, not per sandbox: allow this many *more*
    # than the user runs now, so a busy CI user does not starve Node's threads.
    limits["RLIMIT_NPROC"] += _tasks_of_user()
    for name, value in limits.items():
        resource.setrlimit(getattr(resource, name), (value, value))
    os.chdir(workdir)
    os.execvpe(argv[0], argv, {**os.environ})


main()
