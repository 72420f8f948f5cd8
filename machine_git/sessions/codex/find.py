"""Where Codex keeps sessions: ``<home>/sessions/YYYY/MM/DD/rollout-*.jsonl``.

``$CODEX_HOME`` replaces ``~/.codex``. Rollouts are filed by date, not by
project: the newest whose first line's cwd is the project (or inside it) is
the one, so the usual case reads one first line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from machine_git.core.errors import NoSessionError
from machine_git.sessions import files
from machine_git.sessions.codex.turn import INJECTED_PREFIXES


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
    # A session with no prompt of the user's (opened and left, or holding only
    # a prompt a hook blocked, as machine's /good hook does) is passed over.
    empty: Path | None = None
    for _, path in sorted(rollouts, reverse=True):
        first = files.first_object(path)
        payload = first.get("payload") if first else None
        if isinstance(payload, dict) and files.inside(payload.get("cwd"), project):
            if has_prompt(path):
                return path
            empty = empty or path
    if empty is not None:
        return empty  # the reader says why it holds no turn
    raise NoSessionError(
        f"no Codex session for {project} in {root} (run codex in the project "
        "first, set CODEX_HOME, or pass --session PATH)"
    )


def has_prompt(rollout: Path) -> bool:
    """Whether a rollout holds a prompt of the user's, not only injected context."""
    try:
        lines = rollout.read_bytes().splitlines()
    except OSError:
        return False
    for line in lines:
        if b'"user' not in line:  # "role":"user" and "user_message": cheap first
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        payload = value.get("payload") if isinstance(value, dict) else None
        if not isinstance(payload, dict):
            continue
        if payload.get("type") == "user_message":  # older Codex writes this too
            return True
        if payload.get("type") != "message" or payload.get("role") != "user":
            continue
        parts = payload.get("content")
        text = "".join(
            str(c.get("text", ""))
            for c in (parts if isinstance(parts, list) else [])
            if isinstance(c, dict)
        ).lstrip()
        if text and not text.startswith(INJECTED_PREFIXES):
            return True
    return False


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
