"""The ``rows`` format: machine's rows themselves, one per line, each with
its context inline (as ``machine good --out`` writes them): everything a row
holds, id, kind, note, time, source, original answer and redactions, so an
export imported into an empty store gives the same rows, byte for byte.
Every row schema (``schemas/<kind>.schema.json``) checks a line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Any

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Row


def write(row: Row) -> dict[str, Any]:
    """The row as it is (its context already inline, or left out)."""
    return dict(row)
