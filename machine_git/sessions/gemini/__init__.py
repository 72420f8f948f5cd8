"""Gemini CLI sessions: ``~/.gemini/tmp/<project>/chats/session-*.jsonl``.

Gemini CLI (0.61) writes a header line (``sessionId``, ``projectHash``), then
each message as a line (``id``, ``type`` user | gemini | info | error), a
message written again with the same ``id`` when it changes (its tool calls and
their results arrive so), and ``{"$set": {...}}`` lines that replace fields;
``$set`` of ``messages`` replaces the whole list (a resume rewrites it, a
failed request takes its prompt back out). The conversation is what is left
at the end of the file, read in that order.

``find`` is where Gemini CLI keeps a project's sessions, ``turn`` reads one;
this package is the host's SessionReader.
"""

from __future__ import annotations

from machine_git.sessions.gemini.find import find_session
from machine_git.sessions.gemini.find import gemini_dir
from machine_git.sessions.gemini.turn import HOST
from machine_git.sessions.gemini.turn import read_turn
from machine_git.sessions.gemini.turn import recognize

__all__ = ["HOST", "find_session", "gemini_dir", "read_turn", "recognize"]
