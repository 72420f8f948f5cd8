"""machine install codex: the prompt hook in hooks.json and notify in config.toml.

The user's own entries in both files stay exactly as they were, and uninstall
takes out exactly what install put in. (tests/e2e/test_real_agents.py runs
the real ``codex`` with them.)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from machine_git.agents import codex_install
from machine_git.sessions import codex
from tests.conftest import Run

NEXT = (
    "type /good, /bad or /machine as the prompt (in the TUI: a space first)\n"
    "run /hooks in Codex once to trust the hook (Codex skips it until then)\n"
)
# A user's config: comments, top-level keys, tables, no newline at the end.
CONFIG = (
    "# my settings\n"
    'model = "o3"  # the default\n'
    "\n"
    "[profiles.fast]\n"
    'model = "o4-mini"\n'
    "[mcp_servers.docs]\n"
    'command = "docs-mcp"'
)
HOOKS = {
    "description": "my hooks",
    "hooks": {
        "UserPromptSubmit": [
            {"hooks": [{"type": "command", "command": "scan-for-keys"}]}
        ],
        "Stop": [{"matcher": None, "hooks": [{"type": "command", "command": "beep"}]}],
    },
}
OURS = {
    "type": "command",
    "command": f"{sys.executable} -m machine_git.agents.codex_hook prompt",
    "timeout": 180,
}
NOTIFY = (
    f"{codex_install.NOTIFY_MARKER}\n"
    f'notify = ["{sys.executable}", "-m", "machine_git.agents.codex_hook", "notify"]\n'
)


SKILLS = ("machine-dataset", "machine-release", "machine-tagging", "machine-tinker-sft")


def _files() -> tuple[Path, Path]:
    return codex.home() / "hooks.json", codex.home() / "config.toml"


def _skills(action: str, project: Path | None = None) -> str:
    root = (project or Path.home()) / ".agents" / "skills"
    return "".join(f"{action} {root / name / 'SKILL.md'}\n" for name in SKILLS)


def test_install_codex_keeps_the_users_config_and_uninstall_restores_it(
    project: Path, run: Run
) -> None:
    hooks, config = _files()
    hooks.parent.mkdir(parents=True)
    hooks.write_text(json.dumps(HOOKS))
    config.write_text(CONFIG)
    result = run("install", "codex")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        f"installed the /good hook in {hooks}\ninstalled notify in {config}\n"
        + _skills("installed")
        + NEXT
    )
    assert config.read_text() == NOTIFY + CONFIG
    events = json.loads(hooks.read_text())["hooks"]
    assert events["UserPromptSubmit"] == [
        *HOOKS["hooks"]["UserPromptSubmit"],  # type: ignore[index]
        {"hooks": [OURS]},
    ]
    assert events["Stop"] == HOOKS["hooks"]["Stop"]  # type: ignore[index]
    assert config.stat().st_mode & 0o777 == 0o600
    again = run("install", "codex")
    assert again.stdout == (
        f"up to date: the /good hook in {hooks}\nup to date: notify in {config}\n"
        + _skills("up to date:")
        + NEXT
    )
    result = run("uninstall", "codex")
    assert result.stdout == (
        f"removed the /good hook from {hooks}\nremoved notify from {config}\n"
        + _skills("removed")
    )
    assert config.read_text() == CONFIG
    assert json.loads(hooks.read_text()) == HOOKS
    assert run("uninstall", "codex").stdout == ""  # nothing of machine's is left


def test_install_codex_from_nothing_leaves_nothing(project: Path, run: Run) -> None:
    hooks, config = _files()
    assert run("install", "codex").exit_code == 0
    assert config.read_text() == NOTIFY
    assert json.loads(hooks.read_text()) == {
        "hooks": {"UserPromptSubmit": [{"hooks": [OURS]}]}
    }
    skill = Path.home() / ".agents" / "skills" / "machine-tagging" / "SKILL.md"
    text = skill.read_text()
    assert text.startswith("---\nname: machine-tagging\n")
    assert f"\n---\n{codex_install.SKILL_MARKER}\n" in text
    assert run("uninstall", "codex").exit_code == 0
    assert not hooks.exists() and not config.exists()
    assert not (Path.home() / ".agents").exists()


def test_a_users_notify_program_is_left_alone(project: Path, run: Run) -> None:
    hooks, config = _files()
    config.parent.mkdir(parents=True)
    mine = 'notify = ["notify-send", "Codex"]\nmodel = "o3"\n'
    config.write_text(mine)
    result = run("install", "codex")
    assert result.exit_code == 0, result.output
    assert result.stderr.endswith(
        f"left {config} as it is: a notify program is already set there\n"
    )
    assert config.read_text() == mine
    assert hooks.exists()  # the hook does not need notify
    assert run("uninstall", "codex").exit_code == 0
    assert config.read_text() == mine


def test_a_broken_config_is_refused_before_anything_is_written(
    project: Path, run: Run
) -> None:
    hooks, config = _files()
    config.parent.mkdir(parents=True)
    config.write_text('model = "o3\n')
    result = run("install", "codex")
    assert result.exit_code != 0
    assert result.stderr.startswith(f"Error: {config} is not valid TOML (")
    assert result.stderr.endswith("; fix it, then install again\n")
    assert "Traceback" not in result.output
    assert not hooks.exists()
    assert config.read_text() == 'model = "o3\n'
    hooks.write_text("{not json")
    config.unlink()
    result = run("install", "codex")
    assert result.exit_code != 0
    assert result.stderr.endswith(
        f"{hooks} is not valid JSON; fix it or move it away, then install again\n"
    )
    assert not config.exists()


def test_install_codex_again_from_another_python_replaces_its_hook(
    project: Path, run: Run
) -> None:
    hooks, config = _files()
    assert run("install", "codex").exit_code == 0
    old = hooks.read_text().replace(sys.executable, "/old/venv/bin/python")
    hooks.write_text(old)
    config.write_text(config.read_text().replace(sys.executable, "/old/bin/python"))
    result = run("install", "codex")
    assert result.stdout == (
        f"updated the /good hook in {hooks}\nupdated notify in {config}\n"
        + _skills("up to date:")
        + NEXT
    )
    assert json.loads(hooks.read_text()) == {
        "hooks": {"UserPromptSubmit": [{"hooks": [OURS]}]}
    }
    assert config.read_text() == NOTIFY


def test_install_codex_in_the_project_writes_only_there(
    project: Path, run: Run
) -> None:
    result = run("install", "codex", "--project")
    assert result.exit_code == 0, result.output
    hooks = project / ".codex" / "hooks.json"
    assert result.stdout == (
        f"installed the /good hook in {hooks}\n" + _skills("installed", project) + NEXT
    )
    assert json.loads(hooks.read_text()) == {
        "hooks": {"UserPromptSubmit": [{"hooks": [OURS]}]}
    }
    assert not codex.home().exists()  # notify is the user's: not touched
    assert not (Path.home() / ".agents").exists()
    result = run("uninstall", "codex", "--project")
    assert result.stdout == (
        f"removed the /good hook from {hooks}\n" + _skills("removed", project)
    )
    assert not (project / ".codex").exists()
    assert not (project / ".agents").exists()


def test_install_codex_never_overwrites_a_users_skill(project: Path, run: Run) -> None:
    mine = project / ".agents" / "skills" / "machine-tagging" / "SKILL.md"
    mine.parent.mkdir(parents=True)
    mine.write_text("---\nname: machine-tagging\ndescription: mine\n---\nMine.\n")
    result = run("install", "codex", "--project")
    assert result.exit_code != 0
    assert result.stderr.endswith(
        f"{mine} exists and was not written by machine; move it away first\n"
    )
    assert not (project / ".codex").exists()  # refused before writing anything
    assert run("uninstall", "codex", "--project").exit_code == 0
    assert mine.read_text().endswith("Mine.\n")
