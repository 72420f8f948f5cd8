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
from typing import NamedTuple

from machine_git.core.errors import NoSessionError
from machine_git.core.errors import SessionError
from machine_git.sessions import ReadReport
from machine_git.sessions import SessionReader
from machine_git.sessions import Turn
from machine_git.sessions import files
from machine_git.sessions import formats
from machine_git.sessions.formats import HOSTS as HOSTS

AUTO = "auto"
NAMES = {
    "pi": "Pi",
    "letta": "Letta Code",
    "claude": "Claude Code",
    "codex": "Codex",
    "gemini": "Gemini CLI",
    "opencode": "OpenCode",
}


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


def _gemini() -> SessionReader:
    from machine_git.sessions import gemini

    return gemini


def _opencode() -> SessionReader:
    from machine_git.sessions import opencode

    return opencode


READERS: dict[str, Callable[[], SessionReader]] = {
    "pi": _pi,
    "letta": _letta,
    "claude": _claude,
    "codex": _codex,
    "gemini": _gemini,
    "opencode": _opencode,
}


def reader(host: str) -> SessionReader:
    """The module that reads ``host``'s sessions (imported on first use)."""
    return READERS[host]()


class Format(formats.Format):
    """A session file format that reads its files (through its host's reader)."""

    __slots__ = ()

    def read(self, path: Path, entry: str | None = None) -> tuple[Turn, ReadReport]:
        """The last turn (or the turn ending at ``entry``) of the file at ``path``."""
        return reader(self.host).read_turn(path, entry, self.name)


FORMATS = tuple(Format(*f) for f in formats.FORMATS)
BY_NAME = {f.name: f for f in FORMATS}
PI = BY_NAME[formats.PI.name]
LETTA_LOCAL = BY_NAME[formats.LETTA_LOCAL.name]
LETTA_TRANSCRIPT = BY_NAME[formats.LETTA_TRANSCRIPT.name]
LETTA_HISTORY = BY_NAME[formats.LETTA_HISTORY.name]
LETTA_AGENT_FILE = BY_NAME[formats.LETTA_AGENT_FILE.name]
CLAUDE = BY_NAME[formats.CLAUDE.name]
CODEX = BY_NAME[formats.CODEX.name]
GEMINI = BY_NAME[formats.GEMINI.name]
OPENCODE = BY_NAME[formats.OPENCODE.name]


# Each host's recognizer, from the small module that holds it.
def _recognize_pi() -> formats.Recognize:
    from machine_git.sessions.pi import turn

    return turn.recognize


def _recognize_letta() -> formats.Recognize:
    from machine_git.sessions.letta import forms

    return forms.recognize


def _recognize_claude() -> formats.Recognize:
    from machine_git.sessions.claude import turn

    return turn.recognize


def _recognize_codex() -> formats.Recognize:
    from machine_git.sessions.codex import turn

    return turn.recognize


def _recognize_gemini() -> formats.Recognize:
    from machine_git.sessions.gemini import turn

    return turn.recognize


def _recognize_opencode() -> formats.Recognize:
    from machine_git.sessions.opencode import turn

    return turn.recognize


RECOGNIZERS: formats.Recognizers = {
    "pi": _recognize_pi,
    "letta": _recognize_letta,
    "claude": _recognize_claude,
    "codex": _recognize_codex,
    "gemini": _recognize_gemini,
    "opencode": _recognize_opencode,
}


def sniff(path: Path) -> Format:
    """The format of the session file at ``path``, recognized from its content."""
    return BY_NAME[formats.sniff(path, RECOGNIZERS).name]


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
                f"{session} is {_a(form.label)}, not {_a(NAMES[host])} session "
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
        stamp = _written(path)
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


def _written(path: Path) -> float | None:
    """When the session was last written, or None if it is gone."""
    # A database's latest writes may still sit in its write-ahead log
    # (OpenCode's do), whose time is newer than the database file's.
    wal = files.mtime(path.with_name(path.name + "-wal"))
    stamp = files.mtime(path)
    return max(stamp, wal) if stamp is not None and wal is not None else stamp


def _a(name: str) -> str:
    return f"an {name}" if name[:1] in "AEIOU" else f"a {name}"


def _format(host: str, path: Path) -> Format:
    # A host with one format needs no look inside the file.
    forms = [f for f in FORMATS if f.host == host]
    return forms[0] if len(forms) == 1 else sniff(path)
