"""Letta and Letta Code sessions, in the four forms they reach this machine.

One module a form, each with its test (``looks_like_*``) and its reader:

- ``local``: Letta Code's local backend (``letta --backend local``), a
  conversation's ``messages.jsonl`` of pi-ai messages (hosts.md §3.4);
- ``transcript``: Letta Code's client-side ``transcript.jsonl``;
- ``history``: a Letta API message history saved as JSON, what a mod's
  ``getHistory()`` or the messages API returns (§3.2);
- ``agent_file``: a Letta Agent File (``.af``), an exported agent with its
  ``messages`` (§3.6).

``find`` is where Letta Code keeps a project's sessions; ``common`` holds what
the readers share. This module is the host's SessionReader.
"""

from __future__ import annotations

from pathlib import Path

from machine_git.core.errors import SessionError
from machine_git.sessions import ReadReport
from machine_git.sessions import Turn
from machine_git.sessions import formats
from machine_git.sessions.letta.agent_file import looks_like_agent_file
from machine_git.sessions.letta.agent_file import read_agent_file
from machine_git.sessions.letta.common import HOST
from machine_git.sessions.letta.find import backend_dir
from machine_git.sessions.letta.find import conversation_folder
from machine_git.sessions.letta.find import find_session
from machine_git.sessions.letta.find import transcript_root
from machine_git.sessions.letta.forms import AGENT_FILE
from machine_git.sessions.letta.forms import HISTORY
from machine_git.sessions.letta.forms import LOCAL
from machine_git.sessions.letta.forms import TRANSCRIPT
from machine_git.sessions.letta.forms import recognize as recognize
from machine_git.sessions.letta.history import looks_like_history
from machine_git.sessions.letta.history import read_history
from machine_git.sessions.letta.local import looks_like_local
from machine_git.sessions.letta.local import read_local
from machine_git.sessions.letta.transcript import looks_like_transcript
from machine_git.sessions.letta.transcript import read_transcript

__all__ = [
    "HOST",
    "backend_dir",
    "conversation_folder",
    "find_session",
    "looks_like_agent_file",
    "looks_like_history",
    "looks_like_local",
    "looks_like_transcript",
    "read_agent_file",
    "read_history",
    "read_local",
    "read_transcript",
    "read_turn",
    "recognize",
    "transcript_root",
]


# To say what a file is when it is not Letta's: every host's recognizer
# (sessions/detect.py has the same table; it imports this package, so this
# package cannot import it).
def _pi() -> formats.Recognize:
    from machine_git.sessions.pi import turn

    return turn.recognize


def _claude() -> formats.Recognize:
    from machine_git.sessions.claude import turn

    return turn.recognize


def _codex() -> formats.Recognize:
    from machine_git.sessions.codex import turn

    return turn.recognize


def _gemini() -> formats.Recognize:
    from machine_git.sessions.gemini import turn

    return turn.recognize


def _opencode() -> formats.Recognize:
    from machine_git.sessions.opencode import turn

    return turn.recognize


_RECOGNIZERS: formats.Recognizers = {
    "pi": _pi,
    "letta": lambda: recognize,
    "claude": _claude,
    "codex": _codex,
    "gemini": _gemini,
    "opencode": _opencode,
}

# Each form and its reader, in the order forms.recognize tries them.
_FORMS = (
    (AGENT_FILE, read_agent_file),
    (HISTORY, read_history),
    (LOCAL, read_local),
    (TRANSCRIPT, read_transcript),
)


def read_turn(
    path: Path, entry: str | None = None, form: str | None = None
) -> tuple[Turn, ReadReport]:
    """The last turn of any Letta form (``form``, else recognized from the file)."""
    if form is None:
        found = formats.sniff(path, _RECOGNIZERS)
        if found.host != HOST:
            raise SessionError(f"{path}: a {found.label}, not a Letta session")
        form = found.name
    for name, read in _FORMS:
        if name == form:
            return read(path, entry)
    raise SessionError(f"{path}: {form!r} is not a Letta session format")
