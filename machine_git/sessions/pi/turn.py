"""Reading a Pi session: the active branch of its entry tree, as one turn.

Branching writes new children under an older entry in the same file, so the
active branch is the chain of parents from the leaf (the last entry, or
``--entry``); versions 1 and 2 are migrated in memory as pi migrates them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from machine_git.core.errors import SessionError
from machine_git.core.errors import TurnError
from machine_git.rows import context
from machine_git.rows.context import Context
from machine_git.sessions import ReadReport
from machine_git.sessions import Turn
from machine_git.sessions import files
from machine_git.sessions import piai
from machine_git.sessions.records import Records
from machine_git.sessions.values import EPOCH
from machine_git.sessions.values import iso as _iso
from machine_git.sessions.values import string as _str

HOST = "pi"
KNOWN_TYPES = frozenset(
    {
        "message",
        "model_change",
        "thinking_level_change",
        "compaction",
        "branch_summary",
        "custom",
        "custom_message",
        "label",
        "session_info",
    }
)
# The custom entry machine's Pi extension writes at every agent start (when
# it changed): the system prompt and the active tools of the run that follows.
CONTEXT_ENTRY = "machine-context"


def recognize(value: Any) -> str | None:
    """``pi`` for a parsed Pi session header line (SessionReader)."""
    is_header = isinstance(value, dict) and value.get("type") == "session"
    return HOST if is_header else None


class _Entry:
    __slots__ = ("data", "id", "line", "parent", "type")

    def __init__(self, data: dict[str, Any], line: int, id_: str, parent: str | None):
        self.data = data
        self.line = line
        self.id = id_
        self.parent = parent
        self.type = data.get("type")


def read_turn(
    path: Path, entry: str | None = None, form: str | None = None
) -> tuple[Turn, ReadReport]:
    """The last agent run on the active branch of the session at ``path``.

    (``form`` is for the SessionReader interface: Pi has one format.)
    """
    report = ReadReport(str(path))
    header, entries = _load(path, report)
    by_id = {e.id: e for e in entries}
    if not entries:
        raise TurnError(f"{path}: the session has no entries yet")
    if entry is not None:
        leaf = by_id.get(entry)
        if leaf is None:
            raise SessionError(f"{path}: no entry {entry!r} in this session")
    else:
        leaf = entries[-1]
    return _turn(path, header, _branch(leaf, by_id, report), leaf, report)


def model_of(path: Path) -> str | None:
    """``provider/model`` the session at ``path`` continues with, if it names one.

    As pi restores it (session-manager.js ``buildSessionContext``): the last
    ``model_change`` or assistant message on the active branch of the last entry.
    """
    _, entries = _load(path, ReadReport(str(path)))
    if not entries:
        return None
    by_id = {e.id: e for e in entries}
    found: str | None = None
    for e in _branch(entries[-1], by_id, ReadReport(str(path))):
        message = _message(e)
        if e.type == "model_change":
            provider, model = _str(e.data.get("provider")), _str(e.data.get("modelId"))
        elif message is not None and message.get("role") == "assistant":
            provider, model = _str(message.get("provider")), _str(message.get("model"))
        else:
            continue
        if provider and model:
            found = f"{provider}/{model}"
    return found


def _load(path: Path, report: ReadReport) -> tuple[dict[str, Any], list[_Entry]]:
    data = files.read_bytes(path)  # a regular file, size-limited, BOM dropped
    header: dict[str, Any] | None = None
    raw: list[tuple[int, dict[str, Any]]] = []
    for number, value in files.json_lines(data, report):
        if not isinstance(value.get("type"), str):
            report.corrupt_lines.append(number)
        elif value["type"] == "session" and header is None:
            header = value
        else:
            raw.append((number, value))
    if header is None:  # (an empty file is a TurnError in read_bytes)
        raise SessionError(f"{path}: not a Pi session (no 'session' header line)")
    version = header.get("version", 1)
    if not isinstance(version, int) or version < 1:
        raise SessionError(f"{path}: unsupported session version {version!r}")
    if version > 3:
        raise SessionError(
            f"{path}: session version {version} is newer than this machine reads (1-3)"
        )
    return header, _migrate(version, raw, report)


def _migrate(
    version: int, raw: list[tuple[int, dict[str, Any]]], report: ReadReport
) -> list[_Entry]:
    entries: list[_Entry] = []
    previous: str | None = None
    for number, value in raw:
        kind = value["type"]
        if version == 1:
            # v1 is linear and has no ids: pi chains entries in file order.
            id_ = f"L{number}"
            parent = previous
        else:
            raw_id = value.get("id")
            if not isinstance(raw_id, str) or not raw_id:
                report.corrupt_lines.append(number)
                continue
            id_ = raw_id
            raw_parent = value.get("parentId")
            parent = raw_parent if isinstance(raw_parent, str) else None
        if version <= 2 and kind == "message":
            message = value.get("message")
            if isinstance(message, dict) and message.get("role") == "hookMessage":
                value = {**value, "message": {**message, "role": "custom"}}
        if kind not in KNOWN_TYPES:
            report.unknown_types.append((number, kind))
        entries.append(_Entry(value, number, id_, parent))
        previous = id_
    return entries


def _branch(leaf: _Entry, by_id: dict[str, _Entry], report: ReadReport) -> list[_Entry]:
    chain: list[_Entry] = []
    seen: set[str] = set()
    node: _Entry | None = leaf
    while node is not None:
        if node.id in seen:
            raise SessionError(f"{report.path}: entry {node.id!r} is its own ancestor")
        seen.add(node.id)
        chain.append(node)
        if node.parent is None:
            break
        parent = by_id.get(node.parent)
        if parent is None:
            report.dropped.append(
                f"branch cut at line {node.line}: parent {node.parent!r} is missing"
            )
        node = parent
    chain.reverse()
    return chain


def _message(entry: _Entry) -> dict[str, Any] | None:
    if entry.type != "message":
        return None
    message = entry.data.get("message")
    return message if isinstance(message, dict) else None


def _turn(
    path: Path,
    header: dict[str, Any],
    branch: list[_Entry],
    leaf: _Entry,
    report: ReadReport,
) -> tuple[Turn, ReadReport]:
    start = None
    for index in range(len(branch) - 1, -1, -1):
        message = _message(branch[index])
        if message is not None and message.get("role") == "user":
            start = index
            break
    if start is None:
        if branch and branch[0].parent is not None and report.corrupt_lines:
            raise TurnError(files.cut_short(path, report, branch[0].line))
        raise TurnError(f"{path}: no user message on the active branch")
    files.check_whole(path, report, branch[start].line, leaf.line)
    model = provider = None
    for e in branch[:start]:
        if e.type == "model_change":
            model = _str(e.data.get("modelId")) or model
            provider = _str(e.data.get("provider")) or provider
    session_id = _str(header.get("id")) or path.stem
    cwd = _str(header.get("cwd"))
    builder = Records(_iso(header.get("timestamp")) or EPOCH)
    entry_ids: list[str] = []
    stop_reason: str | None = None
    error: str | None = None
    for e in branch[start:]:
        if e.type == "model_change":
            model = _str(e.data.get("modelId")) or model
            provider = _str(e.data.get("provider")) or provider
        message = _message(e)
        if message is None:
            continue
        role = message.get("role")
        stamp = builder.stamp(e.data.get("timestamp"), message.get("timestamp"))
        if role == "user" and not entry_ids:
            builder.user(piai.user_text(message), stamp, piai.user_images(message))
        elif role == "assistant":
            piai.add_assistant(builder, message, stamp, e.line)
            model = _str(message.get("model")) or model
            provider = _str(message.get("provider")) or provider
            stop_reason = _str(message.get("stopReason"))
            error = _str(message.get("errorMessage"))
        elif role == "toolResult":
            piai.add_tool_result(builder, message, stamp, e.line)
        else:
            continue  # bashExecution, custom, summaries: not the agent's run
        entry_ids.append(e.id)
    return builder.finish(
        report,
        context=_context(branch),
        host=HOST,
        source=HOST,
        path=path,
        session_id=session_id,
        entry_ids=entry_ids,
        leaf_id=leaf.id,
        cwd=cwd,
        model=model,
        provider=provider,
        stop_reason=stop_reason,
        error=error,
    )


def _context(branch: list[_Entry]) -> Context | None:
    """The last ``machine-context`` entry on the branch: what the run had.

    The extension appends one at each agent start whose system prompt or
    tools differ from the last one on the branch, so the last one up to the
    turn's leaf is the turn's. None when the session has none (the extension
    was not installed, or it predates this).
    """
    for e in reversed(branch):
        if e.type == "custom" and e.data.get("customType") == CONTEXT_ENTRY:
            data = e.data.get("data")
            if isinstance(data, dict):
                return context.make(data.get("systemPrompt"), data.get("tools"))
    return None
