"""The ``traces`` format: one run as trajectory-v1 records per line
(``schemas/line-trajectory``), the whole turn as machine keeps it: user,
reasoning, tool calls and their results, observations and the answer.

``{"trajectory": [...], "tag": ..., "context": {...}, "note": ...,
"original_answer": ..., "redactions": {...}, "failure": {...}}``: besides the
records a line carries the row's id, its label (its tag: good is
``traces``, bad ``rejected``, observed ``observed``), time, context, note,
original answer, redactions and failure; not its source (an import records
the file it came from). Rows that hold chat
messages instead of a trajectory have no line in it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Any

from machine_git.rows import context
from machine_git.rows.formats.lines import CARRIED
from machine_git.rows.formats.lines import Found
from machine_git.rows.formats.lines import Parsed
from machine_git.rows.formats.lines import carried

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Row

OWN = ("trajectory", "context")
KEPT = ("id", *CARRIED, "failure")
_WRITTEN = (
    "id",
    "tag",
    "created_at",
    "note",
    "original_answer",
    "redactions",
    "failure",
)


def write(row: Row) -> dict[str, Any] | None:
    """The trajectory line of ``row``, or None if it holds messages."""
    if "trajectory" not in row:
        return None
    out: dict[str, Any] = {"trajectory": row["trajectory"]}
    for key in _WRITTEN:
        value = row.get(key)
        if value is not None:
            out[key] = value
    found = context.of_row(row)
    if found is not None:
        out["context"] = found
    return out


def read(value: dict[str, Any], found: Found) -> Parsed | None:
    """A trajectory line: its records, context and the row fields it carries."""
    given = value.get("context")
    ctx = (
        context.make(given.get("system"), given.get("tools"))
        if isinstance(given, dict)
        else None
    )
    fields, ignored = carried(value, OWN, KEPT)
    return Parsed("trajectory", value["trajectory"], ctx, None, fields, ignored)
