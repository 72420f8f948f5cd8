"""The README's first command, scripts/demo, as a new user runs it."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


@pytest.mark.slow
def test_the_demo_runs_and_prints_pasteable_commands(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "MACHINE_DATA_DIR": str(tmp_path / "data"),
        "TMPDIR": str(tmp_path),
        "HOME": str(tmp_path / "home"),
    }
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "demo")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    commands = [x[2:] for x in done.stdout.splitlines() if x.startswith("$ ")]
    sessions = ROOT / "tests" / "fixtures" / "pi" / "sessions"
    # Read back as a shell would, each printed command is the one that ran.
    assert shlex.split(commands[0]) == [
        "machine",
        "good",
        "--session",
        str(sessions / "multi-turn.jsonl"),
        "short and right",
    ]
    rewrite = shlex.split(commands[4])
    assert rewrite[3:] == [
        "--as",
        "notes.md has a '# Notes' header; /nonexistent-dir does not exist.",
    ]
    assert [shlex.split(c)[1] for c in commands] == [
        "good",
        "good",
        "bad",
        "version",
        "rewrite",
        "log",
        "diff",
        "data",
    ]
    assert "rows     3 (train 1, traces 1, rejected 1, observed 0)\n" in done.stdout
    assert f'. "{ROOT}/.venv/bin/activate"' in done.stdout
    assert done.stderr == ""
