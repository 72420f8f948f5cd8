"""Running git for push, pull and clone: allowed transports only, never a prompt,
never forever.

git can reach a remote through transports that run commands (``ext::``),
read a file descriptor (``fd::``, which waits forever) or load any
``git-remote-<name>`` program on PATH. Whatever the user's git config says
(``protocol.allow=always``, ``url.<x>.insteadOf`` rewriting a URL into one of
those), machine lets git use only file paths, ``git://``, ``http(s)://`` and
ssh: the allow-list goes in the environment (``GIT_ALLOW_PROTOCOL``, which
overrides every ``protocol.*`` setting) and on the command line. A URL of any
other transport is refused before git runs.

git never asks for anything on a terminal (a command run from an agent has no
one to answer): no terminal prompt, no askpass program, ssh in batch mode and
without a controlling terminal. Each run has a time limit
(``MACHINE_GIT_TIMEOUT``); at the limit git and its children (ssh, the remote
helper) are killed as one process group.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from machine_git.core import env
from machine_git.core.errors import RemoteError
from machine_git.sync import hooks

ALLOWED = ("file", "git", "http", "https", "ssh")
TIMEOUT_ENV = "MACHINE_GIT_TIMEOUT"
DEFAULT_TIMEOUT = 300.0
# http(s): a transfer slower than this many bytes/s for _STALL seconds stops.
_LOW_SPEED = 1000
_STALL = 60
_SSH = "ssh -o BatchMode=yes -o ConnectTimeout=30"
# Variables that would point a git child at another repository than ours
# (set when machine runs inside a git hook).
_GIT_LOCAL_ENV = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_QUARANTINE_PATH",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
)
# <transport>::<address> names a remote helper; <scheme>://, a URL (git's rules).
_HELPER = re.compile(r"^([A-Za-z0-9][A-Za-z0-9+.-]*)::")
_SCHEME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9+.-]*)://")
_SCHEMES = {
    "file": "file",
    "git": "git",
    "http": "http",
    "https": "https",
    "ssh": "ssh",
    "git+ssh": "ssh",
    "ssh+git": "ssh",
}


def transport_of(url: str) -> str:
    """The transport git would use for ``url`` (a helper's or scheme's name)."""
    helper = _HELPER.match(url)
    if helper:
        return f"{helper.group(1)}::"
    if is_local(url):
        return "file"
    scheme = _SCHEME.match(url)
    if scheme:
        name = scheme.group(1).lower()
        return _SCHEMES.get(name, f"{name}://")
    return "ssh"  # host:path, as scp writes it


def is_local(url: str) -> bool:
    """True for a path: no colon, or a slash before the first colon."""
    colon, slash = url.find(":"), url.find("/")
    return colon < 0 or (0 <= slash < colon)


def refusal(url: str) -> str | None:
    """Why ``url`` may not be used as a remote, or None if it may."""
    if not url or any(c in url for c in "\x00\n\r") or url.startswith("-"):
        return "not a URL git can use"
    transport = transport_of(url)
    if transport in ALLOWED:
        return None
    return (
        f"transport {transport!r} is not allowed (only file paths, git://, "
        "http(s):// and ssh: other transports can run commands or wait forever)"
    )


def run(
    store_path: Path | None,
    *args: str,
    what: str,
) -> subprocess.CompletedProcess[str]:
    """Run ``git [-C store] ARGS`` under the allow-list and the time limit.

    ``what`` names the step for the one line said when it times out.
    """
    limit = env.seconds(TIMEOUT_ENV, DEFAULT_TIMEOUT)
    command = ["git", *_config(), *(["-C", str(store_path)] if store_path else [])]
    since = time.time() - 2.0  # margin for filesystems with coarse mtimes
    try:
        process = subprocess.Popen(
            [*command, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            env=_environment(store_path),
            umask=0o077,  # new folders 0700, files 0600 (or git's 0400)
            # Its own session: no controlling terminal for ssh to prompt on,
            # and one process group to stop at the time limit.
            start_new_session=True,
        )
    except OSError as e:
        raise RemoteError(f"cannot run git: {e.strerror}") from None
    try:
        stdout, stderr = process.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        _stop(process)
        raise RemoteError(
            f"{what} stopped: no answer within {limit:g} s "
            f"({TIMEOUT_ENV} sets the limit)"
        ) from None
    except BaseException:
        _stop(process)  # Ctrl-C: git and ssh go too
        raise
    if store_path is not None:
        # git's writes (packs, loose objects, tracking refs) leave 0400 files.
        hooks.fix_permissions(store_path, since=since)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def _stop(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.communicate()


def _config() -> list[str]:
    allow = ["-c", "protocol.allow=never"]
    for name in ALLOWED:
        allow += ["-c", f"protocol.{name}.allow=always"]
    return [
        *allow,
        "-c",
        f"http.lowSpeedLimit={_LOW_SPEED}",
        "-c",
        f"http.lowSpeedTime={_STALL}",
    ]


def _environment(store_path: Path | None) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k not in _GIT_LOCAL_ENV}
    out["LC_ALL"] = "C"  # git's messages are parsed: keep them in English
    out["GIT_ALLOW_PROTOCOL"] = ":".join(ALLOWED)
    out["GIT_TERMINAL_PROMPT"] = "0"
    # Set but empty: git then skips core.askPass and SSH_ASKPASS too.
    out["GIT_ASKPASS"] = ""
    out["SSH_ASKPASS"] = ""
    out.pop("SSH_ASKPASS_REQUIRE", None)
    own = out.get("GIT_SSH_COMMAND") or out.get("GIT_SSH")
    if not own and not _configured_ssh(store_path):
        out["GIT_SSH_COMMAND"] = _SSH
    return out


def _configured_ssh(store_path: Path | None) -> bool:
    # A core.sshCommand of the user's (a key, a jump host) is kept; it still
    # runs without a terminal to prompt on.
    import pygit2

    try:
        config: pygit2.Config = (
            pygit2.Repository(str(store_path)).config
            if store_path is not None
            else pygit2.Config.get_global_config()
        )
        return bool(config["core.sshCommand"])
    except (KeyError, OSError, pygit2.GitError):
        return False


def first_error(stderr: str) -> str:
    """The line of git's stderr that says what went wrong."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in lines:
        for prefix in ("fatal: ", "error: "):
            if line.startswith(prefix):
                return line[len(prefix) :]
    return lines[0] if lines else "git failed"
