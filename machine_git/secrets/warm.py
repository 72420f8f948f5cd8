"""The client of the warm scanner: the engine's rules loaded once per machine.

Loading the engine's rules costs about 0.4 s of CPU even from its cache
(engine.py), more than the rest of ``machine good``. So the first scan of a
process asks a small local daemon (daemon.py, like gpg-agent) that holds the
rules loaded: it sends the one joined buffer of a row and gets back the
findings. With no daemon it starts one, detached, and scans in-process this
once; any failure (no answer in time, a short or garbled reply, a socket
that is not the user's) also scans in-process and says nothing. A scan
always happens: the daemon is only ever a shortcut.

The socket lives in a 0700 folder of the engine's cache, named for the
protocol, the engine's version and the gate rules' digest, so a changed rule
set never talks to an old daemon; both ends check the other is the same
user (SO_PEERCRED). Texts go only to the user's own process on this machine.

Messages are a 4-byte big-endian length, then the bytes. A request's first
byte says what it is: ``S`` scan the rest, ``?`` the daemon's status.
``_socket`` rather than ``socket``: it is all the client needs and keeps a
few milliseconds off ``machine good``'s start-up (``socket`` pulls in
``selectors``).
"""

from __future__ import annotations

import json
import os
import sys
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any

from machine_git.core.errors import UsageError

SWITCH_ENV = "MACHINE_SECRETS_DAEMON"
IDLE_ENV = "MACHINE_SECRETS_IDLE"
IDLE_DEFAULT = 600.0  # seconds without a request before the daemon exits
PROTOCOL = 1  # in the socket's name: a changed wire format gets its own daemon
MODULE = "machine_git.secrets.daemon"
RUN_DIR = "run"  # in the engine's cache folder, 0700
MAX_MESSAGE = 64 << 20  # bytes; a bigger row is scanned in-process
CONNECT_TIMEOUT = 0.5  # seconds; a local socket answers at once or not at all
REPLY_TIMEOUT = 2.0  # seconds, plus one per 4 MB sent (the engine does ~50 MB/s)
SCAN = b"S"
STATUS = b"?"
_MAX_PATH = 100  # sun_path holds 108 bytes
_started = False  # this process has started a daemon already


class Found:
    """One engine finding as the daemon sends it: what engine.scan_many reads."""

    __slots__ = ("location", "rule_id", "secret", "visible")

    def __init__(self, rule_id: str, visible: bool, start: int, end: int, secret: str):
        self.rule_id = rule_id
        self.visible = visible
        self.location = {"start_offset": start, "end_offset": end}
        self.secret = secret


def enabled() -> bool:
    """False when ``MACHINE_SECRETS_DAEMON=0``: every process loads the rules."""
    value = os.environ.get(SWITCH_ENV, "").strip()
    if value in ("", "1"):
        return True
    if value == "0":
        return False
    raise UsageError(f"{SWITCH_ENV}={value!r}: expected 0 (off) or 1 (on)")


def engine_version() -> str | None:
    """The installed engine's version, read without importing it (0.4 s)."""
    spec = PathFinder.find_spec("kingfisher_sdk")
    if spec is None or not spec.submodule_search_locations:
        return None
    site = Path(next(iter(spec.submodule_search_locations))).parent
    prefix = "kingfisher_secret_scanner-"
    try:
        with os.scandir(site) as entries:
            for entry in entries:
                name = entry.name
                if name.startswith(prefix) and name.endswith(".dist-info"):
                    return name[len(prefix) : -len(".dist-info")]
    except OSError:
        return None
    return None


def socket_path(folder: Path, gates_digest: str) -> Path | None:
    """Where the daemon for this engine and these gate rules listens."""
    version = engine_version()
    if version is None:
        return None
    name = f"scan-{PROTOCOL}-{version}-{gates_digest}.sock"
    path = folder / RUN_DIR / name
    return path if len(os.fsencode(path)) <= _MAX_PATH else None


def private(folder: Path) -> bool:
    """True if ``folder`` is a real folder of this user that only they can use."""
    try:
        st = os.lstat(folder)
    except OSError:
        return False
    return (
        (st.st_mode & 0o170000) == 0o040000  # a folder, not a link to one
        and st.st_uid == os.getuid()
        and st.st_mode & 0o077 == 0
    )


def peer_uid(sock: Any) -> int:
    """The uid of the process at the other end of a connected Unix socket."""
    import _socket

    # struct ucred {pid_t pid; uid_t uid; gid_t gid;}: three native ints
    cred = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    return int.from_bytes(cred[4:8], sys.byteorder)


def send(sock: Any, payload: bytes) -> None:
    sock.sendall(len(payload).to_bytes(4, "big") + payload)


def receive(sock: Any, limit: int = MAX_MESSAGE) -> bytes | None:
    """One message, or None if the other end closed early or sent too much."""
    head = _exactly(sock, 4)
    if head is None:
        return None
    size = int.from_bytes(head, "big")
    if size > limit:
        return None
    return _exactly(sock, size)


def _exactly(sock: Any, size: int) -> bytes | None:
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:])
        if n == 0:
            return None
        got += n
    return bytes(buf)


def ask(path: Path, request: bytes, timeout: float) -> bytes | None:
    """The daemon's reply to ``request``; None on any failure at all."""
    import _socket

    if len(request) > MAX_MESSAGE or not private(path.parent):
        return None
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT)
        sock.connect(os.fsencode(path))
        if peer_uid(sock) != os.getuid():
            return None  # someone else's socket: never send them a text
        sock.settimeout(timeout)
        send(sock, request)
        return receive(sock)
    except (OSError, ValueError, OverflowError):
        return None
    finally:
        sock.close()


def scan(path: Path | None, data: bytes) -> list[Found] | None:
    """The findings in ``data`` from the daemon at ``path``, or None.

    None means: scan in-process. With no daemon listening, one is started.
    """
    if path is None:
        return None
    reply = ask(path, SCAN + data, REPLY_TIMEOUT + len(data) / 4e6)
    if reply is None:
        start(path)
        return None
    try:
        rows = json.loads(reply)
        return [Found(r, bool(v), int(s), int(e), str(x)) for r, v, s, e, x in rows]
    except (ValueError, TypeError):
        return None  # garbled: in-process


def start(path: Path) -> bool:
    """Start a daemon for ``path``, detached; once per process at most.

    Best effort and never waits; a daemon already starting or running wins
    the lock and the newcomer exits at once (daemon.py).
    """
    global _started
    if _started:
        return False
    _started = True
    import subprocess  # only when no daemon answers: once per idle period

    try:
        subprocess.Popen(
            [sys.executable, "-m", MODULE, str(path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=True,  # no lock or store file goes with it
            start_new_session=True,  # outlives the command and its terminal
            cwd="/",
        )
    except OSError:
        return False
    return True
