"""Run one candidate program confined, with limits for its whole process group.

Isolation comes from a tool made for it (launch.py has the details):

- ``bwrap`` (bubblewrap): new user, pid, network, ipc, uts, mount and cgroup
  namespaces, read-only binds of the interpreters only, a size-capped tmpfs
  work dir, an unprivileged uid of the run's own.
- ``podman`` / ``docker``: the same from a container engine, when one
  answers and its images are already local (nothing is pulled).
- ``none``: no isolation, only with ``allow_unsafe`` (the CLI's
  ``--unsafe-no-sandbox``): the limits, the uid when the harness is root,
  and the language guards, which a determined program gets past.

Around every mode: a wall-clock timeout, a cap on captured output, per-process
rlimits (CPU, address space, file size, open files, no core dumps), a process
limit for the group (a cgroup when one is delegated, see cgroup.py, or the
engine's; else RLIMIT_NPROC on the run's uid), a memory limit for the group
(the same cgroups; else a watchdog adding up the group's proportional set
size), an empty environment,
and, as a second layer only, a language guard (guard_py.py, guard_js.js).
When the run ends, every process of its group ends with it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass
from dataclasses import field

from euler import cgroup
from euler import group
from euler import launch

LANGUAGES = {".py": "python", ".js": "javascript"}
ISOLATIONS = ("bwrap", "podman", "docker")
UNSAFE = "none"
POLL = 0.05  # seconds between two looks at the group's memory
GRACE = 0.2  # after the program exits, how long its leftovers may still write


class NoSandbox(Exception):
    """No real isolation works here, and running without it was not allowed."""


@dataclass(frozen=True)
class Limits:
    timeout: float = 10.0  # wall clock, seconds
    cpu: int = 10  # CPU seconds, per process
    memory: int = 2 << 30  # address space, per process (Node reserves a lot)
    group_memory: int = 512 << 20  # bytes the whole group may hold
    processes: int = 64  # tasks (threads count) the group may run at once
    disk: int = 16 << 20  # bytes of the writable work dir
    file_size: int = 1 << 20
    open_files: int = 64
    output: int = 64 << 10  # bytes of stdout (and of stderr) kept


@dataclass
class Result:
    returncode: int | None
    stdout: bytes
    stderr: bytes
    isolation: str
    # Why the harness ended the run early: "timeout", "output" (more than
    # Limits.output), "memory" (the group held more than group_memory).
    stopped: str | None = None
    seconds: float = field(default=0.0, compare=False)
    uid: int | None = field(default=None, compare=False)  # the run's host uid

    @property
    def timed_out(self) -> bool:
        return self.stopped == "timeout"

    def answer(self) -> str | None:
        """The last line printed, if the program finished cleanly."""
        if self.returncode != 0 or self.stopped:
            return None
        lines = self.stdout.decode(errors="replace").strip().splitlines()
        return lines[-1].strip() if lines else None


def language(program: os.PathLike[str] | str) -> str:
    suffix = os.path.splitext(program)[1]
    try:
        return LANGUAGES[suffix]
    except KeyError:
        known = ", ".join(LANGUAGES)
        raise ValueError(f"{program}: unknown language (use {known})") from None


@functools.cache
def problem(mode: str) -> str | None:
    """Why ``mode`` does not work on this machine, or None when it does."""
    if mode == "bwrap":
        missing = [t for t in ("bwrap", "prlimit", "setpriv") if not _has(t)]
        if missing:
            return f"{', '.join(missing)} not installed (apt-get install bubblewrap)"
        try:
            cgroup.parent()
        except cgroup.CgroupError as e:
            return str(e)
    elif mode in ("podman", "docker"):
        if not _has(mode):
            return f"{mode} not installed"
        for cmd in (
            ["info"],
            *(["image", "inspect", i] for i in launch.IMAGES.values()),
        ):
            if not _quiet([mode, *cmd]):
                return (
                    f"`{mode} {' '.join(cmd)}` failed (engine down or image not local)"
                )
    else:
        raise ValueError(f"unknown isolation {mode!r}")
    probe = _run(b"print(6 * 7)\n", "python", b"", Limits(timeout=30), mode, True)
    if probe.answer() != "42":
        said = probe.stderr.decode(errors="replace").strip().splitlines()
        return said[-1] if said else f"a test program exited {probe.returncode}"
    return None


def _has(tool: str) -> bool:
    try:
        launch.which(tool)
    except FileNotFoundError:
        return False
    return True


def _quiet(cmd: list[str]) -> bool:
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def best() -> str | None:
    """The first isolation that works here (bwrap, podman, docker), or None."""
    return next((m for m in ISOLATIONS if problem(m) is None), None)


def resolve(requested: str | None, *, allow_unsafe: bool = False) -> str:
    """The isolation to use; NoSandbox rather than running unconfined unasked."""
    if requested == UNSAFE:
        if not allow_unsafe:
            raise NoSandbox(
                "isolation 'none' runs the program with in-process guards only;"
                " pass --unsafe-no-sandbox to allow that"
            )
        return UNSAFE
    if requested is not None:
        if requested not in ISOLATIONS:
            known = ", ".join((*ISOLATIONS, UNSAFE))
            raise ValueError(f"unknown isolation {requested!r} (known: {known})")
        why = problem(requested)
        if why:
            raise NoSandbox(f"isolation {requested} does not work here: {why}")
        return requested
    found = best()
    if found:
        return found
    if allow_unsafe:
        return UNSAFE
    raise NoSandbox(
        "no sandbox works here (bwrap: "
        f"{problem('bwrap')}); install bubblewrap, or pass --unsafe-no-sandbox"
        " to run untrusted programs with in-process guards only"
    )


def run(
    source: bytes,
    lang: str,
    stdin: bytes = b"",
    *,
    limits: Limits | None = None,
    isolation: str | None = None,
    allow_unsafe: bool = False,
    guard: bool = True,
) -> Result:
    """Run ``source`` (a whole program in ``lang``) once, confined.

    ``guard=False`` leaves out the language guard (to show what the kernel
    isolation alone stops); it is never the default.
    """
    mode = resolve(isolation, allow_unsafe=allow_unsafe)
    return _run(source, lang, stdin, limits or Limits(), mode, guard)


def _run(
    source: bytes, lang: str, stdin: bytes, limits: Limits, mode: str, guard: bool
) -> Result:
    own_cgroup = mode in ("bwrap", UNSAFE)  # an engine makes its own
    with (
        group.account() as acct,
        cgroup.scope(limits) if own_cgroup else contextlib.nullcontext() as cg,
        launch.prepare(mode, source, lang, limits, acct, guard=guard, cg=cg) as spec,
    ):
        result = _execute(spec, stdin, limits, acct)
        if cg is not None and result.stopped is None and cgroup.oom_killed(cg):
            result.stopped = "memory"
    result.isolation = mode
    return result


def _execute(
    spec: launch.Spec, stdin: bytes, limits: Limits, acct: group.Account
) -> Result:
    start = time.monotonic()
    proc = subprocess.Popen(
        spec.argv,
        cwd=spec.cwd,
        env=spec.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        pass_fds=spec.pass_fds,
        start_new_session=True,  # one process group for the launcher
    )
    assert proc.stdin and proc.stdout and proc.stderr
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.write(stdin)
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.close()
    out, err = b"", b""
    stopped: str | None = "error"  # until _collect returns
    try:
        out, err, stopped = _collect(proc, spec, limits, acct, start)
    finally:
        _end(proc, spec, acct, stopped is not None)
    return Result(
        returncode=proc.returncode,
        stdout=out[: limits.output],
        stderr=err[: limits.output],
        isolation="",
        stopped=stopped,
        seconds=time.monotonic() - start,
        uid=acct.uid,
    )


def _collect(
    proc: subprocess.Popen[bytes],
    spec: launch.Spec,
    limits: Limits,
    acct: group.Account,
    start: float,
) -> tuple[bytes, bytes, str | None]:
    """Read stdout and stderr until both close, or until the run is stopped."""
    assert proc.stdout and proc.stderr
    fd_out, fd_err = proc.stdout.fileno(), proc.stderr.fileno()
    out = {fd_out: bytearray(), fd_err: bytearray()}

    def done(why: str | None) -> tuple[bytes, bytes, str | None]:
        return bytes(out[fd_out]), bytes(out[fd_err]), why

    exited: float | None = None
    next_look = start
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        sel.register(proc.stderr, selectors.EVENT_READ)
        while sel.get_map():
            now = time.monotonic()
            if now >= start + limits.timeout:
                return done("timeout")
            if exited is None and proc.poll() is not None:
                exited = now
            if exited is not None and now > exited + GRACE:
                break  # leftovers hold the pipes open: they are killed next
            if spec.watch_memory and now >= next_look:
                next_look = now + POLL
                if group.memory(acct, proc.pid) > limits.group_memory:
                    return done("memory")
            wait = min(start + limits.timeout, next_look) - now
            for key, _ in sel.select(max(wait, 0.001)):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                buf = out[key.fd]
                buf += chunk[: limits.output + 1 - len(buf)]
                if len(buf) > limits.output:
                    return done("output")
    return done(None)


def _end(
    proc: subprocess.Popen[bytes],
    spec: launch.Spec,
    acct: group.Account,
    stopped: bool,
) -> None:
    """Nothing of the run outlives it: the launcher, the group, a container."""
    running = proc.poll() is None
    if running:
        # Its descendants first, while the tree still leads to them (the
        # pid namespace ends with bwrap, but the none mode has none).
        group.kill_all(acct, proc.pid, wait=0)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    if spec.stop is not None and (running or stopped):
        spec.stop()
    proc.wait()
    group.kill_all(acct)
    assert proc.stdout and proc.stderr
    proc.stdout.close()
    proc.stderr.close()
