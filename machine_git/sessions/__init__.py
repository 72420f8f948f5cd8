"""Agent session readers. Each host's reader turns its own format into a Turn.

A Turn is the last agent run of a session (from the last real user message to
the end of the active branch) as trajectory-v1 records, plus where it came
from. Every reader produces the same records, so tagging, traces and diffs do
not care which agent wrote the session.

Each host's module (pi, letta, claude, codex, gemini, opencode) is a
:class:`SessionReader`; ``detect.py`` reaches the hosts only through that
interface, and loads a host's module only when a session of that host is
looked for or read.

May use: rows, secrets, core, bundled (pyproject.toml: [tool.importlinter]).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import Protocol
from typing import cast
from typing import runtime_checkable

from machine_git.core.plain import Plain

if TYPE_CHECKING:
    from machine_git.rows.context import Context
    from machine_git.rows.rowtypes import Host
    from machine_git.rows.rowtypes import Image
    from machine_git.rows.rowtypes import Record
    from machine_git.rows.rowtypes import Source


class ReadReport(Plain):
    """What a reader skipped, so the CLI can say so in one line."""

    __slots__ = ("corrupt_lines", "dropped", "path", "repaired_lines", "unknown_types")

    def __init__(
        self,
        path: str,
        corrupt_lines: list[int] | None = None,
        unknown_types: list[tuple[int, str]] | None = None,
        dropped: list[str] | None = None,
    ) -> None:
        self.path = path
        self.corrupt_lines: list[int] = corrupt_lines if corrupt_lines else []
        self.unknown_types: list[tuple[int, str]] = (
            unknown_types if unknown_types else []
        )
        self.dropped: list[str] = dropped if dropped else []
        # Lines kept with broken characters (lone surrogates, bad UTF-8) as U+FFFD.
        self.repaired_lines: list[int] = []

    def warning(self) -> str | None:
        """One line describing what was skipped, or None if nothing was."""
        parts: list[str] = []
        if self.corrupt_lines:
            parts.append(_count(sorted(self.corrupt_lines), "corrupt line"))
        if self.unknown_types:
            names = sorted({name for _, name in self.unknown_types})
            lines = [n for n, _ in self.unknown_types]
            kinds = ", ".join(repr(n) for n in names[:5])
            parts.append(f"{_count(lines, 'entry', 'entries')} of unknown type {kinds}")
        if self.dropped:
            parts.append("; ".join(self.dropped[:3]))
        repaired = None
        if self.repaired_lines:
            lines = sorted(self.repaired_lines)
            repaired = (
                f"kept {_count(lines, 'line')} with broken characters "
                "(lone surrogates or bad UTF-8) as U+FFFD"
            )
        if not parts:
            return f"{self.path}: {repaired}" if repaired else None
        skipped = f"{self.path}: skipped {'; '.join(parts)}"
        return f"{skipped}; {repaired}" if repaired else skipped


def _count(lines: list[int], word: str, plural: str | None = None) -> str:
    shown = ", ".join(str(n) for n in lines[:8])
    more = ", ..." if len(lines) > 8 else ""
    noun = word if len(lines) == 1 else (plural or f"{word}s")
    return f"{len(lines)} {noun} (line {shown}{more})"


class Turn(Plain):
    """The last agent run of a session, normalized."""

    __slots__ = (
        "context",
        "cwd",
        "dropped",
        "entry_ids",
        "error",
        "git_branch",
        "host",
        "leaf_id",
        "model",
        "provider",
        "records",
        "session_file",
        "session_id",
        "stop_reason",
    )

    def __init__(
        self,
        host: str,
        session_id: str,
        session_file: str | None,
        records: list[Record],
        entry_ids: list[str],
        leaf_id: str | None = None,
        model: str | None = None,
        provider: str | None = None,
        cwd: str | None = None,
        git_branch: str | None = None,
        stop_reason: str | None = None,
        error: str | None = None,
        dropped: list[str] | None = None,
        context: Context | None = None,
    ) -> None:
        self.host = host
        self.session_id = session_id
        self.session_file = session_file
        self.records = records
        self.entry_ids = entry_ids
        self.leaf_id = leaf_id
        self.model = model
        self.provider = provider
        self.cwd = cwd
        self.git_branch = git_branch
        self.stop_reason = stop_reason
        self.error = error
        self.dropped: list[str] = dropped if dropped else []
        # The system prompt and tools the run had (machine_git.rows.context.Context),
        # or None when the host's files do not hold them.
        self.context = context

    @property
    def user_text(self) -> str:
        """The user's message that started the run."""
        for r in self.records:
            if r["role"] == "user":
                return str(r["content"])
        return ""

    @property
    def user_images(self) -> list[Image]:
        """The images of the user's message that started the run (inline)."""
        for r in self.records:
            if r["role"] == "user":
                return list(r.get("images", []))
        return []

    @property
    def answer(self) -> str | None:
        """The last thing the assistant said in words, if it said anything.

        A turn whose last step is a tool call or a tool's result has not
        answered yet (the file was cut, or the agent is still working): the
        words it said before that call were a step, not the answer.
        """
        for r in reversed(self.records):
            if r["role"] == "tool" or r.get("tool_calls"):
                return None
            if r["role"] == "assistant" and isinstance(r.get("content"), str):
                return str(r["content"])
        return None

    def source(self) -> Source:
        """The row's ``source`` object."""
        return {
            "host": cast("Host", self.host),  # a reader's own name (detect.HOSTS)
            "session_id": self.session_id,
            "session_file": self.session_file,
            "entry_ids": list(self.entry_ids),
            "leaf_id": self.leaf_id,
            "model": self.model,
            "provider": self.provider,
            "cwd": self.cwd,
            "git_branch": self.git_branch,
        }


@runtime_checkable
class SessionReader(Protocol):
    """What a host's module provides: the interface detect.py reads sessions by.

    A host writes one format (Pi, Claude Code, Codex) or several (Letta: four);
    a format's name is one of ``detect.FORMATS``.
    """

    def find_session(self, project: Path) -> Path:
        """The newest session of ``project`` (NoSessionError if there is none)."""
        ...

    def recognize(self, value: Any) -> str | None:
        """The name of this host's format that ``value`` shows, or None.

        ``value`` is one parsed line of a JSONL file, a whole JSON document
        (asked only of hosts with a document format, ``Format.document``), or
        the Path of an SQLite database (asked only of hosts with a database
        format, ``Format.database``).
        """
        ...

    def read_turn(
        self, path: Path, entry: str | None = None, form: str | None = None
    ) -> tuple[Turn, ReadReport]:
        """The last turn of the session at ``path``, or the turn ending at ``entry``.

        ``form`` is the file's format when the caller has recognized it (a
        host with several formats then need not look again).
        """
        ...
