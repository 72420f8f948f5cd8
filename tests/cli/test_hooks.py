from __future__ import annotations

from pathlib import Path

import orjson

from machine_git.core import paths
from tests.conftest import Run


def test_hooks_install_is_idempotent(project: Path, run: Run) -> None:
    folder = paths.store_path(project) / "hooks"
    first = run("hooks", "install")
    assert first.exit_code == 0
    assert first.stdout == f"installed pre-receive, post-receive in {folder}\n"
    assert run("hooks", "install").stdout == f"hooks already installed in {folder}\n"
    assert orjson.loads(run("hooks", "install", "--json").stdout) == {
        "hooks": str(folder),
        "installed": [],
    }
    assert sorted(p.name for p in folder.iterdir()) == ["post-receive", "pre-receive"]


def test_hooks_install_leaves_someone_elses_hook(project: Path, run: Run) -> None:
    run("hooks", "install")
    hook = paths.store_path(project) / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\nexit 0\n")
    result = run("hooks", "install", "--project", str(project))
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {hook} exists and was not written by machine; "
        "move it away, then run 'machine hooks install' again\n"
    )
    assert hook.read_text() == "#!/bin/sh\nexit 0\n"
