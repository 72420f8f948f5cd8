"""Listings that fit the terminal: padded columns, only the free text cut.

``tagged``, ``log``, ``diff``, ``data``, ``versions`` and ``runs`` print
lines no wider than the terminal. Ids, commits, kinds and times are never
cut (a cut id names nothing); the one free-text column of a listing (the
prompt and note, a commit summary, a value) gets what is left and ends in an
ellipsis when it does not fit. ``--json`` prints every value whole.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence

ELLIPSIS = "…"
GAP = "  "
# Not a terminal (a pipe, a file, a test) and no COLUMNS: the classic width,
# so output does not depend on whichever terminal started the process.
DEFAULT_WIDTH = 80


def width() -> int:
    """The terminal's columns: COLUMNS when set, the terminal's own, else 80."""
    # shutil reads COLUMNS first, then the terminal of sys.__stdout__; trust
    # the latter only when the stream we print to is a terminal.
    if os.environ.get("COLUMNS", "").isdigit() or sys.stdout.isatty():
        columns = shutil.get_terminal_size(fallback=(DEFAULT_WIDTH, 24)).columns
        if columns > 0:
            return columns
    return DEFAULT_WIDTH


# Control characters from stored text (a prompt, a note, a commit summary)
# never reach a terminal as themselves: ESC starts a sequence that can set
# the title, clear the screen or rewrite what was printed; C1 CSI (U+009B)
# does the same in one character; NUL cuts what some readers show. Each is
# shown escaped, as git shows such bytes in a path.
_NAMED = {"\0": "\\0", "\t": "\\t", "\n": "\\n", "\r": "\\r"}
_CONTROL = {
    code: _NAMED.get(chr(code), f"\\x{code:02x}")
    for code in (*range(0x20), 0x7F, *range(0x80, 0xA0))
}


def printable(text: str) -> str:
    """``text`` with every control character escaped (``\\x1b``, ``\\n``, ``\\0``)."""
    if text.isprintable():
        return text  # the common case, one C-speed pass
    return text.translate(_CONTROL)


def clip(text: str, room: int) -> str:
    """``text`` in at most ``room`` characters, ending in … when cut."""
    if len(text) <= room:
        return text
    if room <= 0:
        return ""
    return text[: room - 1] + ELLIPSIS


def rows(
    table: Sequence[Sequence[str]],
    free: int,
    columns: int,
    ends: Sequence[str] = (),
) -> list[str]:
    """Lay out ``table``: every column padded, column ``free`` cut to fit.

    The free column gets the width the others leave (at least one
    character); the others keep their whole values even on a terminal too
    narrow for them. ``ends[k]``, the end of row k's free cell (the user's
    note after a prompt), stays whole while it takes at most half the room:
    the text before it is cut instead.
    """
    if not table:
        return []
    table = [[printable(cell) for cell in row] for row in table]
    ends = [printable(end) for end in ends]
    count = len(table[0])
    widths = [max(len(row[i]) for row in table) for i in range(count)]
    fixed = sum(w for i, w in enumerate(widths) if i != free) + len(GAP) * (count - 1)
    room = max(columns - fixed, 1)
    widths[free] = min(widths[free], room)
    lines = []
    for k, row in enumerate(table):
        end = ends[k] if k < len(ends) else ""
        cells = [
            (_fit(cell, end, room) if i == free else cell).ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        lines.append(GAP.join(cells).rstrip())
    return lines


def _fit(cell: str, end: str, room: int) -> str:
    if len(cell) <= room or not end or len(end) > room // 2 or not cell.endswith(end):
        return clip(cell, room)
    return clip(cell[: len(cell) - len(end)], room - len(end)) + end


def pair(head: str, old: str, new: str, columns: int, arrow: str = " -> ") -> str:
    """``head`` then ``old -> new``, the two values cut to share the width."""
    head, old, new = printable(head), printable(old), printable(new)
    room = columns - len(head) - len(arrow)
    if len(old) + len(new) > room:
        half = max(room // 2, 1)
        if len(old) <= half:
            new = clip(new, max(room - len(old), 1))
        elif len(new) <= half:
            old = clip(old, max(room - len(new), 1))
        else:
            old, new = clip(old, half), clip(new, max(room - half, 1))
    return f"{head}{old}{arrow}{new}"
