"""Changing rows after the fact: rewrite, edit, rm, move, undo. Each is a commit."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any
from typing import NamedTuple

from pygit2 import Commit

from machine_git import diff
from machine_git import jsonio
from machine_git import lookup
from machine_git import redaction
from machine_git import rows
from machine_git import schemas
from machine_git.errors import NotFoundError
from machine_git.errors import RowNotFoundError
from machine_git.errors import TurnError
from machine_git.errors import UsageError
from machine_git.store import Change
from machine_git.store import Redaction
from machine_git.store import Snapshot
from machine_git.store import Store
from machine_git.store import parse_row
from machine_git.treediff import changed_blobs


@dataclass
class EditResult:
    """What a change did: the row before and after, and the commit (or None)."""

    row_id: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    commit: str | None


def _current(snap: Snapshot, row_id: str) -> dict[str, Any]:
    data = snap.read(rows.row_path(row_id))
    if data is None:
        raise RowNotFoundError(f"row {row_id} was removed meanwhile")
    return parse_row(data, rows.row_path(row_id))


def _modify(
    store: Store,
    prefix: str,
    action: str,
    change_row: Any,
    summary: Any,
    body: str = "",
    content_changes: bool = True,
) -> EditResult:
    row_id = lookup.resolve_id(store, prefix)
    path = rows.row_path(row_id)
    seen: dict[str, Any] = {}

    def plan(snap: Snapshot) -> Change | None:
        before = _current(snap, row_id)
        after = change_row(copy.deepcopy(before))
        if content_changes and after != before:
            # New words (a rewrite, a hand edit) are scanned like a new tag.
            after, _ = redaction.redact_row(after)
        seen.update(before=before, after=after)
        if after == before:
            return None
        trailers = {"Action": action, "Row": row_id, "Kind": str(after["kind"])}
        if before.get("kind") != after.get("kind"):
            trailers["From"] = str(before.get("kind"))
        return Change(
            summary=_fit(summary(before, after)),
            files={path: jsonio.canonical(after)},
            trailers=trailers,
            body=body or _field_summary(before, after),
            redaction=Redaction.SCANNED if content_changes else Redaction.KEPT,
        )

    oid = store.write(plan)
    return EditResult(
        row_id, seen["before"], seen["after"], None if oid is None else str(oid)
    )


def rewrite(store: Store, prefix: str, text: str) -> EditResult:
    """Replace the row's final answer with ``text``; the first original is kept."""
    if not text.strip():
        raise UsageError("the rewrite is empty")

    def change(row: dict[str, Any]) -> dict[str, Any]:
        old = final_answer(row)
        if old == text:
            return row
        if old is not None and "original_answer" not in row:
            row["original_answer"] = old
        set_final_answer(row, text)
        return row

    return _modify(
        store,
        prefix,
        "rewrite",
        change,
        lambda b, a: f"rewrite {a['id']}: {rows.first_words(a)}",
    )


def move(store: Store, prefix: str, label: str) -> EditResult:
    """Move a row to good (train or traces, by its shape) or bad (rejected)."""
    if label not in rows.LABELS:
        raise UsageError(f"--to must be good or bad, not {label!r}")

    def change(row: dict[str, Any]) -> dict[str, Any]:
        failure = row.get("failure")
        if label == "good" and isinstance(failure, dict):
            aborted = failure.get("stop_reason") == "aborted"
            how = "was aborted" if aborted else "ended with an error"
            raise TurnError(
                f"row {row['id']} is a turn that {how}; only bad keeps it "
                "(nothing moved)"
            )
        answer_kind, trace_kind = rows.LABELS[label]
        row["kind"] = trace_kind if "trajectory" in row else answer_kind
        row["tag"] = rows.TAG_OF_KIND[row["kind"]]
        return row

    return _modify(
        store,
        prefix,
        "move",
        change,
        lambda b, a: (
            f"move {a['id']} {b['kind']} -> {a['kind']}: {rows.first_words(a)}"
        ),
        content_changes=False,
    )


def replace(store: Store, prefix: str, new_row: dict[str, Any]) -> EditResult:
    """Replace a row by an edited version (validated; the id cannot change)."""
    row_id = lookup.resolve_id(store, prefix)
    if new_row.get("id") != row_id:
        raise UsageError(
            f"the id cannot change ({row_id} -> {new_row.get('id')!r}); "
            "use machine rm and machine import"
        )
    return _modify(
        store,
        row_id,
        "edit",
        lambda row: new_row,
        lambda b, a: f"edit {a['id']}: {rows.first_words(a)}",
    )


def remove(store: Store, prefix: str, why: str | None = None) -> EditResult:
    """Delete a row (its history stays in git)."""
    row_id = lookup.resolve_id(store, prefix)
    path = rows.row_path(row_id)
    seen: dict[str, Any] = {}

    def plan(snap: Snapshot) -> Change:
        before = _current(snap, row_id)
        seen["before"] = before
        return Change(
            summary=_fit(f"rm {row_id}: {rows.first_words(before)}"),
            files={path: None},
            trailers={"Action": "rm", "Row": row_id, "Kind": str(before["kind"])},
            body=why or "",
        )

    oid = store.write(plan)
    return EditResult(row_id, seen["before"], None, None if oid is None else str(oid))


# -- undo and redo -------------------------------------------------------------
#
# Every change is a step; undo and redo are commits too, never a rewind of the
# branch. Walking the first-parent line from the head: an undo or redo commit
# takes back the commit its Machine-Reverts trailer names (a redo takes back
# an undo), unless a newer one took it back in turn. A step no undo in force
# has taken back is the next thing to undo, so repeated undos walk back one
# step at a time; redo takes back the newest undo in force, as long as only
# undos and redos were made since.

UNDO = "undo"
REDO = "redo"


def _action(commit: Commit) -> str:
    return commit.message_trailers.get("Machine-Action", "")


def _reverts(commit: Commit) -> str | None:
    return commit.message_trailers.get("Machine-Reverts") or None


def _role(store: Store, commit: Commit) -> str:
    """``undo``, ``redo`` or ``step``.

    An undo of an undo (as undo made before redo existed) is a redo.
    """
    action = _action(commit)
    if action == REDO:
        return REDO
    if action != UNDO:
        return "step"
    target = _reverts(commit)
    try:
        undone = store.repo[target].peel(Commit) if target else None
    except (KeyError, ValueError):
        undone = None
    return REDO if undone is not None and _action(undone) in (UNDO, REDO) else UNDO


def next_undo(store: Store, head: Commit | None = None) -> Commit | None:
    """The step ``machine undo`` takes back next, or None if there is none."""
    commit = head if head is not None else store.head
    taken_back: set[str] = set()
    while commit is not None and commit.parents:
        role = _role(store, commit)
        if str(commit.id) in taken_back:
            pass  # undone, or an undo that was redone: no longer in force
        elif role != "step":
            taken_back.add(_reverts(commit) or "")
        elif commit.tree_id != commit.parents[0].tree_id:
            return commit  # a step with nothing in it has nothing to take back
        commit = commit.parents[0]
    return None


def next_redo(store: Store, head: Commit | None = None) -> Commit | None:
    """The undo commit ``machine redo`` takes back, or None if there is none."""
    commit = head if head is not None else store.head
    taken_back: set[str] = set()
    while commit is not None and commit.parents:
        role = _role(store, commit)
        if str(commit.id) in taken_back:
            pass
        elif role == UNDO:
            return commit
        elif role == REDO:
            taken_back.add(_reverts(commit) or "")
        else:
            return None  # a change made after the undos: redo would clobber it
        commit = commit.parents[0]
    return None


class Undone(NamedTuple):
    """What an undo or redo did: the step it took back or made again, and the
    new commit."""

    step: Commit
    commit: str | None


def undo(store: Store) -> Undone:
    """Take back the newest step not yet undone, as a new commit."""
    return _take_back(store, UNDO)


def redo(store: Store) -> Undone:
    """Make the most recently undone step again, as a new commit."""
    return _take_back(store, REDO)


def _take_back(store: Store, action: str) -> Undone:
    seen: dict[str, Commit] = {}

    def plan(snap: Snapshot) -> Change:
        head = snap.commit
        if action == UNDO:
            target = next_undo(store, head)
            if target is None and (head is None or not head.parents):
                raise NotFoundError(
                    "nothing to undo: the store has only its first commit"
                )
            if target is None:
                raise NotFoundError(
                    "nothing to undo: every change since the store was created "
                    "is undone ('machine redo' makes them again)"
                )
            step = target
        else:
            target = next_redo(store, head)
            if target is None:
                raise NotFoundError(
                    "nothing to redo: no change was undone since the last one"
                )
            step = store.repo[_reverts(target) or ""].peel(Commit)
        seen["step"] = step
        return _revert(store, target, step, action)

    oid = store.write(plan)
    return Undone(seen["step"], None if oid is None else str(oid))


def _revert(store: Store, target: Commit, step: Commit, action: str) -> Change:
    """The change that puts the files ``target`` changed back as they were
    before it (target is the step for an undo, the undo for a redo)."""
    parent = target.parents[0]
    files: dict[str, bytes | None] = {}
    touched_rows: list[str] = []
    for path, _, before in changed_blobs(store.repo, target.tree, parent.tree):
        files[path] = None if before is None else store.repo[before].read_raw()
        row_id = rows.id_of_path(path)
        if row_id:
            touched_rows.append(row_id)
    summary = step.message.splitlines()[0] if step.message else str(step.id)
    trailers = {"Action": action, "Reverts": str(target.id)}
    if action == REDO:
        trailers["Redoes"] = str(step.id)
    if len(touched_rows) == 1:
        trailers["Row"] = touched_rows[0]
    # Undo and redo restore bytes the store already held: no new content.
    return Change(
        summary=_fit(f"{action}: {summary}"),
        files=files,
        trailers=trailers,
        redaction=Redaction.KEPT,
    )


# -- answers ---------------------------------------------------------------------


def final_answer(row: dict[str, Any]) -> str | None:
    """The row's last assistant text (messages or trajectory)."""
    for item in reversed(row.get("messages") or row.get("trajectory") or []):
        if item.get("role") == "assistant" and _spoken(item):
            return str(item["content"])
    return None


def set_final_answer(row: dict[str, Any], text: str) -> None:
    """Replace the last assistant text, or append an answer if there is none."""
    items = row.get("messages") if "messages" in row else row.get("trajectory")
    if items is None:
        raise UsageError(f"row {row.get('id')} has no conversation to rewrite")
    for item in reversed(items):
        if item.get("role") == "assistant" and _spoken(item):
            item["content"] = text
            return
    answer: dict[str, Any] = {"role": "assistant", "content": text}
    if "trajectory" in row:
        answer["timestamp"] = items[-1].get("timestamp") or rows.now()
    items.append(answer)


def _spoken(item: dict[str, Any]) -> bool:
    return isinstance(item.get("content"), str) and bool(item["content"])


def problems_of(row: Any) -> list[str]:
    """The schema problems of an edited row, one line each."""
    return [str(p) for p in schemas.row_problems(row)]


def _field_summary(before: dict[str, Any], after: dict[str, Any]) -> str:
    lines = [
        f"{c.path}: {diff.show_value(c.old, 40)} -> {diff.show_value(c.new, 40)}"
        for c in diff.diff_values(before, after)
    ]
    return "\n".join(lines[:20] + (["..."] if len(lines) > 20 else []))


def _fit(summary: str, limit: int = 72) -> str:
    summary = " ".join(summary.split())
    return summary if len(summary) <= limit else summary[: limit - 1] + "…"
