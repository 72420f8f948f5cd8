"""Letta Code's client-side transcript: ``transcript.jsonl``.

Rows of ``kind`` user, assistant, reasoning, tool_call (a call and its result
in one row) and error; the file has no ids of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from machine_git.sessions import ReadReport
from machine_git.sessions import Turn
from machine_git.sessions import files
from machine_git.sessions.letta.common import CODE
from machine_git.sessions.letta.common import HOST
from machine_git.sessions.letta.common import strip_reminders
from machine_git.sessions.records import Records
from machine_git.sessions.records import window
from machine_git.sessions.values import string

KINDS = frozenset({"user", "assistant", "reasoning", "tool_call", "error"})
Line = tuple[int, dict[str, Any]]


def looks_like_transcript(row: Any) -> bool:
    """A parsed line of a Letta Code ``transcript.jsonl``."""
    return (
        isinstance(row, dict)
        and isinstance(row.get("kind"), str)
        and row["kind"] in KINDS
        and ("captured_at" in row or "text" in row or "argsText" in row)
    )


def read_transcript(path: Path, entry: str | None = None) -> tuple[Turn, ReadReport]:
    """The last turn of a Letta Code ``transcript.jsonl``."""
    report = ReadReport(str(path))
    rows = files.load_jsonl(path, report, "kind", KINDS)
    ids = [
        string(row.get("source_line_id"))
        or string(row.get("source_message_id"))
        or f"L{n}"
        for n, row in rows
    ]
    turn = window(rows, ids, entry, path, _user)
    builder = Records()
    for index in range(turn.start, len(turn.items)):
        number, row = turn.items[index]
        kind, text = row["kind"], row.get("text")
        text = text if isinstance(text, str) else ""
        stamp = builder.moment(row.get("captured_at"))
        if index == turn.start:
            builder.user(turn.texts[index], stamp)
        elif kind == "reasoning":
            builder.reasoning(text, stamp)
        elif kind == "assistant":
            builder.say(text, stamp)
        elif kind == "error":
            # A provider error the harness logged; it ended the turn only if
            # no answer came after it.
            builder.stopped("error", text or None)
        elif kind == "tool_call":
            _tool_call(builder, number, row, stamp)
    return builder.finish(
        report,
        host=HOST,
        source=CODE,
        path=path,
        session_id=_session(path),
        entry_ids=turn.ids[turn.start :],
        leaf_id=turn.ids[-1],
    )


def _user(line: Line) -> str:
    row = line[1]
    text = row.get("text")
    return (
        strip_reminders(text) if row["kind"] == "user" and isinstance(text, str) else ""
    )


def _tool_call(builder: Records, number: int, row: dict[str, Any], stamp: str) -> None:
    """A ``tool_call`` row: the call, and its result when the row has one."""
    call_id = (
        string(row.get("source_line_id"))
        or string(row.get("source_message_id"))
        or f"letta-code-tool-line-{number}"
    )
    args = row.get("argsText")
    where = f"line {number}"
    builder.call(
        call_id,
        row.get("name"),
        args if isinstance(args, str) and args else "{}",
        stamp,
        where,
    )
    ok, result = row.get("resultOk"), row.get("resultText")
    if isinstance(result, str) or isinstance(ok, bool):
        builder.result(
            call_id,
            None,
            result if isinstance(result, str) else "",
            (not ok) if isinstance(ok, bool) else None,
            stamp,
            where,
        )


def _session(path: Path) -> str:
    # The layout is <agent>/<conversation>/transcript.jsonl; the file has no ids.
    folder = path.resolve().parent
    session = folder.name or path.stem
    if folder.parent.name.startswith("agent-"):
        session = f"{folder.parent.name}/{session}"
    return session
