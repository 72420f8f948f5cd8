"""Chat messages to and from rows: what every chat format shares.

Writing: a row's conversation as chat messages (stored messages, or a
trajectory turned into them), led by its context's system prompt, and the
preference pair of a row rewritten with ``--as``. Reading: a line's leading
system message and its tools become the row's context again (the store keeps
it once, by hash), so an export imported back exports to the same bytes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from typing import Any
from typing import cast

from machine_git.core import jsonio
from machine_git.rows import context
from machine_git.rows.formats.lines import text_of

if TYPE_CHECKING:
    from machine_git.rows.context import Context
    from machine_git.rows.rowtypes import Record
    from machine_git.rows.rowtypes import RecordToolCall
    from machine_git.rows.rowtypes import Row

Message = dict[str, Any]
PLACEHOLDER = "[image]"  # rows/images.py
_DATA_URI = re.compile(r"^data:(image/png|image/jpeg);base64,([A-Za-z0-9+/=]+)$")
OPENAI_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id")
_DROPPED = ("meta", "reasoning", "observation")  # not turns of the conversation


# -- writing -----------------------------------------------------------------------


def trajectory_to_messages(
    records: Iterable[Record], *, null_content: bool
) -> list[Message]:
    """Chat messages from trajectory-v1 records.

    ``meta``, ``reasoning`` and ``observation`` records are dropped (they are
    not turns of the conversation). An assistant text immediately followed by
    a tool-calls record becomes one message, as the model produced it; dropped
    records in between do not count, so a trace kept with ``--reasoning``
    gives the same messages as one without. A message that only calls tools
    has ``content`` None if ``null_content`` (OpenAI) else ``""`` (tinker
    renders content as a string).
    """
    out: list[Message] = []
    pending_text: str | None = None  # assistant text that may own the next calls

    def flush() -> None:
        nonlocal pending_text
        if pending_text is not None:
            out.append({"role": "assistant", "content": pending_text})
            pending_text = None

    for record in records:
        role = record.get("role")
        calls = cast("list[RecordToolCall] | None", record.get("tool_calls"))
        if role == "assistant" and calls:
            text = pending_text
            pending_text = None
            content = text if text else (None if null_content else "")
            out.append(
                {
                    "role": "assistant",
                    "content": content,
                    "tool_calls": [_tool_call(c) for c in calls],
                }
            )
            continue
        if role in _DROPPED:
            continue
        flush()
        if role == "assistant":
            pending_text = str(record.get("content") or "")
        elif role in ("user", "system"):
            out.append({"role": role, "content": str(record.get("content") or "")})
        elif role == "tool":
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": record.get("tool_call_id"),
                    "content": str(record.get("content") or ""),
                }
            )
        if role in ("user", "tool") and record.get("images"):
            out[-1]["images"] = record.get("images")
    flush()
    return out


def _tool_call(call: RecordToolCall) -> dict[str, Any]:
    return {
        "type": "function",
        "id": call.get("id"),
        "function": {"name": call.get("name"), "arguments": call.get("args", "")},
    }


def conversation(row: Row, *, null_content: bool) -> list[Message]:
    """A row's conversation as chat messages (stored messages, or a trajectory),
    led by its context's system prompt when it has one inline and the
    conversation does not start with a system message of its own."""
    if "messages" in row:
        messages = [dict(m) for m in row["messages"]]
    else:
        messages = trajectory_to_messages(
            row.get("trajectory") or [], null_content=null_content
        )
    system = context.system_message(context.of_row(row))
    if system is not None and not (messages and messages[0].get("role") == "system"):
        messages.insert(0, system)
    return messages


def tool_specs(row: Row) -> list[dict[str, Any]] | None:
    """The tools a row's turn was offered (cookbook ``ToolSpec``s), or None."""
    found = context.of_row(row)
    tools = found.get("tools") if found is not None else None
    return [dict(t) for t in tools] if tools else None


def answers(messages: list[Message]) -> bool:
    """True if an assistant message says something: what a chat line (and
    machine import) needs to be learned from."""
    return any(
        m.get("role") == "assistant"
        and isinstance(m.get("content"), str)
        and bool(m["content"])
        for m in messages
    )


def openai_message(message: Message) -> Message:
    """A message with only the keys OpenAI's chat fine-tuning accepts.

    A message with images (inline, rows/images.py) has its content as parts:
    its text split at the ``[image]`` placeholders, each image an
    ``image_url`` part (a data URI) in its place.
    """
    out = {k: message[k] for k in OPENAI_KEYS if k in message}
    if message.get("images"):
        out["content"] = image_parts(str(message.get("content") or ""), message)
    if "tool_calls" in out:
        out["tool_calls"] = [
            {
                "type": "function",
                "id": c.get("id"),
                "function": {
                    "name": (c.get("function") or {}).get("name"),
                    "arguments": (c.get("function") or {}).get("arguments"),
                },
            }
            for c in out["tool_calls"]
        ]
    return out


def image_parts(
    text: str, message: Message, tinker: bool = False
) -> list[dict[str, Any]]:
    """OpenAI content parts of ``text`` with ``message``'s inline images.

    Each ``[image]`` placeholder becomes the next image; images left over
    (more images than placeholders) follow the text. ``tinker``: each image
    is the cookbook's ``ImagePart`` (``{"type": "image", "image": <data
    URI>}``, what its vision renderers read) instead of an ``image_url``.
    """
    found = [i for i in message.get("images") or [] if isinstance(i, dict)]
    part = _image_part if tinker else _image_url
    pieces = text.split(PLACEHOLDER)
    parts: list[dict[str, Any]] = []
    for index, piece in enumerate(pieces):
        if piece:
            parts.append({"type": "text", "text": piece})
        if index < len(pieces) - 1:
            if found:
                parts.append(part(found.pop(0)))
            else:
                parts.append({"type": "text", "text": PLACEHOLDER})
    parts.extend(part(image) for image in found)
    return parts


def _image_part(image: dict[str, Any]) -> dict[str, Any]:
    # tinker-cookbook's ImagePart; its renderers open a data URI offline.
    return {"type": "image", "image": _image_url(image)["image_url"]["url"]}


def _image_url(image: dict[str, Any]) -> dict[str, Any]:
    if "url" in image:  # written to a file beside the JSONL (--images-dir)
        return {"type": "image_url", "image_url": {"url": image["url"]}}
    data = image.get("base64", "")
    return {
        "type": "image_url",
        "image_url": {"url": f"data:{image.get('media_type')};base64,{data}"},
    }


def text_and_images(content: Any) -> tuple[Any, list[dict[str, str]]]:
    """The inverse of :func:`image_parts`: a message's content as text with a
    ``[image]`` placeholder per image, and its images inline (data URIs only;
    anything else is left as it was, for the schema to name)."""
    if not isinstance(content, list) or not any(
        isinstance(p, dict) and p.get("type") in _IMAGE_PARTS for p in content
    ):
        return content, []
    text: list[str] = []
    found: list[dict[str, str]] = []
    for part in content:
        if not isinstance(part, dict):
            return content, []
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            text.append(part["text"])
            continue
        url = _url_of(part)
        match = _DATA_URI.match(url) if isinstance(url, str) else None
        if match is None:
            return content, []
        text.append(PLACEHOLDER)
        found.append({"media_type": match.group(1), "base64": match.group(2)})
    return "".join(text), found


_IMAGE_PARTS = ("image_url", "image")  # OpenAI's, tinker-cookbook's


def _url_of(part: dict[str, Any]) -> Any:
    """The URL of an image part (OpenAI ``image_url`` or cookbook ``image``)."""
    if part.get("type") == "image_url":
        found = part.get("image_url")
        return found.get("url") if isinstance(found, dict) else None
    if part.get("type") == "image":
        return part.get("image")
    return None


def string_content(messages: Iterable[Message]) -> list[Message]:
    """Copies with a null ``content`` as ``""`` (tinker's renderers need strings)."""
    out = []
    for m in messages:
        m = dict(m)
        if m.get("content") is None:
            m["content"] = ""
        out.append(m)
    return out


@dataclass
class Pair:
    """A preference pair: the prompt, the preferred answer and the other one."""

    prompt: list[Message]
    preferred: str
    other: str


def pair(row: Row, *, null_content: bool) -> Pair | None:
    """The preference pair of a row, or None if the row has no rewrite.

    Only a row tagged with ``--as`` has one: ``original_answer`` holds what
    the agent said and the final assistant message holds the rewrite.
    """
    original = row.get("original_answer")
    if not isinstance(original, str) or not original:
        return None
    messages = conversation(row, null_content=null_content)
    if len(messages) < 2:
        return None
    final = messages[-1]
    rewrite = final.get("content")
    if (
        final.get("role") != "assistant"
        or final.get("tool_calls")
        or not isinstance(rewrite, str)
        or not rewrite
        or rewrite == original
    ):
        return None
    return Pair(messages[:-1], rewrite, original)


# -- reading -----------------------------------------------------------------------


@dataclass
class Conversation:
    """What a chat line gives a row: its messages and its context, if any."""

    messages: list[Message]
    context: Context | None


def split(messages: list[Message], tools: Any) -> Conversation:
    """A line's messages without its leading system message, which goes with
    the tools into the row's context (None when the line has neither).

    The inverse of :func:`conversation`: exporting the row gives the same
    messages and tools again.
    """
    rest = [dict(m) for m in messages]
    system = None
    if (
        rest
        and rest[0].get("role") == "system"
        and isinstance(rest[0].get("content"), str)
    ):
        system = rest.pop(0)["content"]
    offered = [_spec(t) for t in tools] if isinstance(tools, list) and tools else None
    found = context.make(system, offered)
    if found is not None and found["system"] is None and system is not None:
        rest.insert(0, {"role": "system", "content": system})  # blank: kept as is
    return Conversation(rest, found)


def _spec(tool: Any) -> Any:
    """A tool as machine keeps it, from a ToolSpec or an OpenAI function."""
    if isinstance(tool, dict) and isinstance(tool.get("function"), dict):
        return tool["function"]
    return tool


def to_trajectory(messages: list[Message], stamp: str) -> list[dict[str, Any]]:
    """trajectory-v1 records from chat messages, each stamped ``stamp``: what
    ``--kind traces`` makes of an exported trace (the inverse of
    :func:`trajectory_to_messages`; a tool message's ``name`` has no place)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        content = m.get("content")
        text = content if isinstance(content, str) else ""
        if role == "assistant":
            if text:
                out.append({"role": "assistant", "content": text, "timestamp": stamp})
            calls = m.get("tool_calls") or []
            if calls:
                out.append(
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [_record_call(c) for c in calls],
                        "timestamp": stamp,
                    }
                )
        elif role == "tool":
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": m.get("tool_call_id"),
                    "content": text,
                    "timestamp": stamp,
                }
            )
        else:
            out.append({"role": role, "content": text, "timestamp": stamp})
        if role in ("user", "tool") and m.get("images"):
            out[-1]["images"] = m["images"]
    return out


def _record_call(call: Any) -> dict[str, Any]:
    function = call.get("function") or {} if isinstance(call, dict) else {}
    return {
        "id": call.get("id") if isinstance(call, dict) else None,
        "name": function.get("name"),
        "args": function.get("arguments"),
    }


def arguments_text(value: Any) -> Any:
    """Tool-call arguments as the JSON string chat formats carry (some
    datasets keep them as an object)."""
    if isinstance(value, dict | list):
        return jsonio.compact(value)
    return value


def normalized(value: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A chat line as other tools write it, in the shape machine checks, and
    the message keys dropped on the way.

    OpenAI's own examples leave out ``content`` on a message that only calls
    tools (null here) and weigh messages (``weight``, which a row has no
    place for); many datasets keep content as a list of text parts; an empty
    ``tools`` list is no tools. Lines machine writes pass unchanged.
    """
    out = dict(value)
    if out.get("tools") == []:
        del out["tools"]
    messages = out.get("messages")
    if not isinstance(messages, list):
        return out, []
    dropped: list[str] = []
    fixed = []
    for m in messages:
        if isinstance(m, dict):
            m = dict(m)
            if "tool_calls" in m and "content" not in m:
                m["content"] = None
            if "weight" in m:
                del m["weight"]
                dropped.append("messages[].weight")
            if "content" in m:
                m["content"], found = text_and_images(m["content"])
                if found:
                    m["images"] = found
                m["content"] = text_of(m["content"])
        fixed.append(m)
    out["messages"] = fixed
    return out, sorted(set(dropped))
