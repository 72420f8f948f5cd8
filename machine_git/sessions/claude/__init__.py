"""Claude Code sessions: ``~/.claude/projects/<encoded cwd>/<sessionId>.jsonl``.

``$CLAUDE_CONFIG_DIR`` replaces ``~/.claude``. Each line is a row; ``user`` and
``assistant`` rows carry an Anthropic API ``message``, the rest (summaries,
snapshots, system notices, progress) are the harness's own bookkeeping. Rows
form a tree through ``uuid``/``parentUuid`` (a rewind writes a new branch in the
same file), so the turn is read on the chain of parents from the last row, the
way Pi's active branch is. One API response is written as several assistant
rows sharing ``message.id``, one content block each: they are grouped back.
Subagent rows (``isSidechain: true``) and harness noise (local command echoes,
caveats, meta rows) are not the user's conversation and are dropped.

``find`` is where Claude Code keeps a project's sessions, ``turn`` reads
one; this package is the host's SessionReader.
"""

from __future__ import annotations

from machine_git.sessions.claude.find import config_dir
from machine_git.sessions.claude.find import encode_cwd
from machine_git.sessions.claude.find import find_session
from machine_git.sessions.claude.turn import BOOKKEEPING
from machine_git.sessions.claude.turn import HOST
from machine_git.sessions.claude.turn import NOISE_PREFIXES
from machine_git.sessions.claude.turn import SOURCE
from machine_git.sessions.claude.turn import read_turn
from machine_git.sessions.claude.turn import recognize

__all__ = [
    "BOOKKEEPING",
    "HOST",
    "NOISE_PREFIXES",
    "SOURCE",
    "config_dir",
    "encode_cwd",
    "find_session",
    "read_turn",
    "recognize",
]
