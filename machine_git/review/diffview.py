"""``machine diff`` as two columns: each changed field, old on the left, new on
the right, with the words that changed marked.

The row and field changes are ``diff.diff_commits``'s own (trajectories
aligned record by record, tool-call arguments key by key); this module only
lays them out. Long strings are compared word by word with difflib.
"""

from __future__ import annotations

import difflib
import re
from typing import Any
from typing import TypedDict

from machine_git.history import diff as diffs
from machine_git.review import view
from machine_git.rows import rows
from machine_git.rows.schemas import KINDS

_TOKENS = re.compile(r"\s+|[^\s\w]|\w+")
_MAX_TOKENS = 4000  # beyond this, two sides are shown whole, without word marks
PAGE = 100  # row changes per page


class Segment(TypedDict):
    op: str  # same | del | ins
    text: str


class Side(TypedDict):
    absent: bool
    segments: list[Segment]


class FieldView(TypedDict):
    path: str
    old: Side
    new: Side


class Preview(TypedDict):
    user: str
    answer: str
    note: str


class RowView(TypedDict):
    id: str
    status: str
    kinds: str
    words: str
    fields: list[FieldView]
    old: Preview | None
    new: Preview | None


class KindCount(TypedDict):
    kind: str
    added: int
    removed: int
    modified: int
    moved_in: int
    moved_out: int


def summary(result: diffs.Diff) -> list[KindCount]:
    """Per kind (in the schemas' order): added, removed, modified, moved."""
    table = result.summary()
    order = sorted(table, key=lambda k: KINDS.index(k) if k in KINDS else 99)
    return [
        KindCount(
            kind=kind,
            added=table[kind]["added"],
            removed=table[kind]["removed"],
            modified=table[kind]["modified"],
            moved_in=table[kind]["moved_in"],
            moved_out=table[kind]["moved_out"],
        )
        for kind in order
    ]


def row_views(changes: list[diffs.RowChange]) -> list[RowView]:
    """The two-column layout of each row change."""
    return [row_view(c) for c in changes]


def row_view(change: diffs.RowChange) -> RowView:
    row = change.new or change.old or {}
    kinds = (
        f"{change.old_kind} → {change.new_kind}"
        if change.status == "moved"
        else str(change.new_kind or change.old_kind)
    )
    return RowView(
        id=change.id,
        status=change.status,
        kinds=kinds,
        words=rows.first_words(row, 80),
        fields=[field_view(f) for f in change.fields],
        old=_preview(change.old) if change.status == "removed" else None,
        new=_preview(change.new) if change.status == "added" else None,
    )


def _preview(row: dict[str, Any] | None) -> Preview | None:
    if row is None:
        return None
    users = [
        str(r.get("content"))
        for r in row.get("trajectory") or row.get("messages") or []
        if isinstance(r, dict) and r.get("role") == "user"
    ]
    return Preview(
        user=view.clip(users[0] if users else ""),
        answer=view.clip(view.answer(row)),
        note=str(row.get("note") or ""),
    )


def field_view(change: diffs.FieldChange) -> FieldView:
    """One changed field, with changed words marked when both sides are text."""
    old, new = change.old, change.new
    if isinstance(old, str) and isinstance(new, str):
        left, right = words(old, new)
        return FieldView(path=change.path, old=left, new=right)
    return FieldView(path=change.path, old=_whole(old, "del"), new=_whole(new, "ins"))


def _whole(value: Any, op: str) -> Side:
    if value is diffs.MISSING:
        return Side(absent=True, segments=[])
    return Side(
        absent=False, segments=[Segment(op=op, text=view.clip(view.pretty(value)))]
    )


def words(old: str, new: str) -> tuple[Side, Side]:
    """Both strings split into unchanged and changed runs of words."""
    a, b = _TOKENS.findall(old), _TOKENS.findall(new)
    if len(a) > _MAX_TOKENS or len(b) > _MAX_TOKENS:
        return _whole(old, "del"), _whole(new, "ins")
    left: list[Segment] = []
    right: list[Segment] = []
    codes = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    for index, (op, a0, a1, b0, b1) in enumerate(codes):
        same = "".join(a[a0:a1])
        # A lone space between two changes reads better as part of them.
        inside = 0 < index < len(codes) - 1 and not same.strip()
        if op == "equal" and not inside:
            _add(left, "same", same)
            _add(right, "same", "".join(b[b0:b1]))
            continue
        _add(left, "del", "".join(a[a0:a1]))
        _add(right, "ins", "".join(b[b0:b1]))
    return Side(absent=False, segments=left), Side(absent=False, segments=right)


def _add(segments: list[Segment], op: str, text: str) -> None:
    if not text:
        return
    if segments and segments[-1]["op"] == op:
        segments[-1]["text"] += text
    else:
        segments.append(Segment(op=op, text=text))
