"""Reading OpenCode's database: read-only, the conversation tables only.

The database is opened with ``mode=ro`` (SQLite refuses every write) and
``query_only``; queries name ``session``, ``message`` and ``part`` and nothing
else, so the ``account`` and ``credential`` tables (access tokens) are never
read. A busy database is waited on for a few seconds, never forever.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from typing import NamedTuple

from machine_git.core import jsonio
from machine_git.core.errors import SessionError

BUSY_SECONDS = 5.0
# The columns the reader needs, per table: a database without them is not
# OpenCode's (or is of a version whose layout this reader does not know).
TABLES = {
    "session": ("id", "parent_id", "directory", "time_created", "time_updated"),
    "message": ("id", "session_id", "time_created", "data"),
    "part": ("id", "message_id", "session_id", "data"),
}


class Session(NamedTuple):
    id: str
    directory: str
    updated: int


class Message(NamedTuple):
    id: str
    created: int
    data: dict[str, Any]
    parts: list[dict[str, Any]]


@contextmanager
def connect(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the database at ``path`` (SessionError if not)."""
    uri = f"{path.absolute().as_uri()}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_SECONDS)
    except sqlite3.Error as e:
        raise SessionError(f"{path}: cannot open the OpenCode database ({e})") from None
    try:
        conn.execute("PRAGMA query_only = ON")
        yield conn
    except sqlite3.Error as e:
        raise SessionError(f"{path}: cannot read the OpenCode database ({e})") from None
    finally:
        conn.close()


def is_opencode(conn: sqlite3.Connection) -> bool:
    """True if the database has OpenCode's conversation tables."""
    for table, wanted in TABLES.items():
        columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        if not set(wanted) <= columns:
            return False
    return True


def newest_session(conn: sqlite3.Connection) -> Session | None:
    """The session updated last, not counting subagents' sessions."""
    row = conn.execute(
        "SELECT id, directory, time_updated FROM session WHERE parent_id IS NULL "
        "ORDER BY time_updated DESC, id DESC LIMIT 1"
    ).fetchone()
    return Session(*row) if row else None


def session(conn: sqlite3.Connection, session_id: str) -> Session | None:
    row = conn.execute(
        "SELECT id, directory, time_updated FROM session WHERE id = ?", (session_id,)
    ).fetchone()
    return Session(*row) if row else None


def session_of_message(conn: sqlite3.Connection, message_id: str) -> str | None:
    row = conn.execute(
        "SELECT session_id FROM message WHERE id = ?", (message_id,)
    ).fetchone()
    return str(row[0]) if row else None


def messages(
    conn: sqlite3.Connection, session_id: str, unreadable: list[str]
) -> list[Message]:
    """The session's messages in order, each with its parts in order.

    OpenCode's ids grow with time, so id order is the order written. A row
    whose ``data`` is not a JSON object is left out and named in ``unreadable``.
    """
    parts: dict[str, list[dict[str, Any]]] = {}
    for part_id, message_id, data in conn.execute(
        "SELECT id, message_id, data FROM part WHERE session_id = ? ORDER BY id",
        (session_id,),
    ):
        value = _object(data)
        if value is None:
            unreadable.append(f"part {part_id}")
            continue
        parts.setdefault(str(message_id), []).append(value)
    found: list[Message] = []
    for message_id, created, data in conn.execute(
        "SELECT id, time_created, data FROM message WHERE session_id = ? "
        "ORDER BY time_created, id",
        (session_id,),
    ):
        value = _object(data)
        if value is None:
            unreadable.append(f"message {message_id}")
            continue
        kept = parts.get(str(message_id), [])
        found.append(Message(str(message_id), created, value, kept))
    return found


def _object(data: Any) -> dict[str, Any] | None:
    if isinstance(data, bytes):
        data = data.decode("utf-8", errors="replace")
    if not isinstance(data, str):
        return None
    try:
        value = jsonio.loads(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
