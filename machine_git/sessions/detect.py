"""Which agent wrote a session: from a file's content, or across the hosts.

``sniff(path)`` recognizes a session file from what is in it, not its name, so
``--session PATH`` works for every host. ``locate(project, host, session)``
answers the capturing commands' question "which session?": the given file, the
newest session of one host, or (``auto``) the newest session of the project
across every host that has one.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any
from typing import NamedTuple

from machine_git import jsonio
from machine_git.errors import NoSessionError
from machine_git.errors import SessionError
from machine_git.sessions import ReadReport
from machine_git.sessions import Turn
from machine_git.sessions import files

HOSTS = ("pi", "letta", "claude", "codex")
AUTO = "auto"
NAMES = {"pi": "Pi", "letta": "Letta Code", "claude": "Claude Code", "codex": "Codex"}
_SNIFF_LINES = 50  # lines read to find one that names the format

Reader = Callable[[Path, str | None], tuple[Turn, ReadReport]]


def _reader_module(host: str) -> Any:
    # Each host's reader loads when a session of that host is read or looked
    # for: `/good` in Pi passes its own session file, and needs none of the
    # others' modules on the start-up path of `machine good`.
    return importlib.import_module(f"machine_git.sessions.{host}")


class Format(NamedTuple):
    """One session file format: who writes it, what it is called, its reader."""

    name: str
    host: str
    label: str
    reader: str
    """The function of the host's module that reads it."""

    def read(self, path: Path, entry: str | None = None) -> tuple[Turn, ReadReport]:
        """The last turn (or the turn ending at ``entry``) of the file at ``path``."""
        read: Reader = getattr(_reader_module(self.host), self.reader)
        return read(path, entry)


PI = Format("pi", "pi", "Pi session", "read_turn")
LETTA_LOCAL = Format(
    "letta-local", "letta", "Letta Code local-backend conversation", "read_local"
)
LETTA_TRANSCRIPT = Format(
    "letta-transcript", "letta", "Letta Code transcript", "read_transcript"
)
LETTA_HISTORY = Format(
    "letta-history", "letta", "Letta API message history", "read_history"
)
LETTA_AGENT_FILE = Format(
    "letta-agent-file", "letta", "Letta Agent File", "read_agent_file"
)
CLAUDE = Format("claude", "claude", "Claude Code session", "read_turn")
CODEX = Format("codex", "codex", "Codex rollout", "read_turn")
FORMATS = (
    PI,
    LETTA_LOCAL,
    LETTA_TRANSCRIPT,
    LETTA_HISTORY,
    LETTA_AGENT_FILE,
    CLAUDE,
    CODEX,
)

# Per JSONL line, in order: the first test a line passes names the format.
# (the host's module, its test); modules load as the tests get to them.
_LINE_TESTS: tuple[tuple[str, str, Format], ...] = (
    ("pi", "looks_like", PI),
    ("codex", "looks_like", CODEX),
    ("claude", "looks_like", CLAUDE),
    ("letta", "looks_like_local", LETTA_LOCAL),
    ("letta", "looks_like_transcript", LETTA_TRANSCRIPT),
)


def sniff(path: Path) -> Format:
    """The format of the session file at ``path``, recognized from its content."""
    data = files.read_bytes(path)
    whole = _whole(data)
    if whole is not None:
        letta = _reader_module("letta")
        if letta.looks_like_agent_file(whole):
            return LETTA_AGENT_FILE
        if letta.looks_like_history(whole):
            return LETTA_HISTORY
    seen = 0
    for text in data.split(b"\n"):
        if not text.strip():
            continue
        seen += 1
        if seen > _SNIFF_LINES:
            break
        try:
            row = jsonio.loads(text)
        except ValueError:
            continue
        for host, test, form in _LINE_TESTS:
            if getattr(_reader_module(host), test)(row):
                return form
    tried = ", ".join(f.label for f in FORMATS)
    raise SessionError(f"{path}: not a session file of a known format (tried: {tried})")


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


def read(path: Path, entry: str | None = None) -> tuple[Turn, ReadReport]:
    """The last turn of the session at ``path``, whatever wrote it."""
    return sniff(path).read(path, entry)


class Found(NamedTuple):
    """The session a capturing command will read."""

    host: str
    path: Path
    format: Format
    announce: bool
    """True when ``auto`` should say which session it used (see :func:`locate`)."""

    def read(self, entry: str | None = None) -> tuple[Turn, ReadReport]:
        return self.format.read(self.path, entry)


def _find(host: str, project: Path) -> Path:
    """The newest session of ``host`` for ``project`` (NoSessionError if none)."""
    finder: Callable[[Path], Path] = _reader_module(host).find_session
    return finder(project)


_FIXED: dict[str, Format] = {"pi": PI, "claude": CLAUDE, "codex": CODEX}


def locate(project: Path, host: str = AUTO, session: Path | None = None) -> Found:
    """The session to read for ``project``.

    With ``session``, that file (its format from its content; a ``host`` other
    than auto must agree). Otherwise the newest session of ``host``, or with
    ``auto`` the newest across the hosts that have one for the project. Auto
    announces its choice unless it is the only session host there is and that
    host is Pi, the default that needs no saying.
    """
    if host != AUTO and host not in HOSTS:
        raise SessionError(
            f"unknown host {host!r} (expected one of {', '.join(HOSTS)})"
        )
    if session is not None:
        # Rows record where their turn came from: an absolute path, not one
        # relative to wherever the command happened to run.
        session = Path(os.path.abspath(session))
        form = sniff(session)
        if host not in (AUTO, form.host):
            raise SessionError(
                f"{session} is a {form.label}, not a {NAMES[host]} session "
                f"(pass --host {form.host} or --host auto)"
            )
        return Found(form.host, session, form, announce=False)
    if host != AUTO:
        path = _find(host, project)
        return Found(host, path, _format(host, path), announce=False)
    found: list[tuple[float, int, str, Path]] = []
    for rank, name in enumerate(reversed(HOSTS)):
        try:
            path = _find(name, project)
        except NoSessionError:
            continue
        stamp = files.mtime(path)
        if stamp is not None:
            found.append((stamp, rank, name, path))
    if not found:
        raise NoSessionError(
            f"no agent session for {project} (looked for Pi, Letta Code, Claude Code "
            "and Codex sessions; run your agent in the project first, or pass "
            "--host HOST or --session PATH)"
        )
    # Newest wins; on a tie, the host listed first in HOSTS.
    _, _, name, path = max(found)
    announce = name != "pi" or len(found) > 1
    return Found(name, path, _format(name, path), announce=announce)


def _format(host: str, path: Path) -> Format:
    fixed = _FIXED.get(host)
    return fixed if fixed is not None else sniff(path)
