"""Letta's four session forms: their names and how each is recognized.

Kept apart from the readers so sessions/formats.py can recognize a Letta
file without importing the Letta package (which sniffs files through it).
"""

from __future__ import annotations

from typing import Any

from machine_git.sessions.letta.agent_file import looks_like_agent_file
from machine_git.sessions.letta.history import looks_like_history
from machine_git.sessions.letta.local import looks_like_local
from machine_git.sessions.letta.transcript import looks_like_transcript

# The formats' names, as sessions/formats.py lists them.
AGENT_FILE = "letta-agent-file"
HISTORY = "letta-history"
LOCAL = "letta-local"
TRANSCRIPT = "letta-transcript"
# In the order they are tried: the documents' tests first, as sniff asks them.
_TESTS = (
    (AGENT_FILE, looks_like_agent_file),
    (HISTORY, looks_like_history),
    (LOCAL, looks_like_local),
    (TRANSCRIPT, looks_like_transcript),
)


def recognize(value: Any) -> str | None:
    """The Letta form a parsed line or a whole document shows (SessionReader)."""
    for name, test in _TESTS:
        if test(value):
            return name
    return None
