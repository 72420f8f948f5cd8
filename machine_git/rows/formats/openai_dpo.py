"""The ``openai-dpo`` format: the same pairs as ``dpo`` in OpenAI's
preference fine-tuning shape (``schemas/line-openai-dpo``): ``input``
(messages and tools), ``preferred_output``, ``non_preferred_output``.
It carries and reads back what ``dpo`` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Any

from machine_git.rows import context
from machine_git.rows.formats import chat
from machine_git.rows.formats import dpo
from machine_git.rows.formats.lines import Found
from machine_git.rows.formats.lines import Parsed

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Row

OWN = ("input", "preferred_output", "non_preferred_output")


def write(row: Row) -> dict[str, Any] | None:
    """An OpenAI preference pair, or None if the row has no rewrite."""
    found = chat.pair(row, null_content=True)
    return None if found is None else line(found, row)


def line(found: chat.Pair, row: Row) -> dict[str, Any]:
    """The line of one pair, with the tools of ``row``'s turn (as dpo.line)."""
    prompt: dict[str, Any] = {
        "messages": [chat.openai_message(m) for m in found.prompt]
    }
    tools = context.openai_tools(context.of_row(row))
    if tools:
        prompt["tools"] = tools
    return {
        "input": prompt,
        "preferred_output": [{"role": "assistant", "content": found.preferred}],
        "non_preferred_output": [{"role": "assistant", "content": found.other}],
    }


def read(value: dict[str, Any], found: Found) -> Parsed | None:
    """The row of a pair: the prompt, then the preferred output."""
    given = value["input"]
    return dpo.pairs_row(
        given["messages"],
        value["preferred_output"][0],
        value["non_preferred_output"][0],
        given.get("tools"),
        value,
        OWN,
    )
