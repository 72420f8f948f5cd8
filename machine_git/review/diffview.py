"""``machine diff`` as two columns: each changed field, old on the left, new on
the right, with the words that changed marked.

The row and field changes are ``diff.diff_commits``'s own (trajectories
aligned record by record, tool-call arguments key by key); this module only
lays them out. Long strings are compared word by word with difflib.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from typing import Any
from typing import TypedDict

from machine_git.history import diff as diffs
from machine_git.review import view
from machine_git.review.pictures import Picture
from machine_git.rows import rows
from machine_git.rows.schemas import KINDS

_TOKENS = re.compile(r"\s+|[^\s\w]|\w+")
_MAX_TOKENS = 4000  # beyond this, two sides are shown whole, without word marks
PAGE = 100  # row changes per page


class Segment(TypedDict):
    op: str  # same | del | ins
    text: str


class ShownCall(TypedDict):
    id: str
    name: str
    args: str  # pretty-printed
    result: view.Result | None


class ShownRecord(TypedDict):
    """A trajectory or message record as the Queue shows one, not as JSON."""

    role: str
    text: str
    calls: list[ShownCall]
    result: view.Result | None  # a tool result not shown under its call
    call_id: str  # of a tool result: the call it answers


class Side(TypedDict):
    absent: bool
    segments: list[Segment]
    record: ShownRecord | None


class FieldView(TypedDict):
    path: str
    label: str  # the path read as a person would ("record 3 · call bash · command")
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
    gained: list[Picture]  # images the row names now and did not before
    lost: list[Picture]


# The images a row change gained and lost (review.pictures.changed, which
# knows the two revisions).
Changed = Callable[[diffs.RowChange], tuple[list[Picture], list[Picture]]]


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


def row_views(
    changes: list[diffs.RowChange], pictures: Changed | None = None
) -> list[RowView]:
    """The two-column layout of each row change."""
    return [row_view(c, pictures) for c in changes]


def row_view(change: diffs.RowChange, pictures: Changed | None = None) -> RowView:
    row = change.new or change.old or {}
    kinds = (
        f"{change.old_kind} → {change.new_kind}"
        if change.status == "moved"
        else str(change.new_kind or change.old_kind)
    )
    gained, lost = pictures(change) if pictures is not None else ([], [])
    return RowView(
        id=change.id,
        status=change.status,
        kinds=kinds,
        words=rows.first_words(row, 80),
        fields=_readable(change),
        old=_preview(change.old) if change.status == "removed" else None,
        new=_preview(change.new) if change.status == "added" else None,
        gained=gained,
        lost=lost,
    )


_RECORD = re.compile(r"^\$\.(trajectory|messages)\[(\d+)\]$")
_CALL = re.compile(r"^\$\.(trajectory|messages)\[(\d+)\]\.tool_calls\[(\d+)\](.*)$")


def _readable(change: diffs.RowChange) -> list[FieldView]:
    """The field views of a change, with whole records shown as records.

    A tool result inserted (or removed) with the call that made it is shown
    under that call, as the Queue shows it, not as a field of its own.
    """
    views = [field_view(f, change.old, change.new) for f in change.fields]
    for side, other in (("old", "new"), ("new", "old")):
        calls = {
            call["id"]: call
            for v in views
            if (record := _side(v, side)["record"]) is not None
            for call in record["calls"]
        }
        kept = []
        for v in views:
            record = _side(v, side)["record"]
            if (
                record is not None
                and record["role"] == "tool"
                and _side(v, other)["absent"]
                and record["call_id"] in calls
            ):
                calls[record["call_id"]]["result"] = record["result"]
                continue
            kept.append(v)
        views = kept
    return views


def _side(field: FieldView, side: str) -> Side:
    return field["old"] if side == "old" else field["new"]


def _call_name(row: dict[str, Any] | None, kind: str, record: int, call: int) -> str:
    try:
        found = (row or {})[kind][record]["tool_calls"][call]
    except (KeyError, IndexError, TypeError):
        return "?"
    function = found.get("function") if isinstance(found, dict) else None
    name = found.get("name") or (function or {}).get("name")
    return str(name or "?")


def label_of(
    path: str, old: dict[str, Any] | None = None, new: dict[str, Any] | None = None
) -> str:
    """A field's JSON path as words: which record, which call, which argument."""
    whole = _RECORD.match(path)
    if whole:
        return f"record {whole.group(2)}"
    inside = _CALL.match(path)
    if not inside:
        return path
    kind, record, call, rest = inside.groups()
    name = _call_name(new, kind, int(record), int(call))
    if name == "?":
        name = _call_name(old, kind, int(record), int(call))
    label = f"record {record} · tool call {name}"
    for prefix, word in (
        (".args.", "argument "),
        (".function.arguments.", "argument "),
    ):
        if rest.startswith(prefix):
            return f"{label} · {word}{rest[len(prefix) :]}"
    return f"{label} · {rest.lstrip('.')}" if rest else label


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


def field_view(
    change: diffs.FieldChange,
    old_row: dict[str, Any] | None = None,
    new_row: dict[str, Any] | None = None,
) -> FieldView:
    """One changed field, with changed words marked when both sides are text,
    and a whole trajectory record shown as a record (calls, arguments, result)."""
    old, new = change.old, change.new
    label = label_of(change.path, old_row, new_row)
    if isinstance(old, str) and isinstance(new, str):
        left, right = words(old, new)
        return FieldView(path=change.path, label=label, old=left, new=right)
    whole = _RECORD.match(change.path) is not None
    return FieldView(
        path=change.path,
        label=label,
        old=_whole(old, "del", whole),
        new=_whole(new, "ins", whole),
    )


def _whole(value: Any, op: str, record: bool = False) -> Side:
    if value is diffs.MISSING:
        return Side(absent=True, segments=[], record=None)
    if record and isinstance(value, dict) and "role" in value:
        return Side(absent=False, segments=[], record=shown_record(value))
    return Side(
        absent=False,
        segments=[Segment(op=op, text=view.clip(view.pretty(value)))],
        record=None,
    )


def shown_record(record: dict[str, Any]) -> ShownRecord:
    """A record as a person reads it: its text, each call with its arguments."""
    role = str(record.get("role"))
    found = record.get("tool_calls")
    calls = [
        ShownCall(id=c["id"], name=c["name"], args=c["args"], result=None)
        for c in (
            view.call_of(call)
            for call in (found if isinstance(found, list) else [])
            if isinstance(call, dict)
        )
    ]
    content = record.get("content")
    text = view.clip(content) if isinstance(content, str) else ""
    if role == "meta":
        text = view.meta_text(record)
    tool = role == "tool"
    return ShownRecord(
        role=role,
        text="" if tool else text,
        calls=calls,
        result=view.result_of(record) if tool else None,
        call_id=str(record.get("tool_call_id") or "") if tool else "",
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
    return (
        Side(absent=False, segments=left, record=None),
        Side(absent=False, segments=right, record=None),
    )


def _add(segments: list[Segment], op: str, text: str) -> None:
    if not text:
        return
    if segments and segments[-1]["op"] == op:
        segments[-1]["text"] += text
    else:
        segments.append(Segment(op=op, text=text))
