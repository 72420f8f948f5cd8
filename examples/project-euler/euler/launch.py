"""How a run starts under each isolation: the command line, its files, its stop.

``bwrap`` (bubblewrap): the harness joins the run's cgroup if one is
delegated (cgroup.py), sets the resource limits (``prlimit``) and, as root,
drops to the run's unprivileged uid (``setpriv``: real and effective ids, no
supplementary groups, no capabilities, no new privileges); then ``bwrap``
makes new user, pid, network, ipc, uts, mount and cgroup namespaces, with no
further user namespaces allowed, a fresh ``/proc``, a minimal ``/dev``
(null, zero, full, random, urandom, tty, pts; read-only itself), read-only
binds of ``/usr`` (and the ``/lib``, ``/bin`` links or directories, and an
interpreter's prefix when it lives elsewhere) and nothing else, and a tmpfs
work dir of ``Limits.disk`` bytes. The program and the guard are copied in
from memory file descriptors, parameters arrive on stdin: no host directory
is visible at all, so the harness's source, answer keys and seeds are not
either. ``--die-with-parent`` and the pid namespace end every process of the
run with it.

``podman``/``docker``: the same shape from a container engine (``--network
none``, read-only root, all capabilities dropped, the run's uid, memory,
pids and CPU limits from the engine's cgroup); the program comes in through a
private read-only staging dir.

``none``: no isolation, for machines without any (only with an explicit
flag): limits and the unprivileged uid when the harness is root, a private
work dir, the language guard. A determined program gets past it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from euler import cgroup
from euler import group

if TYPE_CHECKING:
    from euler.sandbox import Limits

HERE = Path(__file__).parent
WORK = "/sandbox"  # the writable work dir inside bwrap and containers
FILES = "/in"  # the program and the guard, read-only, inside bwrap and containers
EXT = {"python": "py", "javascript": "js"}
IMAGES = {
    "python": os.environ.get("EULER_IMAGE_PYTHON", "python:3.11-slim"),
    "javascript": os.environ.get("EULER_IMAGE_NODE", "node:20-slim"),
}
ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


@dataclass
class Spec:
    """What to start: the command, its environment, fds to hand over, a stop."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    pass_fds: tuple[int, ...] = ()
    # Processes outside the launcher's reach that must end with the run
    # (a container the engine runs for us).
    stop: Callable[[], None] | None = None
    # The harness adds up the group's memory itself (no cgroup holds it).
    watch_memory: bool = True


def which(name: str) -> str:
    found = shutil.which(name)
    if not found:
        raise FileNotFoundError(name)
    return found


# --- interpreters ---------------------------------------------------------


@functools.cache
def python() -> str:
    """The sandbox's Python (3.10+, for the guard): the system's if it has one.

    A real path: a virtualenv's ``bin/python`` link leads out of the sandbox.
    """
    for candidate in (
        os.environ.get("EULER_PYTHON", ""),
        "/usr/bin/python3",
        "/usr/local/bin/python3",
        sys.executable,
    ):
        if candidate and os.access(candidate, os.X_OK) and _python_prefix(candidate):
            return os.path.realpath(candidate)
    return os.path.realpath(sys.executable)


@functools.cache
def node() -> str:
    return os.path.realpath(shutil.which("node") or "/usr/bin/node")


@functools.cache
def _python_prefix(interpreter: str) -> str | None:
    """sys.base_prefix of a Python 3.10+, or None for an older or broken one."""
    check = "import sys; assert sys.version_info >= (3, 10); print(sys.base_prefix)"
    try:
        done = subprocess.run(
            [os.path.realpath(interpreter), "-I", "-S", "-c", check],
            capture_output=True,
            text=True,
            check=False,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _prefix(interpreter: str, lang: str) -> str:
    """The install prefix an interpreter needs besides /usr, or ''."""
    if lang == "python":
        prefix = _python_prefix(interpreter) or "/usr"
    else:
        prefix = str(Path(os.path.realpath(interpreter)).parents[1])
    return "" if prefix == "/usr" or prefix.startswith("/usr/") else prefix


def _system_binds(interpreter: str, lang: str) -> list[str]:
    """Read-only binds of what an interpreter needs, and nothing else."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/", name)
        if path.is_symlink():  # merged /usr: /lib -> usr/lib
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    args += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    prefix = _prefix(interpreter, lang)
    if prefix:
        args += ["--ro-bind", prefix, prefix]
    return args


@functools.cache
def _node_permission_flag() -> str:
    # Node 20 spells it --experimental-permission; 22.13+/23.5+ --permission.
    done = subprocess.run(
        [node(), "--permission", "-e", "0"], capture_output=True, check=False
    )
    return "--permission" if done.returncode == 0 else "--experimental-permission"


def program_argv(
    lang: str, interpreter: str, files: str, work: str, *, guard: bool
) -> list[str]:
    """The interpreter's command line: ``files``/main.<ext>, writing in ``work``.

    With ``guard``, the language guard from ``files`` runs first.
    """
    main = f"{files}/main.{EXT[lang]}"
    if lang == "python":
        inner = [interpreter, "-I", "-S"]
        return [*inner, f"{files}/guard_py.py", main] if guard else [*inner, main]
    flags = ["--no-warnings", "--max-old-space-size=256"]
    if guard:
        flags = [
            _node_permission_flag(),
            "--allow-fs-read=*",
            f"--allow-fs-write={work}",
            *flags,
            "--require",
            f"{files}/guard_js.js",
        ]
    return [interpreter, *flags, main]


def guard_source(lang: str) -> bytes:
    return (HERE / f"guard_{EXT[lang]}.{EXT[lang]}").read_bytes()


# --- limits and the uid, outside ------------------------------------------


def host_prefix(
    limits: Limits, acct: group.Account, cg: Path | None = None
) -> list[str]:
    """Into the run's cgroup if any, prlimit (per-process limits) and, as
    root, setpriv (the run's uid)."""
    # RLIMIT_NPROC counts every task of the uid: exact when the uid is the
    # run's own, else allow this many more than the user runs now.
    nproc = limits.processes + (0 if acct.exclusive else group.tasks_of(acct.uid))
    argv = [
        *(cgroup.join(cg) if cg else []),
        which("prlimit"),
        f"--cpu={limits.cpu}",
        f"--as={limits.memory}",
        f"--fsize={limits.file_size}",
        f"--nofile={limits.open_files}",
        f"--nproc={nproc}",
        "--core=0",
        "--",
    ]
    if os.geteuid() == 0:
        argv += [
            which("setpriv"),
            f"--reuid={acct.uid}",
            f"--regid={acct.gid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
            "--",
        ]
    return argv


# --- the three ways -------------------------------------------------------


@contextlib.contextmanager
def prepare(
    mode: str,
    source: bytes,
    lang: str,
    limits: Limits,
    acct: group.Account,
    *,
    guard: bool = True,
    cg: Path | None = None,
) -> Iterator[Spec]:
    """The Spec that runs ``source`` under ``mode``; its files live as long.

    ``cg``: the run's cgroup (bwrap and none; an engine has its own).
    """
    if mode == "bwrap":
        with _bwrap(source, lang, limits, acct, guard, cg) as spec:
            yield spec
    elif mode in ("podman", "docker"):
        with _container(mode, source, lang, limits, acct, guard) as spec:
            yield spec
    elif mode == "none":
        with _unconfined(source, lang, limits, acct, guard, cg) as spec:
            yield spec
    else:
        raise ValueError(f"unknown isolation {mode!r}")


def _memfd(name: str, data: bytes) -> int:
    """A file in memory holding ``data``, read from the start by bwrap."""
    fd = os.memfd_create(name)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def bwrap_argv(
    lang: str, limits: Limits, main_fd: int, guard_fd: int | None
) -> list[str]:
    interpreter = python() if lang == "python" else node()
    ext = EXT[lang]
    files = {main_fd: f"{FILES}/main.{ext}"}
    if guard_fd is not None:
        files[guard_fd] = f"{FILES}/guard_{ext}.{ext}"
    argv = [
        which("bwrap"),
        "--unshare-user",
        "--unshare-all",  # pid, net, ipc, uts, mount, cgroup
        "--disable-userns",  # and no namespaces made inside to undo it
        "--die-with-parent",
        "--new-session",
        "--hostname",
        "sandbox",
        "--clearenv",
        *[a for k, v in {**ENV, "HOME": WORK, "TMPDIR": WORK}.items()
          for a in ("--setenv", k, v)],
        *_system_binds(interpreter, lang),
        "--proc", "/proc",
        "--dev", "/dev",
        "--perms", "0700", "--size", str(limits.disk), "--tmpfs", WORK,
    ]  # fmt: skip
    for fd, path in files.items():
        argv += ["--ro-bind-data", str(fd), path]
    # Last: nothing but the work dir stays writable (/dev's tmpfs and the
    # root tmpfs bwrap builds would otherwise take files of any size).
    argv += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", WORK, "--"]
    return argv + program_argv(
        lang, interpreter, FILES, WORK, guard=guard_fd is not None
    )


@contextlib.contextmanager
def _bwrap(
    source: bytes,
    lang: str,
    limits: Limits,
    acct: group.Account,
    guard: bool,
    cg: Path | None,
) -> Iterator[Spec]:
    main_fd = _memfd("main", source)
    guard_fd = _memfd("guard", guard_source(lang)) if guard else None
    fds = (main_fd,) if guard_fd is None else (main_fd, guard_fd)
    try:
        argv = host_prefix(limits, acct, cg)
        argv += bwrap_argv(lang, limits, main_fd, guard_fd)
        yield Spec(argv, dict(ENV), "/", fds, watch_memory=cg is None)
    finally:
        for fd in fds:
            os.close(fd)


@contextlib.contextmanager
def _unconfined(
    source: bytes,
    lang: str,
    limits: Limits,
    acct: group.Account,
    guard: bool,
    cg: Path | None,
) -> Iterator[Spec]:
    work = tempfile.mkdtemp(prefix="euler-")
    try:
        ext = EXT[lang]
        Path(work, f"main.{ext}").write_bytes(source)
        if guard:
            Path(work, f"guard_{ext}.{ext}").write_bytes(guard_source(lang))
        for path in [work, *(str(p) for p in Path(work).iterdir())]:
            os.chown(path, acct.uid, acct.gid)  # no-op unless root
        os.chmod(work, 0o700)
        interpreter = python() if lang == "python" else node()
        argv = host_prefix(limits, acct, cg) + program_argv(
            lang, interpreter, work, work, guard=guard
        )
        env = {**ENV, "HOME": work, "TMPDIR": work}
        yield Spec(argv, env, work, watch_memory=cg is None)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def container_argv(
    engine: str, name: str, lang: str, limits: Limits, acct: group.Account,
    staging: str, *, guard: bool,
) -> list[str]:  # fmt: skip
    """``engine run`` for one run (nothing is pulled)."""
    interpreter = "python3" if lang == "python" else "node"
    return [
        engine, "run", "--rm", "-i", "--name", name, "--pull", "never",
        "--network", "none", "--ipc", "private", "--read-only",
        "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
        "--user", f"{acct.uid}:{acct.gid}",
        "--memory", str(limits.group_memory),
        "--memory-swap", str(limits.group_memory),
        "--pids-limit", str(limits.processes), "--cpus", "1",
        "--ulimit", f"cpu={limits.cpu}", "--ulimit", f"fsize={limits.file_size}",
        "--ulimit", f"nofile={limits.open_files}", "--ulimit", "core=0",
        "--tmpfs", f"{WORK}:rw,size={limits.disk},mode=1777",
        "--volume", f"{staging}:{FILES}:ro", "--workdir", WORK,
        "--env", f"HOME={WORK}", "--env", f"TMPDIR={WORK}",
        IMAGES[lang],
        *program_argv(lang, interpreter, FILES, WORK, guard=guard),
    ]  # fmt: skip


@contextlib.contextmanager
def _container(
    engine: str,
    source: bytes,
    lang: str,
    limits: Limits,
    acct: group.Account,
    guard: bool,
) -> Iterator[Spec]:
    staging = tempfile.mkdtemp(prefix="euler-in-")
    try:
        ext = EXT[lang]
        # The staging dir holds the program and the guard only; the work
        # dir is the container's own tmpfs.
        Path(staging, f"main.{ext}").write_bytes(source)
        Path(staging, f"guard_{ext}.{ext}").write_bytes(guard_source(lang))
        for path in Path(staging).iterdir():
            path.chmod(0o444)
        os.chmod(staging, 0o755)
        name = f"euler-{secrets.token_hex(6)}"
        argv = container_argv(
            which(engine), name, lang, limits, acct, staging, guard=guard
        )

        def stop() -> None:
            subprocess.run(
                [which(engine), "kill", name],
                capture_output=True,
                check=False,
                timeout=30,
            )

        yield Spec(argv, {**os.environ}, staging, stop=stop, watch_memory=False)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
