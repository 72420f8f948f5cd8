"""``machine review`` as a user starts it: a real process on a real port."""

from __future__ import annotations

import http.client
import importlib.util
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from machine_git.core.errors import NOT_FOUND
from machine_git.review.security import cookie_name
from tests.conftest import Run
from tests.review.conftest import small_store

URL_LINE = "machine review: http://127.0.0.1:"


@pytest.fixture
def started(project: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    small_store(project)
    process = subprocess.Popen(
        [sys.executable, "-m", "machine_git", "review", "--no-browser"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
        cwd=project,
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    try:
        yield process, first
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)


def get(port: int, path: str, **headers: str) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", path, headers={"Host": f"127.0.0.1:{port}", **headers})
    return connection.getresponse()


def test_it_prints_a_tokened_loopback_url_serves_and_stops_on_ctrl_c(
    started: tuple[subprocess.Popen[str], str],
) -> None:
    process, first = started
    assert first.startswith(URL_LINE), first
    url = first.removeprefix("machine review: ").strip()
    port = int(url.split(":")[2].split("/")[0])
    token = url.split("?token=")[1]
    assert len(token) >= 40
    assert get(port, "/queue").status == 403  # no token, no cookie
    login = get(port, f"/?token={token}")
    assert login.status == 200
    cookie = login.getheader("set-cookie") or ""
    assert cookie.startswith(f"{cookie_name(port)}={token}; HttpOnly; SameSite=Strict")
    page = get(port, "/queue", Cookie=f"{cookie_name(port)}={token}")
    assert page.status == 200 and b"Run 1 of 6" in page.read()
    rebound = get(port, "/queue", Host=f"attacker.example:{port}")
    assert rebound.status == 403
    # Ctrl-C stops it as it stops any command: exit 130, one line, no traceback.
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=15) == 130
    assert process.stderr is not None
    assert process.stderr.read() == "Interrupted\n"


def test_without_the_web_extra_it_says_how_to_install_it(
    project: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "starlette" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    result = run("review", "--no-browser")
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: machine review needs its web stack (starlette is missing): "
        "pip install '.[ui]' in a machine checkout, or pip install "
        "'machine_git-0.1.0-py3-none-any.whl[ui]' from a wheel\n"
    )


def test_a_port_in_use_is_one_line(project: Path, run: Run) -> None:
    small_store(project)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        result = run("review", "--port", str(port), "--no-browser")
    assert result.exit_code == 2
    assert result.stderr == (
        f"Error: port {port} is in use; pick another with --port (0: any free port)\n"
    )


def test_no_store_yet_is_one_line(project: Path, run: Run) -> None:
    result = run("review", "--no-browser")
    assert result.exit_code == NOT_FOUND
    assert result.stderr.startswith("Error: no store at ")
