"""The ``tinker`` format: ``{"messages": [...], "tools": [...]}`` as
tinker-cookbook reads a conversation file (``schemas/line-tinker``).

Every content is a string (an assistant message that only calls tools has
``""``), except a message with images: its content is the cookbook's parts,
its text split at the ``[image]`` placeholders and each image an
``ImagePart`` with a data URI in its place (``{"type": "image", "image":
"data:image/png;base64,..."}``), which the cookbook's vision renderers
(Qwen3-VL) read. ``tools`` are the cookbook's ``ToolSpec`` dicts, which
machine's builder renders as the model family's tool declaration. A line carries the
conversation, the system prompt (its first message) and the tools; not the
row's id, kind, note, time, source, original answer or redactions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Any

from machine_git.rows.formats import chat
from machine_git.rows.formats.lines import Found
from machine_git.rows.formats.lines import Parsed
from machine_git.rows.formats.lines import carried

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Row

OWN = ("messages", "tools")


def write(row: Row) -> dict[str, Any]:
    """``{"messages": [...], "tools": [...]}`` as tinker-cookbook reads it."""
    messages = chat.string_content(chat.conversation(row, null_content=False))
    out: dict[str, Any] = {"messages": [_with_parts(m) for m in messages]}
    tools = chat.tool_specs(row)
    if tools:
        out["tools"] = tools
    return out


def read(value: dict[str, Any], found: Found) -> Parsed | None:
    """A chat line (tinker's or OpenAI's): its messages, and its system
    message and tools as the row's context."""
    conv = chat.split(value["messages"], value.get("tools"))
    fields, ignored = carried(value, OWN)
    return Parsed("messages", conv.messages, conv.context, None, fields, ignored)


def _with_parts(message: chat.Message) -> chat.Message:
    """A message with inline images as cookbook content parts (else as is).

    An image still a store reference (a row not read with its images, e.g.
    an eval prompt) keeps its ``[image]`` placeholder: a part needs bytes.
    """
    out = {k: v for k, v in message.items() if k != "images"}
    found = [
        i
        for i in message.get("images") or ()
        if isinstance(i, dict) and ("base64" in i or "url" in i)
    ]
    if found:
        text = str(message.get("content") or "")
        out["content"] = chat.image_parts(text, {"images": found}, True)
    return out
