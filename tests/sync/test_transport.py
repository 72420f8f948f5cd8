"""git runs with allowed transports only, never prompts, and never waits forever.

The real servers the sharing tests talk to live here too, on 127.0.0.1 and a
free port, each stopped when its test ends: :func:`git_daemon` (``git
daemon`` with receive-pack on, serving bare repositories made with
:meth:`GitServer.bare`), :func:`silent_server` (accepts connections and never
answers: a stalled network) and :func:`asking_server` (an HTTP server that
asks for a password).
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

from machine_git.core.errors import RemoteError
from machine_git.core.errors import UsageError
from machine_git.store.store import Store
from machine_git.sync import sharing as sync
from machine_git.sync import transport
from tests import helpers
from tests.conftest import git
from tests.sync.test_sync import put

# -- servers ----------------------------------------------------------------------


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


# -- transports ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("/srv/hub.git", "file"),
        ("hub.git", "file"),
        ("./a:b", "file"),
        ("file:///srv/hub.git", "file"),
        ("git://example.com/data.git", "git"),
        ("http://example.com/data.git", "http"),
        ("HTTPS://example.com/data.git", "https"),
        ("ssh://me@example.com/data.git", "ssh"),
        ("git+ssh://example.com/data.git", "ssh"),
        ("git@example.com:me/data.git", "ssh"),
        ("ext::sh -c touch% /tmp/x", "ext::"),
        ("fd::3", "fd::"),
        ("persistent-https::example.com", "persistent-https::"),
        ("ftp://example.com/data.git", "ftp://"),
        ("foo://example.com/data.git", "foo://"),
    ],
)
def test_the_transport_git_would_use(url: str, name: str) -> None:
    assert transport.transport_of(url) == name


@pytest.fixture
def permissive_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user git config that allows every transport; a marker file to watch."""
    config = tmp_path / "gitconfig"
    config.write_text("[protocol]\n\tallow = always\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    return tmp_path / "ran"


@pytest.mark.parametrize(
    "url", ["ext::sh -c touch% /tmp/x", "fd::0", "foo://example.com/x", "ftp://x/y"]
)
def test_a_remote_of_another_transport_is_refused_when_added(
    tmp_path: Path, url: str
) -> None:
    store = Store.create(tmp_path / "s")
    with pytest.raises(UsageError) as e:
        sync.add_remote(store, "origin", url)
    assert str(e.value).startswith(f"remote URL {url!r} is refused: transport ")
    assert "\n" not in str(e.value)
    assert sync.remotes(store) == []


def test_a_command_remote_added_by_hand_never_runs(
    tmp_path: Path, permissive_git: Path
) -> None:
    store = Store.create(tmp_path / "s")
    put(store, helpers.train_row("a1a1a1a1a1a1"))
    url = f"ext::sh -c touch% {permissive_git}"
    git(store.path, "remote", "add", "evil", url)
    for step in (sync.pull, sync.push):
        with pytest.raises(RemoteError) as e:
            step(store, "evil")
        assert str(e.value) == (
            f"remote evil ({url}) is refused: transport 'ext::' is not allowed "
            "(only file paths, git://, http(s):// and ssh: other transports can "
            "run commands or wait forever)"
        )
    # A push URL of its own is checked too.
    git(store.path, "remote", "add", "mixed", str(tmp_path / "hub.git"))
    git(store.path, "remote", "set-url", "--push", "mixed", url)
    with pytest.raises(RemoteError, match="is refused"):
        sync.push(store, "mixed")
    assert not permissive_git.exists()


def test_a_url_rewritten_into_a_command_is_stopped_by_git_itself(
    tmp_path: Path, permissive_git: Path
) -> None:
    # insteadOf turns an allowed URL into ext:: after machine checked it: the
    # allow-list in git's environment is what stops it.
    config = Path(str(permissive_git.parent / "gitconfig"))
    config.write_text(
        "[protocol]\n\tallow = always\n"
        f'[url "ext::sh -c touch% {permissive_git}% #"]\n'
        "\tinsteadOf = https://evil.example/\n"
    )
    store = Store.create(tmp_path / "s")
    sync.add_remote(store, "origin", "https://evil.example/data.git")
    with pytest.raises(RemoteError) as e:
        sync.pull(store)
    assert str(e.value) == (
        "cannot fetch from origin (https://evil.example/data.git): "
        "transport 'ext' not allowed"
    )
    assert not permissive_git.exists()


def test_an_fd_remote_added_by_hand_is_refused_not_waited_on(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    git(store.path, "remote", "add", "pipe", "fd::0")
    started = time.monotonic()
    with pytest.raises(RemoteError, match=r"^remote pipe \(fd::0\) is refused"):
        sync.pull(store, "pipe")
    assert time.monotonic() - started < 5


def test_a_silent_server_is_given_up_on_at_the_time_limit(
    tmp_path: Path,
    silent_server: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(transport.TIMEOUT_ENV, "1.5")
    store = Store.create(tmp_path / "s")
    sync.add_remote(store, "origin", f"git://127.0.0.1:{silent_server}/data.git")
    started = time.monotonic()
    with pytest.raises(RemoteError) as e:
        sync.pull(store)
    assert str(e.value) == (
        "pull from origin stopped: no answer within 1.5 s "
        "(MACHINE_GIT_TIMEOUT sets the limit)"
    )
    assert time.monotonic() - started < 10


def test_a_bad_time_limit_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(transport.TIMEOUT_ENV, "soon")
    store = Store.create(tmp_path / "s")
    sync.add_remote(store, "origin", str(tmp_path / "hub.git"))
    with pytest.raises(UsageError, match=r"^MACHINE_GIT_TIMEOUT='soon': expected"):
        sync.pull(store)


def test_a_server_asking_for_a_password_gets_no_prompt(
    tmp_path: Path,
    asking_server: int,
    permissive_git: Path,
) -> None:
    store = Store.create(tmp_path / "s")
    url = f"http://127.0.0.1:{asking_server}/data.git"
    sync.add_remote(store, "origin", url)
    started = time.monotonic()
    with pytest.raises(RemoteError) as e:
        sync.pull(store)
    assert str(e.value) == (
        f"cannot fetch from origin ({url}): could not read Username for "
        f"'http://127.0.0.1:{asking_server}': terminal prompts disabled"
    )
    assert time.monotonic() - started < 10
