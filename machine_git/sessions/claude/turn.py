"""Reading a Claude Code session: the chain of rows from the last one, as one turn.

Rows form a tree through ``uuid``/``parentUuid`` (a rewind writes a new
branch in the same file). One API response is written as several assistant
rows sharing ``message.id``, one content block each: they are grouped back.
Subagent rows and harness noise are dropped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from machine_git.core.errors import SessionError
from machine_git.core.errors import TurnError
from machine_git.sessions import ReadReport
from machine_git.sessions import Turn
from machine_git.sessions import files
from machine_git.sessions.records import Records
from machine_git.sessions.values import string
from machine_git.sessions.values import text_of

HOST = "claude"
SOURCE = "claude-code"  # meta.source (agent-trajectory's name)
# Row types that are bookkeeping, not conversation (agent-trajectory's list).
BOOKKEEPING = frozenset(
    {
        "progress",
        "queue-operation",
        "file-history-snapshot",
        "summary",
        "system",
        "pr-link",
        "last-prompt",
        "custom-title",
        "ai-title",
        "agent-name",
        "permission-mode",
        "attachment",
        "mode",
    }
)
# User text the harness writes (agent-trajectory's NOISE_PREFIXES).
NOISE_PREFIXES = (
    "<local-command-caveat>",
    "<command-name>",
    "<command-message>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<task-notification",
)
_INTERRUPTED = "[Request interrupted by user"
_SYNTHETIC = "<synthetic>"  # the model name of rows the harness made up


def recognize(value: Any) -> str | None:
    """``claude`` for a parsed Claude Code session row (SessionReader)."""
    return HOST if _looks_like(value) else None


def _looks_like(row: Any) -> bool:
    if not isinstance(row, dict):
        return False
    kind = row.get("type")
    if kind in ("user", "assistant"):
        return isinstance(row.get("message"), dict) and (
            "uuid" in row or "sessionId" in row or "parentUuid" in row
        )
    return (
        isinstance(kind, str)
        and kind in BOOKKEEPING
        and (
            "leafUuid" in row
            or "uuid" in row
            or "sessionId" in row
            or "messageId" in row
        )
    )


# -- reading ---------------------------------------------------------------------------


class _Row:
    __slots__ = ("data", "line", "message")

    def __init__(self, line: int, data: dict[str, Any], message: dict[str, Any]):
        self.line = line
        self.data = data
        self.message = message

    @property
    def uuid(self) -> str:
        return string(self.data.get("uuid")) or f"L{self.line}"

    @property
    def is_user(self) -> bool:
        return self.data.get("type") == "user"


def read_turn(
    path: Path, entry: str | None = None, form: str | None = None
) -> tuple[Turn, ReadReport]:
    """The last turn on the active branch of the Claude Code session at ``path``.

    (Claude Code has one format: ``form`` is not needed.)
    """
    report = ReadReport(str(path))
    rows = files.load_jsonl(path, report)
    conversational = [
        r
        for _, r in rows
        if r.get("type") in ("user", "assistant") and isinstance(r.get("message"), dict)
    ]
    # A subagent's own file is all sidechain: then the sidechain is the session.
    standalone = bool(conversational) and all(
        r.get("isSidechain") is True for r in conversational
    )
    by_uuid: dict[str, tuple[int, dict[str, Any]]] = {}
    order: list[tuple[int, dict[str, Any]]] = []
    for number, row in rows:
        kind = row.get("type")
        if not isinstance(kind, str):
            report.corrupt_lines.append(number)
            continue
        if row.get("isSidechain") is True and not standalone:
            continue
        if kind not in BOOKKEEPING and kind not in ("user", "assistant"):
            if isinstance(row.get("message"), dict):
                report.unknown_types.append((number, kind))
            continue
        uuid = string(row.get("uuid"))
        if uuid:
            by_uuid[uuid] = (number, row)
        order.append((number, row))
    if not order:
        raise SessionError(f"{path}: not a Claude Code session (no rows with a type)")
    chain = _chain(path, order, by_uuid, entry)
    turn_rows = [
        _Row(n, r, r["message"])
        for n, r in chain
        if r.get("type") in ("user", "assistant") and isinstance(r.get("message"), dict)
    ]
    start = None
    for index in range(len(turn_rows) - 1, -1, -1):
        if _user_text(turn_rows[index]):
            start = index
            break
    if start is None:
        raise TurnError(f"{path}: no user message on the active branch")
    return _turn(path, turn_rows[start:], chain[-1], report)


def _chain(
    path: Path,
    order: list[tuple[int, dict[str, Any]]],
    by_uuid: dict[str, tuple[int, dict[str, Any]]],
    entry: str | None,
) -> list[tuple[int, dict[str, Any]]]:
    """Root-to-leaf rows of the active branch, or file order without links.

    A file whose rows link no parent (hand-written, exported, or trimmed, as
    in letta-ai/trajectory's own fixtures) has no tree to follow: it is read
    in file order, as agent-trajectory reads it. A file with links is a tree.
    """
    if not any(string(row.get("parentUuid")) for _, row in order):
        names = [string(row.get("uuid")) or f"L{n}" for n, row in order]
        if entry is None:
            return order
        return order[: files.entries_until(names, entry, path)]
    if entry is not None:
        leaf = by_uuid.get(entry)
        if leaf is None:
            # Rows without uuids are named by line, and read in file order.
            lines = [f"L{n}" for n, _ in order]
            return order[: files.entries_until(lines, entry, path)]
    else:
        with_ids = [r for r in order if string(r[1].get("uuid"))]
        if not with_ids:
            return order
        leaf = with_ids[-1]
    chain: list[tuple[int, dict[str, Any]]] = []
    seen: set[str] = set()
    node: tuple[int, dict[str, Any]] | None = leaf
    while node is not None:
        uuid = string(node[1].get("uuid")) or ""
        if uuid in seen:
            raise SessionError(f"{path}: row {uuid!r} is its own ancestor")
        seen.add(uuid)
        chain.append(node)
        parent = string(node[1].get("parentUuid"))
        # A missing parent ends the branch (a compaction boundary starts anew).
        node = by_uuid.get(parent) if parent else None
    chain.reverse()
    return chain


def _blocks(row: _Row) -> list[Any]:
    content = row.message.get("content")
    return content if isinstance(content, list) else [content]


def _has_results(row: _Row) -> bool:
    return any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in _blocks(row)
    )


def _raw_text(row: _Row) -> str:
    content = row.message.get("content")
    if isinstance(content, str):
        return content
    return text_of(
        [
            b
            for b in _blocks(row)
            if isinstance(b, dict) and b.get("type") != "tool_result"
        ]
    )


def _user_text(row: _Row) -> str:
    """The row's text if it is a real user message; "" for everything else."""
    if not row.is_user or _has_results(row):
        return ""
    if row.data.get("isMeta") is True or row.data.get("isCompactSummary") is True:
        return ""
    text = _raw_text(row)
    head = text.lstrip()
    if head.startswith(NOISE_PREFIXES) or head.startswith(_INTERRUPTED):
        return ""
    return text if text.strip() else ""


def _turn(
    path: Path, rows: list[_Row], leaf: tuple[int, dict[str, Any]], report: ReadReport
) -> tuple[Turn, ReadReport]:
    first = rows[0]
    builder = Records()
    entry_ids: list[str] = []
    model: str | None = None
    stop_reason: str | None = None
    response: object = None
    seen_calls: set[str] = set()
    for index, row in enumerate(rows):
        stamp = builder.moment(row.data.get("timestamp"))
        where = f"line {row.line}"
        if index == 0:
            builder.user(_user_text(row), stamp)
        elif row.is_user:
            if _has_results(row):
                _results(builder, row, stamp, where)
            else:
                head = _raw_text(row).lstrip()
                if head.startswith(_INTERRUPTED):
                    builder.stopped("aborted", "Request interrupted by user")
                else:
                    continue  # noise, meta rows
        else:
            message_id = row.message.get("id")
            if not isinstance(message_id, str) or message_id != response:
                builder.end_calls()  # a new response: its calls are a new record
            response = message_id if isinstance(message_id, str) else None
            _assistant(builder, row, stamp, where, seen_calls)
            name = string(row.message.get("model"))
            if name and name != _SYNTHETIC:
                model = name
            stop_reason = string(row.message.get("stop_reason")) or stop_reason
            if row.data.get("isApiErrorMessage") is True:
                builder.stopped("error", _raw_text(row) or None)
        entry_ids.append(row.uuid)
    return builder.finish(
        report,
        host=HOST,
        source=SOURCE,
        path=path,
        session_id=string(first.data.get("sessionId")) or path.stem,
        entry_ids=entry_ids,
        leaf_id=string(leaf[1].get("uuid")) or f"L{leaf[0]}",
        cwd=string(first.data.get("cwd")),
        model=model,
        branch=string(first.data.get("gitBranch")),
        stop_reason=stop_reason,
    )


def _assistant(
    builder: Records, row: _Row, stamp: str, where: str, seen_calls: set[str]
) -> None:
    """Add one assistant row's blocks."""
    content = row.message.get("content")
    if isinstance(content, str):
        builder.say(content, stamp)
        return
    for block in _blocks(row):
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "thinking" and isinstance(block.get("thinking"), str):
            builder.reasoning(block["thinking"], stamp)
        elif kind == "text" and isinstance(block.get("text"), str):
            builder.say(block["text"], stamp)
        elif kind == "tool_use":
            call_id = block.get("id")
            if isinstance(call_id, str) and call_id in seen_calls:
                continue  # a row written twice
            if builder.call(
                call_id, block.get("name"), block.get("input"), stamp, where
            ):
                seen_calls.add(str(call_id))


def _results(builder: Records, row: _Row, stamp: str, where: str) -> None:
    for block in _blocks(row):
        if not isinstance(block, dict) or block.get("type") != "tool_result":
            continue
        status = block.get("is_error")
        builder.result(
            block.get("tool_use_id"),
            None,
            text_of(block.get("content")),
            status if isinstance(status, bool) else None,
            stamp,
            where,
        )
