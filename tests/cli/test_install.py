"""machine install and uninstall: the files machine writes into Pi and Letta Code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import orjson

from machine_git.agents import install
from machine_git.core import paths
from machine_git.core.errors import USAGE
from machine_git.sessions import pi
from tests.conftest import Run
from tests.conftest import install_session

SKILLS = ("machine-dataset", "machine-release", "machine-tagging", "machine-tinker-sft")


def store_of(project: Path) -> Path:
    return paths.store_path(project)


def test_install_pi_twice_and_uninstall(project: Path, run: Run) -> None:
    agent = pi.agent_dir()
    ext, models = agent / "extensions" / "machine.ts", agent / "models.json"
    first = run("install", "pi")
    assert first.exit_code == 0, first.output
    skills = (
        f"skills {', '.join(SKILLS)}: loaded by the extension from "
        f"{install.skills_dir()}\n"
    )
    assert first.stdout == (
        f"installed {ext}\n"
        f"installed the Tinker provider in {models}\n"
        f"{skills}"
        "run /reload in pi (or start it again) to load the commands\n"
    )
    argv = json.dumps([sys.executable, "-m", "machine_git"])
    assert f"const MACHINE: string[] = {argv};" in ext.read_text()
    again = run("install", "pi")
    assert again.stdout == (
        f"up to date: {ext}\n"
        f"up to date: the Tinker provider in {models}\n"
        f"{skills}"
        "run /reload in pi (or start it again) to load the commands\n"
    )
    gone = run("uninstall", "pi")
    assert gone.stdout == f"removed {ext}\nremoved the Tinker provider from {models}\n"
    assert not ext.exists()
    assert run("uninstall", "pi").stdout == f"not installed: {ext}\n"


def test_install_pi_in_the_project(project: Path, run: Run) -> None:
    result = run("install", "pi", "--project")
    target = project / ".pi" / "extensions" / "machine.ts"
    assert result.stdout.splitlines()[0] == f"installed {target}"
    assert 'const SCOPE: string = "project";' in target.read_text()
    assert run("uninstall", "pi", "--project").stdout.splitlines()[0] == (
        f"removed {target}"
    )


def test_letta_mods_are_global_only(project: Path, run: Run) -> None:
    result = run("install", "letta", "--project")
    assert result.exit_code == USAGE
    assert result.stderr == (
        "Error: Letta Code loads mods from ~/.letta/mods only; drop --project\n"
    )
    done = run("install", "letta")
    target = Path.home() / ".letta" / "mods" / "machine.ts"
    skills = [Path.home() / ".letta" / "skills" / n / "SKILL.md" for n in SKILLS]
    provider = target.with_name("machine-tinker.ts")
    assert done.stdout == (
        f"installed {target}\n"
        f"installed {provider}\n"
        + "".join(f"installed {path}\n" for path in skills)
        + "run /reload in Letta Code (mods need Letta Code 0.30 or newer)\n"
    )
    assert run("uninstall", "letta").stdout == (
        f"removed {target}\nremoved {provider}\n"
        + "".join(f"removed {path}\n" for path in skills)
    )


# -- --json ----------------------------------------------------------------------


def test_install_and_uninstall_json(project: Path, run: Run) -> None:
    agent = pi.agent_dir()
    ext, models = agent / "extensions" / "machine.ts", agent / "models.json"
    first = run("install", "pi", "--json")
    assert first.exit_code == 0, first.stderr
    assert orjson.loads(first.stdout) == {
        "host": "pi",
        "files": [
            {"path": str(ext), "action": "installed", "detail": ""},
            {"path": str(models), "action": "installed", "detail": ""},
        ],
        "skills": list(SKILLS),
        "skills_dir": str(install.skills_dir()),
        "next": "run /reload in pi (or start it again) to load the commands",
    }
    assert first.stdout.count("\n") == 1
    gone = run("uninstall", "pi", "--json")
    assert gone.stdout == (
        '{"files":['
        f'{{"action":"removed","detail":"","path":"{ext}"}},'
        f'{{"action":"removed","detail":"","path":"{models}"}}'
        '],"host":"pi"}\n'
    )


# -- Claude Code -------------------------------------------------------------------


def test_install_claude_commands_and_uninstall(project: Path, run: Run) -> None:
    from machine_git.agents import claude_commands
    from machine_git.sessions import claude

    folder = claude.config_dir() / "commands"
    files = [folder / f"{name}.md" for name in ("good", "bad", "machine")]
    settings = claude.config_dir() / "settings.json"
    result = run("install", "claude")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "".join(f"installed {f}\n" for f in files)
        + f"installed the status line in {settings}\n"
        + "type /good, /bad or /machine in Claude Code (claude -p too)\n"
    )
    status = json.loads(settings.read_text())["statusLine"]
    assert status == {
        "type": "command",
        "command": claude_commands.status_command(),
        "padding": 0,
    }
    good = files[0].read_text()
    machine = f"{sys.executable} -m machine_git"
    assert good.startswith(f"---\n{claude_commands.MARKER}\n")
    assert f"allowed-tools: Bash({machine} good:*)\n" in good
    assert f"!`{machine} good --host claude $ARGUMENTS 2>&1`\n" in good
    assert files[0].stat().st_mode & 0o777 == 0o600
    again = run("install", "claude")
    assert again.stdout.startswith(f"up to date: {files[0]}\n")
    result = run("uninstall", "claude")
    assert result.stdout == (
        "".join(f"removed {f}\n" for f in files)
        + f"removed the status line from {settings}\n"
    )
    assert not any(f.exists() for f in files)
    assert not settings.exists()  # it held nothing else


def test_the_claude_status_line_shows_the_row_counts(project: Path, run: Run) -> None:
    from machine_git.agents import claude_commands

    # Claude Code runs it with a shell, in the project, JSON on stdin.
    def status() -> str:
        done = subprocess.run(
            ["sh", "-c", claude_commands.status_command()],
            cwd=project,
            input="{}",
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return done.stdout

    assert status() == "machine: 0 (train 0, traces 0, rejected 0, observed 0)\n"
    install_session(project, "basic")
    assert run("good").exit_code == 0
    assert status() == "machine: 1 (train 1, traces 0, rejected 0, observed 0)\n"


def test_a_users_status_line_is_left_alone(project: Path, run: Run) -> None:
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    mine = {"statusLine": {"type": "command", "command": "echo mine"}, "model": "x"}
    settings.write_text(json.dumps(mine))
    result = run("install", "claude", "--project")
    assert result.exit_code == 0, result.output
    assert result.stderr.endswith(
        f"left {settings} as it is: a status line is already set there\n"
    )
    assert json.loads(settings.read_text()) == mine
    assert run("uninstall", "claude", "--project").exit_code == 0
    assert json.loads(settings.read_text()) == mine


def test_install_claude_in_the_project_leaves_no_trace(project: Path, run: Run) -> None:
    folder = project / ".claude" / "commands"
    assert run("install", "claude", "--project").exit_code == 0
    assert sorted(p.name for p in folder.iterdir()) == [
        "bad.md",
        "good.md",
        "machine.md",
    ]
    assert run("uninstall", "claude", "--project").exit_code == 0
    assert not (project / ".claude").exists()


def test_install_claude_never_overwrites_a_users_command(
    project: Path, run: Run
) -> None:
    folder = project / ".claude" / "commands"
    folder.mkdir(parents=True)
    mine = folder / "good.md"
    mine.write_text("---\ndescription: my own /good\n---\nSay good.\n")
    result = run("install", "claude", "--project")
    assert result.exit_code != 0
    assert result.stderr.endswith(
        f"{mine} exists and was not written by machine; move it away first\n"
    )
    assert mine.read_text() == "---\ndescription: my own /good\n---\nSay good.\n"
    result = run("uninstall", "claude", "--project")
    assert result.exit_code != 0
    assert result.stderr.endswith(f"{mine} was not written by machine; left in place\n")
    assert mine.exists()
