"""Running the real ``claude`` and ``codex`` CLIs offline, against fake models.

Each run gets its own HOME (and ``CODEX_HOME``) in a scratch folder, the fake
server's address and a fake key, and nothing else from the environment that
could reach a network: Claude Code with telemetry and non-essential traffic
off, Codex with a custom model provider on 127.0.0.1. Used by the e2e tests
and by the fixture generators (tests/fixtures/{claude,codex}/make_sessions.py).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import time
from pathlib import Path

HERE = Path(__file__).parent
# What a run may see of the caller's environment: enough to find node and git,
# and for machine run from inside the agent (/good) to use the caller's store.
_KEEP = (
    "PATH",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "PYTHONPATH",
    "TERM",
    "MACHINE_DATA_DIR",
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "GIT_CONFIG_NOSYSTEM",
    # the session's copy of the secret engine's cache, where its warm scanners
    # live and are stopped when the tests end (tests/conftest.py)
    "MACHINE_SECRETS_CACHE",
    "MACHINE_SECRETS_IDLE",
)


def _base(home: Path) -> dict[str, str]:
    env = {k: os.environ[k] for k in _KEEP if k in os.environ}
    env["HOME"] = str(home)
    env["USER"] = env["LOGNAME"] = "fixture"
    return env


def base_env(home: Path) -> dict[str, str]:
    """The environment every run starts from: HOME at ``home``, little else."""
    return _base(home)


def install(name: str) -> Path:
    """The binary ``tests/e2e/install_<name>.sh`` installed (installing it once)."""
    done = subprocess.run(
        ["bash", str(HERE / f"install_{name}.sh")],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"tests/e2e/install_{name}.sh failed:\n{done.stderr}")
    return Path(done.stdout.strip().splitlines()[-1])


def claude_env(home: Path, url: str) -> dict[str, str]:
    """The environment of a ``claude`` run against the fake Messages API at ``url``."""
    env = _base(home)
    env.update(
        ANTHROPIC_BASE_URL=url,
        ANTHROPIC_API_KEY="sk-ant-fake-key",
        DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_ERROR_REPORTING="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        CLAUDE_CONFIG_DIR=str(home / ".claude"),
    )
    return env


def claude_stream_args() -> list[str]:
    """``claude -p`` reading its prompt as stream-json on stdin."""
    return [
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
    ]


def claude_user_line(text: str, png: bytes) -> str:
    """One stream-json user message: ``text``, then ``png`` as an image block."""
    source = {
        "type": "base64",
        "media_type": "image/png",
        "data": base64.b64encode(png).decode(),
    }
    content = [{"type": "text", "text": text}, {"type": "image", "source": source}]
    message = {"role": "user", "content": content}
    return json.dumps({"type": "user", "message": message}) + "\n"


def codex_env(home: Path, url: str) -> dict[str, str]:
    """The environment of a ``codex`` run against the fake Responses API at ``url``.

    ``$CODEX_HOME/config.toml`` names the fake as the model provider.
    """
    from tests.e2e.fake_openai_responses import config_toml

    env = _base(home)
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(config_toml(url))
    env.update(CODEX_HOME=str(codex_home), FAKE_OPENAI_KEY="sk-fake-key")
    return env


def gemini_env(home: Path, url: str) -> dict[str, str]:
    """The environment of a ``gemini`` run against the fake Gemini API at ``url``.

    ``~/.gemini/settings.json`` chooses the API-key sign-in (the key is fake)
    and turns off updates and usage statistics; the workspace is trusted.
    """
    env = _base(home)
    folder = home / ".gemini"
    folder.mkdir(parents=True, exist_ok=True)
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "general": {"disableAutoUpdate": True},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
    }
    (folder / "settings.json").write_text(json.dumps(settings))
    env.update(
        GEMINI_API_KEY="fake-gemini-key",
        GOOGLE_GEMINI_BASE_URL=url,
        GEMINI_CLI_TRUST_WORKSPACE="true",
    )
    return env


def run(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    timeout: float = 60,
    interrupt_after: float | None = None,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run one CLI call to its end (or SIGINT it after ``interrupt_after`` s),
    ``stdin`` its input (else none)."""
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    if interrupt_after is not None:
        time.sleep(interrupt_after)
        process.send_signal(signal.SIGINT)
    try:
        out, err = process.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        raise RuntimeError(f"{argv[0]} timed out after {timeout}s:\n{err}") from None
    return subprocess.CompletedProcess(argv, process.returncode, out, err)


def sessions(root: Path, pattern: str) -> list[Path]:
    """The session files under ``root`` matching ``pattern``, oldest first."""
    found = [p for p in root.rglob(pattern) if p.is_file()]
    return sorted(found, key=lambda p: (p.stat().st_mtime, str(p)))
