"""OpenCode sessions: rows of one SQLite database, ``opencode.db``.

OpenCode (1.18) keeps every session of every project in one database
(``~/.local/share/opencode/opencode.db``): a
``session`` row (its ``directory``, ``parent_id`` for a subagent's session),
its ``message`` rows (``data``: JSON with ``role`` user | assistant) and each
message's ``part`` rows (``data``: text, reasoning, tool with its call and
result, step markers). The same database holds ``account`` and ``credential``
tables with access tokens: the reader opens it read-only and queries the
conversation tables only.

``find`` is where OpenCode keeps it, ``db`` reads it, ``turn`` makes a Turn of
one session; this package is the host's SessionReader.
"""

from __future__ import annotations

from machine_git.sessions.opencode.find import database
from machine_git.sessions.opencode.find import find_session
from machine_git.sessions.opencode.turn import HOST
from machine_git.sessions.opencode.turn import read_turn
from machine_git.sessions.opencode.turn import recognize

__all__ = ["HOST", "database", "find_session", "read_turn", "recognize"]
