"""Letta Code's local backend: a conversation's ``messages.jsonl``.

One pi-ai message a line (the Pi shape, machine_git/sessions/piai.py) plus
``id`` and ``metadata`` (hosts.md §3.4); ``conversation.json`` beside it names
the agent and the conversation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from machine_git.core import jsonio
from machine_git.core.errors import MachineError
from machine_git.rows import context
from machine_git.rows.context import Context
from machine_git.sessions import ReadReport
from machine_git.sessions import Turn
from machine_git.sessions import files
from machine_git.sessions import piai
from machine_git.sessions.letta.common import CODE
from machine_git.sessions.letta.common import HOST
from machine_git.sessions.letta.common import cwd_of
from machine_git.sessions.letta.common import user_text
from machine_git.sessions.records import Records
from machine_git.sessions.records import window
from machine_git.sessions.values import string
from machine_git.sessions.values import text_of

ROLES = frozenset({"user", "assistant", "toolResult"})
Line = tuple[int, dict[str, Any]]


def looks_like_local(row: Any) -> bool:
    """A parsed line of a local-backend ``messages.jsonl`` (a bare pi-ai message)."""
    return (
        isinstance(row, dict)
        and isinstance(row.get("role"), str)
        and row["role"] in ROLES
        and "type" not in row
        and ("content" in row or "toolCallId" in row)
    )


def read_local(path: Path, entry: str | None = None) -> tuple[Turn, ReadReport]:
    """The last turn of a Letta Code local-backend ``messages.jsonl``."""
    report = ReadReport(str(path))
    rows = files.load_jsonl(path, report, "role", ROLES)
    ids = [string(row.get("id")) or f"L{n}" for n, row in rows]
    turn = window(rows, ids, entry, path, _user)
    rows, start = turn.items, turn.start
    cwd = None
    for _, row in rows[: start + 1]:
        if row["role"] == "user":
            cwd = cwd_of(text_of(row.get("content"))) or cwd
    builder = Records()
    model = provider = stop_reason = error = None
    for (number, row), text in zip(rows[start:], turn.texts[start:], strict=False):
        data = row.get("metadata")
        created = data.get("created_at") if isinstance(data, dict) else None
        stamp = builder.moment(created, row.get("timestamp"))
        if row["role"] == "user":
            if text:  # only the first (the turn's start) is non-empty here
                builder.user(text, stamp)
        elif row["role"] == "assistant":
            piai.add_assistant(builder, row, stamp, number)
            model = string(row.get("model")) or model
            provider = string(row.get("provider")) or provider
            stop_reason = string(row.get("stopReason"))
            error = string(row.get("errorMessage"))
        else:
            piai.add_tool_result(builder, row, stamp, number)
    return builder.finish(
        report,
        host=HOST,
        source=CODE,
        path=path,
        session_id=_session(path, rows),
        entry_ids=turn.ids[start:],
        leaf_id=turn.ids[-1],
        cwd=cwd,
        model=model,
        provider=provider,
        stop_reason=stop_reason,
        error=error,
        context=_local_context(path),
    )


def _local_context(path: Path) -> Context | None:
    """The compiled system prompt beside a local-backend ``messages.jsonl``.

    Letta Code keeps it in ``system-prompt.json`` (``{"content": ...,
    "compiledAt", "rawSystemHash", "memfsRevision"}``, as 0.25.9 writes it)
    and recompiles it when memory changes, so it is the newest one, not
    necessarily the one an older turn ran with. The tools are not stored.
    """
    try:
        data = files.read_bytes(path.with_name("system-prompt.json"))
        value = jsonio.loads(data)
    except (MachineError, OSError, ValueError):
        return None
    if not isinstance(value, dict):
        return None
    return context.make(value.get("content"), None)


def _user(line: Line) -> str:
    row = line[1]
    return user_text(row.get("content")) if row["role"] == "user" else ""


def _session(path: Path, rows: list[Line]) -> str:
    """``<agent>/<conversation>``, from the messages or ``conversation.json``."""
    agent = conversation = None
    for _, row in rows:
        data = row.get("metadata")
        if isinstance(data, dict):
            agent = string(data.get("agent_id")) or agent
            conversation = string(data.get("conversation_id")) or conversation
    if not (agent and conversation):
        agent, conversation = _conversation_json(path, agent, conversation)
    session = "/".join(p for p in (agent, conversation) if p)
    return session or path.resolve().parent.name or path.stem


def _conversation_json(
    path: Path, agent: str | None, conversation: str | None
) -> tuple[str | None, str | None]:
    try:
        data = jsonio.loads((path.parent / "conversation.json").read_bytes())
    except (OSError, ValueError):
        return agent, conversation
    if not isinstance(data, dict):
        return agent, conversation
    return (
        agent or string(data.get("agent_id")),
        conversation or string(data.get("id")),
    )
