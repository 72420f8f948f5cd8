"""Where OpenCode keeps its sessions: one database for every project.

``$XDG_DATA_HOME/opencode/opencode.db`` (``~/.local/share/opencode/opencode.db``
when XDG_DATA_HOME is not set). The session read is the database's newest
one (subagents' sessions aside), so a project's session is found only when
that newest session was run in the project or a folder inside it.
"""

from __future__ import annotations

import os
from pathlib import Path

from machine_git.core.errors import NoSessionError
from machine_git.sessions import files
from machine_git.sessions.opencode import db

NAME = "opencode.db"


def database() -> Path:
    """The path of OpenCode's database (it may not exist)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "opencode" / NAME


def find_session(project: Path) -> Path:
    """OpenCode's database, if its newest session is ``project``'s (SessionReader)."""
    path = database()
    if not path.is_file():
        raise NoSessionError(
            f"no OpenCode session for {project} ({path} does not exist; run "
            "opencode in the project first, or pass --session PATH)"
        )
    with db.connect(path) as conn:
        newest = db.newest_session(conn) if db.is_opencode(conn) else None
    if newest is None:
        raise NoSessionError(f"no OpenCode session for {project} in {path}")
    if not files.inside(newest.directory, project):
        raise NoSessionError(
            f"the newest OpenCode session in {path} was run in {newest.directory}, "
            f"not in {project} (pass --session {path} to tag it anyway)"
        )
    return path
