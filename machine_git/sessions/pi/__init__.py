"""Pi coding agent sessions (npm @mariozechner/pi-coding-agent).

A session is JSONL: a header line, then entries that form a tree through
``id``/``parentId``. Branching writes new children under an older entry in the
same file, so file order is not conversation order: the active branch is the
chain of parents from the leaf (the last entry, or ``--entry``). Versions 1 and
2 are migrated in memory the way pi migrates them (hosts.md §2.2).

``find`` is where Pi keeps a project's sessions, ``turn`` reads one;
this package is the host's SessionReader.
"""

from __future__ import annotations

from machine_git.sessions.pi.find import agent_dir
from machine_git.sessions.pi.find import encode_cwd
from machine_git.sessions.pi.find import find_session
from machine_git.sessions.pi.find import session_files
from machine_git.sessions.pi.turn import CONTEXT_ENTRY
from machine_git.sessions.pi.turn import HOST
from machine_git.sessions.pi.turn import KNOWN_TYPES
from machine_git.sessions.pi.turn import model_of
from machine_git.sessions.pi.turn import read_turn
from machine_git.sessions.pi.turn import recognize

__all__ = [
    "CONTEXT_ENTRY",
    "HOST",
    "KNOWN_TYPES",
    "agent_dir",
    "encode_cwd",
    "find_session",
    "model_of",
    "read_turn",
    "recognize",
    "session_files",
]
