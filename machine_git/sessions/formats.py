"""Session file formats: who writes each, and recognizing one from its content.

``sniff(path)`` recognizes a session file from what is in it, not its name.
It asks each host's ``recognize`` from the small module that holds it (never
the host's reader package), so a reader may sniff a file itself
(sessions/letta does) without importing the dispatch in detect.py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any
from typing import NamedTuple

from machine_git.core import inputs
from machine_git.core import jsonio
from machine_git.core.errors import SessionError
from machine_git.sessions import files

HOSTS = ("pi", "letta", "claude", "codex")
_SNIFF_LINES = 50  # lines read to find one that names the format

Recognize = Callable[[Any], "str | None"]


# Imported on first use, so sniffing a Pi session loads no other host's code.
def _pi() -> Recognize:
    from machine_git.sessions.pi import turn

    return turn.recognize


def _letta() -> Recognize:
    from machine_git.sessions.letta import forms

    return forms.recognize


def _claude() -> Recognize:
    from machine_git.sessions.claude import turn

    return turn.recognize


def _codex() -> Recognize:
    from machine_git.sessions.codex import turn

    return turn.recognize


RECOGNIZERS: dict[str, Callable[[], Recognize]] = {
    "pi": _pi,
    "letta": _letta,
    "claude": _claude,
    "codex": _codex,
}


class Format(NamedTuple):
    """One session file format: who writes it and what it is called."""

    name: str
    host: str
    label: str
    document: bool = False
    """A whole JSON document (else JSON lines)."""


PI = Format("pi", "pi", "Pi session")
LETTA_LOCAL = Format("letta-local", "letta", "Letta Code local-backend conversation")
LETTA_TRANSCRIPT = Format("letta-transcript", "letta", "Letta Code transcript")
LETTA_HISTORY = Format(
    "letta-history", "letta", "Letta API message history", document=True
)
LETTA_AGENT_FILE = Format(
    "letta-agent-file", "letta", "Letta Agent File", document=True
)
CLAUDE = Format("claude", "claude", "Claude Code session")
CODEX = Format("codex", "codex", "Codex rollout")
FORMATS = (
    PI,
    LETTA_LOCAL,
    LETTA_TRANSCRIPT,
    LETTA_HISTORY,
    LETTA_AGENT_FILE,
    CLAUDE,
    CODEX,
)
BY_NAME = {f.name: f for f in FORMATS}
# The hosts asked about a line, in order (the first to recognize it names the
# format): Pi first, so a Pi session loads no other host's module.
_LINE_HOSTS = ("pi", "codex", "claude", "letta")
_DOCUMENT_HOSTS = tuple(
    h for h in HOSTS if any(f.document for f in FORMATS if f.host == h)
)


def sniff(path: Path) -> Format:
    """The format of the session file at ``path``, recognized from its content."""
    data = files.read_bytes(path)
    whole = _whole(data)
    if whole is not None:
        for host in _DOCUMENT_HOSTS:
            form = _recognized(host, whole)
            if form is not None and form.document:
                return form
    seen = 0
    for _, text in inputs.numbered_lines(data):
        seen += 1
        if seen > _SNIFF_LINES:
            break
        try:
            row = jsonio.loads(text)
        except ValueError:
            continue
        for host in _LINE_HOSTS:
            form = _recognized(host, row)
            if form is not None and not form.document:
                return form
    tried = ", ".join(f.label for f in FORMATS)
    raise SessionError(f"{path}: not a session file of a known format (tried: {tried})")


def _recognized(host: str, value: Any) -> Format | None:
    name = RECOGNIZERS[host]()(value)
    return BY_NAME[name] if name is not None else None


def _whole(data: bytes) -> Any:
    # JSON documents (history, agent file) are often pretty-printed: parse the
    # whole file. A JSONL file fails at its second line, cheaply.
    head = data.lstrip()[:1]
    if head not in (b"[", b"{"):
        return None
    try:
        return jsonio.loads(data)
    except ValueError:
        return None
