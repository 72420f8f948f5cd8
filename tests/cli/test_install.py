"""machine install and uninstall: the files machine writes into Pi and Letta Code."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import orjson

from machine_git.agents import install
from machine_git.core import paths
from machine_git.core.errors import USAGE
from machine_git.sessions import pi
from tests.conftest import Run

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
