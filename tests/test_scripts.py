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


def test_update_secret_engine_moves_the_pin_and_only_it(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    original = (ROOT / "pyproject.toml").read_text()
    pyproject.write_text(original)
    script = [str(ROOT / "scripts" / "update-secret-engine"), "--pyproject"]
    done = subprocess.run(
        [*script, str(pyproject), "--to", "9.8.7"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("kingfisher-secret-scanner: ")
    assert "-> 9.8.7 in pyproject.toml\n" in done.stdout
    changed = pyproject.read_text()
    assert '"kingfisher-secret-scanner==9.8.7"' in changed
    # nothing else moved
    pinned = [x for x in original.splitlines() if "kingfisher-secret-scanner==" in x]
    assert changed == original.replace(
        pinned[0], pinned[0].split("==")[0] + '==9.8.7",'
    )
    again = subprocess.run(
        [*script, str(pyproject), "--to", "9.8.7", "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (again.returncode, again.stdout) == (
        0,
        "kingfisher-secret-scanner is pinned at 9.8.7, the newest\n",
    )
