"""Codex CLI sessions: ``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``.

``$CODEX_HOME`` replaces ``~/.codex``. Every line is
``{"timestamp", "type", "payload"}``: ``session_meta`` (id, cwd, git), one
``turn_context`` per turn (model), ``response_item`` (what the model saw and
said: messages, reasoning, tool calls and their outputs) and ``event_msg``
(the UI's stream, which repeats the messages). Messages are read from
``response_item`` only; reasoning from the ``agent_reasoning`` events (the
``response_item`` copy is encrypted), falling back to its summary when a file
has no such events. Codex injects context (AGENTS.md, the environment) as user
messages; those are not the user speaking. Lines have no ids: a line's id is
``L<line number>``, stable because the file only grows.

``find`` is where Codex keeps sessions, ``turn`` reads one; this package
is the host's SessionReader.
"""

from __future__ import annotations

from machine_git.sessions.codex.find import find_session
from machine_git.sessions.codex.find import home
from machine_git.sessions.codex.turn import HOST
from machine_git.sessions.codex.turn import INJECTED_PREFIXES
from machine_git.sessions.codex.turn import KNOWN_TYPES
from machine_git.sessions.codex.turn import SOURCE
from machine_git.sessions.codex.turn import read_turn
from machine_git.sessions.codex.turn import recognize

__all__ = [
    "HOST",
    "INJECTED_PREFIXES",
    "KNOWN_TYPES",
    "SOURCE",
    "find_session",
    "home",
    "read_turn",
    "recognize",
]
