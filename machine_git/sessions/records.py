"""Building trajectory-v1 records: the conventions every session reader shares.

Each host's reader decodes its own rows and calls a :class:`Records` builder,
so the rules below hold whatever agent wrote the session:

- consecutive tool calls of one model response share one ``assistant`` record
  (``content: null``); text, reasoning, a result or a new response ends the group;
- a tool result pairs with its call by id, then by tool name, then (when the
  result names no call at all) with the nearest unanswered call; a result that
  pairs with nothing is dropped and reported;
- a failed result gets ``ok: false`` and its content prefixed ``Error: ``
  (unless it already starts with "error", as agent-trajectory does); ``ok`` is
  present only when the source states a status;
- images become the placeholder ``[image]``; empty text is never a record.
"""

from __future__ import annotations

import re
from datetime import UTC
from datetime import datetime
from typing import TYPE_CHECKING
from typing import Any

from machine_git import jsonio

if TYPE_CHECKING:
    from machine_git.rowtypes import MetaRecord
    from machine_git.rowtypes import Record
    from machine_git.rowtypes import RecordToolCall
    from machine_git.rowtypes import ToolRecord

IMAGE = "[image]"
EPOCH = "1970-01-01T00:00:00Z"
_TIMESTAMP = re.compile(
    r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})$"
)
_ALREADY_AN_ERROR = re.compile(r"^error", re.IGNORECASE)


class Records:
    """Trajectory-v1 records of one turn, in order, with tool results paired."""

    def __init__(self, fallback: str = EPOCH) -> None:
        self.fallback = fallback
        self.records: list[Record] = []
        self.dropped: list[str] = []
        self.open_calls: list[tuple[str, str]] = []  # (id, name), unanswered
        self._calls: list[RecordToolCall] = []
        self._calls_stamp = fallback

    def stamp(self, *values: Any) -> str:
        """The first value that is a valid timestamp, else the fallback."""
        for value in values:
            found = iso(value)
            if found is not None:
                return found
        return self.fallback

    def user(self, text: str, stamp: str) -> None:
        self.end_calls()
        self.records.append({"role": "user", "content": text, "timestamp": stamp})

    def reasoning(self, text: str, stamp: str) -> None:
        self.end_calls()
        if text.strip():
            self.records.append(
                {"role": "reasoning", "content": text, "timestamp": stamp}
            )

    def say(self, text: str, stamp: str) -> None:
        """An assistant message in words (nothing if it is blank)."""
        self.end_calls()
        if text.strip():
            self.records.append(
                {"role": "assistant", "content": text, "timestamp": stamp}
            )

    def call(
        self, call_id: Any, name: Any, args: Any, stamp: str, where: str
    ) -> str | None:
        """Add a tool call to the current group; its id, or None if unusable."""
        if (
            not isinstance(call_id, str)
            or not call_id
            or not isinstance(name, str)
            or not name
        ):
            self.dropped.append(f"tool call without id or name ({where})")
            return None
        if not self._calls:
            self._calls_stamp = stamp
        self._calls.append({"id": call_id, "name": name, "args": args_text(args)})
        self.open_calls.append((call_id, name))
        return call_id

    def end_calls(self) -> None:
        """Close the current group of tool calls (one model response)."""
        if self._calls:
            self.records.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": list(self._calls),
                    "timestamp": self._calls_stamp,
                }
            )
            self._calls.clear()

    def result(
        self,
        call_id: Any,
        name: Any,
        text: str,
        failed: bool | None,
        stamp: str,
        where: str,
    ) -> bool:
        """Add a tool result; False (and reported) if it answers no open call."""
        self.end_calls()
        match = self._match(call_id, name)
        if match is None:
            self.dropped.append(f"tool result with no matching call ({where})")
            return False
        paired, _ = self.open_calls.pop(match)
        record: ToolRecord = {
            "role": "tool",
            "tool_call_id": paired,
            "content": error_text(text) if failed else text,
            "timestamp": stamp,
        }
        if failed is not None:
            record["ok"] = not failed
        self.records.append(record)
        return True

    def _match(self, call_id: Any, name: Any) -> int | None:
        # Nearest unanswered call first: ids are not promised unique per session.
        for field, wanted in ((0, call_id), (1, name)):
            if not isinstance(wanted, str) or not wanted:
                continue
            for index in range(len(self.open_calls) - 1, -1, -1):
                if self.open_calls[index][field] == wanted:
                    return index
        if not (isinstance(call_id, str) and call_id) and self.open_calls:
            return len(self.open_calls) - 1
        return None


def error_text(text: str) -> str:
    """A failed tool result's content: ``Error: `` first, said once."""
    return text if _ALREADY_AN_ERROR.match(text) else f"Error: {text}"


def args_text(args: Any) -> str:
    """A tool call's arguments as a JSON string (a source's string kept as is)."""
    if isinstance(args, str):
        return args
    return jsonio.compact(args if args is not None else {})


def text_of(content: Any, *, joiner: str = "\n") -> str:
    """The text of a string or a list of content blocks; images as ``[image]``.

    Text blocks are ``text``, ``input_text`` and ``output_text`` (Codex), or a
    bare string; image blocks are ``image`` and ``input_image``.
    """
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            kind = block.get("type")
            if kind in ("text", "input_text", "output_text"):
                text = block.get("text")
                if isinstance(text, str):
                    parts.append(text)
            elif kind in ("image", "input_image"):
                parts.append(IMAGE)
    return joiner.join(parts)


def string(value: Any) -> str | None:
    """``value`` if it is a non-empty string."""
    return value if isinstance(value, str) and value else None


def iso(value: Any) -> str | None:
    """An ISO 8601 timestamp as is, or Unix milliseconds converted; else None."""
    if isinstance(value, str) and _TIMESTAMP.match(value):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            moment = datetime.fromtimestamp(value / 1000, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
        return (
            moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
        )
    return None


def meta(
    source: str, cwd: str | None, model: str | None, branch: str | None
) -> MetaRecord:
    """The ``meta`` record: keys only for what is known."""
    record: MetaRecord = {"role": "meta", "source": source}
    if cwd:
        record["cwd"] = cwd
    if branch:
        record["git_branch"] = branch
    if model:
        record["model"] = model
    return record
