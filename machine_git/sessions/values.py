"""Values read from a host's rows: text, strings, timestamps, tool arguments.

Every reader decodes its host's rows with these, so text is joined, images
become ``[image]``, timestamps are ISO 8601 and a failed result says
``Error:`` the same way whatever agent wrote the session.
"""

from __future__ import annotations

import re
from datetime import UTC
from datetime import datetime
from typing import TYPE_CHECKING
from typing import Any
from typing import cast

from machine_git.core import jsonio

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Image
    from machine_git.rows.rowtypes import InlineImage

IMAGE = "[image]"
KEPT_IMAGE_TYPES = ("image/png", "image/jpeg")  # rows/images.py MEDIA_TYPES
EPOCH = "1970-01-01T00:00:00Z"
_IMAGE_BLOCKS = ("image", "input_image")
_TIMESTAMP = re.compile(
    r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})$"
)
_ALREADY_AN_ERROR = re.compile(r"^error", re.IGNORECASE)


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
            elif kind in _IMAGE_BLOCKS:
                parts.append(IMAGE)
    return joiner.join(parts)


def images_of(content: Any) -> list[Image]:
    """The images of a list of content blocks, inline (rows/images.py).

    Pi's ``{"type": "image", "data": <base64>, "mimeType": ...}`` blocks,
    Claude Code's ``{"type": "image", "source": {"type": "base64", "data",
    "media_type"}}`` and Codex's ``{"type": "input_image", "image_url":
    "data:image/png;base64,..."}``, in order; a type machine does not keep (not
    PNG or JPEG), or an image only named by a URL or path, stays the ``[image]``
    placeholder alone: machine never fetches or opens what a session points at.
    """
    if not isinstance(content, list):
        return []
    found: list[Image] = []
    for block in content:
        if not isinstance(block, dict) or block.get("type") not in _IMAGE_BLOCKS:
            continue
        data, media_type = block.get("data"), block.get("mimeType")
        source = block.get("source")
        if isinstance(source, dict) and source.get("type") == "base64":
            # Claude Code (the Anthropic API's shape)
            data, media_type = source.get("data"), source.get("media_type")
        elif block.get("type") == "input_image":
            media_type, data = _data_url(block.get("image_url"))
        if isinstance(data, str) and data and media_type in KEPT_IMAGE_TYPES:
            found.append(
                cast("InlineImage", {"media_type": media_type, "base64": data})
            )
    return found


def _data_url(url: Any) -> tuple[str | None, str | None]:
    """The media type and base64 data of a ``data:<type>;base64,<data>`` URL."""
    if not isinstance(url, str) or not url.startswith("data:"):
        return None, None
    head, comma, data = url[5:].partition(",")
    media_type, _, encoding = head.partition(";")
    if not comma or encoding != "base64":
        return None, None
    return media_type, data


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


def args_text(args: Any) -> str:
    """A tool call's arguments as a JSON string (a source's string kept as is)."""
    if isinstance(args, str):
        return args
    return jsonio.compact(args if args is not None else {})


def error_text(text: str) -> str:
    """A failed tool result's content: ``Error: `` first, said once."""
    return text if _ALREADY_AN_ERROR.match(text) else f"Error: {text}"
