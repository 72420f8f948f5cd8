"""Session file formats: who writes each, and recognizing one from its content.

``sniff(path, recognizers)`` recognizes a session file from what is in it,
not its name, asking each host's ``recognize`` through the table it is given.
It imports no host, so a host's reader may sniff a file too (sessions/letta
does, to say what a file is when it is not Letta's).
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from typing import NamedTuple

from machine_git.core import inputs
from machine_git.core import jsonio
from machine_git.core.errors import SessionError
from machine_git.sessions import files

HOSTS = ("pi", "letta", "claude", "codex", "gemini")
_SNIFF_LINES = 50  # lines read to find one that names the format

Recognize = Callable[[Any], "str | None"]


# How each host's recognizer is loaded (imported on first use, so sniffing
# a Pi session loads no other host's code). The caller passes the table: a
# host package that sniffs (sessions/letta) cannot be imported from here.
Recognizers = Mapping[str, Callable[[], Recognize]]


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
GEMINI = Format("gemini", "gemini", "Gemini CLI session")
FORMATS = (
    PI,
    LETTA_LOCAL,
    LETTA_TRANSCRIPT,
    LETTA_HISTORY,
    LETTA_AGENT_FILE,
    CLAUDE,
    CODEX,
    GEMINI,
)
BY_NAME = {f.name: f for f in FORMATS}
# The hosts asked about a line, in order (the first to recognize it names the
# format): Pi first, so a Pi session loads no other host's module.
_LINE_HOSTS = ("pi", "codex", "claude", "gemini", "letta")
_DOCUMENT_HOSTS = tuple(
    h for h in HOSTS if any(f.document for f in FORMATS if f.host == h)
)


def sniff(path: Path, recognizers: Recognizers) -> Format:
    """The format of the session file at ``path``, recognized from its content."""
    data = files.read_bytes(path)
    whole = _whole(data)
    if whole is not None:
        for host in _DOCUMENT_HOSTS:
            form = _recognized(recognizers, host, whole)
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
            form = _recognized(recognizers, host, row)
            if form is not None and not form.document:
                return form
    tried = ", ".join(f.label for f in FORMATS)
    raise SessionError(f"{path}: not a session file of a known format (tried: {tried})")


def _recognized(recognizers: Recognizers, host: str, value: Any) -> Format | None:
    name = recognizers[host]()(value)
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
