"""The skills in skills/: loadable by Pi and Letta Code, and every command real.

Each skill is a folder with a SKILL.md whose YAML front matter has the
``name`` (the folder's name, Agent Skills rules) and ``description`` Pi and
Letta Code read. Every ``machine ...`` command line the skills show (in code
blocks and inline code) must parse as the CLI parses it: the command path
exists in the click group and its options and arguments are accepted, values
included. A skill naming a command that does not exist fails here.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest
import yaml

from machine_git import bundled
from machine_git.cli import cli

SKILLS = Path(str(bundled.folder("skills")))
NAMES = [p.parent.name for p in sorted(SKILLS.glob("*/SKILL.md"))]
_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
_INLINE = re.compile(r"`([^`]+)`")
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
# What the release skill may use: the releases interface (machine_git/cli/releases.py).
RELEASE_COMMANDS = {
    "release new": {"--run", "--title", "--gates", "--template"},
    "release check": {"--yes"},
    "release trial": set(),
    "release activate": set(),
    "release list": set(),
    "release show": set(),
    "lineage": {"--json", "--rows"},
}


def front_matter(text: str) -> dict[str, object]:
    assert text.startswith("---\n")
    head, _, _ = text[4:].partition("\n---\n")
    value = yaml.safe_load(head)
    assert isinstance(value, dict)
    return value


def command_lines(text: str) -> list[str]:
    """Every ``machine ...`` line of a code block, then every inline one."""
    found: list[str] = []
    for block in _FENCE.findall(text):
        found += [
            line.strip()
            for line in block.splitlines()
            if line.strip().startswith("machine ")
        ]
    prose = _FENCE.sub("", text)
    found += [
        " ".join(span.split())
        for span in _INLINE.findall(prose)
        if span.startswith("machine ")
    ]
    return found


def problem(line: str) -> str | None:
    """Why the CLI would refuse ``line`` before running it, or None."""
    words = shlex.split(line, comments=True)
    assert words[0] == "machine"
    command: click.Command = cli
    path = ["machine"]
    args = words[1:]
    while isinstance(command, click.Group) and args and not args[0].startswith("-"):
        sub = command.get_command(click.Context(command), args[0])
        if sub is None:
            return f"no command '{' '.join([*path, args[0]])}'"
        path.append(args[0])
        command, args = sub, args[1:]
    if isinstance(command, click.Group):
        return f"'{' '.join(path)}' needs a subcommand" if args else None
    try:
        command.make_context(" ".join(path), list(args))
    except click.ClickException as e:
        return f"{' '.join(path)}: {e.format_message()}"
    return None


def all_lines() -> list[tuple[str, str]]:
    return [
        (name, line)
        for name in NAMES
        for line in command_lines((SKILLS / name / "SKILL.md").read_text())
    ]


def test_the_four_skills_ship() -> None:
    assert NAMES == [
        "machine-dataset",
        "machine-release",
        "machine-tagging",
        "machine-tinker-sft",
    ]


@pytest.mark.parametrize("name", NAMES)
def test_a_skill_is_loadable_by_pi_and_letta(name: str) -> None:
    text = (SKILLS / name / "SKILL.md").read_text()
    meta = front_matter(text)
    assert meta["name"] == name
    assert _NAME.match(name) and len(name) <= 64
    description = meta["description"]
    assert isinstance(description, str)
    assert 0 < len(description) <= 1024
    assert "Use when" in description  # says when to load it
    assert len(command_lines(text)) >= 5


@pytest.mark.parametrize(
    ("name", "line"), all_lines(), ids=[f"{n}: {line}" for n, line in all_lines()]
)
def test_every_command_a_skill_shows_is_accepted(name: str, line: str) -> None:
    assert problem(line) is None


def test_the_checker_refuses_what_the_cli_refuses() -> None:
    assert problem("machine nope") == "no command 'machine nope'"
    assert problem("machine train nope") == "no command 'machine train nope'"
    assert problem("machine good --bogus") == (
        "machine good: No such option '--bogus'. (Did you mean one of: '--host', "
        "'--out'?)"
    )
    assert problem("machine tagged --kind nope") == (
        "machine tagged: Invalid value for '--kind': 'nope' is not one of "
        "'train', 'traces', 'rejected', 'observed'."
    )
    assert problem("machine undo extra") == (
        "machine undo: Got unexpected extra argument (extra)"
    )
    assert problem("machine train validate --kind traces  # offline") is None


def test_the_release_skill_uses_the_releases_interface() -> None:
    text = (SKILLS / "machine-release" / "SKILL.md").read_text()
    used: dict[str, set[str]] = {}
    for line in command_lines(text):
        words = shlex.split(line, comments=True)[1:]
        if words[0] not in ("release", "lineage"):
            continue
        key = " ".join(words[:2]) if words[0] == "release" else words[0]
        options = {w for w in words if w.startswith("--")}
        used.setdefault(key, set()).update(options)
    assert set(used) == set(RELEASE_COMMANDS)
    for key, options in used.items():
        assert options <= RELEASE_COMMANDS[key], key
