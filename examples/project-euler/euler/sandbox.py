"""Run one candidate program confined, with a deadline and bounded output.

Isolation, strongest available first (``best()`` probes once per process):

- ``docker``: ``docker run --network none --read-only`` with the work dir the
  only writable mount, memory/pids/cpu limits. Used when a Docker engine
  answers and the images exist locally (nothing is pulled).
- ``namespaces``: ``unshare`` into new user, network, mount and pid
  namespaces: no network at all (only a loopback that is down), every mount
  read-only except the private work dir, no view of other processes.
- ``guards``: no kernel isolation; language guards only (below).

Always, in every mode: a fresh private work dir (removed afterwards), a
wall-clock timeout that kills the whole process group, a cap on captured
output, rlimits (CPU seconds, address space, file size, open files,
processes, no core dumps), an empty environment, and a language guard: a
Python audit hook (no sockets, subprocesses, ctypes, writes outside the work
dir) or Node's permission model (no child processes, workers, addons, writes
outside the work dir) plus a preload that refuses connections and name
resolution.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

HERE = Path(__file__).parent
LANGUAGES = {".py": "python", ".js": "javascript"}
ISOLATIONS = ("docker", "namespaces", "guards")
IMAGES = {
    "python": os.environ.get("EULER_DOCKER_PYTHON", "python:3.11-slim"),
    "javascript": os.environ.get("EULER_DOCKER_NODE", "node:20-slim"),
}
_UNSHARE = ["unshare", "--user", "--map-root-user", "--net", "--mount", "--pid"]
_UNSHARE += ["--fork", "--kill-child"]


@dataclass(frozen=True)
class Limits:
    timeout: float = 10.0  # wall clock, seconds
    cpu: int = 10  # seconds
    memory: int = 2 << 30  # address space, bytes (Node reserves a lot)
    file_size: int = 1 << 20
    open_files: int = 64
    processes: int = 64  # new tasks (threads count) beyond the user's current
    output: int = 64 << 10  # bytes of stdout (and of stderr) kept

    def rlimits(self) -> dict[str, int]:
        return {
            "RLIMIT_CPU": self.cpu,
            "RLIMIT_AS": self.memory,
            "RLIMIT_FSIZE": self.file_size,
            "RLIMIT_NOFILE": self.open_files,
            "RLIMIT_NPROC": self.processes,
            "RLIMIT_CORE": 0,
        }


@dataclass
class Result:
    returncode: int | None
    stdout: bytes
    stderr: bytes
    isolation: str
    timed_out: bool = False
    truncated: bool = False
    seconds: float = field(default=0.0, compare=False)

    def answer(self) -> str | None:
        """The last line printed, if the program finished cleanly."""
        if self.returncode != 0 or self.timed_out or self.truncated:
            return None
        lines = self.stdout.decode(errors="replace").strip().splitlines()
        return lines[-1].strip() if lines else None


def language(program: Path) -> str:
    try:
        return LANGUAGES[program.suffix]
    except KeyError:
        known = ", ".join(LANGUAGES)
        raise ValueError(f"{program}: unknown language (use {known})") from None


@functools.cache
def best() -> str:
    """The strongest isolation that works on this machine."""
    images = [["docker", "image", "inspect", i] for i in IMAGES.values()]
    if shutil.which("docker") and all(map(_quiet, [["docker", "info"], *images])):
        return "docker"
    with tempfile.TemporaryDirectory() as tmp:
        probe = [*_UNSHARE, *_launcher(Limits(), tmp, mounts=True), "true"]
        if shutil.which("unshare") and _quiet(probe):
            return "namespaces"
    return "guards"


def _quiet(cmd: list[str]) -> bool:
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _launcher(limits: Limits, workdir: str, *, mounts: bool) -> list[str]:
    rl = json.dumps(limits.rlimits())
    launch = str(HERE / "launch.py")
    return [sys.executable, "-I", launch, rl, workdir, "1" if mounts else "0", "--"]


@functools.cache
def _node_permission_flag() -> str:
    # Node 20 spells it --experimental-permission; 22.13+/23.5+ --permission.
    node = shutil.which("node") or "node"
    return (
        "--permission"
        if _quiet([node, "--permission", "-e", "0"])
        else ("--experimental-permission")
    )


def _program_argv(lang: str, workdir: str, python: str, node: str) -> list[str]:
    if lang == "python":
        return [python, "-I", "guard_py.py", "main.py"]
    return [
        node,
        _node_permission_flag(),
        "--allow-fs-read=*",
        f"--allow-fs-write={workdir}",
        "--no-warnings",
        "--max-old-space-size=256",
        "--require",
        "./guard_js.js",
        "main.js",
    ]


def command(lang: str, workdir: str, limits: Limits, isolation: str) -> list[str]:
    """The argv that runs main.<ext> in ``workdir`` under ``isolation``."""
    if isolation == "docker":
        inner = _program_argv(lang, "/sandbox", "python3", "node")
        return [
            "docker", "run", "--rm", "-i", "--pull", "never", "--network", "none",
            "--read-only", "--tmpfs", "/tmp:size=16m", "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges",
            "--memory", str(min(limits.memory, 512 << 20)),
            "--pids-limit", str(limits.processes), "--cpus", "1",
            "--ulimit", f"cpu={limits.cpu}", "--ulimit", f"fsize={limits.file_size}",
            "--user", f"{os.getuid()}:{os.getgid()}",
            "-v", f"{workdir}:/sandbox", "-w", "/sandbox", IMAGES[lang], *inner,
        ]  # fmt: skip
    node = shutil.which("node") or "node"
    inner = _program_argv(lang, workdir, sys.executable, node)
    if isolation == "namespaces":
        return [*_UNSHARE, *_launcher(limits, workdir, mounts=True), *inner]
    if isolation == "guards":
        return [*_launcher(limits, workdir, mounts=False), *inner]
    raise ValueError(f"unknown isolation {isolation!r} ({', '.join(ISOLATIONS)})")


def run(
    source: bytes,
    lang: str,
    stdin: bytes = b"",
    *,
    limits: Limits | None = None,
    isolation: str | None = None,
) -> Result:
    """Run ``source`` (a whole program in ``lang``) once, confined."""
    limits = limits or Limits()
    isolation = isolation or best()
    workdir = tempfile.mkdtemp(prefix="euler-")
    try:
        ext = "py" if lang == "python" else "js"
        Path(workdir, f"main.{ext}").write_bytes(source)
        shutil.copy(HERE / f"guard_{ext}.{ext}", workdir)
        os.chmod(workdir, 0o700)
        cmd = command(lang, workdir, limits, isolation)
        env = {"PATH": "/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir}
        env["LANG"] = "C.UTF-8"
        return _execute(cmd, workdir, env, stdin, limits, isolation)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _execute(
    cmd: list[str],
    workdir: str,
    env: dict[str, str],
    stdin: bytes,
    limits: Limits,
    isolation: str,
) -> Result:
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        cwd=workdir,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # one process group to kill, whatever it spawned
    )
    assert proc.stdin and proc.stdout and proc.stderr
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.write(stdin)
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.close()
    fd_out, fd_err = proc.stdout.fileno(), proc.stderr.fileno()
    out = {fd_out: bytearray(), fd_err: bytearray()}
    timed_out = truncated = False
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        sel.register(proc.stderr, selectors.EVENT_READ)
        while sel.get_map():
            left = start + limits.timeout - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                buf = out[key.fd]
                buf += chunk[: limits.output + 1 - len(buf)]
                if len(buf) > limits.output:
                    truncated = True
            if truncated:
                break
    if timed_out or truncated:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    code = proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    return Result(
        returncode=code,
        stdout=bytes(out[fd_out])[: limits.output],
        stderr=bytes(out[fd_err])[: limits.output],
        isolation=isolation,
        timed_out=timed_out,
        truncated=truncated,
        seconds=time.monotonic() - start,
    )
