"""Where Codex keeps sessions: ``<home>/sessions/YYYY/MM/DD/rollout-*.jsonl``.

``$CODEX_HOME`` replaces ``~/.codex``. Rollouts are filed by date, not by
project: the newest whose first line's cwd is the project (or inside it) is
the one, so the usual case reads one first line.
"""

from __future__ import annotations

import os
from pathlib import Path

from machine_git.core.errors import NoSessionError
from machine_git.sessions import files


def home() -> Path:
    """``$CODEX_HOME`` or ``~/.codex``."""
    env = os.environ.get("CODEX_HOME")
    return Path(env).expanduser() if env else Path.home() / ".codex"


def find_session(project: Path) -> Path:
    """The newest Codex rollout whose session started in ``project`` (or inside)."""
    root = home() / "sessions"
    rollouts: list[tuple[float, Path]] = []
    for path in _rollouts(root):
        stamp = files.mtime(path)
        if stamp is not None:
            rollouts.append((stamp, path))
    # Newest first, so the usual case reads one first line, not all of them.
    for _, path in sorted(rollouts, reverse=True):
        first = files.first_object(path)
        payload = first.get("payload") if first else None
        if isinstance(payload, dict) and files.inside(payload.get("cwd"), project):
            return path
    raise NoSessionError(
        f"no Codex session for {project} in {root} (run codex in the project "
        "first, set CODEX_HOME, or pass --session PATH)"
    )


def _rollouts(root: Path) -> list[Path]:
    found: list[Path] = []
    try:
        for dirpath, _, names in os.walk(root):
            found += [
                Path(dirpath) / n
                for n in names
                if n.startswith("rollout-") and n.endswith(".jsonl")
            ]
    except OSError:
        return found
    return found
