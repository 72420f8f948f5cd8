"""Letta and Letta Code sessions, in the four forms they reach this machine.

- Letta Code's local backend (``letta --backend local``):
  ``$LETTA_LOCAL_BACKEND_DIR`` or ``~/.letta/lc-local-backend``, one folder per
  conversation under ``conversations/`` holding ``messages.jsonl``: pi-ai
  messages (the Pi shape) plus ``id`` and ``metadata`` (hosts.md §3.4).
- Letta Code's client-side transcript: ``$LETTA_TRANSCRIPT_ROOT`` or
  ``~/.letta/transcripts``, ``<agent>/<conversation>/transcript.jsonl``, rows
  of ``kind`` user, assistant, reasoning, tool_call (call and result in one
  row) and error.
- A Letta API message history saved as JSON: what a mod's ``getHistory()`` or
  the messages API returns, a list of ``message_type`` messages (§3.2).
- A Letta Agent File (``.af``): an exported agent with its ``messages`` (§3.6).

Letta Code injects ``<system-reminder>`` blocks into user messages; they are
not what the user typed, so they are removed from the user text, but the
device-info reminder is where the working directory is written down.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from pathlib import Path
from typing import Any

from machine_git import context
from machine_git import jsonio
from machine_git.context import Context
from machine_git.errors import MachineError
from machine_git.errors import NoSessionError
from machine_git.errors import SessionError
from machine_git.errors import TurnError
from machine_git.sessions import ReadReport
from machine_git.sessions import Turn
from machine_git.sessions import files
from machine_git.sessions import piai
from machine_git.sessions.records import Records
from machine_git.sessions.records import args_text
from machine_git.sessions.records import meta
from machine_git.sessions.records import string
from machine_git.sessions.records import text_of

HOST = "letta"
CODE = "letta-code"  # meta.source of Letta Code sessions (agent-trajectory's name)
AGENT_FILE = "letta"  # meta.source of an Agent File

_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
_CWD = re.compile(r"\*\*Current working directory\*\*:\s*(\S[^\n]*)")
_NAIVE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?$")
_PI_ROLES = frozenset({"user", "assistant", "toolResult"})
_TRANSCRIPT_KINDS = frozenset({"user", "assistant", "reasoning", "tool_call", "error"})
# Letta's packed user-role messages that are not the user speaking.
_PACKETS = frozenset({"login", "heartbeat", "system_alert"})
_SEND_MESSAGE = "send_message"
_MEMGPT_TYPES = frozenset({"memgpt_agent", "memgpt_v2_agent"})
_ERROR_STOPS = frozenset(
    {
        "error",
        "llm_api_error",
        "invalid_llm_response",
        "invalid_tool_call",
        "context_window_overflow_in_system_prompt",
    }
)


# -- where sessions live ---------------------------------------------------------------


def backend_dir() -> Path:
    """``$LETTA_LOCAL_BACKEND_DIR`` or ``~/.letta/lc-local-backend``."""
    env = os.environ.get("LETTA_LOCAL_BACKEND_DIR")
    return (
        Path(env).expanduser() if env else Path.home() / ".letta" / "lc-local-backend"
    )


def transcript_root() -> Path:
    """``$LETTA_TRANSCRIPT_ROOT`` or ``~/.letta/transcripts``."""
    env = os.environ.get("LETTA_TRANSCRIPT_ROOT")
    return Path(env).expanduser() if env else Path.home() / ".letta" / "transcripts"


def conversation_folder(conversation_id: str | None, agent_id: str | None) -> str:
    """The local backend's folder name: base64url of ``conversation:<id>``.

    An agent's default conversation is ``default:<agentId>``.
    """
    if conversation_id and conversation_id != "default":
        key = f"conversation:{conversation_id}"
    else:
        key = f"default:{agent_id}"
    return base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")


def find_session(project: Path) -> Path:
    """The newest Letta Code session of ``project``.

    Candidates: the conversation the project's ``.letta/settings.local.json``
    names as ``lastSession`` (its transcript and its local-backend folder), and
    every local-backend conversation whose recorded working directory is in the
    project.
    """
    backend = backend_dir() / "conversations"
    candidates: list[Path] = []
    agent, conversation = _last_session(project)
    if agent:
        if conversation:
            candidates.append(
                transcript_root() / agent / conversation / "transcript.jsonl"
            )
        candidates.append(
            backend / conversation_folder(conversation, agent) / "messages.jsonl"
        )
    try:
        folders = [p for p in backend.iterdir() if p.is_dir()]
    except OSError:
        folders = []
    for folder in folders:
        path = folder / "messages.jsonl"
        if path not in candidates and files.inside(_head_cwd(path), project):
            candidates.append(path)
    found = files.newest(p for p in candidates if p.is_file())
    if found is None:
        raise NoSessionError(
            f"no Letta Code session for {project} in {backend} or "
            f"{transcript_root()} (run letta in the project first, set "
            "LETTA_LOCAL_BACKEND_DIR or LETTA_TRANSCRIPT_ROOT, or pass --session PATH)"
        )
    return found


def _last_session(project: Path) -> tuple[str | None, str | None]:
    try:
        data = jsonio.loads((project / ".letta" / "settings.local.json").read_bytes())
    except (OSError, ValueError):
        return None, None
    last = data.get("lastSession") if isinstance(data, dict) else None
    if not isinstance(last, dict):
        return None, None
    agent, conversation = (
        string(last.get("agentId")),
        string(last.get("conversationId")),
    )
    if not _safe(agent) or not _safe(conversation):
        return None, None  # not an id: never let it walk out of the folder
    return agent, conversation


def _safe(name: str | None) -> bool:
    return name is None or not (set(name) & {"/", "\\"} or name in {".", ".."})


def _head_cwd(path: Path, lines: int = 20) -> str | None:
    """The working directory written in the first user messages of a file."""
    try:
        with path.open("rb") as f:
            for _ in range(lines):
                line = f.readline(files.MAX_LINE)
                if not line:
                    break
                try:
                    row = jsonio.loads(line)
                except ValueError:
                    continue
                if isinstance(row, dict) and row.get("role") == "user":
                    cwd = cwd_of(text_of(row.get("content")))
                    if cwd:
                        return cwd
    except OSError:
        return None
    return None


# -- recognizing the forms -------------------------------------------------------------


def looks_like_local(row: Any) -> bool:
    """A parsed line of a local-backend ``messages.jsonl`` (a bare pi-ai message)."""
    return (
        isinstance(row, dict)
        and isinstance(row.get("role"), str)
        and row["role"] in _PI_ROLES
        and "type" not in row
        and ("content" in row or "toolCallId" in row)
    )


def looks_like_transcript(row: Any) -> bool:
    """A parsed line of a Letta Code ``transcript.jsonl``."""
    return (
        isinstance(row, dict)
        and isinstance(row.get("kind"), str)
        and row["kind"] in _TRANSCRIPT_KINDS
        and ("captured_at" in row or "text" in row or "argsText" in row)
    )


def looks_like_history(value: Any) -> bool:
    """A Letta API message list (or an object holding one under ``messages``)."""
    messages = _history_list(value)
    if not messages:
        return False
    return all(
        isinstance(m, dict) and isinstance(m.get("message_type"), str)
        for m in messages[:20]
    )


def looks_like_agent_file(value: Any) -> bool:
    """A Letta Agent File: an object with an ``agents`` list of agents."""
    if not isinstance(value, dict) or not isinstance(value.get("agents"), list):
        return False
    agents = value["agents"]
    return bool(agents) and isinstance(agents[0], dict) and "messages" in agents[0]


def _history_list(value: Any) -> list[Any] | None:
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        for key in ("messages", "items", "data"):
            if isinstance(value.get(key), list):
                return list(value[key])
    return None


# -- shared text rules -----------------------------------------------------------------


def strip_reminders(text: str) -> str:
    """``text`` without Letta Code's injected ``<system-reminder>`` blocks."""
    return _REMINDER.sub("", text).strip()


def user_text(content: Any) -> str:
    """What the user typed: text blocks minus reminders, images as ``[image]``."""
    if isinstance(content, str):
        return strip_reminders(content)
    if not isinstance(content, list):
        return ""
    parts = [strip_reminders(text_of([block])) for block in content]
    return "\n".join(p for p in parts if p).strip()


def cwd_of(text: str) -> str | None:
    """The working directory a device-info reminder records, if any."""
    found = _CWD.search(text)
    if not found:
        return None
    return found.group(1).strip().strip("`") or None


def _time(value: Any) -> Any:
    # Letta's Python server may write naive UTC times; the schema needs a zone.
    if isinstance(value, str) and _NAIVE_TIME.match(value):
        return value + "Z"
    return value


def _unpack(text: str) -> tuple[str | None, str]:
    """Letta's packed user messages: ``{"type": "user_message", "message": ...}``.

    Returns (packet type or None if not packed, the text).
    """
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None, text
    try:
        value = jsonio.loads(stripped)
    except ValueError:
        return None, text
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        return None, text
    message = value.get("message")
    return value["type"], message if isinstance(message, str) else ""


def _last_user(flags: list[bool], path: Path) -> int:
    for index in range(len(flags) - 1, -1, -1):
        if flags[index]:
            return index
    raise TurnError(f"{path}: no user message in this session")


# -- local backend (pi-ai messages.jsonl) ----------------------------------------------


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


def read_local(path: Path, entry: str | None = None) -> tuple[Turn, ReadReport]:
    """The last turn of a Letta Code local-backend ``messages.jsonl``."""
    report = ReadReport(str(path))
    rows: list[tuple[int, dict[str, Any]]] = []
    for number, row in files.load_jsonl(path, report):
        role = row.get("role")
        if not isinstance(role, str):
            report.corrupt_lines.append(number)
        elif role not in _PI_ROLES:
            report.unknown_types.append((number, role))
        else:
            rows.append((number, row))
    ids = [string(row.get("id")) or f"L{n}" for n, row in rows]
    rows = rows[: files.entries_until(ids, entry, path)]
    ids = ids[: len(rows)]
    texts = [
        user_text(row.get("content")) if row["role"] == "user" else ""
        for _, row in rows
    ]
    start = _last_user([bool(t) for t in texts], path)
    cwd = None
    for _, row in rows[: start + 1]:
        if row["role"] == "user":
            cwd = cwd_of(text_of(row.get("content"))) or cwd
    agent = conversation = None
    for _, row in rows:
        data = row.get("metadata")
        if isinstance(data, dict):
            agent = string(data.get("agent_id")) or agent
            conversation = string(data.get("conversation_id")) or conversation
    agent, conversation = _conversation_json(path, agent, conversation)
    builder = Records()
    model = provider = stop_reason = error = None
    for (number, row), text in zip(rows[start:], texts[start:], strict=False):
        data = row.get("metadata")
        created = data.get("created_at") if isinstance(data, dict) else None
        stamp = builder.stamp(created, row.get("timestamp"))
        builder.fallback = stamp
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
    builder.end_calls()
    report.dropped.extend(builder.dropped)
    session = "/".join(p for p in (agent, conversation) if p)
    session = session or path.resolve().parent.name or path.stem
    return (
        Turn(
            context=_local_context(path),
            host=HOST,
            session_id=session,
            session_file=str(path),
            records=[meta(CODE, cwd, model, None), *builder.records],
            entry_ids=ids[start:],
            leaf_id=ids[-1],
            model=model,
            provider=provider,
            cwd=cwd,
            stop_reason=stop_reason,
            error=error,
            dropped=builder.dropped,
        ),
        report,
    )


def _conversation_json(
    path: Path, agent: str | None, conversation: str | None
) -> tuple[str | None, str | None]:
    if agent and conversation:
        return agent, conversation
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


# -- transcript.jsonl ------------------------------------------------------------------


def read_transcript(path: Path, entry: str | None = None) -> tuple[Turn, ReadReport]:
    """The last turn of a Letta Code ``transcript.jsonl``."""
    report = ReadReport(str(path))
    rows: list[tuple[int, dict[str, Any]]] = []
    for number, row in files.load_jsonl(path, report):
        kind = row.get("kind")
        if not isinstance(kind, str):
            report.corrupt_lines.append(number)
        elif kind not in _TRANSCRIPT_KINDS:
            report.unknown_types.append((number, kind))
        else:
            rows.append((number, row))
    ids = [
        string(row.get("source_line_id"))
        or string(row.get("source_message_id"))
        or f"L{n}"
        for n, row in rows
    ]
    rows = rows[: files.entries_until(ids, entry, path)]
    ids = ids[: len(rows)]
    texts = [
        strip_reminders(row["text"])
        if row["kind"] == "user" and isinstance(row.get("text"), str)
        else ""
        for _, row in rows
    ]
    start = _last_user([bool(t) for t in texts], path)
    builder = Records()
    ending: tuple[str, str | None] | None = None
    for index in range(start, len(rows)):
        number, row = rows[index]
        kind, text = row["kind"], row.get("text")
        text = text if isinstance(text, str) else ""
        stamp = builder.stamp(row.get("captured_at"))
        builder.fallback = stamp
        if index == start:
            builder.user(texts[index], stamp)
        elif kind == "reasoning":
            builder.reasoning(text, stamp)
        elif kind == "assistant":
            builder.say(text, stamp)
            if text.strip():
                ending = None
        elif kind == "error":
            # A provider error the harness logged; it ended the turn only if
            # no answer came after it.
            ending = ("error", text or None)
        elif kind == "tool_call":
            call_id = (
                string(row.get("source_line_id"))
                or string(row.get("source_message_id"))
                or f"letta-code-tool-line-{number}"
            )
            args = row.get("argsText")
            builder.call(
                call_id,
                row.get("name"),
                args if isinstance(args, str) and args else "{}",
                stamp,
                f"line {number}",
            )
            ok, result = row.get("resultOk"), row.get("resultText")
            if isinstance(result, str) or isinstance(ok, bool):
                builder.result(
                    call_id,
                    None,
                    result if isinstance(result, str) else "",
                    (not ok) if isinstance(ok, bool) else None,
                    stamp,
                    f"line {number}",
                )
    builder.end_calls()
    report.dropped.extend(builder.dropped)
    # The layout is <agent>/<conversation>/transcript.jsonl; the file has no ids.
    folder = path.resolve().parent
    session = folder.name or path.stem
    if folder.parent.name.startswith("agent-"):
        session = f"{folder.parent.name}/{session}"
    return (
        Turn(
            host=HOST,
            session_id=session,
            session_file=str(path),
            records=[meta(CODE, None, None, None), *builder.records],
            entry_ids=ids[start:],
            leaf_id=ids[-1],
            stop_reason=ending[0] if ending else None,
            error=ending[1] if ending else None,
            dropped=builder.dropped,
        ),
        report,
    )


# -- Letta API message history (JSON) --------------------------------------------------


def read_history(path: Path, entry: str | None = None) -> tuple[Turn, ReadReport]:
    """The last turn of a saved Letta API message list (oldest or newest first)."""
    report = ReadReport(str(path))
    value = files.load_json(path)
    listed = _history_list(value)
    if listed is None:
        raise SessionError(f"{path}: not a Letta message list")
    messages: list[dict[str, Any]] = []
    for number, message in enumerate(listed, start=1):
        if isinstance(message, dict) and isinstance(message.get("message_type"), str):
            messages.append(message)
        else:
            report.dropped.append(f"item {number} is not a Letta message")
    if not messages:
        raise TurnError(f"{path}: the message list is empty")
    messages = _oldest_first(messages)
    ids = [string(m.get("id")) or f"#{n}" for n, m in enumerate(messages, start=1)]
    messages = messages[: files.entries_until(ids, entry, path)]
    ids = ids[: len(messages)]
    texts = [_history_user(m) for m in messages]
    start = _last_user([bool(t) for t in texts], path)
    cwd = None
    for message in messages[: start + 1]:
        if message["message_type"] == "user_message":
            cwd = cwd_of(text_of(message.get("content"))) or cwd
    answered = {
        call_id
        for m in messages
        if m["message_type"] == "tool_return_message"
        for call_id, _, _ in _returns(m)
    }
    builder = Records()
    seen_calls: set[str] = set()
    ending: tuple[str, str | None] | None = None
    unknown: list[str] = []
    for index in range(start, len(messages)):
        message = messages[index]
        kind = message["message_type"]
        stamp = builder.stamp(_time(message.get("date")))
        builder.fallback = stamp
        where = f"message {ids[index]}"
        if index == start:
            builder.user(texts[index], stamp)
        elif kind == "reasoning_message":
            reasoning = message.get("reasoning")
            builder.reasoning(reasoning if isinstance(reasoning, str) else "", stamp)
        elif kind == "assistant_message":
            text = text_of(message.get("content"))
            builder.say(text, stamp)
            if message.get("is_err") is True:
                ending = ("error", text or None)
            elif text.strip():
                ending = None
        elif kind in ("tool_call_message", "approval_request_message"):
            for call in _calls(message):
                call_id = call.get("tool_call_id")
                if isinstance(call_id, str) and call_id in seen_calls:
                    continue  # the same call, requested then executed
                if builder.call(
                    call_id, call.get("name"), call.get("arguments"), stamp, where
                ):
                    seen_calls.add(str(call_id))
            builder.end_calls()
        elif kind == "tool_return_message":
            for call_id, text, failed in _returns(message):
                builder.result(call_id, None, text, failed, stamp, where)
        elif kind == "approval_response_message":
            # Client-side tools (Letta Code's) may send their results here;
            # a tool_return_message for the same call wins.
            for call_id, text, failed in _approval_returns(message):
                if call_id not in answered:
                    builder.result(call_id, None, text, failed, stamp, where)
        elif kind == "stop_reason":
            reason = string(message.get("stop_reason"))
            if reason == "cancelled":
                ending = ("aborted", "cancelled")
            elif reason in _ERROR_STOPS:
                ending = ("error", reason)
        elif kind not in (
            "user_message",
            "system_message",
            "hidden_reasoning_message",
            "usage_statistics",
            "ping",
            "event_message",
            "summary_message",
        ):
            unknown.append(kind)
    builder.end_calls()
    if unknown:
        names = ", ".join(repr(k) for k in sorted(set(unknown))[:5])
        report.dropped.append(f"{len(unknown)} message(s) of unknown type {names}")
    report.dropped.extend(builder.dropped)
    return (
        Turn(
            host=HOST,
            session_id=_history_session(value, messages),
            session_file=str(path),
            records=[meta(CODE, cwd, None, None), *builder.records],
            entry_ids=ids[start:],
            leaf_id=ids[-1],
            cwd=cwd,
            stop_reason=ending[0] if ending else None,
            error=ending[1] if ending else None,
            dropped=builder.dropped,
            context=context.make(
                _system_before(messages, start, "system_message"), None
            ),
        ),
        report,
    )


def _system_before(messages: list[dict[str, Any]], start: int, kind: str) -> Any:
    """The text of the last system message before the turn, or None.

    Letta keeps the compiled system prompt (memory blocks included) as the
    first in-context message and recompiles it in place when memory changes,
    so it is the newest one, as with the local backend's system-prompt.json.
    """
    for message in reversed(messages[:start]):
        if message.get("message_type", message.get("role")) == kind:
            return text_of(message.get("content"))
    return None


def _oldest_first(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seqs = [m.get("seq_id") for m in messages]
    if all(isinstance(s, int) and not isinstance(s, bool) for s in seqs):
        return [m for _, m in sorted(zip(seqs, messages, strict=True), key=_first)]
    dates = [m.get("date") for m in messages]
    first, last = dates[0], dates[-1]
    if isinstance(first, str) and isinstance(last, str) and first > last:
        return list(reversed(messages))  # order="desc"
    return messages


def _first(pair: tuple[Any, Any]) -> Any:
    return pair[0]


def _history_user(message: dict[str, Any]) -> str:
    if message["message_type"] != "user_message":
        return ""
    text = user_text(message.get("content"))
    packet, unpacked = _unpack(text)
    if packet is None:
        return text
    return strip_reminders(unpacked) if packet == "user_message" else ""


def _calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        return [c for c in calls if isinstance(c, dict)]
    single = message.get("tool_call")
    return [single] if isinstance(single, dict) else []


def _returns(message: dict[str, Any]) -> list[tuple[str | None, str, bool | None]]:
    failed_message = message.get("is_err") is True
    returns = message.get("tool_returns")
    items: list[dict[str, Any]]
    if isinstance(returns, list) and returns:
        items = [r for r in returns if isinstance(r, dict)]
    else:
        items = [message]
    out: list[tuple[str | None, str, bool | None]] = []
    for item in items:
        status = item.get("status")
        failed: bool | None = None
        if status in ("success", "error"):
            failed = status == "error"
        if failed_message:
            failed = True
        out.append(
            (
                string(item.get("tool_call_id")),
                _return_text(item.get("tool_return")),
                failed,
            )
        )
    return out


def _approval_returns(
    message: dict[str, Any],
) -> list[tuple[str | None, str, bool | None]]:
    approvals = message.get("approvals")
    if not isinstance(approvals, list):
        return []
    tools = [a for a in approvals if isinstance(a, dict) and a.get("type") == "tool"]
    return _returns({"tool_returns": tools}) if tools else []


def _return_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return text_of(value) if isinstance(value, list) else jsonio.compact(value)


def _history_session(value: Any, messages: list[dict[str, Any]]) -> str:
    # Letta message ids are unique on their own, so the session id only has
    # to be stable: the conversation or agent when known, else a constant.
    for holder in [value, *messages]:
        if isinstance(holder, dict):
            for key in ("conversation_id", "agent_id"):
                found = string(holder.get(key))
                if found:
                    return found
    return "letta-api"


# -- Agent File (.af) ------------------------------------------------------------------


def read_agent_file(path: Path, entry: str | None = None) -> tuple[Turn, ReadReport]:
    """The last turn of the (first) agent in a Letta Agent File."""
    report = ReadReport(str(path))
    value = files.load_json(path)
    if not looks_like_agent_file(value):
        raise SessionError(f"{path}: not a Letta Agent File (no agents with messages)")
    agents = value["agents"]
    if len(agents) > 1:
        report.dropped.append(f"{len(agents) - 1} more agent(s) in the file not read")
    agent: dict[str, Any] = agents[0]
    listed = agent.get("messages")
    if not isinstance(listed, list):
        raise SessionError(f"{path}: the agent's messages are not a list")
    messages: list[dict[str, Any]] = []
    for number, message in enumerate(listed, start=1):
        if isinstance(message, dict) and isinstance(message.get("role"), str):
            messages.append(message)
        else:
            report.dropped.append(f"message {number} is not a Letta message")
    if not messages:
        raise TurnError(f"{path}: the agent has no messages")
    ids = [string(m.get("id")) or f"#{n}" for n, m in enumerate(messages, start=1)]
    messages = messages[: files.entries_until(ids, entry, path)]
    ids = ids[: len(messages)]
    texts = [_agent_user(m) for m in messages]
    start = _last_user([bool(t) for t in texts], path)
    # Agents that answer through send_message think in their content text.
    thoughts = string(agent.get("agent_type")) in _MEMGPT_TYPES or any(
        call[1] == _SEND_MESSAGE for m in messages for call in _af_calls(m)
    )
    builder = Records()
    hidden: set[str] = set()  # send_message calls: their "result" is not a tool's
    config = agent.get("llm_config")
    model = string(config.get("model")) if isinstance(config, dict) else None
    for index in range(start, len(messages)):
        message = messages[index]
        role = message["role"]
        stamp = builder.stamp(_time(message.get("created_at")))
        builder.fallback = stamp
        where = f"message {ids[index]}"
        model = string(message.get("model")) or model
        if index == start:
            builder.user(texts[index], stamp)
        elif role in ("assistant", "approval"):
            _af_assistant(builder, message, stamp, where, thoughts, hidden)
        elif role == "tool":
            for call_id, text, failed in _af_returns(message):
                if call_id not in hidden:
                    builder.result(
                        call_id, message.get("name"), text, failed, stamp, where
                    )
    builder.end_calls()
    report.dropped.extend(builder.dropped)
    return (
        Turn(
            host=HOST,
            session_id=_agent_session(agent, messages),
            session_file=str(path),
            records=[meta(AGENT_FILE, None, model, None), *builder.records],
            entry_ids=ids[start:],
            leaf_id=ids[-1],
            model=model,
            dropped=builder.dropped,
            context=context.make(
                _system_before(messages, start, "system"), _af_tools(value, agent)
            ),
        ),
        report,
    )


def _af_tools(value: dict[str, Any], agent: dict[str, Any]) -> list[Any] | None:
    """The agent's tools as its file declares them (``json_schema``), or None.

    An Agent File lists every tool once (``tools``, each with the OpenAI
    function schema the model is sent) and each agent names its own by
    ``tool_ids``. If any of them has no schema the declaration is unknown: a
    partial list would teach the model a different set of tools.
    """
    ids = agent.get("tool_ids")
    listed = value.get("tools")
    if not isinstance(ids, list) or not isinstance(listed, list):
        return None
    by_id = {t.get("id"): t for t in listed if isinstance(t, dict)}
    schemas = [(by_id.get(i) or {}).get("json_schema") for i in ids]
    if not all(isinstance(s, dict) and s.get("name") for s in schemas):
        return None
    return schemas


def _agent_user(message: dict[str, Any]) -> str:
    if message["role"] != "user":
        return ""
    text = user_text(message.get("content"))
    packet, unpacked = _unpack(text)
    if packet is None:
        return text
    return strip_reminders(unpacked) if packet == "user_message" else ""


def _af_calls(message: dict[str, Any]) -> list[tuple[Any, Any, Any]]:
    calls = message.get("tool_calls")
    out: list[tuple[Any, Any, Any]] = []
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, dict):
            continue
        function = call.get("function")
        function = function if isinstance(function, dict) else {}
        out.append((call.get("id"), function.get("name"), function.get("arguments")))
    return out


def _af_assistant(
    builder: Records,
    message: dict[str, Any],
    stamp: str,
    where: str,
    thoughts: bool,
    hidden: set[str],
) -> None:
    content = message.get("content")
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, dict) and block.get("type") == "reasoning":
            reasoning = block.get("reasoning")
            builder.reasoning(reasoning if isinstance(reasoning, str) else "", stamp)
            continue
        text = text_of([block])
        if thoughts:
            builder.reasoning(text, stamp)
        else:
            builder.say(text, stamp)
    for call_id, name, arguments in _af_calls(message):
        said = _sent_message(name, arguments) if thoughts else None
        if said is not None:
            builder.say(said, stamp)
            if isinstance(call_id, str):
                hidden.add(call_id)
            continue
        builder.call(call_id, name, arguments, stamp, where)
    builder.end_calls()


def _sent_message(name: Any, arguments: Any) -> str | None:
    if name != _SEND_MESSAGE:
        return None
    try:
        value = jsonio.loads(args_text(arguments))
    except ValueError:
        return None
    message = value.get("message") if isinstance(value, dict) else None
    return message if isinstance(message, str) else None


def _af_returns(message: dict[str, Any]) -> list[tuple[str | None, str, bool | None]]:
    returns = message.get("tool_returns")
    items = (
        [r for r in returns if isinstance(r, dict)] if isinstance(returns, list) else []
    )
    text = text_of(message.get("content"))
    if not items:
        return [(string(message.get("tool_call_id")), text, None)]
    out: list[tuple[str | None, str, bool | None]] = []
    for item in items:
        status = item.get("status")
        failed = status == "error" if status in ("success", "error") else None
        # One return: the message text is what the model saw; several: each
        # return's own response.
        own = item.get("func_response")
        body = text if len(items) == 1 and text else _return_text(own)
        call_id = string(item.get("tool_call_id")) or string(
            message.get("tool_call_id")
        )
        out.append((call_id, body, failed))
    return out


def _agent_session(agent: dict[str, Any], messages: list[dict[str, Any]]) -> str:
    agent_id = string(agent.get("id")) or "agent"
    if not re.fullmatch(r"agent-\d+", agent_id):
        return agent_id
    # Exports renumber ids (agent-0, message-N): add what tells agents apart
    # and stays put when the same agent is exported again later.
    first = messages[0].get("created_at")
    key = jsonio.compact([agent.get("name"), first if isinstance(first, str) else None])
    return f"{agent_id}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


# -- one entry point -------------------------------------------------------------------


def read_turn(path: Path, entry: str | None = None) -> tuple[Turn, ReadReport]:
    """The last turn of any Letta form, recognized from the file's content."""
    from machine_git.sessions import detect

    form = detect.sniff(path)
    if form.host != HOST:
        raise SessionError(f"{path}: a {form.label}, not a Letta session")
    return form.read(path, entry)
