"""The store stays private and hostile names never leave their folder."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from machine_git.core import paths
from machine_git.core.errors import NOT_FOUND
from machine_git.core.errors import USAGE
from tests.conftest import PI_SESSIONS
from tests.conftest import Run
from tests.conftest import install_session

HOOKS = {"pre-receive", "post-receive", "pre-commit"}


def modes(root: Path) -> list[str]:
    """Every path under ``root`` whose mode is not private, as ``mode path``."""
    wrong = []
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            mode = stat.S_IMODE(os.stat(Path(folder, name)).st_mode)
            if mode != 0o700:
                wrong.append(f"{oct(mode)} {Path(folder, name).relative_to(root)}/")
        for name in files:
            path = Path(folder, name)
            mode = stat.S_IMODE(os.stat(path).st_mode)
            want = 0o700 if path.parent.name == "hooks" and name in HOOKS else 0o600
            if mode != want:
                wrong.append(f"{oct(mode)} {path.relative_to(root)}")
    return wrong


@pytest.mark.slow
def test_every_file_stays_private_after_a_full_workflow(
    project: Path, run: Run, tmp_path: Path
) -> None:
    install_session(project, "basic")
    steps = [
        ("good",),
        ("good", "--trace"),
        ("bad", "too", "terse"),
        ("version", "v1"),
        ("auto", "on"),
        ("export", "-o", str(tmp_path / "out.jsonl")),
        ("hooks", "install"),
    ]
    for step in steps:
        result = run(*step)
        assert result.exit_code == 0, (step, result.stderr)
    row_id = run("tagged", "-n", "1", "--json").stdout.split('"id":"')[1][:12]
    for step in [
        ("rewrite", row_id, "--as", "Short."),
        ("rm", row_id, "--why", "dup"),
        ("undo",),
        ("import", str(tmp_path / "out.jsonl"), "--kind", "train"),
    ]:
        result = run(*step)
        assert result.exit_code == 0, (step, result.stderr)
    hub = tmp_path / "hub.git"
    subprocess.run(["git", "init", "-q", "--bare", str(hub)], check=True)
    for step in [("remote", "add", "origin", str(hub)), ("push",), ("pull",), ("gc",)]:
        result = run(*step)
        assert result.exit_code == 0, (step, result.stderr)
    store = paths.store_path(project)
    assert list((store / "objects" / "pack").glob("*.pack"))  # packing happened
    assert modes(store) == []
    assert stat.S_IMODE(os.stat(store).st_mode) == 0o700


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        (("rm", "../../etc/passwd"), "bad row id '../../etc/passwd'", USAGE),
        (("rewrite", "/etc/passwd", "--as", "x"), "bad row id '/etc/passwd'", USAGE),
        (("show", "../x"), "'../x' is neither a row id nor a revision", NOT_FOUND),
        (("log", "--id", "a" * 500), "bad row id", USAGE),
        (("version", "../../evil"), "may not contain '/' or start with '.'", USAGE),
        (("version", "/abs"), "may not contain '/' or start with '.'", USAGE),
        (("version", "x" * 300), "is longer than 100 characters", USAGE),
        (
            ("remote", "add", "../up", "/tmp/x"),
            "may not contain '/' or start with '.'",
            USAGE,
        ),
        (("release", "show", "BR-../../x"), "bad release id", USAGE),
        (("diff", "../../.."), "unknown revision", NOT_FOUND),
        (("export", "--kind", "train", "@{../..}"), "bad date", USAGE),
    ],
)
def test_hostile_names_get_one_clear_line(
    project: Path, run: Run, args: tuple[str, ...], message: str, code: int
) -> None:
    run("good", "--session", str(PI_SESSIONS / "basic.jsonl"))
    store = paths.store_path(project)
    before = sorted(p.name for p in store.parent.iterdir())
    result = run(*args)
    assert result.exit_code == code, result.output
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1
    assert message in result.stderr
    assert sorted(p.name for p in store.parent.iterdir()) == before


def test_out_cannot_be_a_folder_and_is_created_private(
    project: Path, run: Run, tmp_path: Path
) -> None:
    session = str(PI_SESSIONS / "basic.jsonl")
    result = run("good", "--session", session, "--out", str(tmp_path))
    assert result.exit_code == USAGE
    target = tmp_path / "sub" / "rows.jsonl"
    missing = run("good", "--session", session, "--out", str(target))
    assert missing.exit_code == USAGE
    assert (
        missing.stderr == f"Error: cannot write {target}: No such file or directory\n"
    )
    ok = run("good", "--session", session, "--out", str(tmp_path / "rows.jsonl"))
    assert ok.exit_code == 0
    assert stat.S_IMODE(os.stat(tmp_path / "rows.jsonl").st_mode) == 0o600


def test_a_deleted_working_folder_is_one_line(
    tmp_path: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    result = run("data")
    assert result.exit_code == USAGE
    assert result.stderr == (
        "Error: the current folder no longer exists; cd somewhere or pass --project\n"
    )
