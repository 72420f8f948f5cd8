"""Reading a Claude Code session: the chain of rows from the last one, as one turn.

Rows form a tree through ``uuid``/``parentUuid`` (a rewind writes a new
branch in the same file). One API response is written as several assistant
rows sharing ``message.id``, one content block each: they are grouped back.
Subagent rows and harness noise are dropped.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

from machine_git.core.errors import SessionError
from machine_git.core.errors import TurnError
from machine_git.rows import context
from machine_git.rows.context import Context
from machine_git.sessions import ReadReport
from machine_git.sessions import Turn
from machine_git.sessions import files
from machine_git.sessions.records import Records
from machine_git.sessions.values import images_of
from machine_git.sessions.values import string
from machine_git.sessions.values import text_of

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Image

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
        # Claude Code 2.1.x: what each API request carried (the context is
        # read from these), cost and tool tallies.
        "api-request",
        "api-request-blob",
        "api-request-shape",
        "atis-latch",
        "cost-state",
        "tools-used",
    }
)
# The command a user typed (``/name args``) as Claude Code writes it.
_COMMAND = re.compile(r"<command-name>\s*(/?[^<]*?)\s*</command-name>")
_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.DOTALL)
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
# What machine's own commands (/good, /bad, /machine: agents/claude_commands.py)
# expand to: their turns are machine's, never the user's.
MACHINE_COMMAND = "<machine-command>"
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
        known = kind in BOOKKEEPING or kind in ("user", "assistant")
        if not known and isinstance(row.get("message"), dict):
            report.unknown_types.append((number, kind))
        uuid = string(row.get("uuid"))
        if uuid:
            by_uuid[uuid] = (number, row)
        order.append((number, row))
    if not order:
        raise SessionError(f"{path}: not a Claude Code session (no rows with a type)")
    chain, cut = _chain(path, order, by_uuid, entry)
    branch = [_Row(n, r, r["message"]) for n, r in chain if _conversational(r)]
    turn_rows = _before_machine(branch)
    opening = _opening(turn_rows)
    if opening is None:
        if cut is not None and report.corrupt_lines:
            raise TurnError(files.cut_short(path, report, cut))
        raise TurnError(f"{path}: no user message on the active branch")
    start, text = opening
    leaf = chain[-1]
    if len(turn_rows) < len(branch):  # the turn ends before machine's commands
        leaf = (turn_rows[-1].line, turn_rows[-1].data)
    files.check_whole(path, report, turn_rows[start].line, leaf[0])
    rows_ = _siblings(turn_rows[start:], order, standalone, leaf[0])
    return _turn(path, rows_, text, leaf, report, _shapes(order))


def _before_machine(rows: list[_Row]) -> list[_Row]:
    """The branch without machine's own command turns at its end.

    ``/good`` typed in Claude Code tags the turn before it; its expansion and
    the model's reply are written after that turn, and must not become it.
    """
    while True:
        opening = _opening(rows)
        if opening is None:
            return rows
        cut = next(
            (
                j
                for j in range(opening[0], len(rows))
                if rows[j].is_user
                and rows[j].data.get("isMeta") is True
                and _raw_text(rows[j]).lstrip().startswith(MACHINE_COMMAND)
            ),
            None,
        )
        if cut is None:
            return rows
        # The command row just before the expansion goes too.
        if cut > 0 and _is_command(rows[cut - 1]):
            cut -= 1
        rows = rows[:cut]


def _conversational(row: dict[str, Any]) -> bool:
    return row.get("type") in ("user", "assistant") and isinstance(
        row.get("message"), dict
    )


def _opening(rows: list[_Row]) -> tuple[int, str] | None:
    """Where the last turn starts on the branch, and what the user said there.

    A prompt command (``/init``, or a custom one from ``.claude/commands/``)
    is written as a ``<command-name>`` row, then the prompt it expands to
    (an ``isMeta`` user row), then the answer: that is a turn, and its text
    is the expanded prompt, what the model was sent. A local command
    (``/cost``, ``/compact``) prints ``<local-command-stdout>`` and gets no
    answer: it is noise.
    """
    for index in range(len(rows) - 1, -1, -1):
        row = rows[index]
        text = _user_text(row)
        if text:
            return index, text
        if not _is_command(row):
            continue
        following = rows[index + 1] if index + 1 < len(rows) else None
        if following is None:
            continue
        if following.is_user and following.data.get("isMeta") is True:
            expanded = _raw_text(following)
            if expanded.lstrip().startswith(MACHINE_COMMAND):
                continue
            if (
                expanded.strip()
                and not _noise(expanded)
                and not _has_results(following)
            ):
                return index, expanded
        elif not following.is_user:
            return index, _typed(row)  # answered with no expansion written down
    return None


def _is_command(row: _Row) -> bool:
    return (
        row.is_user
        and not _has_results(row)
        and _COMMAND.search(_raw_text(row)) is not None
    )


def _typed(row: _Row) -> str:
    """``/name args`` as the user typed it, from a command row."""
    text = _raw_text(row)
    name = _COMMAND.search(text)
    args = _ARGS.search(text)
    typed = name.group(1) if name else ""
    if args and args.group(1).strip():
        typed = f"{typed} {args.group(1).strip()}"
    return typed


def _siblings(
    rows: list[_Row],
    order: list[tuple[int, dict[str, Any]]],
    standalone: bool,
    last: int,
) -> list[_Row]:
    """The turn's rows with the siblings of parallel tool calls put back.

    With parallel calls each result row's parent is its own call row, and the
    next response hangs under one result only, so the chain of parents misses
    sibling calls and results. Rows of the same API response (``message.id``)
    and results of the turn's calls (``tool_use_id``) belong to the turn, if
    they come before its last row (line ``last``).
    """
    first = rows[0].line
    have = {row.line for row in rows}
    responses = {row.message.get("id") for row in rows if not row.is_user} - {None}
    calls = {c for row in rows for c in _call_ids(row)}
    grew = True
    while grew:
        grew = False
        for number, data in order:
            if not first < number < last or number in have:
                continue
            if not _conversational(data):
                continue
            if data.get("isSidechain") is True and not standalone:
                continue
            row = _Row(number, data, data["message"])
            if row.is_user:
                belongs = any(c in calls for c in _result_ids(row))
            else:
                belongs = row.message.get("id") in responses
            if belongs:
                rows.append(row)
                have.add(number)
                responses.add(row.message.get("id"))
                calls.update(_call_ids(row))
                grew = True
    return sorted(rows, key=lambda r: r.line)


def _call_ids(row: _Row) -> list[str]:
    if row.is_user:
        return []
    return [
        b["id"]
        for b in _blocks(row)
        if isinstance(b, dict)
        and b.get("type") == "tool_use"
        and isinstance(b.get("id"), str)
    ]


def _result_ids(row: _Row) -> list[str]:
    return [
        b["tool_use_id"]
        for b in _blocks(row)
        if isinstance(b, dict)
        and b.get("type") == "tool_result"
        and isinstance(b.get("tool_use_id"), str)
    ]


def _shapes(order: list[tuple[int, dict[str, Any]]]) -> _Shapes:
    shapes = _Shapes()
    for _, row in order:
        kind = row.get("type")
        if kind == "api-request-shape":
            key, shape = string(row.get("shapeHash")), row.get("shape")
            if key and isinstance(shape, dict):
                shapes.by_hash[key] = shape
        elif kind == "api-request":
            key, shape_hash = string(row.get("id")), string(row.get("shapeHash"))
            if key and shape_hash:
                shapes.requests[key] = shape_hash
    return shapes


class _Shapes:
    """What Claude Code 2.1.x writes about its requests: ``api-request-shape``
    rows (the system prompt and tools sent, by hash) and ``api-request`` rows
    (each request's shape), named by the assistant rows' ``requestRef``."""

    def __init__(self) -> None:
        self.by_hash: dict[str, dict[str, Any]] = {}
        self.requests: dict[str, str] = {}

    def context(self, rows: list[_Row]) -> Context | None:
        """The context of the turn's first request that recorded one."""
        for row in rows:
            ref = string(row.data.get("requestRef"))
            shape = self.by_hash.get(self.requests.get(ref or "", ""))
            if shape is not None:
                return _context(shape)
        return None


def _context(shape: dict[str, Any]) -> Context | None:
    system = shape.get("system")
    if isinstance(system, list):
        system = "\n\n".join(
            b["text"]
            for b in system
            if isinstance(b, dict) and isinstance(b.get("text"), str)
        )
    tools = shape.get("tools")
    offered = None
    if isinstance(tools, list):
        offered = [
            {
                "name": t.get("name"),
                "description": t.get("description"),
                "parameters": t.get("input_schema"),
            }
            for t in tools
            if isinstance(t, dict)
        ]
    return context.make(system, offered)


def _chain(
    path: Path,
    order: list[tuple[int, dict[str, Any]]],
    by_uuid: dict[str, tuple[int, dict[str, Any]]],
    entry: str | None,
) -> tuple[list[tuple[int, dict[str, Any]]], int | None]:
    """Root-to-leaf rows of the active branch (or file order without links),
    and the line where the branch was cut by a missing parent, if it was.

    A file whose rows link no parent (hand-written, exported, or trimmed, as
    in letta-ai/trajectory's own fixtures) has no tree to follow: it is read
    in file order, as agent-trajectory reads it. A file with links is a tree;
    a compaction boundary names the row before it as ``logicalParentUuid``,
    which the branch follows (the turn before a ``/compact`` is still there).
    """
    if not any(string(row.get("parentUuid")) for _, row in order):
        names = [string(row.get("uuid")) or f"L{n}" for n, row in order]
        if entry is None:
            return order, None
        return order[: files.entries_until(names, entry, path)], None
    if entry is not None:
        leaf = by_uuid.get(entry)
        if leaf is None:
            # Rows without uuids are named by line, and read in file order.
            lines = [f"L{n}" for n, _ in order]
            return order[: files.entries_until(lines, entry, path)], None
    else:
        with_ids = [r for r in order if string(r[1].get("uuid"))]
        if not with_ids:
            return order, None
        leaf = with_ids[-1]
    chain: list[tuple[int, dict[str, Any]]] = []
    seen: set[str] = set()
    cut: int | None = None
    node: tuple[int, dict[str, Any]] | None = leaf
    while node is not None:
        uuid = string(node[1].get("uuid")) or ""
        if uuid in seen:
            raise SessionError(f"{path}: row {uuid!r} is its own ancestor")
        seen.add(uuid)
        chain.append(node)
        parent = string(node[1].get("parentUuid")) or string(
            node[1].get("logicalParentUuid")
        )
        node = by_uuid.get(parent) if parent else None
        if parent and node is None:
            cut = chain[-1][0]
    chain.reverse()
    return chain, cut


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
    if _noise(text):
        return ""
    return text if text.strip() else ""


def _prompt_images(row: _Row) -> list[Image]:
    """The images of the prompt, inline: base64 ``image`` blocks of the row
    the user typed (a pasted picture, an SDK client's image). A command's
    expansion is Claude Code's text: no images. The ``[Image: source: …]``
    companion row naming the file Claude Code saved it to is meta, not read.
    """
    return images_of(row.message.get("content")) if _user_text(row) else []


def _noise(text: str) -> bool:
    head = text.lstrip()
    return head.startswith(NOISE_PREFIXES) or head.startswith(_INTERRUPTED)


def _turn(
    path: Path,
    rows: list[_Row],
    text: str,
    leaf: tuple[int, dict[str, Any]],
    report: ReadReport,
    shapes: _Shapes,
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
            builder.user(text, stamp, _prompt_images(row))
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
            if row.data.get("isApiErrorMessage") is True:
                # The harness's own words about a failed request, not the model's.
                builder.stopped("error", _raw_text(row) or None)
                entry_ids.append(row.uuid)
                continue
            _assistant(builder, row, stamp, where, seen_calls)
            name = string(row.message.get("model"))
            if name and name != _SYNTHETIC:
                model = name
            stop_reason = string(row.message.get("stop_reason")) or stop_reason
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
        context=shapes.context(rows),
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
            images_of(block.get("content")),
        )
