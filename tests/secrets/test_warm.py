"""The warm scanner (secrets/daemon.py, warm.py): real daemons, real sockets.

Each test's daemon lives in the session's copy of the engine cache
(conftest.py); the session stops them all when it ends.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git.core import paths
from machine_git.core.errors import UsageError
from machine_git.secrets import engine
from machine_git.secrets import warm
from machine_git.secrets.daemon import Daemon
from tests.conftest import PI_SESSIONS
from tests.conftest import Run
from tests.conftest import scanner_pids
from tests.secrets import secrets_agents
from tests.secrets import test_secrets_corpus

TOKEN = "ghp_R8kqZ2vW0xYt5LmN3pQa7sDf1GhJ9cBe4uIo"  # made up: no one owns it
TIMEOUT = 30.0


def _path() -> Path:
    path = warm.socket_path(engine.cache_dir(), engine.gates_digest())
    assert path is not None
    return path


def _status(path: Path) -> dict[str, Any] | None:
    reply = warm.ask(path, warm.STATUS, 2.0)
    return None if reply is None else dict(json.loads(reply))


def _wait_status(path: Path, other_than: int = 0) -> dict[str, Any]:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        status = _status(path)
        if status is not None and status["pid"] != other_than:
            return status
        time.sleep(0.05)
    raise AssertionError(f"no warm scanner answered at {path}")


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(") ")[1][:1]
        except (OSError, IndexError):
            return
        if state == "Z":
            return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} still runs")


def _kill_all() -> None:
    for pid in scanner_pids(engine.cache_dir()):
        os.kill(pid, signal.SIGKILL)
        _wait_gone(pid)


@pytest.fixture
def daemon() -> Iterator[dict[str, Any]]:
    """A warm scanner for this engine and these gates; its status."""
    path = _path()
    started = subprocess.Popen(
        [sys.executable, "-m", warm.MODULE, str(path)],
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield _wait_status(path)
    finally:
        started.terminate()
        started.wait(TIMEOUT)


def _session(tmp_path: Path, name: str, secret: str) -> Path:
    """Pi's basic fixture with ``secret`` in the user's last message."""
    raw = (PI_SESSIONS / "basic.jsonl").read_bytes().splitlines()
    lines = [orjson.loads(x) for x in raw if x.strip()]
    lines[0]["id"] = lines[0]["id"][: -len(name)] + name  # its own session: a new row
    for line in reversed(lines):  # the last turn is the one tagged
        message = line.get("message") or {}
        if message.get("role") == "user":
            message["content"][0]["text"] += f" my token is {secret}"
            break
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(x) for x in lines) + b"\n")
    return path


def _good(
    session: Path, *, importtime: bool = False
) -> subprocess.CompletedProcess[str]:
    flags = ["-X", "importtime"] if importtime else []
    done = subprocess.run(
        [sys.executable, *flags, "-m", "machine_git", "good", "--session", session],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("good ")
    return done


def _stored(project: Path) -> bytes:
    store = paths.store_path(project)
    done = subprocess.run(
        ["git", "-C", str(store), "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True,
        check=True,
    )
    return done.stdout


def _imported_engine(done: subprocess.CompletedProcess[str]) -> bool:
    return any(line.endswith("| kingfisher_sdk") for line in done.stderr.splitlines())


def test_a_second_good_scans_through_the_daemon(project: Path, tmp_path: Path) -> None:
    _kill_all()
    path = _path()
    first = _good(_session(tmp_path, "a", TOKEN), importtime=True)
    assert _imported_engine(first)  # no daemon yet: it scanned in-process
    before = _wait_status(path)  # and started one
    second = _good(_session(tmp_path, "b", TOKEN[:-3] + "Kk7"), importtime=True)
    assert not _imported_engine(second)
    after = _status(path)
    assert after is not None
    assert after["pid"] == before["pid"]
    assert after["requests"] > before["requests"]  # the scans of its row
    stored = _stored(project)
    assert TOKEN.encode() not in stored
    assert (TOKEN[:-3] + "Kk7").encode() not in stored
    assert b"[REDACTED:github-pat]" in stored  # the placeholder that took its place


def test_a_killed_daemon_neither_leaks_nor_stays_gone(
    project: Path, tmp_path: Path, daemon: dict[str, Any]
) -> None:
    os.kill(daemon["pid"], signal.SIGKILL)
    _wait_gone(daemon["pid"])
    assert _path().exists()  # its socket stays behind: stale
    _good(_session(tmp_path, "a", TOKEN))
    assert TOKEN.encode() not in _stored(project)
    assert b"[REDACTED:github-pat]" in _stored(project)
    assert _wait_status(_path(), other_than=daemon["pid"])["requests"] == 0


def _garbage_server(path: Path, reply: bytes) -> threading.Thread:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(4)
    listener.settimeout(TIMEOUT)

    def serve() -> None:
        with listener:
            conn, _ = listener.accept()
            with conn:
                conn.recv(1 << 20)
                conn.sendall(reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize(
    "reply",
    [b"", b"\x00\x00\x00\x09not json!", b"\x00\x00\x00\x10short", b"\xff\xff\xff\xff"],
    ids=["closed", "garbled", "short", "too-big"],
)
def test_garbage_on_the_socket_still_redacts(
    project: Path, tmp_path: Path, reply: bytes
) -> None:
    _kill_all()
    path = _path()
    path.parent.mkdir(mode=0o700, exist_ok=True)
    path.unlink(missing_ok=True)
    server = _garbage_server(path, reply)
    _good(_session(tmp_path, "a", TOKEN))
    server.join(TIMEOUT)
    assert not server.is_alive()  # it was asked, and answered nonsense
    assert TOKEN.encode() not in _stored(project)
    assert b"[REDACTED:github-pat]" in _stored(project)


def test_a_stale_file_at_the_socket_is_replaced(project: Path, tmp_path: Path) -> None:
    _kill_all()
    path = _path()
    path.parent.mkdir(mode=0o700, exist_ok=True)
    path.unlink(missing_ok=True)
    path.write_text("not a socket")
    _good(_session(tmp_path, "a", TOKEN))
    assert TOKEN.encode() not in _stored(project)
    assert _wait_status(path)["requests"] == 0


def test_the_daemon_refuses_another_user() -> None:
    if os.getuid() != 0:
        _refused_as_another_owner()  # no second user to be without root
        return
    folder = Path(tempfile.mkdtemp(prefix="machine-peer-"))  # /tmp: nobody reaches it
    folder.chmod(0o755)
    path = folder / "s.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    path.chmod(0o777)
    listener.listen(1)
    listener.settimeout(TIMEOUT)
    child = os.fork()
    if child == 0:  # another user asks for a scan
        code = 1
        try:
            os.setgid(65534)
            os.setuid(65534)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(10)
            sock.connect(str(path))
            try:
                warm.send(sock, warm.SCAN + TOKEN.encode())
                reply = warm.receive(sock)
            except OSError:  # closed on it, unread: reset
                reply = None
            code = 0 if reply is None else 3
        finally:
            os._exit(code)
    try:
        conn, _ = listener.accept()
        served = Daemon(path, engine._load())
        with conn:
            assert warm.peer_uid(conn) == 65534
            served.handle(conn)
    finally:
        _, status = os.waitpid(child, 0)
        listener.close()
        shutil.rmtree(folder)
    assert os.waitstatus_to_exitcode(status) == 0  # it got nothing back
    assert served.requests == 0


def _refused_as_another_owner() -> None:
    """The same refusal, with the daemon serving a user this process is not."""
    client, end = socket.socketpair(socket.AF_UNIX)
    with client, end:
        served = Daemon(Path("unused.sock"), engine._load())
        served.owner = os.getuid() + 1
        warm.send(client, warm.SCAN + TOKEN.encode())
        served.handle(end)
        end.close()
        client.settimeout(TIMEOUT)
        try:
            reply = client.recv(1)
        except ConnectionResetError:  # closed on it, unread: reset
            reply = b""
        assert reply == b""  # nothing back
    assert served.requests == 0


def test_peer_uid_is_the_other_ends() -> None:
    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        assert warm.peer_uid(a) == os.getuid()


def test_an_idle_daemon_exits_and_removes_its_socket() -> None:
    _kill_all()
    path = _path()
    started = subprocess.Popen(
        [sys.executable, "-m", warm.MODULE, str(path)],
        env={**os.environ, warm.IDLE_ENV: "1"},
        stdin=subprocess.DEVNULL,
    )
    try:
        _wait_status(path)
        assert started.wait(TIMEOUT) == 0
    finally:
        started.kill()
    assert not path.exists()


def test_one_daemon_per_socket(daemon: dict[str, Any]) -> None:
    second = subprocess.run(
        [sys.executable, "-m", warm.MODULE, str(_path())], timeout=60, check=False
    )
    assert second.returncode == 0  # it saw the lock and left
    assert _status(_path()) == daemon


def test_a_daemon_for_other_rules_does_not_start() -> None:
    other = _path().with_name("scan-1-0.0.0-0000000000000000.sock")
    command = [sys.executable, "-m", warm.MODULE, str(other)]
    done = subprocess.run(command, timeout=60, check=False)
    assert done.returncode == 2
    assert not other.exists()


def _fields(found: list[Any]) -> list[tuple[str, bool, int, int, str]]:
    return [
        (
            f.rule_id,
            f.visible,
            f.location["start_offset"],
            f.location["end_offset"],
            f.secret,
        )
        for f in found
    ]


def _corpus() -> list[str]:
    texts = [f.line for f in secrets_agents.SECRETS]
    texts += [x.line for x in secrets_agents.LOOKALIKES]
    texts += [f.line for f in test_secrets_corpus.SECRETS]
    return texts


def test_findings_are_the_same_both_ways(daemon: dict[str, Any]) -> None:
    texts = _corpus()
    assert len(texts) > 500
    data = "\n".join(texts).encode("utf-8", "surrogatepass")
    here = _fields(engine._load().scan(data))
    there = warm.scan(_path(), data)
    assert there is not None
    assert _fields(there) == here
    assert len(here) > 300
    assert _status(_path())["requests"] == daemon["requests"] + 1  # type: ignore[index]


def test_scan_many_is_the_same_both_ways(
    daemon: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [_corpus()[i : i + 40] for i in range(0, len(_corpus()), 40)]
    here = [engine.scan_many(r) for r in rows]
    monkeypatch.setattr(engine, "_scanner", None)  # as a fresh process: ask first
    there = [engine.scan_many(r) for r in rows]
    assert there == here
    assert _status(_path())["requests"] == daemon["requests"] + len(rows)  # type: ignore[index]


def test_the_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(warm.SWITCH_ENV, "0")
    assert not warm.enabled()
    monkeypatch.setenv(warm.SWITCH_ENV, "1")
    assert warm.enabled()
    monkeypatch.setenv(warm.SWITCH_ENV, "yes")
    with pytest.raises(UsageError, match=r"MACHINE_SECRETS_DAEMON='yes': expected 0"):
        warm.enabled()


def test_switched_off_no_daemon_starts(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _kill_all()
    monkeypatch.setenv(warm.SWITCH_ENV, "0")
    done = _good(_session(tmp_path, "a", TOKEN), importtime=True)
    assert _imported_engine(done)
    time.sleep(1)
    assert scanner_pids(engine.cache_dir()) == []
    assert TOKEN.encode() not in _stored(project)


def test_a_bad_switch_is_one_line(
    project: Path, tmp_path: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine, "_scanner", None)  # as a fresh process
    monkeypatch.setenv(warm.SWITCH_ENV, "yes")
    result = run("good", "--session", str(_session(tmp_path, "a", TOKEN)))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (
        "Error: MACHINE_SECRETS_DAEMON='yes': expected 0 (off) or 1 (on)\n"
    )
    assert not paths.store_path(project).exists()
