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
"""

from __future__ import annotations

import shlex
from pathlib import Path

from machine_git.agents import install
from machine_git.agents.install import Outcome
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


def install_claude(project: Path | None = None) -> list[Outcome]:
    """Write ``good.md``, ``bad.md`` and ``machine.md`` (user or project scope)."""
    folder = commands_dir(project)
    return [install._place(folder / f"{n}.md", render(n), _ours) for n in COMMANDS]


def uninstall_claude(project: Path | None = None) -> list[Outcome]:
    """Remove the command files machine wrote (and the folders they leave empty)."""
    folder = commands_dir(project)
    done = [install._remove(folder / f"{n}.md", _ours) for n in COMMANDS]
    if project is not None and any(o.action == "removed" for o in done):
        install._remove_empty(folder, project)
    return done
