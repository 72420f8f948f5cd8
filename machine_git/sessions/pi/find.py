"""Where Pi keeps a project's sessions: one folder per working directory.

The folder name is Pi's encoding of the directory (lossy), so sessions
started in a subfolder are matched by the cwd in their header line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from machine_git.core.errors import NoSessionError
from machine_git.sessions import files


def agent_dir() -> Path:
    """``$PI_CODING_AGENT_DIR`` or ``~/.pi/agent``."""
    env = os.environ.get("PI_CODING_AGENT_DIR")
    return Path(env).expanduser() if env else Path.home() / ".pi" / "agent"


def encode_cwd(cwd: Path) -> str:
    """Pi's folder name for a working directory (session-manager.js)."""
    text = str(cwd)
    text = re.sub(r"^[/\\]", "", text)
    return "--" + re.sub(r"[/\\:]", "-", text) + "--"


def find_session(project: Path) -> Path:
    """The newest Pi session of ``project`` or of a folder inside it."""
    where, candidates = _candidates(project)
    if not candidates:
        raise NoSessionError(
            f"no Pi session for {project} in {where} "
            "(run pi in the project first, set PI_CODING_AGENT_DIR, "
            "or pass --session PATH)"
        )
    return max(candidates)[1]


def session_files(project: Path) -> list[Path]:
    """Every Pi session file of ``project`` (and its subfolders), oldest first."""
    return [path for _, path in sorted(_candidates(project)[1])]


def _candidates(project: Path) -> tuple[Path, list[tuple[float, Path]]]:
    """Where the project's sessions live, and each session file with its mtime."""
    override = os.environ.get("PI_CODING_AGENT_SESSION_DIR")
    if override:
        folders = [Path(override).expanduser()]
        where = folders[0]
    else:
        root = agent_dir() / "sessions"
        exact = encode_cwd(project)
        where = root / exact
        folders = [where]
        if root.is_dir():
            # Sessions started in a subfolder of the project live in their own
            # folder; the name is lossy, so the header's cwd decides.
            stem = exact[:-2] + "-"
            folders += [
                p for p in root.iterdir() if p.name.startswith(stem) and p.is_dir()
            ]
    candidates: list[tuple[float, Path]] = []
    for folder in folders:
        for path in _jsonl_files(folder):
            if folder != where and not files.inside(_header_cwd(path), project):
                continue
            candidates.append((path.stat().st_mtime, path))
    return where, candidates


def _jsonl_files(folder: Path) -> Iterable[Path]:
    try:
        return [p for p in folder.iterdir() if p.suffix == ".jsonl" and p.is_file()]
    except OSError:
        return []


def _header_cwd(path: Path) -> Any:
    header = files.first_object(path)
    return header.get("cwd") if header is not None else None
