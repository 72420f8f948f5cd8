"""Where Claude Code keeps a project's sessions: ``<config>/projects/<encoded cwd>/``.

``$CLAUDE_CONFIG_DIR`` replaces ``~/.claude``. The folder name is lossy (a
sibling "proj-x" looks like a subfolder "proj/x"), so sessions in other
folders are matched by the cwd their rows record; subagents' files are not
sessions of their own.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from machine_git.core.errors import NoSessionError
from machine_git.sessions import files
from machine_git.sessions.values import string


def config_dir() -> Path:
    """``$CLAUDE_CONFIG_DIR`` or ``~/.claude``."""
    env = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(env).expanduser() if env else Path.home() / ".claude"


def encode_cwd(cwd: Path) -> str:
    """Claude Code's folder name for a working directory (lossy)."""
    return re.sub(r"[^a-zA-Z0-9]", "-", str(cwd))


def find_session(project: Path) -> Path:
    """The newest Claude Code session of ``project`` or of a folder inside it."""
    root = config_dir() / "projects"
    exact = encode_cwd(project)
    where = root / exact
    candidates = _sessions(where)
    try:
        others = [p for p in root.iterdir() if p.name.startswith(exact + "-")]
    except OSError:
        others = []
    for folder in others:
        # The name is lossy: a sibling "proj-x" looks like a subfolder "proj/x".
        candidates += [p for p in _sessions(folder) if files.inside(_cwd(p), project)]
    found = files.newest(candidates)
    if found is None:
        raise NoSessionError(
            f"no Claude Code session for {project} in {where} (run claude in the "
            "project first, set CLAUDE_CONFIG_DIR, or pass --session PATH)"
        )
    return found


def _sessions(folder: Path) -> list[Path]:
    try:
        return [
            p
            for p in folder.iterdir()
            if p.suffix == ".jsonl" and not p.name.startswith("agent-") and p.is_file()
        ]
    except OSError:
        return []


def _cwd(path: Path) -> str | None:
    for row in files.head_objects(path):
        cwd = string(row.get("cwd"))
        if cwd:
            return cwd
    return None
