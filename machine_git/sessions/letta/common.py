"""What the Letta readers share: names, Letta Code's text rules, message lists.

Letta Code injects ``<system-reminder>`` blocks into user messages; they are
not what the user typed, so they are removed from the user text, but the
device-info reminder is where the working directory is written down.
"""

from __future__ import annotations

import re
from typing import Any

from machine_git.core import jsonio
from machine_git.core.errors import TurnError
from machine_git.sessions import ReadReport
from machine_git.sessions.values import string
from machine_git.sessions.values import text_of

HOST = "letta"
CODE = "letta-code"  # meta.source of Letta Code sessions (agent-trajectory's name)
AGENT_FILE = "letta"  # meta.source of an Agent File

_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
_CWD = re.compile(r"\*\*Current working directory\*\*:\s*(\S[^\n]*)")
_NAIVE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?$")

Message = dict[str, Any]
Return = tuple[str | None, str, bool | None]
"""A tool's result: (the call it answers, its text, whether it failed or None)."""


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


def utc(value: Any) -> Any:
    """A time as the schema needs it: Letta's Python server may write naive UTC."""
    if isinstance(value, str) and _NAIVE_TIME.match(value):
        return value + "Z"
    return value


def typed(content: Any) -> str:
    """What the user typed in a Letta message's content, "" if it is not theirs.

    Letta packs user-role messages as JSON, ``{"type": "user_message",
    "message": ...}``; the other packets (login, heartbeat, system alerts) are
    not the user speaking.
    """
    text = user_text(content)
    stripped = text.strip()
    if not stripped.startswith("{"):
        return text
    try:
        value = jsonio.loads(stripped)
    except ValueError:
        return text
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        return text
    message = value.get("message")
    if value["type"] != "user_message":
        return ""
    return strip_reminders(message if isinstance(message, str) else "")


def messages(
    listed: list[Any], key: str, noun: str, report: ReadReport, empty: str
) -> list[Message]:
    """The items of a saved message list that are messages (a string ``key``).

    The others are reported as dropped (``<noun> <n>``); none at all is a
    TurnError saying ``empty``.
    """
    found: list[Message] = []
    for number, message in enumerate(listed, start=1):
        if isinstance(message, dict) and isinstance(message.get(key), str):
            found.append(message)
        else:
            report.dropped.append(f"{noun} {number} is not a Letta message")
    if not found:
        raise TurnError(f"{report.path}: {empty}")
    return found


def message_ids(listed: list[Message]) -> list[str]:
    """Each message's id, ``#<n>`` when it has none."""
    return [string(m.get("id")) or f"#{n}" for n, m in enumerate(listed, start=1)]


def failed_status(status: Any) -> bool | None:
    """A tool return's ``status``: True for "error", False for "success"."""
    return status == "error" if status in ("success", "error") else None


def return_text(value: Any) -> str:
    """A tool's return as the model saw it: text as is, else compact JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return text_of(value) if isinstance(value, list) else jsonio.compact(value)


def system_before(messages: list[Message], start: int, kind: str) -> Any:
    """The text of the last system message before the turn, or None.

    Letta keeps the compiled system prompt (memory blocks included) as the
    first in-context message and recompiles it in place when memory changes,
    so it is the newest one, as with the local backend's system-prompt.json.
    """
    for message in reversed(messages[:start]):
        if message.get("message_type", message.get("role")) == kind:
            return text_of(message.get("content"))
    return None
