"""Chat data exported by Hugging Face ``datasets`` (import only, with
``--format hf``): ``Dataset.to_json`` (JSONL, one record per line) or
``Dataset.to_parquet``, one conversation per record.

A record's conversation is its ``messages`` column (``role``/``content``, as
the chat-template datasets keep it: content may be a list of text parts,
tool-call arguments an object) or a ShareGPT ``conversations`` column; a
``tools`` column (a list, or a JSON string of one) and a leading system
message give the row's context. Columns that are null in a record (Parquet
gives every column to every record) count as absent; other columns (``id``,
``source``, ...) have no place in a row and are named. Records carry no
machine id, kind or note: rows get an id from their content and are
``train``. Reading Parquet needs pyarrow (the training extra installs it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from machine_git.core import inputs
from machine_git.core import jsonio
from machine_git.core.errors import MachineError
from machine_git.core.errors import UsageError
from machine_git.rows.formats import chat
from machine_git.rows.formats import sharegpt
from machine_git.rows.formats.lines import Found
from machine_git.rows.formats.lines import Parsed
from machine_git.rows.formats.lines import carried
from machine_git.rows.formats.lines import text_of

OWN = ("messages", "conversations", "tools")
PYARROW_HINT = (
    "reading Parquet needs pyarrow: pip install pyarrow (the training extra "
    "installs it: pip install torch==2.13.0 '.[train]' from a checkout)"
)


def is_parquet(path: Path | None) -> bool:
    """True for a ``.parquet`` file (read by pyarrow, not as lines)."""
    return path is not None and path.suffix.lower() == ".parquet"


def parquet_records(path: Path) -> list[tuple[int, bytes]]:
    """The records of a Parquet file as numbered JSON lines (1-based rows)."""
    try:
        import pyarrow.parquet as pq  # type: ignore[import-untyped]  # optional
    except ImportError:
        raise MachineError(PYARROW_HINT) from None
    try:
        size = path.stat().st_size
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from None
    if size > inputs.JSONL_LIMIT:
        raise UsageError(
            f"cannot read {path}: {inputs.too_big(size, inputs.JSONL_LIMIT)}"
        )
    try:
        table = pq.read_table(path)
    except (OSError, ValueError) as e:
        raise UsageError(f"cannot read {path}: not a Parquet file ({e})") from None
    return [
        (number, jsonio.line(record).rstrip(b"\n"))
        for number, record in enumerate(table.to_pylist(), start=1)
    ]


def read(value: dict[str, Any], found: Found) -> Parsed | None:
    """The conversation of one record."""
    record = {k: v for k, v in value.items() if v is not None}
    tools = _tools(record.get("tools"), found)
    if "messages" in record:
        given = record["messages"]
        if not isinstance(given, list):
            found.append(("$.messages", "expected a list of messages"))
            return None
        messages = [_message(m, f"$.messages[{i}]", found) for i, m in enumerate(given)]
    elif "conversations" in record:
        turns = record["conversations"]
        if not isinstance(turns, list) or not turns:
            found.append(("$.conversations", "expected a non-empty list of turns"))
            return None
        messages = sharegpt.to_messages(turns, "$.conversations", found)
    else:
        found.append(("$", "a record needs a messages or conversations column"))
        return None
    if found:
        return None
    conv = chat.split(messages, tools)
    fields, ignored = carried(record, OWN, ())
    return Parsed("messages", conv.messages, conv.context, None, fields, ignored)


def _message(value: Any, at: str, found: Found) -> dict[str, Any]:
    if not isinstance(value, dict):
        found.append((at, "a message must be an object with role and content"))
        return {}
    out: dict[str, Any] = {}
    for key in chat.OPENAI_KEYS:
        if value.get(key) is not None:
            out[key] = value[key]
    out["content"] = text_of(value.get("content"))
    if not isinstance(out["content"], str | None):
        found.append((f"{at}.content", "expected a string or a list of text parts"))
    if "tool_calls" in out:
        out["tool_calls"] = [
            _call(c, f"{at}.tool_calls[{i}]", found)
            for i, c in enumerate(out["tool_calls"])
        ]
    return out


def _call(value: Any, at: str, found: Found) -> dict[str, Any]:
    function = value.get("function") if isinstance(value, dict) else None
    if not isinstance(function, dict):
        found.append((at, "a tool call needs a function with name and arguments"))
        return {}
    return {
        "id": value.get("id") or f"call_{at.rsplit('[', 1)[-1].rstrip(']')}",
        "type": "function",
        "function": {
            "name": function.get("name"),
            "arguments": chat.arguments_text(function.get("arguments") or {}),
        },
    }


def _tools(value: Any, found: Found) -> Any:
    if isinstance(value, str) and value.strip():
        try:
            return jsonio.loads(value)
        except jsonio.JSONDecodeError:
            found.append(("$.tools", "not valid JSON"))
    return value if isinstance(value, list) else None
