"""Changing rows after the fact: rewrite, edit, rm, move, undo. Each is a commit."""

from __future__ import annotations

import copy
from collections.abc import Callable
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING
from typing import Any
from typing import NamedTuple
from typing import cast

import pygit2
from pygit2 import Commit

from machine_git.core import jsonio
from machine_git.core.errors import NotFoundError
from machine_git.core.errors import ReleaseError
from machine_git.core.errors import RowNotFoundError
from machine_git.core.errors import RowValidationError
from machine_git.core.errors import TurnError
from machine_git.core.errors import UsageError
from machine_git.history import diff
from machine_git.history import lookup
from machine_git.rows import context
from machine_git.rows import rows
from machine_git.rows import schemas
from machine_git.secrets import redaction
from machine_git.store.store import Change
from machine_git.store.store import Redaction
from machine_git.store.store import Snapshot
from machine_git.store.store import Store
from machine_git.store.store import fit
from machine_git.store.treediff import changed_blobs

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Row


@dataclass
class EditResult:
    """What a change did: the row before and after, and the commit (or None)."""

    row_id: str
    before: Row | None
    after: Row | None
    commit: str | None


def _current(snap: Snapshot, row_id: str) -> Row:
    data = snap.read(rows.row_path(row_id))
    if data is None:
        raise RowNotFoundError(f"row {row_id} was removed meanwhile")
    return rows.parse(data, rows.row_path(row_id))


def _modify(
    store: Store,
    prefix: str,
    action: str,
    change_row: Callable[[Row], Row],
    summary: Callable[[Row, Row], str],
    body: str = "",
    content_changes: bool = True,
) -> EditResult:
    row_id = lookup.resolve_id(store, prefix)
    path = rows.row_path(row_id)
    seen: list[Row] = []

    def plan(snap: Snapshot) -> Change | None:
        before = _current(snap, row_id)
        after = context.from_shown(change_row(copy.deepcopy(before)), snap.read)
        if content_changes and after != before:
            # New words (a rewrite, a hand edit) are scanned like a new tag.
            after, _ = redaction.redact_row(after)
        # An edited context is stored once, by hash, like a tagged one.
        stored, contexts = context.stored(
            cast("dict[str, Any]", after),
            lambda where: context.in_tree(snap.tree, where),
        )
        after = cast("Row", stored)
        seen[:] = [before, after]
        if after == before:
            return None
        trailers = {"Action": action, "Row": row_id, "Kind": after["kind"]}
        if before["kind"] != after["kind"]:
            trailers["From"] = before["kind"]
        return Change(
            summary=fit(summary(before, after)),
            files={path: jsonio.canonical(after), **contexts},
            trailers=trailers,
            body=body or _field_summary(before, after),
            redaction=Redaction.SCANNED if content_changes else Redaction.KEPT,
        )

    oid = store.write(plan)
    return EditResult(row_id, seen[0], seen[1], None if oid is None else str(oid))


def rewrite(store: Store, prefix: str, text: str) -> EditResult:
    """Replace the row's final answer with ``text``; the first original is kept."""
    rows.check_answer(text)

    def change(row: Row) -> Row:
        rows.rewrite_answer(row, text)
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

    def change(row: Row) -> Row:
        if label == "good" and "failure" in row:
            aborted = row["failure"].get("stop_reason") == "aborted"
            how = "was aborted" if aborted else "ended with an error"
            raise TurnError(
                f"row {row['id']} is a turn that {how}; only bad keeps it "
                "(nothing moved)"
            )
        return rows.with_kind(row, rows.shape_kind(row, label))

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


def replace(store: Store, prefix: str, new_row: Mapping[str, Any]) -> EditResult:
    """Replace a row by a version edited by hand (the id cannot change).

    ``new_row`` is whatever JSON object the user wrote; the store checks it
    against its schema before it is written.
    """
    row_id = lookup.resolve_id(store, prefix)
    if new_row.get("id") != row_id:
        raise UsageError(
            f"the id cannot change ({row_id} -> {new_row.get('id')!r}); "
            "use machine rm and machine import"
        )
    blank = rows.blank_answer(new_row)
    if blank is not None:
        raise RowValidationError(f"{blank}: {rows.BLANK_ANSWER}")
    return _modify(
        store,
        row_id,
        "edit",
        lambda row: cast("Row", dict(new_row)),
        lambda b, a: f"edit {a['id']}: {rows.first_words(a)}",
    )


def remove(store: Store, prefix: str, why: str | None = None) -> EditResult:
    """Delete a row (its history stays in git)."""
    row_id = lookup.resolve_id(store, prefix)
    path = rows.row_path(row_id)
    seen: list[Row] = []

    def plan(snap: Snapshot) -> Change:
        before = _current(snap, row_id)
        seen[:] = [before]
        return Change(
            summary=fit(f"rm {row_id}: {rows.first_words(before)}"),
            files={path: None},
            trailers={"Action": "rm", "Row": row_id, "Kind": before["kind"]},
            body=why or "",
        )

    oid = store.write(plan)
    return EditResult(row_id, seen[0], None, None if oid is None else str(oid))


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
    _refuse_release_undo(target, parent)
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
        summary=fit(f"{action}: {summary}"),
        files=files,
        trailers=trailers,
        redaction=Redaction.KEPT,
    )


def _refuse_release_undo(target: Commit, parent: Commit) -> None:
    # Release records are append-only: reverting one would read as tampering.
    if _releases(target) != _releases(parent):
        summary = target.message.splitlines()[0] if target.message else ""
        raise ReleaseError(
            f"the step to take back ({summary}) wrote release records, which are "
            "append-only: it cannot be undone"
        )


def _releases(commit: Commit) -> pygit2.Oid | None:
    try:
        return commit.tree["releases"].id
    except KeyError:
        return None


def problems_of(row: Any) -> list[str]:
    """The schema problems of an edited row, one line each (its context may
    be as ``machine show`` gives it)."""
    return [str(p) for p in schemas.row_problems(context.from_shown(row))]


def _field_summary(before: Row, after: Row) -> str:
    lines = [
        f"{c.path}: {diff.show_value(c.old, 40)} -> {diff.show_value(c.new, 40)}"
        for c in diff.diff_values(before, after)
    ]
    return "\n".join(lines[:20] + (["..."] if len(lines) > 20 else []))
