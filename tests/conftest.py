"""Fixtures: every test gets its own data dir, Pi dir and project; git is real."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pygit2
import pytest
from click.testing import CliRunner
from click.testing import Result
from pygit2.enums import ConfigLevel

from machine_git.cli import cli
from machine_git.core import paths
from machine_git.sessions import pi
from tests import helpers

FIXTURES = Path(__file__).parent / "fixtures"
PI_SESSIONS = FIXTURES / "pi" / "sessions"


@pytest.fixture(autouse=True, scope="session")
def _secret_engine_cache() -> Iterator[None]:
    # The secret engine compiles its rules (seconds) and caches them: the
    # user's own cache, found before the tests move HOME, serves every test,
    # subprocess and run (it holds compiled public rules, nothing of a test).
    # The session works on a copy of it, so the warm scanners its commands
    # start are its own (their sockets are in the cache) and are stopped when
    # it ends: nothing outlives the test run.
    from machine_git.secrets import engine
    from machine_git.secrets import warm

    user = engine.cache_dir()
    folder = Path(tempfile.mkdtemp(prefix="machine-secrets-"))
    for path in user.glob("*.vscdb") if user.is_dir() else ():
        shutil.copy2(path, folder / path.name)
    saved = {n: os.environ.get(n) for n in (engine.CACHE_ENV, warm.IDLE_ENV)}
    os.environ[engine.CACHE_ENV] = str(folder)
    os.environ.setdefault(warm.IDLE_ENV, "120")  # a backstop for the stop below
    try:
        yield
    finally:
        stop_scanners(folder)
        with contextlib.suppress(OSError):  # rules compiled here: keep them
            user.mkdir(mode=0o700, parents=True, exist_ok=True)
            for path in folder.glob("*.vscdb"):
                if not (user / path.name).exists():
                    shutil.copy2(path, user / path.name)
        shutil.rmtree(folder, ignore_errors=True)  # one still starting then exits
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def scanner_pids(folder: Path) -> list[int]:
    """The warm scanners (secrets/daemon.py) running for the cache ``folder``."""
    pids = []
    for lock in (folder / "run").glob("*.lock"):
        with contextlib.suppress(OSError, ValueError):
            pid = int(lock.read_text() or "0")
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            if pid > 0 and b"machine_git.secrets.daemon" in cmdline:
                pids.append(pid)
    return pids


def stop_scanners(folder: Path) -> None:
    """Stop the warm scanners of ``folder`` and wait until they are gone."""
    pids = scanner_pids(folder)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if Path(f"/proc/{p}").exists() and not _zombie(p)]
        time.sleep(0.02)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][:1] == "Z"
    except (OSError, IndexError):
        return True


@pytest.fixture(autouse=True, scope="session")
def _no_global_git_config() -> None:
    # Tests must not depend on the developer's ~/.gitconfig (pygit2 #989).
    for level in (ConfigLevel.GLOBAL, ConfigLevel.XDG, ConfigLevel.SYSTEM):
        pygit2.settings.search_path[level] = ""


class YouForgotToChooseADataDir(AssertionError):
    pass


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse() -> Path:
        raise YouForgotToChooseADataDir("a test reached for ~/.machine")

    monkeypatch.setattr(paths, "default_data_dir", refuse)
    monkeypatch.setenv("MACHINE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "pi-agent"))
    for name in (
        "PI_CODING_AGENT_SESSION_DIR",
        "CLAUDE_CONFIG_DIR",
        "CODEX_HOME",
        "LETTA_LOCAL_BACKEND_DIR",
        "LETTA_TRANSCRIPT_ROOT",
        "XDG_DATA_HOME",  # OpenCode's database is under it
    ):
        monkeypatch.delenv(name, raising=False)
    for name in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
        monkeypatch.setenv(name, "Test User")
    for name in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(name, "test@example.com")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    # Listings fit the terminal (machine_git/core/table.py): without COLUMNS and
    # with output that is no terminal, every test sees 80 columns.
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder (a git work tree) that is the current directory."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / ".git").mkdir()
    monkeypatch.chdir(root)
    return root


def fixture_lines(name: str) -> list[dict[str, Any]]:
    """The raw JSON lines of a Pi fixture (an oracle independent of the reader)."""
    text = (PI_SESSIONS / f"{name}.jsonl").read_bytes()
    return [orjson.loads(line) for line in text.splitlines() if line.strip()]


def entry_with_text(name: str, text: str) -> str:
    """The id of the fixture entry whose message starts with ``text``."""
    for line in fixture_lines(name):
        for block in (line.get("message") or {}).get("content") or []:
            if isinstance(block, dict) and str(block.get("text", "")).startswith(text):
                return str(line["id"])
    raise LookupError(text)


def session_id(name: str) -> str:
    return str(fixture_lines(name)[0]["id"])


def install_session(project: Path, name: str, *, as_name: str | None = None) -> Path:
    """Copy fixture session ``name`` into the Pi sessions folder of ``project``."""
    folder = pi.agent_dir() / "sessions" / pi.encode_cwd(project)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / (as_name or f"{name}.jsonl")
    shutil.copyfile(PI_SESSIONS / f"{name}.jsonl", target)
    # The newest file is the session machine picks: make the order explicit.
    stamp = 1_800_000_000 + len(list(folder.iterdir()))
    os.utime(target, (stamp, stamp))
    return target


Run = Callable[..., Result]


@pytest.fixture
def run() -> Run:
    """Invoke the CLI in-process; ``result.stdout`` and ``.stderr`` kept apart."""
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None) -> Result:
        result = runner.invoke(cli, list(args), input=input, catch_exceptions=False)
        if "--json" in args and result.stdout.strip():
            # Every --json run of the suite: one time format (tests/cli/test_json.py).
            for document in helpers.json_output(result.stdout):
                assert helpers.odd_times(document) == [], args
        return result

    return invoke


def git(store: Path, *args: str) -> str:
    """Run the real git CLI against a store and return its stdout."""
    done = subprocess.run(
        ["git", "-C", str(store), *args], capture_output=True, text=True, check=True
    )
    return done.stdout
