"""What one line of a file gives a row, whatever its format."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
from typing import TYPE_CHECKING
from typing import Any

if TYPE_CHECKING:
    from machine_git.rows.context import Context

# ``(json-path, problem)`` pairs a reader adds to when a line does not read.
Found = list[tuple[str, str]]

# Row fields a line may carry beside its conversation; ``machine import``
# keeps them (an older machine's lines, the traces format).
CARRIED = ("note", "tag", "kind", "created_at", "original_answer", "redactions")


@dataclass
class Parsed:
    """A line as a row's parts: its conversation (``messages`` or
    ``trajectory``), its context, the kind its format implies, the row fields
    it carries and the keys a row has no place for."""

    body: str
    value: list[Any]
    context: Context | None = None
    kind: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)


def carried(
    value: dict[str, Any], own: tuple[str, ...], keep: tuple[str, ...] = CARRIED
) -> tuple[dict[str, Any], list[str]]:
    """The row fields ``value`` carries (of ``keep``), and its keys that are
    neither those nor the format's ``own``."""
    fields = {k: value[k] for k in keep if k in value}
    ignored = [k for k in value if k not in own and k not in keep]
    return fields, ignored


def text_of(content: Any) -> Any:
    """A message's content as text: a list of parts (``[{"type": "text",
    "text": ...}]``, as many datasets keep it) joined; anything else as is."""
    if isinstance(content, list) and all(
        isinstance(p, dict) and isinstance(p.get("text"), str) for p in content
    ):
        return "".join(p["text"] for p in content)
    return content
