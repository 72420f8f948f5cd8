"""The ``openai`` format: OpenAI chat fine-tuning JSONL with tools
(``schemas/line-openai``).

``tools`` are OpenAI functions (``{"type": "function", "function": {...}}``),
a message that only calls tools has ``content`` null, and messages keep only
the keys OpenAI accepts. It carries what ``tinker`` carries, and is read the
same way: files from OpenAI's own tooling import as machine's do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Any

from machine_git.rows import context
from machine_git.rows.formats import chat
from machine_git.rows.formats import tinker

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Row

read = tinker.read  # the same messages and tools, in either tool shape


def write(row: Row) -> dict[str, Any]:
    """``{"messages": [...], "tools": [...]}`` for OpenAI chat fine-tuning."""
    messages = chat.conversation(row, null_content=True)
    out: dict[str, Any] = {"messages": [chat.openai_message(m) for m in messages]}
    tools = context.openai_tools(context.of_row(row))
    if tools:
        out["tools"] = tools
    return out
