"""The warm scanner: the engine's rules loaded once, serving this user's scans.

``python -m machine_git.secrets.daemon SOCKET`` is started detached by the
first scan that finds no daemon (warm.py). It takes the lock next to the
socket (a second daemon for the same socket exits at once), loads the rules,
removes a stale socket left by a dead daemon, listens, and answers one
request per connection, from its own user only (SO_PEERCRED). After
``MACHINE_SECRETS_IDLE`` seconds without a request (default 600) it removes
its socket and exits; SIGTERM does the same at once.

The answer to a scan is a JSON list of ``[rule_id, visible, start, end,
secret]``, the findings' fields engine.scan_many reads; the findings are
the engine's own, so a scan here is the scan in-process.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from machine_git.core import env
from machine_git.core.errors import MachineError
from machine_git.secrets import engine
from machine_git.secrets import warm

REQUEST_TIMEOUT = 10.0  # seconds a client may take to send its request


class Daemon:
    def __init__(self, path: Path, scanner: Any) -> None:
        self.path = path
        self.scanner = scanner
        self.requests = 0
        self.owner = os.getuid()  # the only user whose texts it reads

    def answer(self, request: bytes) -> bytes:
        if request[:1] == warm.SCAN:
            self.requests += 1
            found = self.scanner.scan(request[1:])
            rows = [
                [
                    f.rule_id,
                    bool(f.visible),
                    f.location["start_offset"],
                    f.location["end_offset"],
                    f.secret,
                ]
                for f in found
            ]
            return json.dumps(rows).encode()
        status = {"pid": os.getpid(), "requests": self.requests}
        return json.dumps(status).encode()

    def serve(self, listener: socket.socket, idle: float) -> None:
        listener.settimeout(idle)
        while True:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                return  # idle: the caller removes the socket
            with conn:
                self.handle(conn)

    def handle(self, conn: socket.socket) -> None:
        conn.settimeout(REQUEST_TIMEOUT)
        try:
            if warm.peer_uid(conn) != self.owner:
                return  # another user's process: refused, unread
            request = warm.receive(conn)
            if request is None:
                return
            warm.send(conn, self.answer(request))
        except OSError:
            return  # that client went away or stalled; the next one is served


def _own_path() -> Path | None:
    return warm.socket_path(engine.cache_dir(), engine.gates_digest())


def _private_run_dir(folder: Path) -> bool:
    with contextlib.suppress(FileExistsError, OSError):
        folder.mkdir(mode=0o700)
    return warm.private(folder)


def _stop(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def run(path: Path) -> int:
    """Serve at ``path`` until idle; 0 when done or when another daemon serves."""
    if path != _own_path() or not path.parent.parent.is_dir():
        return 2  # started by another version, or its cache is gone
    if not _private_run_dir(path.parent):
        return 2
    lock_path = path.with_suffix(".lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # a daemon for this socket runs or starts already
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    signal.signal(signal.SIGTERM, _stop)
    try:
        idle = env.seconds(warm.IDLE_ENV, warm.IDLE_DEFAULT)
        scanner = engine._load()
    except MachineError:
        return 2
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # stale: we hold the lock, so no daemon listens there
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mine = None
    try:
        listener.bind(str(path))
        mine = os.stat(path).st_ino
        os.chmod(path, 0o600)
        listener.listen(64)
        Daemon(path, scanner).serve(listener, idle)
    finally:
        listener.close()
        with contextlib.suppress(OSError):
            if os.stat(path).st_ino == mine:
                path.unlink()
        os.close(fd)  # the lock file stays: removing it would race a newcomer
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m machine_git.secrets.daemon SOCKET", file=sys.stderr)
        return 2
    return run(Path(argv[0]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
