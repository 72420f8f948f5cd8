"""Every command documents itself, the README names it, and start-up stays light."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from machine_git.cli import cli

ROOT = Path(__file__).parents[2]
# The README names the daily commands; docs/ (the reference) names them all.
DOCS = "\n".join(
    p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
)


def all_commands(
    group: click.Group, prefix: tuple[str, ...] = ()
) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []
    for name, command in sorted(group.commands.items()):
        path = (*prefix, name)
        found.append(path)
        if isinstance(command, click.Group):
            found.extend(all_commands(command, path))
    return found


COMMANDS = all_commands(cli)


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_every_command_has_help(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, result.output
    command: click.Command = cli
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    assert command.help and command.help.strip(), (
        f"machine {' '.join(path)} has no help"
    )


@pytest.mark.parametrize("path", [p for p in COMMANDS if len(p) == 1], ids=" ".join)
def test_every_top_level_command_is_in_the_docs(path: tuple[str, ...]) -> None:
    assert f"machine {path[0]}" in DOCS


def test_start_up_imports_no_heavy_library() -> None:
    code = (
        "import sys\n"
        "from machine_git.cli import cli\n"
        "heavy = {'pydantic', 'jsonschema', 'tinker', 'torch', 'tinker_cookbook',"
        " 'tml_renderers', 'transformers', 'numpy'}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & heavy))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert done.stdout == "[]\n"


EVERY = [(), *COMMANDS]


@pytest.mark.parametrize("path", EVERY, ids=lambda p: " ".join(("machine", *p)))
def test_help_renders_cleanly_with_an_example(path: tuple[str, ...]) -> None:
    output = CliRunner().invoke(cli, [*path, "--help"]).output
    assert "``" not in output  # reST markup, shown literally by click
    assert "Example usage:" in output
