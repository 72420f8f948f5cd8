"""Reading an OpenCode session: its last turn, from the last prompt.

A user message's prompt is its ``text`` parts (``synthetic`` ones, which
OpenCode adds itself, left out). Each assistant message is one model step:
its ``reasoning`` and ``text`` parts in order, then its ``tool`` parts, each
holding a call (``tool``, ``callID``, ``state.input``) and, once run, its
result (``state.status`` completed with ``output``, or error with ``error``;
a command that completed with a non-zero ``metadata.exit`` failed).
A step that failed carries ``error`` on the message; ``MessageAbortedError``
is an interrupt. A compaction's summary (``summary: true``) is not the answer.
OpenCode stores neither the system prompt nor the tools sent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from machine_git.core.errors import SessionError
from machine_git.core.errors import TurnError
from machine_git.sessions import ReadReport
from machine_git.sessions import Turn
from machine_git.sessions.opencode import db
from machine_git.sessions.records import Records
from machine_git.sessions.records import window
from machine_git.sessions.values import string

HOST = "opencode"
SOURCE = "opencode"  # meta.source
_ABORTED = "MessageAbortedError"


def recognize(value: Any) -> str | None:
    """``opencode`` for the path of an OpenCode database (SessionReader).

    Asked only about SQLite databases (``Format.database``); a parsed JSON line
    or document is never OpenCode's.
    """
    if not isinstance(value, Path):
        return None
    try:
        with db.connect(value) as conn:
            return HOST if db.is_opencode(conn) else None
    except SessionError:
        return None


def read_turn(
    path: Path, entry: str | None = None, form: str | None = None
) -> tuple[Turn, ReadReport]:
    """The last turn of the newest session in the database at ``path``.

    With ``entry`` (a message id), the turn that ends at that message, in its
    session.
    """
    report = ReadReport(str(path))
    unreadable: list[str] = []
    with db.connect(path) as conn:
        if not db.is_opencode(conn):
            raise SessionError(f"{path}: not an OpenCode database")
        chosen = _session(conn, path, entry)
        messages = db.messages(conn, chosen.id, unreadable)
    if unreadable:
        report.dropped.append(f"{len(unreadable)} unreadable rows ({unreadable[0]})")
    if not messages:
        raise TurnError(f"{path}: OpenCode session {chosen.id} has no messages yet")
    turn = window(messages, [m.id for m in messages], entry, path, _prompt)
    builder = Records()
    entry_ids: list[str] = []
    model = provider = None
    for index in range(turn.start, len(turn.items)):
        message = turn.items[index]
        data = message.data
        stamp = builder.moment(_time(data), message.created)
        if index == turn.start:
            builder.user(turn.texts[index], stamp)
        elif data.get("role") == "assistant" and not data.get("summary"):
            _step(builder, message, stamp)
            model = string(data.get("modelID")) or model
            provider = string(data.get("providerID")) or provider
        else:
            continue
        entry_ids.append(message.id)
    return builder.finish(
        report,
        host=HOST,
        source=SOURCE,
        path=path,
        session_id=chosen.id,
        entry_ids=entry_ids,
        leaf_id=turn.ids[-1],
        cwd=chosen.directory or None,
        model=model,
        provider=provider,
        stop_reason=_finish(turn.items[-1].data),
    )


def _session(conn: Any, path: Path, entry: str | None) -> db.Session:
    if entry is not None:
        owner = db.session_of_message(conn, entry)
        found = db.session(conn, owner) if owner else None
        if found is None:
            raise SessionError(f"{path}: no OpenCode message {entry!r}")
        return found
    newest = db.newest_session(conn)
    if newest is None:
        raise TurnError(f"{path}: the OpenCode database has no session yet")
    return newest


def _time(data: dict[str, Any]) -> Any:
    when = data.get("time")
    return when.get("created") if isinstance(when, dict) else None


def _finish(data: dict[str, Any]) -> str | None:
    return string(data.get("finish")) if data.get("role") == "assistant" else None


def _prompt(message: db.Message) -> str:
    """The words the user typed in ``message``, or "" if it is not a prompt."""
    if message.data.get("role") != "user":
        return ""
    texts = [
        p["text"]
        for p in message.parts
        if p.get("type") == "text"
        and isinstance(p.get("text"), str)
        and not p.get("synthetic")
        and not p.get("ignored")
    ]
    text = "\n".join(texts)
    return text if text.strip() else ""


def _exit_code(state: dict[str, Any]) -> int | None:
    # OpenCode's bash tool "completes" whatever the command's status, which it
    # keeps in metadata.exit; a command that exited non-zero failed, as Codex
    # and Claude Code say of theirs.
    meta = state.get("metadata")
    code = meta.get("exit") if isinstance(meta, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def _step(builder: Records, message: db.Message, stamp: str) -> None:
    where = f"message {message.id}"
    tools: list[dict[str, Any]] = []
    for part in message.parts:
        kind = part.get("type")
        if kind == "reasoning":
            builder.reasoning(string(part.get("text")) or "", stamp)
        elif kind == "text" and not part.get("synthetic"):
            builder.say(string(part.get("text")) or "", stamp)
        elif kind == "tool":
            state = part.get("state")
            state = state if isinstance(state, dict) else {}
            builder.call(
                part.get("callID"), part.get("tool"), state.get("input"), stamp, where
            )
            tools.append(part)
    for part in tools:
        state = part.get("state")
        state = state if isinstance(state, dict) else {}
        status = state.get("status")
        if status == "completed":
            text = state.get("output")
            failed = _exit_code(state) not in (None, 0)
        elif status == "error":
            text = state.get("error")
            failed = True
        else:
            continue  # pending or running: the call has no result (yet)
        builder.result(
            part.get("callID"),
            part.get("tool"),
            text if isinstance(text, str) else "",
            failed,
            stamp,
            where,
        )
    error = message.data.get("error")
    if isinstance(error, dict):
        name = string(error.get("name")) or "error"
        details = error.get("data")
        said = details.get("message") if isinstance(details, dict) else None
        how = "aborted" if name == _ABORTED else "error"
        builder.stopped(how, string(said) or name)
