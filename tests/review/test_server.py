from __future__ import annotations

import socket
import webbrowser
from types import SimpleNamespace
from typing import Any

import pytest

from machine_git.core.errors import UsageError
from machine_git.review import server


def test_it_listens_on_loopback_only() -> None:
    sock = server.listen(0)
    try:
        host, port = sock.getsockname()
        assert host == "127.0.0.1" and port > 0
        assert sock.family == socket.AF_INET
    finally:
        sock.close()


def test_a_port_in_use_is_a_usage_error() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        with pytest.raises(UsageError, match=f"port {port} is in use"):
            server.listen(port)


def test_the_browser_opens_the_link_once_the_server_is_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    opened: list[str] = []
    monkeypatch.setattr(webbrowser, "open", lambda url, *a, **k: opened.append(url))
    up: Any = SimpleNamespace(started=True)
    server._open_when_up(up, "http://127.0.0.1:1/?token=t")
    assert opened == ["http://127.0.0.1:1/?token=t"]
