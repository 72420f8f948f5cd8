"""``machine install`` and ``machine uninstall``: machine inside the agents."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

import click

from machine_git.cli.common import emit_json
from machine_git.cli.common import json_option
from machine_git.cli.common import project_of
from machine_git.cli.common import warn

if TYPE_CHECKING:
    from machine_git.agents.install import Outcome

# The commands import machine_git.agents.install when they run: its templates
# and JSON handling stay off the start-up path of every other command.
HOSTS = ("pi", "letta", "claude", "codex")  # agents.install.HOSTS, Claude Code, Codex


def _project_flag(f: Any) -> Any:
    return click.option(
        "--project",
        "project",
        is_flag=False,
        flag_value="",
        default=None,
        metavar="[DIR]",
        help=(
            "Only for this project (<project>/.pi/extensions, "
            "<project>/.claude/commands, <project>/.codex/hooks.json), not globally."
        ),
    )(f)


def _where(project: str | None, host: str) -> Path | None:
    """``--project`` alone: this project; ``--project DIR``: that one."""
    if project is None or host == "letta":  # Letta Code: the library says why not
        return None if project is None else Path(project or ".")
    return project_of(Path(project) if project else None)


# Files machine shares with the agent: what of machine's is in them.
_WHAT = {
    "models.json": "the Tinker provider in ",
    "settings.json": "the status line in ",
    "hooks.json": "the /good hook in ",
    "config.toml": "notify in ",
}


def _show(outcomes: list[Outcome], as_json: bool = False) -> None:
    for o in outcomes:
        what = _WHAT.get(o.path.name, "")
        if o.action == "skipped":
            warn(f"left {o.path} as it is: {o.detail}")
        elif as_json:
            continue  # the JSON lists every file
        elif o.action == "unchanged":
            click.echo(f"up to date: {what}{o.path}")
        elif o.action == "absent":
            if not what:
                click.echo(f"not installed: {o.path}")
        elif o.action == "removed":
            click.echo(f"removed {what.replace(' in ', ' from ')}{o.path}")
        else:
            click.echo(f"{o.action} {what}{o.path}")


def _files(outcomes: list[Outcome]) -> list[dict[str, str]]:
    return [
        {"path": str(o.path), "action": o.action, "detail": o.detail} for o in outcomes
    ]


@click.command()
@click.argument("host", type=click.Choice(HOSTS))
@_project_flag
@json_option
def install(host: str, project: str | None, as_json: bool) -> None:
    """Install the /good, /bad, /tagged, /machine and /train commands in an agent.

    Pi: ~/.pi/agent/extensions/machine.ts (or $PI_CODING_AGENT_DIR), or with
    --project <project>/.pi/extensions/machine.ts; also /tinker, a footer with
    the row counts, machine's skills (loaded by the extension from this
    machine's package), and a Tinker provider in Pi's models.json so the
    student can be chosen with /model. Letta Code: ~/.letta/mods/machine.ts,
    and the skills copied to ~/.letta/skills/<name>/SKILL.md. The file runs
    this machine ('python -m machine_git'), so it works without machine on
    PATH. Installing again rewrites the same files. Claude Code: /good, /bad
    and /machine as custom commands in ~/.claude/commands (or
    $CLAUDE_CONFIG_DIR/commands), or with --project <project>/.claude/commands,
    and the row counts as its status line (settings.json), unless one is set.
    Codex: a prompt hook in $CODEX_HOME/hooks.json (or --project
    <project>/.codex/hooks.json) that runs /good, /bad and /machine typed as
    the prompt, machine's skills in ~/.agents/skills (or
    <project>/.agents/skills), and notify in $CODEX_HOME/config.toml (records
    each turn when machine auto is on), unless a notify program is set.

    \b
    Example usage:
        machine install pi
        machine install pi --project
        machine install letta
        machine install claude
        machine install codex
    """
    from machine_git.agents import install as installer

    if host == "claude":
        from machine_git.agents import claude_commands

        files = claude_commands.install_claude(_where(project, host))
        done = installer.Installed(files, [], installer.skills_dir())
    elif host == "codex":
        from machine_git.agents import codex_install

        files = codex_install.install_codex(_where(project, host))
        done = installer.Installed(files, [], installer.skills_dir())
    else:
        done = installer.install(host, _where(project, host))
    _show(done.outcomes, as_json)
    if host == "claude":
        lines = ["type /good, /bad or /machine in Claude Code (claude -p too)"]
    elif host == "codex":
        lines = [
            "type /good, /bad or /machine as the prompt (in the TUI: a space first)",
            "run /hooks in Codex once to trust the hook (Codex skips it until then)",
        ]
    elif host == "pi":
        names = ", ".join(done.skills)
        lines = [
            f"skills {names}: loaded by the extension from {done.skills_dir}",
            "run /reload in pi (or start it again) to load the commands",
        ]
    else:
        lines = ["run /reload in Letta Code (mods need Letta Code 0.30 or newer)"]
    if as_json:
        skills = {"skills": done.skills, "skills_dir": str(done.skills_dir)}
        emit_json(
            {
                "host": host,
                "files": _files(done.outcomes),
                **(skills if host == "pi" else {}),
                "next": lines[-1],
            }
        )
        return
    for line in lines:
        click.echo(line)


@click.command()
@click.argument("host", type=click.Choice(HOSTS))
@_project_flag
@json_option
def uninstall(host: str, project: str | None, as_json: bool) -> None:
    """Remove what machine install wrote (only files machine wrote).

    \b
    Example usage:
        machine uninstall pi
        machine uninstall letta
        machine uninstall codex
    """
    from machine_git.agents import install as installer

    if host == "claude":
        from machine_git.agents import claude_commands

        outcomes = claude_commands.uninstall_claude(_where(project, host))
    elif host == "codex":
        from machine_git.agents import codex_install

        outcomes = codex_install.uninstall_codex(_where(project, host))
    else:
        outcomes = installer.uninstall(host, _where(project, host))
    _show(outcomes, as_json)
    if as_json:
        emit_json({"host": host, "files": _files(outcomes)})
