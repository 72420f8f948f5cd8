"""A Letta API message history saved as JSON (hosts.md §3.2).

What a mod's ``getHistory()`` or the messages API returns: a list of
``message_type`` messages, oldest or newest first, alone or under
``messages``/``items``/``data``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from machine_git.core.errors import SessionError
from machine_git.rows import context
from machine_git.sessions import ReadReport
from machine_git.sessions import Turn
from machine_git.sessions import files
from machine_git.sessions.letta.common import CODE
from machine_git.sessions.letta.common import HOST
from machine_git.sessions.letta.common import Message
from machine_git.sessions.letta.common import Return
from machine_git.sessions.letta.common import cwd_of
from machine_git.sessions.letta.common import failed_status
from machine_git.sessions.letta.common import message_ids
from machine_git.sessions.letta.common import messages
from machine_git.sessions.letta.common import return_text
from machine_git.sessions.letta.common import system_before
from machine_git.sessions.letta.common import typed
from machine_git.sessions.letta.common import utc
from machine_git.sessions.records import Records
from machine_git.sessions.records import window
from machine_git.sessions.values import string
from machine_git.sessions.values import text_of

_ERROR_STOPS = frozenset(
    {
        "error",
        "llm_api_error",
        "invalid_llm_response",
        "invalid_tool_call",
        "context_window_overflow_in_system_prompt",
    }
)
# Message types that are not part of the agent's run (the user's own come first).
_NOT_THE_RUN = frozenset(
    {
        "user_message",
        "system_message",
        "hidden_reasoning_message",
        "usage_statistics",
        "ping",
        "event_message",
        "summary_message",
    }
)


def looks_like_history(value: Any) -> bool:
    """A Letta API message list (or an object holding one under ``messages``)."""
    listed = history_list(value)
    if not listed:
        return False
    return all(
        isinstance(m, dict) and isinstance(m.get("message_type"), str)
        for m in listed[:20]
    )


def history_list(value: Any) -> list[Any] | None:
    """The message list of a saved history, or None if it holds none."""
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        for key in ("messages", "items", "data"):
            if isinstance(value.get(key), list):
                return list(value[key])
    return None


def read_history(path: Path, entry: str | None = None) -> tuple[Turn, ReadReport]:
    """The last turn of a saved Letta API message list (oldest or newest first)."""
    report = ReadReport(str(path))
    value = files.load_json(path)
    listed = history_list(value)
    if listed is None:
        raise SessionError(f"{path}: not a Letta message list")
    found = messages(
        listed, "message_type", "item", report, "the message list is empty"
    )
    found = _oldest_first(found)
    turn = window(found, message_ids(found), entry, path, _user)
    found, start = turn.items, turn.start
    cwd = None
    for message in found[: start + 1]:
        if message["message_type"] == "user_message":
            cwd = cwd_of(text_of(message.get("content"))) or cwd
    run = _Run(found)
    for index in range(start, len(found)):
        message = found[index]
        stamp = run.builder.moment(utc(message.get("date")))
        if index == start:
            run.builder.user(turn.texts[index], stamp)
        else:
            run.add(message, stamp, f"message {turn.ids[index]}")
    if run.unknown:
        unknown = run.unknown
        names = ", ".join(repr(k) for k in sorted(set(unknown))[:5])
        report.dropped.append(f"{len(unknown)} message(s) of unknown type {names}")
    return run.builder.finish(
        report,
        host=HOST,
        source=CODE,
        path=path,
        session_id=_session(value, found),
        entry_ids=turn.ids[start:],
        leaf_id=turn.ids[-1],
        cwd=cwd,
        context=context.make(system_before(found, start, "system_message"), None),
    )


def _user(message: Message) -> str:
    if message["message_type"] != "user_message":
        return ""
    return typed(message.get("content"))


class _Run:
    """The agent's run after the user's message, one message at a time."""

    def __init__(self, listed: list[Message]) -> None:
        self.builder = Records()
        self.seen_calls: set[str] = set()
        self.unknown: list[str] = []
        self.answered = {
            call_id
            for m in listed
            if m["message_type"] == "tool_return_message"
            for call_id, _, _ in _returns(m)
        }

    def add(self, message: Message, stamp: str, where: str) -> None:
        kind = message["message_type"]
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, message, stamp, where)
        elif kind not in _NOT_THE_RUN:
            self.unknown.append(kind)

    def reasoning(self, message: Message, stamp: str, where: str) -> None:
        reasoning = message.get("reasoning")
        self.builder.reasoning(reasoning if isinstance(reasoning, str) else "", stamp)

    def assistant(self, message: Message, stamp: str, where: str) -> None:
        text = text_of(message.get("content"))
        self.builder.say(text, stamp)
        if message.get("is_err") is True:
            self.builder.stopped("error", text or None)

    def calls(self, message: Message, stamp: str, where: str) -> None:
        for call in _calls(message):
            call_id = call.get("tool_call_id")
            if isinstance(call_id, str) and call_id in self.seen_calls:
                continue  # the same call, requested then executed
            name, arguments = call.get("name"), call.get("arguments")
            if self.builder.call(call_id, name, arguments, stamp, where):
                self.seen_calls.add(str(call_id))
        self.builder.end_calls()

    def returns(self, message: Message, stamp: str, where: str) -> None:
        for call_id, text, failed in _returns(message):
            self.builder.result(call_id, None, text, failed, stamp, where)

    def approvals(self, message: Message, stamp: str, where: str) -> None:
        # Client-side tools (Letta Code's) may send their results here;
        # a tool_return_message for the same call wins.
        for call_id, text, failed in _approval_returns(message):
            if call_id not in self.answered:
                self.builder.result(call_id, None, text, failed, stamp, where)

    def stop(self, message: Message, stamp: str, where: str) -> None:
        reason = string(message.get("stop_reason"))
        if reason == "cancelled":
            self.builder.stopped("aborted", "cancelled")
        elif reason in _ERROR_STOPS:
            self.builder.stopped("error", reason)


_HANDLERS: dict[str, Callable[[_Run, Message, str, str], None]] = {
    "reasoning_message": _Run.reasoning,
    "assistant_message": _Run.assistant,
    "tool_call_message": _Run.calls,
    "approval_request_message": _Run.calls,
    "tool_return_message": _Run.returns,
    "approval_response_message": _Run.approvals,
    "stop_reason": _Run.stop,
}


def _oldest_first(listed: list[Message]) -> list[Message]:
    seqs = [m.get("seq_id") for m in listed]
    if all(isinstance(s, int) and not isinstance(s, bool) for s in seqs):
        return [m for _, m in sorted(zip(seqs, listed, strict=True), key=_first)]
    dates = [m.get("date") for m in listed]
    first, last = dates[0], dates[-1]
    if isinstance(first, str) and isinstance(last, str) and first > last:
        return list(reversed(listed))  # order="desc"
    return listed


def _first(pair: tuple[Any, Any]) -> Any:
    return pair[0]


def _calls(message: Message) -> list[Message]:
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        return [c for c in calls if isinstance(c, dict)]
    single = message.get("tool_call")
    return [single] if isinstance(single, dict) else []


def _returns(message: Message) -> list[Return]:
    failed_message = message.get("is_err") is True
    returns = message.get("tool_returns")
    items: list[Message]
    if isinstance(returns, list) and returns:
        items = [r for r in returns if isinstance(r, dict)]
    else:
        items = [message]
    return [
        (
            string(item.get("tool_call_id")),
            return_text(item.get("tool_return")),
            True if failed_message else failed_status(item.get("status")),
        )
        for item in items
    ]


def _approval_returns(message: Message) -> list[Return]:
    approvals = message.get("approvals")
    if not isinstance(approvals, list):
        return []
    tools = [a for a in approvals if isinstance(a, dict) and a.get("type") == "tool"]
    return _returns({"tool_returns": tools}) if tools else []


def _session(value: Any, listed: list[Message]) -> str:
    # Letta message ids are unique on their own, so the session id only has
    # to be stable: the conversation or agent when known, else a constant.
    for holder in [value, *listed]:
        if isinstance(holder, dict):
            for key in ("conversation_id", "agent_id"):
                found = string(holder.get(key))
                if found:
                    return found
    return "letta-api"
