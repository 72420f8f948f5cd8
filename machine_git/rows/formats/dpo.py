"""The ``dpo`` format: preference pairs as tinker-cookbook's comparison
loader (``ComparisonBuilderFromJsonl``) reads them (``schemas/line-dpo``).

``{"comparison": {"prompt_conversation", "completion_A", "completion_B"},
"label": "A", "tools"}``: the rewrite given with ``--as`` (A) is preferred
over what the agent said (B). A pair carries the conversation, the rewrite,
the original answer and the context; it is read back as a row whose final
answer is the preferred completion and whose ``original_answer`` is the
other (kind ``rejected``, as ``export --format dpo`` takes by default).
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

OWN = ("comparison", "label", "tools")
KIND = "rejected"  # pairs come from rows rewritten with --as, rejected by default


def write(row: Row) -> dict[str, Any] | None:
    """A pair as tinker-cookbook's comparison loader reads it (label A: the
    rewrite), with the turn's tools beside it; None without a rewrite."""
    found = chat.pair(row, null_content=False)
    return None if found is None else line(found, row)


def line(found: chat.Pair, row: Row) -> dict[str, Any]:
    """The line of one pair (``found``: prompt, preferred and other answer),
    with the tools of ``row``'s turn: a rewrite's pair, or two rows rated
    differently (machine_git/export/export.py)."""
    out: dict[str, Any] = {
        "comparison": {
            "prompt_conversation": chat.string_content(found.prompt),
            "completion_A": [{"role": "assistant", "content": found.preferred}],
            "completion_B": [{"role": "assistant", "content": found.other}],
        },
        "label": "A",
    }
    tools = chat.tool_specs(row)
    if tools:
        out["tools"] = tools
    return out


def read(value: dict[str, Any], found: Found) -> Parsed | None:
    """The row of a pair: the prompt, then the preferred completion."""
    pair = value["comparison"]
    a, b = pair["completion_A"][0], pair["completion_B"][0]
    preferred, other = (a, b) if value["label"] == "A" else (b, a)
    return pairs_row(
        pair["prompt_conversation"], preferred, other, value.get("tools"), value, OWN
    )


def pairs_row(
    prompt: list[Any],
    preferred: dict[str, Any],
    other: dict[str, Any],
    tools: Any,
    value: dict[str, Any],
    own: tuple[str, ...],
) -> Parsed:
    """What a preference pair (either format) gives a row."""
    conv = chat.split([*prompt, dict(preferred)], tools)
    fields, ignored = carried(value, own)
    fields["original_answer"] = other["content"]
    return Parsed("messages", conv.messages, conv.context, KIND, fields, ignored)
