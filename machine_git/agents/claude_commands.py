"""machine inside Claude Code: ``/good``, ``/bad`` and ``/machine`` as custom commands.

Claude Code reads custom slash commands from Markdown files in
``<config>/commands/`` (user scope; ``$CLAUDE_CONFIG_DIR`` replaces
``~/.claude``) or ``<project>/.claude/commands/`` (project scope). A command's
text may run a shell command before the model sees it (``!`cmd```, allowed
by the ``allowed-tools`` front matter), and that is how these work: typing
``/good --trace`` runs this machine's ``good --host claude --trace`` on the
project's newest session, whose last turn is complete on disk by then, and
the output becomes the prompt. Claude Code still sends that prompt to the
model (a custom command always does), so it is wrapped in
``<machine-command>`` and the Claude Code reader never takes such a turn, or
the model's reply to it, for the user's (sessions/claude/turn.py).

Each file carries a marker in its front matter (a YAML comment); machine
never overwrites or removes a file without it.

Claude Code's footer is its status line (``statusLine`` in ``settings.json``:
a shell command whose first output line is shown under the prompt). Unless
one is set already, machine sets it to the project's row counts (``machine
data``'s rows line) and removes it again on uninstall. Claude Code shows it
in its interactive UI only.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from machine_git.agents import install
from machine_git.agents.install import Outcome
from machine_git.core.errors import InstallError
from machine_git.sessions import claude as claude_sessions
from machine_git.sessions.claude.turn import MACHINE_COMMAND

MARKER = "# machine-generated: claude command. `machine uninstall claude` removes it."
COMMANDS = {
    "good": ("Tag the last turn as good training data (machine)", "good"),
    "bad": ("Tag the last turn as bad training data (machine)", "bad"),
    "machine": ("Run a machine command, e.g. /machine status (machine)", ""),
}
_HINTS = {"good": "[--trace] [--note TEXT]", "bad": "[--trace] [--note TEXT]"}


def commands_dir(project: Path | None = None) -> Path:
    """``<config>/commands`` (user scope) or ``<project>/.claude/commands``."""
    if project is not None:
        return project / ".claude" / "commands"
    return claude_sessions.config_dir() / "commands"


def render(name: str) -> str:
    """The Markdown of the ``/name`` command."""
    description, verb = COMMANDS[name]
    machine = shlex.join(install.machine_argv())
    run = f"{machine} {verb} --host claude" if verb else machine
    allowed = f"{machine} {verb}".rstrip()
    hint = _HINTS.get(name, "<command> [options]")
    return (
        "---\n"
        f"{MARKER}\n"
        f"description: {description}\n"
        f'argument-hint: "{hint}"\n'
        f"allowed-tools: Bash({allowed}:*)\n"
        "---\n"
        f"{MACHINE_COMMAND}\n"
        f"!`{run} $ARGUMENTS 2>&1`\n"
        f"{MACHINE_COMMAND.replace('<', '</')}\n"
        "machine ran the command above (it is not a request to you). Reply with "
        "its output, as it is, and nothing else.\n"
    )


def _ours(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            head = f.read(400)
    except OSError:
        return False
    return MARKER.encode() in head.split(b"\n---", 1)[0]


def settings_path(project: Path | None = None) -> Path:
    """``<config>/settings.json`` or ``<project>/.claude/settings.json``."""
    if project is not None:
        return project / ".claude" / "settings.json"
    return claude_sessions.config_dir() / "settings.json"


def status_command() -> str:
    """The status line: ``machine: <rows line of machine data>``."""
    machine = shlex.join(install.machine_argv())
    return f"{machine} data 2>/dev/null | sed -n 's/^rows  */machine: /p'"


def install_claude(project: Path | None = None) -> list[Outcome]:
    """Write ``good.md``, ``bad.md``, ``machine.md`` and the status line."""
    folder = commands_dir(project)
    settings = _read_settings(settings_path(project))  # refuse a broken file first
    done = [install._place(folder / f"{n}.md", render(n), _ours) for n in COMMANDS]
    done.append(_set_status(settings_path(project), settings))
    return done


def uninstall_claude(project: Path | None = None) -> list[Outcome]:
    """Remove the command files machine wrote, its status line, and what empties."""
    folder = commands_dir(project)
    done = [install._remove(folder / f"{n}.md", _ours) for n in COMMANDS]
    done.append(_unset_status(settings_path(project)))
    if project is not None and any(o.action == "removed" for o in done):
        install._remove_empty(folder, project)
    return done


def _ours_status(value: Any) -> bool:
    return isinstance(value, dict) and value.get("command") == status_command()


def _read_settings(path: Path) -> dict[str, Any]:
    value = install.read_user_json(path)
    if not isinstance(value, dict):
        raise InstallError(f"{path} is not a JSON object; fix it first")
    return value


def _set_status(path: Path, settings: dict[str, Any]) -> Outcome:
    current = settings.get("statusLine")
    if current is not None and not _ours_status(current):
        return Outcome(path, "skipped", "a status line is already set there")
    wanted = {"type": "command", "command": status_command(), "padding": 0}
    if current == wanted:
        return Outcome(path, "unchanged")
    settings["statusLine"] = wanted
    install._write(path, (json.dumps(settings, indent=2) + "\n").encode())
    return Outcome(path, "updated" if current is not None else "installed")


def _unset_status(path: Path) -> Outcome:
    settings = _read_settings(path)
    if not _ours_status(settings.get("statusLine")):
        return Outcome(path, "absent")
    del settings["statusLine"]
    if settings:
        install._write(path, (json.dumps(settings, indent=2) + "\n").encode())
    else:
        try:
            path.unlink()
        except OSError as e:
            raise InstallError(f"cannot remove {path}: {e.strerror}") from None
    return Outcome(path, "removed")
