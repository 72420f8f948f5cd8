"""Where Gemini CLI keeps a project's sessions: ``~/.gemini/tmp/<name>/chats/``.

Each project folder under ``tmp`` holds a ``.project_root`` file naming the
project's path (the folder's own name is a short, lossy one), so the sessions
of a project are those of the folders whose root is the project or inside it.
"""

from __future__ import annotations

from pathlib import Path

from machine_git.core.errors import NoSessionError
from machine_git.sessions import files

ROOT_FILE = ".project_root"


def gemini_dir() -> Path:
    """``~/.gemini``."""
    return Path.home() / ".gemini"


def project_root(folder: Path) -> str | None:
    """The project path a ``tmp/<name>`` folder belongs to, if it says."""
    try:
        with (folder / ROOT_FILE).open("rb") as f:
            text = f.read(4096).decode("utf-8", errors="replace").strip()
    except OSError:
        return None
    return text or None


def find_session(project: Path) -> Path:
    """The newest Gemini CLI session of ``project`` or of a folder inside it."""
    root = gemini_dir() / "tmp"
    candidates: list[Path] = []
    try:
        folders = [p for p in root.iterdir() if p.is_dir()]
    except OSError:
        folders = []
    for folder in folders:
        if files.inside(project_root(folder), project):
            candidates += _sessions(folder / "chats")
    found = files.newest(candidates)
    if found is None:
        raise NoSessionError(
            f"no Gemini CLI session for {project} in {root} (run gemini in the "
            "project first, or pass --session PATH)"
        )
    return found


def _sessions(folder: Path) -> list[Path]:
    try:
        return [
            p
            for p in folder.iterdir()
            if p.name.startswith("session-") and p.suffix == ".jsonl" and p.is_file()
        ]
    except OSError:
        return []
