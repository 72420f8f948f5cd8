"""Serving the review application on 127.0.0.1 until Ctrl-C."""

from __future__ import annotations

import errno
import secrets
import socket
import threading
import webbrowser
from collections.abc import Callable
from pathlib import Path

import uvicorn

from machine_git.core.errors import UsageError
from machine_git.review.app import create_app

HOST = "127.0.0.1"  # loopback only: never another interface


def listen(port: int) -> socket.socket:
    """A socket bound to 127.0.0.1:``port`` (0: any free port)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((HOST, port))
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise UsageError(
                f"port {port} is in use; pick another with --port (0: any free port)"
            ) from None
        raise UsageError(f"cannot listen on {HOST}:{port}: {e.strerror}") from None
    sock.listen(64)
    return sock


def serve(
    location: Path,
    *,
    port: int,
    open_browser: bool,
    echo: Callable[[str], None],
    project: str = "",
) -> None:
    """Serve the store at ``location`` and print (and open) its URL."""
    sock = listen(port)
    port = int(sock.getsockname()[1])
    token = secrets.token_urlsafe(32)
    app = create_app(location, token=token, port=port, project=project, warm=True)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="off",
        proxy_headers=False,  # nothing stands in front of it
        server_header=False,
        timeout_keep_alive=5,
    )
    server = uvicorn.Server(config)
    url = f"http://{HOST}:{port}/?token={token}"
    echo(f"machine review: {url}")
    echo("(the link carries the access token; Ctrl-C stops the server)")
    if open_browser:
        threading.Thread(target=_open_when_up, args=(server, url), daemon=True).start()
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()


def _open_when_up(server: uvicorn.Server, url: str) -> None:
    for _ in range(100):
        if server.started:
            webbrowser.open(url)
            return
        threading.Event().wait(0.05)
