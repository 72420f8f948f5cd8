"""pi-ai messages (npm @mariozechner/pi-ai): the shape Pi and Letta Code share.

Pi stores them inside its session entries; Letta Code's local backend stores
them one per line in ``messages.jsonl`` (hosts.md §2.2, §3.4). Roles are
``user``, ``assistant`` and ``toolResult``; blocks are ``text``, ``thinking``,
``toolCall{id, name, arguments}`` and ``image``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Any

from machine_git.sessions.records import Records
from machine_git.sessions.values import images_of
from machine_git.sessions.values import text_of

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Image


def user_text(message: dict[str, Any]) -> str:
    """A user message's text, images as ``[image]``, blocks joined by newlines."""
    return text_of(message.get("content"))


def user_images(message: dict[str, Any]) -> list[Image]:
    """A user message's images, inline (``[image]`` marks each in its text)."""
    return images_of(message.get("content"))


def add_assistant(
    records: Records, message: dict[str, Any], stamp: str, line: int
) -> None:
    """Records for one assistant message, in block order.

    Consecutive text blocks join into one record (blank lines between them);
    consecutive tool calls share one record; thinking becomes ``reasoning``.
    """
    content = message.get("content")
    blocks = content if isinstance(content, list) else [content]
    texts: list[str] = []

    def flush_text() -> None:
        if not texts:
            return  # a blank call here would close the group of tool calls
        joined = "\n\n".join(t for t in texts if t.strip())
        texts.clear()
        records.say(joined, stamp)

    for block in blocks:
        if isinstance(block, str):
            records.end_calls()
            texts.append(block)
            continue
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            records.end_calls()
            texts.append(block["text"])
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            flush_text()
            records.reasoning(block["thinking"], stamp)
        elif kind == "toolCall":
            flush_text()
            records.call(
                block.get("id"),
                block.get("name"),
                block.get("arguments"),
                stamp,
                f"line {line}",
            )
    flush_text()
    records.end_calls()


def add_tool_result(
    records: Records, message: dict[str, Any], stamp: str, line: int
) -> None:
    """The record of one ``toolResult`` message (``isError`` is its status)."""
    status = message.get("isError")
    records.result(
        message.get("toolCallId"),
        message.get("toolName"),
        text_of(message.get("content")),
        status if isinstance(status, bool) else None,
        stamp,
        f"line {line}",
        images_of(message.get("content")),
    )
