from __future__ import annotations

from pathlib import Path

from machine_git import settings
from machine_git.store import Store
from tests.conftest import git


def test_settings_are_commits_with_defaults(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    assert settings.read(store) == {"auto": False}
    assert settings.write(store, "auto", False) is None  # the default: no commit
    commit = settings.write(store, "auto", True)
    assert commit is not None
    assert settings.read(store)["auto"] is True
    assert settings.write(store, "auto", True) is None
    assert git(store.path, "log", "-1", "--format=%s%n%(trailers:only)") == (
        "set auto = true\nMachine-Action: setting\nMachine-Setting: auto\n\n"
    )
    assert git(store.path, "show", "HEAD:settings.json") == '{\n  "auto": true\n}\n'
