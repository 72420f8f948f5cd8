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

HOSTS = ("pi", "letta", "claude", "codex", "gemini", "opencode")
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
    database: bool = False
    """An SQLite database (its hosts are asked about its path)."""


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
OPENCODE = Format("opencode", "opencode", "OpenCode database", database=True)
FORMATS = (
    PI,
    LETTA_LOCAL,
    LETTA_TRANSCRIPT,
    LETTA_HISTORY,
    LETTA_AGENT_FILE,
    CLAUDE,
    CODEX,
    GEMINI,
    OPENCODE,
)
BY_NAME = {f.name: f for f in FORMATS}
# The hosts asked about a line, in order (the first to recognize it names the
# format): Pi first, so a Pi session loads no other host's module.
_LINE_HOSTS = ("pi", "codex", "claude", "gemini", "letta")
_DOCUMENT_HOSTS = tuple(
    h for h in HOSTS if any(f.document for f in FORMATS if f.host == h)
)
_DATABASE_HOSTS = tuple(
    h for h in HOSTS if any(f.database for f in FORMATS if f.host == h)
)
SQLITE_HEADER = b"SQLite format 3\x00"


def sniff(path: Path, recognizers: Recognizers) -> Format:
    """The format of the session file at ``path``, recognized from its content."""
    if _head(path) == SQLITE_HEADER:
        # A database is asked about as a whole (and may be larger than any
        # session file read into memory).
        for host in _DATABASE_HOSTS:
            form = _recognized(recognizers, host, path)
            if form is not None and form.database:
                return form
        known = ", ".join(f.label for f in FORMATS if f.database)
        raise SessionError(
            f"{path}: an SQLite database, but not one of a known agent (tried: {known})"
        )
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
    tried = ", ".join(f.label for f in FORMATS if not f.database)
    raise SessionError(f"{path}: not a session file of a known format (tried: {tried})")


def _head(path: Path) -> bytes:
    # Only a regular file is opened (a FIFO would block); read_bytes reports
    # the rest (missing, a folder, unreadable).
    try:
        if not path.is_file():
            return b""
        with path.open("rb") as f:
            return f.read(len(SQLITE_HEADER))
    except OSError:
        return b""


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
