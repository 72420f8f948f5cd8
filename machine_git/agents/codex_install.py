"""machine inside Codex: a prompt hook for ``/good``, ``/bad``, ``/machine``; notify.

What Codex 0.171 allows, and what machine does with it:

- Custom prompts (``$CODEX_HOME/prompts/*.md``, ``/prompts:name``) are gone:
  Codex removed them in 0.117.0 (openai/codex#15941), and ``codex exec``
  never expanded them. Nothing is written there.
- Hooks (``hooks.json`` beside a config layer: ``$CODEX_HOME/hooks.json``, or
  ``<project>/.codex/hooks.json`` for a trusted project) run a command at
  ``UserPromptSubmit`` with the prompt and the rollout path; the command may
  block the prompt with a reason Codex shows to the user. machine adds one
  such handler (``codex_hook prompt``), so ``/good`` typed as the prompt tags
  the turn before it without a model request. Codex runs a hook only once it
  has been reviewed and trusted (``/hooks`` in Codex; trust is kept as a hash
  of the hook's content in Codex's own state, which machine does not write).
- ``notify`` in ``$CODEX_HOME/config.toml`` (one program for the whole user;
  Codex 0.171 does not run one from a project's ``.codex/config.toml``) gets
  every finished turn. machine sets it to ``codex_hook notify``, which records
  the turn when ``machine auto`` is on, unless a notify program is set already.

- Skills (``SKILL.md`` folders in ``~/.agents/skills`` or
  ``<project>/.agents/skills``) replaced custom prompts. Codex lists each
  skill's name and description to the model, which reads one when a task
  matches (or when typed as ``$name``). machine copies its four skills there,
  marked, as it does for Letta Code; uninstall removes the marked copies.

``hooks.json`` is edited as JSON: machine's handler is the one whose command
runs ``-m machine_git.agents.codex_hook prompt``; everything else in the file
stays as it was, and uninstall removes only that handler (and the file, if
nothing else is left). ``config.toml`` is edited as text, never rewritten:
install puts two lines at its top (a marker comment and ``notify = [...]``;
top-level keys must come before any table), uninstall removes exactly those
two lines, so the user's formatting and comments survive.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import sys
import tomllib
from pathlib import Path
from typing import Any

from machine_git.agents import install
from machine_git.agents.install import Outcome
from machine_git.core.errors import InstallError
from machine_git.sessions import codex as codex_sessions

HOOK_MODULE = "machine_git.agents.codex_hook"
EVENT = "UserPromptSubmit"
NOTIFY_MARKER = "# machine-generated: notify. `machine uninstall codex` removes it."
SKILL_MARKER = (
    "<!-- machine-generated: skill. `machine uninstall codex` removes it. -->"
)
HOOK_TIMEOUT = 180  # seconds: above the hook's own 120 s limit for machine


def hooks_path(project: Path | None = None) -> Path:
    """``$CODEX_HOME/hooks.json`` or ``<project>/.codex/hooks.json``."""
    if project is not None:
        return project / ".codex" / "hooks.json"
    return codex_sessions.home() / "hooks.json"


def config_path() -> Path:
    """``$CODEX_HOME/config.toml`` (Codex reads ``notify`` from the user's only)."""
    return codex_sessions.home() / "config.toml"


def hook_argv(what: str) -> list[str]:
    """The command Codex runs for ``what`` (``prompt`` or ``notify``)."""
    return [sys.executable, "-m", HOOK_MODULE, what]


def hook_command() -> str:
    return shlex.join(hook_argv("prompt"))


def notify_line() -> str:
    return f"notify = {json.dumps(hook_argv('notify'))}"


def skills_dir(project: Path | None = None) -> Path:
    """Where Codex finds skills: ``~/.agents/skills``, ``<project>/.agents/skills``."""
    return (project or Path.home()) / ".agents" / "skills"


def install_codex(project: Path | None = None) -> list[Outcome]:
    """Add the prompt hook and machine's skills (user or project scope) and, for
    the user, notify."""
    path = hooks_path(project)
    hooks = _read_hooks(path)  # refuse a broken file before writing anything
    config = None if project is not None else _read_config(config_path())
    skills = {
        skills_dir(project) / name / install.SKILL_FILE: text
        for name, text in install.skills().items()
    }
    for target in skills:
        install._refuse_foreign(target, _our_skill)
    done = [_add_hook(path, hooks)]
    if config is not None:
        done.append(_add_notify(config_path(), config))
    for target, text in skills.items():
        marked = install.marked_skill(text, SKILL_MARKER)
        done.append(install._place(target, marked, _our_skill))
    done += [_remove_skill(p) for p in _copied_skills(project) if p not in skills]
    return done


def uninstall_codex(project: Path | None = None) -> list[Outcome]:
    """Remove machine's hook handler, its skills and, for the user, its notify
    lines; folders machine's files were the last thing in go too."""
    path = hooks_path(project)
    done = [_remove_hook(path)]
    if project is None:
        done.append(_remove_notify(config_path()))
    elif done[0].action == "removed":
        install._remove_empty(path.parent, project)
    done += [_remove_skill(p) for p in _copied_skills(project)]
    install._remove_empty(skills_dir(project), project or Path.home())
    return done


# -- skills ----------------------------------------------------------------------


def _our_skill(path: Path) -> bool:
    try:
        head = path.read_text(errors="replace")[:8192]
    except OSError:
        return False
    return f"\n---\n{SKILL_MARKER}\n" in head


def _copied_skills(project: Path | None) -> list[Path]:
    try:
        children = sorted(skills_dir(project).iterdir())
    except OSError:
        return []
    found = [c / install.SKILL_FILE for c in children]
    return [p for p in found if _our_skill(p)]


def _remove_skill(path: Path) -> Outcome:
    done = install._remove(path, _our_skill)
    with contextlib.suppress(OSError):
        path.parent.rmdir()  # only if machine's file was all it held
    return done


# -- hooks.json ------------------------------------------------------------------


def _read_hooks(path: Path) -> dict[str, Any]:
    value = install.read_user_json(path)
    if not isinstance(value, dict) or not isinstance(value.get("hooks", {}), dict):
        raise InstallError(f"{path} has no 'hooks' object; fix it first")
    return value


def _ours(handler: Any) -> bool:
    if not isinstance(handler, dict) or handler.get("type") != "command":
        return False
    command = handler.get("command")
    return isinstance(command, str) and command.endswith(f"-m {HOOK_MODULE} prompt")


def _handler() -> dict[str, Any]:
    return {
        "type": "command",
        "command": hook_command(),
        "timeout": HOOK_TIMEOUT,  # no statusMessage: ordinary prompts show nothing
    }


def _without_ours(groups: Any) -> tuple[list[Any], bool]:
    """The event's matcher groups without machine's handler (and groups it emptied)."""
    if not isinstance(groups, list):
        return groups, False
    kept: list[Any] = []
    found = False
    for group in groups:
        handlers = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(handlers, list) or not any(map(_ours, handlers)):
            kept.append(group)
            continue
        found = True
        rest = [h for h in handlers if not _ours(h)]
        if rest:
            kept.append({**group, "hooks": rest})
    return kept, found


def _add_hook(path: Path, value: dict[str, Any]) -> Outcome:
    hooks: dict[str, Any] = value.setdefault("hooks", {})
    groups = hooks.get(EVENT, [])
    if not isinstance(groups, list):
        raise InstallError(f"{path}: hooks.{EVENT} is not a list; fix it first")
    wanted = {"hooks": [_handler()]}
    if wanted in groups:
        return Outcome(path, "unchanged")
    kept, found = _without_ours(groups)
    hooks[EVENT] = [*kept, wanted]
    install._write(path, (json.dumps(value, indent=2) + "\n").encode())
    return Outcome(path, "updated" if found else "installed")


def _remove_hook(path: Path) -> Outcome:
    value = _read_hooks(path)
    hooks = value.get("hooks", {})
    kept, found = _without_ours(hooks.get(EVENT))
    if not found:
        return Outcome(path, "absent")
    if kept:
        hooks[EVENT] = kept
    else:
        del hooks[EVENT]
    if value == {"hooks": {}}:
        try:
            path.unlink()  # nothing of the user's was in it
        except OSError as e:
            raise InstallError(f"cannot remove {path}: {e.strerror}") from None
    else:
        install._write(path, (json.dumps(value, indent=2) + "\n").encode())
    return Outcome(path, "removed")


# -- config.toml -----------------------------------------------------------------


def _read_config(path: Path) -> str:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return ""
    except OSError as e:
        raise InstallError(f"cannot read {path}: {e.strerror}") from None
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InstallError(
            f"{path} is not valid TOML ({e}); fix it, then install again"
        ) from None
    return text


def _our_lines(lines: list[str]) -> int | None:
    """Where machine's marker line is, when the notify line after it is machine's."""
    for i, line in enumerate(lines[:-1]):
        if line.rstrip("\r\n") == NOTIFY_MARKER:
            after = lines[i + 1].rstrip("\r\n")
            if after.startswith("notify = ") and after.endswith(
                f'"-m", "{HOOK_MODULE}", "notify"]'
            ):
                return i
    return None


def _add_notify(path: Path, text: str) -> Outcome:
    lines = text.splitlines(keepends=True)
    at = _our_lines(lines)
    if at is not None:
        if lines[at + 1].rstrip("\r\n") == notify_line():
            return Outcome(path, "unchanged")
        lines[at + 1] = notify_line() + "\n"  # another Python installed it before
        install._write(path, "".join(lines).encode())
        return Outcome(path, "updated")
    if "notify" in tomllib.loads(text):
        return Outcome(path, "skipped", "a notify program is already set there")
    # At the very top: a top-level key after a [table] would belong to the table.
    install._write(path, f"{NOTIFY_MARKER}\n{notify_line()}\n{text}".encode())
    return Outcome(path, "installed")


def _remove_notify(path: Path) -> Outcome:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return Outcome(path, "absent")
    except OSError as e:
        raise InstallError(f"cannot read {path}: {e.strerror}") from None
    lines = text.splitlines(keepends=True)
    at = _our_lines(lines)
    if at is None:
        return Outcome(path, "absent")
    rest = "".join(lines[:at] + lines[at + 2 :])
    if rest.strip():
        install._write(path, rest.encode())
    else:
        try:
            path.unlink()  # machine's lines were all it held
        except OSError as e:
            raise InstallError(f"cannot remove {path}: {e.strerror}") from None
    return Outcome(path, "removed")
