"""Real servers the sharing tests talk to, on 127.0.0.1 and a free port.

- :func:`git_daemon`: ``git daemon`` with receive-pack on, serving bare
  repositories made with :meth:`GitServer.bare`;
- :func:`silent_server`: accepts connections and never answers (a stalled
  network, to test the time limit);
- :func:`asking_server`: an HTTP server that asks for a password (to test that
  git never prompts).

Each is stopped when its test ends.
"""

from __future__ import annotations

import contextlib
import http.server
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(port: int, process: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


class GitServer:
    """A running ``git daemon``: its base folder and its URLs."""

    def __init__(self, base: Path, port: int) -> None:
        self.base = base
        self.port = port

    def bare(self, name: str) -> str:
        """A new bare repository served as ``name``; its git:// URL."""
        subprocess.run(
            ["git", "init", "-q", "--bare", "-b", "main", str(self.base / name)],
            check=True,
        )
        return self.url(name)

    def url(self, name: str) -> str:
        return f"git://127.0.0.1:{self.port}/{name}"


@pytest.fixture
def git_daemon(tmp_path: Path) -> Iterator[GitServer]:
    base = tmp_path / "served"
    base.mkdir()
    port = free_port()
    log = (tmp_path / "git-daemon.log").open("wb")
    process = subprocess.Popen(
        [
            "git",
            "daemon",
            "--enable=receive-pack",
            "--export-all",
            f"--base-path={base}",
            f"--port={port}",
            "--listen=127.0.0.1",
            "--reuseaddr",
            "--informative-errors",
            str(base),
        ],
        stdout=log,
        stderr=log,
        start_new_session=True,  # its children (one per connection) stop with it
    )
    try:
        _wait_for(port, process)
        yield GitServer(base, port)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)
        log.close()


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port that accepts connections and never says a word."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        listener.close()


class _Asking(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="data"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def asking_server() -> Iterator[int]:
    """An HTTP server that answers every request with 401, asking for a password."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Asking)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
