"""Install hints name what works: extras pyproject.toml defines, the torch
the README installs, and no package the index does not have."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from machine_git import __version__
from machine_git.core import extras

ROOT = Path(__file__).parents[2]


@pytest.mark.parametrize("extra", ["train", "ui"])
def test_a_hint_installs_an_extra_the_project_defines(extra: str) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert extra in project["optional-dependencies"]
    hint = extras.install_hint(extra)
    assert f"'.[{extra}]' in a machine checkout" in hint
    # the wheel `python -m build` names for this version
    assert f"'machine_git-{__version__}-py3-none-any.whl[{extra}]'" in hint
    assert "machine-git[" not in hint  # not on the index (yet)


def test_the_training_hint_pins_the_documented_torch() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    assert any(f"pip install {extras.TORCH} " in p.read_text() for p in pages)
    assert extras.install_hint("train").startswith(f"pip install {extras.TORCH} ")
