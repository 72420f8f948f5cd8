"""Differences between dataset versions: rows, then fields, then records.

Rows are keyed by id; a modified row is compared field by field and reported
by JSON path. Conversations are aligned record by record (difflib on each
record's role and tool-call ids), so an inserted tool call shows up as one
added record rather than as every later index changing, and a tool call's
JSON arguments are compared key by key.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from dataclasses import field
from typing import Any

import pygit2
from pygit2 import Commit

from machine_git import context
from machine_git import jsonio
from machine_git import rows
from machine_git.objects import Objects
from machine_git.store import Store
from machine_git.store import read_path
from machine_git.treediff import changed_blobs


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
_ALIGNED = frozenset({"trajectory", "messages"})


@dataclass(frozen=True)
class FieldChange:
    """One value that differs, at a JSON path; MISSING marks an absent side."""

    path: str
    old: Any
    new: Any

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path}
        if self.old is not MISSING:
            out["old"] = self.old
        if self.new is not MISSING:
            out["new"] = self.new
        return out


@dataclass
class RowChange:
    """How one row differs between two versions."""

    id: str
    status: str  # added | removed | modified | moved
    old: dict[str, Any] | None
    new: dict[str, Any] | None
    fields: list[FieldChange] = field(default_factory=list)

    @property
    def old_kind(self) -> str | None:
        return None if self.old is None else str(self.old.get("kind"))

    @property
    def new_kind(self) -> str | None:
        return None if self.new is None else str(self.new.get("kind"))

    def kinds(self) -> set[str]:
        return {k for k in (self.old_kind, self.new_kind) if k is not None}


@dataclass
class Diff:
    """Every row change between two commits, plus other files that changed."""

    old: Commit | None
    new: Commit
    rows: list[RowChange]
    other_files: list[str]

    def summary(self) -> dict[str, dict[str, int]]:
        """Per kind: added, removed, modified, moved in, moved out."""
        out: dict[str, dict[str, int]] = {}

        def bump(kind: str | None, what: str) -> None:
            if kind is None:
                return
            counts = out.setdefault(
                kind,
                {
                    "added": 0,
                    "removed": 0,
                    "modified": 0,
                    "moved_in": 0,
                    "moved_out": 0,
                },
            )
            counts[what] += 1

        for change in self.rows:
            if change.status == "moved":
                bump(change.old_kind, "moved_out")
                bump(change.new_kind, "moved_in")
            elif change.status == "added":
                bump(change.new_kind, "added")
            elif change.status == "removed":
                bump(change.old_kind, "removed")
            else:
                bump(change.new_kind, "modified")
        return out


def diff_commits(
    store: Store, old: Commit | None, new: Commit, kinds: Iterable[str] | None = None
) -> Diff:
    """Row-level diff of ``old`` -> ``new``; cost follows the size of the change."""
    wanted = set(kinds) if kinds else None
    changes: list[RowChange] = []
    others: list[str] = []
    contexts: list[str] = []
    repo = store.repo
    objects = Objects(repo)  # a damaged loose object: an error, not a hang
    old_tree = objects.tree(old.tree_id) if old is not None else None
    new_tree = objects.tree(new.tree_id)
    for path, a, b in changed_blobs(repo, old_tree, new_tree, objects=objects):
        row_id = rows.id_of_path(path)
        if row_id is None:
            (contexts if context.is_context_path(path) else others).append(path)
            continue
        before = _shown(_load(objects, a), repo, old_tree)
        after = _shown(_load(objects, b), repo, new_tree)
        change = row_change(row_id, before, after)
        if wanted is None or change.kinds() & wanted:
            changes.append(change)
    changes.sort(key=lambda c: c.id)
    # A context shows in the rows that name it; alone (pruned) it is a file.
    named = {
        context.path_of(str(r[context.FIELD]["id"]))
        for c in changes
        for r in (c.old, c.new)
        if r is not None
        and isinstance(r.get(context.FIELD), dict)
        and "id" in r[context.FIELD]
    }
    others.extend(p for p in contexts if p not in named)
    return Diff(old, new, changes, sorted(others))


def row_change(
    row_id: str, before: dict[str, Any] | None, after: dict[str, Any] | None
) -> RowChange:
    """Classify and field-diff one row."""
    if before is None:
        return RowChange(row_id, "added", None, after)
    if after is None:
        return RowChange(row_id, "removed", before, None)
    status = "moved" if before.get("kind") != after.get("kind") else "modified"
    return RowChange(row_id, status, before, after, diff_values(before, after))


def _shown(
    row: dict[str, Any] | None, repo: pygit2.Repository, tree: Any
) -> dict[str, Any] | None:
    # A row's context by hash is opaque: compare what it holds, field by field.
    if row is None:
        return None
    return context.shown(row, lambda path: read_path(repo, tree, path))


def _load(objects: Objects, oid: pygit2.Oid | None) -> dict[str, Any] | None:
    if oid is None:
        return None
    try:
        value = jsonio.loads(objects.blob(oid))
    except ValueError:
        return {"_unreadable": str(oid)}
    return value if isinstance(value, dict) else {"_not_an_object": value}


# -- values --------------------------------------------------------------------


def diff_values(old: Any, new: Any, path: str = "$") -> list[FieldChange]:
    """Every leaf that differs between two JSON values, by JSON path."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[FieldChange] = []
        for key in sorted(old.keys() | new.keys()):
            sub = f"{path}.{key}"
            if key not in old:
                out.append(FieldChange(sub, MISSING, new[key]))
            elif key not in new:
                out.append(FieldChange(sub, old[key], MISSING))
            elif (
                key in _ALIGNED
                and isinstance(old[key], list)
                and isinstance(new[key], list)
            ):
                out.extend(_diff_aligned(old[key], new[key], sub))
            else:
                out.extend(diff_values(old[key], new[key], sub))
        return out
    if isinstance(old, list) and isinstance(new, list):
        out = []
        for index in range(max(len(old), len(new))):
            sub = f"{path}[{index}]"
            if index >= len(old):
                out.append(FieldChange(sub, MISSING, new[index]))
            elif index >= len(new):
                out.append(FieldChange(sub, old[index], MISSING))
            else:
                out.extend(diff_values(old[index], new[index], sub))
        return out
    if isinstance(old, str) and isinstance(new, str) and path.endswith(".args"):
        # Tool-call arguments are a JSON string: compare them as JSON.
        parsed = _json_object(old), _json_object(new)
        if parsed[0] is not None and parsed[1] is not None and old != new:
            return diff_values(parsed[0], parsed[1], path)
    if old == new and type(old) is type(new):
        return []
    return [FieldChange(path, old, new)]


def _diff_aligned(old: list[Any], new: list[Any], path: str) -> list[FieldChange]:
    matcher = difflib.SequenceMatcher(
        None, [_signature(r) for r in old], [_signature(r) for r in new], autojunk=False
    )
    out: list[FieldChange] = []
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        if op == "equal":
            for i, j in zip(range(a0, a1), range(b0, b1), strict=True):
                out.extend(diff_values(old[i], new[j], f"{path}[{j}]"))
            continue
        paired = min(a1 - a0, b1 - b0) if op == "replace" else 0
        for k in range(paired):
            out.extend(diff_values(old[a0 + k], new[b0 + k], f"{path}[{b0 + k}]"))
        for i in range(a0 + paired, a1):
            out.append(FieldChange(f"{path}[{i}]", old[i], MISSING))
        for j in range(b0 + paired, b1):
            out.append(FieldChange(f"{path}[{j}]", MISSING, new[j]))
    return out


def _signature(record: Any) -> tuple[str, ...]:
    if not isinstance(record, dict):
        return ("?",)
    role = str(record.get("role"))
    calls = record.get("tool_calls")
    if isinstance(calls, list):
        return (role, *(str(c.get("id") if isinstance(c, dict) else c) for c in calls))
    if "tool_call_id" in record:
        return (role, str(record["tool_call_id"]))
    return (role,)


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = jsonio.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def show_value(value: Any, limit: int = 70) -> str:
    """A value on one line for the terminal."""
    if value is MISSING:
        return "(absent)"
    text = jsonio.compact(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
