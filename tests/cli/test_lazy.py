from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from machine_git.cli import FAST
from machine_git.cli import cli
from tests.conftest import Run

CLI = Path(__file__).parents[2] / "machine_git" / "cli"


@pytest.mark.parametrize("name", sorted(FAST))
def test_a_fast_command_is_the_one_registered_under_its_name(name: str) -> None:
    module, attribute = FAST[name]
    command = getattr(importlib.import_module(module), attribute)
    assert cli.commands[name] is command
    assert command.name == name


def test_machine_good_loads_no_other_command() -> None:
    code = (
        "import sys, click\n"
        "from machine_git.cli import cli\n"
        "cli.get_command(click.Context(cli), 'good')\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    others = {
        f"machine_git.cli.{p.stem}"
        for p in CLI.glob("*.py")
        if p.stem not in {"__init__", "common", "tag"}
    }
    assert others
    assert others & set(done.stdout.split()) == set()


def test_help_lists_every_command(run: Run) -> None:
    listed = run("--help").stdout
    for name in cli.commands:
        assert f"  {name} " in listed or f"  {name}\n" in listed
