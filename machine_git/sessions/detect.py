"""Which agent wrote a session: from a file's content, or across the hosts.

``sniff(path)`` recognizes a session file from what is in it, not its name, so
``--session PATH`` works for every host. ``locate(project, host, session)``
answers the capturing commands' question "which session?": the given file, the
newest session of one host, or (``auto``) the newest session of the project
across every host that has one.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any
from typing import NamedTuple

from machine_git.core import inputs
from machine_git.core import jsonio
from machine_git.core.errors import NoSessionError
from machine_git.core.errors import SessionError
from machine_git.sessions import ReadReport
from machine_git.sessions import SessionReader
from machine_git.sessions import Turn
from machine_git.sessions import files

HOSTS = ("pi", "letta", "claude", "codex")
AUTO = "auto"
NAMES = {"pi": "Pi", "letta": "Letta Code", "claude": "Claude Code", "codex": "Codex"}
_SNIFF_LINES = 50  # lines read to find one that names the format


# Each host's reader loads when a session of that host is read or looked for:
# `/good` in Pi passes its own session file, and needs none of the others'
# modules on the start-up path of `machine good`. Typed with the Protocol, so
# mypy checks that every host's module is a SessionReader.
def _pi() -> SessionReader:
    from machine_git.sessions import pi

    return pi


def _letta() -> SessionReader:
    from machine_git.sessions import letta

    return letta


def _claude() -> SessionReader:
    from machine_git.sessions import claude

    return claude


def _codex() -> SessionReader:
    from machine_git.sessions import codex

    return codex


READERS: dict[str, Callable[[], SessionReader]] = {
    "pi": _pi,
    "letta": _letta,
    "claude": _claude,
    "codex": _codex,
}


def reader(host: str) -> SessionReader:
    """The module that reads ``host``'s sessions (imported on first use)."""
    return READERS[host]()


class Format(NamedTuple):
    """One session file format: who writes it and what it is called."""

    name: str
    host: str
    label: str
    document: bool = False
    """A whole JSON document (else JSON lines)."""

    def read(self, path: Path, entry: str | None = None) -> tuple[Turn, ReadReport]:
        """The last turn (or the turn ending at ``entry``) of the file at ``path``."""
        return reader(self.host).read_turn(path, entry, self.name)


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
    name = reader(host).recognize(value)
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
    return reader(host).find_session(project)


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
    # A host with one format needs no look inside the file.
    forms = [f for f in FORMATS if f.host == host]
    return forms[0] if len(forms) == 1 else sniff(path)
