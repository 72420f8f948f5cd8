"""Agent session readers. Each host's reader turns its own format into a Turn.

A Turn is the last agent run of a session (from the last real user message to
the end of the active branch) as trajectory-v1 records, plus where it came
from. Every reader produces the same records, so tagging, traces and diffs do
not care which agent wrote the session.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
from typing import Any

Record = dict[str, Any]
"""One trajectory-v1 record (meta, user, reasoning, assistant, tool)."""


@dataclass
class ReadReport:
    """What a reader skipped, so the CLI can say so in one line."""

    path: str
    corrupt_lines: list[int] = field(default_factory=list)
    unknown_types: list[tuple[int, str]] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)

    def warning(self) -> str | None:
        """One line describing what was skipped, or None if nothing was."""
        parts: list[str] = []
        if self.corrupt_lines:
            parts.append(_count(self.corrupt_lines, "corrupt line"))
        if self.unknown_types:
            names = sorted({name for _, name in self.unknown_types})
            lines = [n for n, _ in self.unknown_types]
            kinds = ", ".join(repr(n) for n in names[:5])
            parts.append(f"{_count(lines, 'entry', 'entries')} of unknown type {kinds}")
        if self.dropped:
            parts.append("; ".join(self.dropped[:3]))
        if not parts:
            return None
        return f"{self.path}: skipped {'; '.join(parts)}"


def _count(lines: list[int], word: str, plural: str | None = None) -> str:
    shown = ", ".join(str(n) for n in lines[:8])
    more = ", ..." if len(lines) > 8 else ""
    noun = word if len(lines) == 1 else (plural or f"{word}s")
    return f"{len(lines)} {noun} (line {shown}{more})"


@dataclass
class Turn:
    """The last agent run of a session, normalized."""

    host: str
    session_id: str
    session_file: str | None
    records: list[Record]
    entry_ids: list[str]
    leaf_id: str | None = None
    model: str | None = None
    provider: str | None = None
    cwd: str | None = None
    git_branch: str | None = None
    stop_reason: str | None = None
    error: str | None = None
    dropped: list[str] = field(default_factory=list)

    @property
    def user_text(self) -> str:
        """The user's message that started the run."""
        for r in self.records:
            if r["role"] == "user":
                return str(r["content"])
        return ""

    @property
    def answer(self) -> str | None:
        """The last thing the assistant said in words, if it said anything."""
        for r in reversed(self.records):
            if r["role"] == "assistant" and isinstance(r.get("content"), str):
                return str(r["content"])
        return None

    def source(self) -> dict[str, Any]:
        """The row's ``source`` object."""
        return {
            "host": self.host,
            "session_id": self.session_id,
            "session_file": self.session_file,
            "entry_ids": list(self.entry_ids),
            "leaf_id": self.leaf_id,
            "model": self.model,
            "provider": self.provider,
            "cwd": self.cwd,
            "git_branch": self.git_branch,
        }
