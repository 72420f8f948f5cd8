"""Tagging: a validated row becomes one commit (or one JSONL line with --out)."""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pygit2
from pygit2 import Commit

from machine_git import jsonio
from machine_git import rows
from machine_git import schemas
from machine_git.errors import RowValidationError
from machine_git.errors import UsageError
from machine_git.plain import Plain
from machine_git.store import Change
from machine_git.store import Snapshot
from machine_git.store import Store
from machine_git.store import parse_row


class TagResult(Plain):
    """What tagging did: ``tag`` (new row), ``move`` (other label), ``label`` (the
    turn's observed row judged), ``duplicate``; ``also`` lists the turn's other
    rows moved with it, as ``(id, from kind, to kind)``."""

    __slots__ = ("action", "also", "commit", "previous_kind", "row")

    def __init__(
        self,
        action: str,
        row: dict[str, Any],
        previous_kind: str | None = None,
        commit: str | None = None,
        also: list[tuple[str, str, str]] | None = None,
    ) -> None:
        self.action = action
        self.row = row
        self.previous_kind = previous_kind
        self.commit = commit
        self.also: list[tuple[str, str, str]] = also if also is not None else []


# -- the rows of one turn ------------------------------------------------------------


def turn_rows(snap: Snapshot, row: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The rows already stored for ``row``'s turn, by shape (answer, trace, observed).

    One turn can be stored under three ids, one per shape (rows.make_id of its
    host, session and entries), so these are three reads, whatever the size of
    the store. Tagging and observing look here first, so a turn is in the
    dataset once: a tag labels the turn's observed row instead of adding a
    second row, a new label moves every row of the turn, and an observation
    of a tagged turn records nothing.
    """
    source = row.get("source") or {}
    host, session, entries = (
        source.get("host"),
        source.get("session_id"),
        source.get("entry_ids"),
    )
    if not (isinstance(host, str) and isinstance(session, str) and entries):
        return {}
    found: dict[str, dict[str, Any]] = {}
    for shape in rows.SHAPES:
        path = rows.row_path(rows.make_id(host, session, list(entries), shape))
        data = snap.read(path)
        if data is not None:
            found[shape] = parse_row(data, path)
    return found


def _shape_kind(stored: dict[str, Any], label: str) -> str:
    """The kind a stored row takes under ``label``: by its shape, like machine move."""
    answer_kind, trace_kind = rows.LABELS[label]
    return trace_kind if "trajectory" in stored else answer_kind


def _labeled(observed: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """The turn's observed row judged as ``row`` is: its label, note and answer."""
    after = copy.deepcopy(observed)
    after["kind"] = _shape_kind(observed, row["tag"])
    after["tag"] = row["tag"]
    if row.get("note"):
        after["note"] = row["note"]
    from machine_git import edits  # only when a tag meets an observed row

    answer, old = edits.final_answer(row), edits.final_answer(after)
    if answer is not None and answer != old:  # the tag rewrote it (--as)
        if old is not None and "original_answer" not in after:
            after["original_answer"] = old
        edits.set_final_answer(after, answer)
    return after


def _primary(
    snap: Snapshot, row: dict[str, Any], turn: dict[str, dict[str, Any]]
) -> tuple[str, dict[str, Any] | None, dict[str, Any]]:
    """What the tag does to its own row: (action, row before, row after).

    The row itself if it exists or the turn has no observed row; else the
    observed row, labeled (or moved, if it was labeled before).
    """
    path = rows.row_path(row["id"])
    data = snap.read(path)
    existing = parse_row(data, path) if data is not None else None
    observed = turn.get("observed")
    if existing is None and observed is not None and observed["id"] != row["id"]:
        after = _labeled(observed, row)
        if observed.get("kind") == "observed":
            return "label", observed, after
        existing, row = observed, after  # labeled before: same label, or a move
    if existing is None:
        return "tag", None, row
    if existing.get("kind") == row["kind"]:
        return "duplicate", existing, existing
    return "move", existing, row


def tag(store: Store, row: dict[str, Any], redaction: str | None = None) -> TagResult:
    """Commit ``row``: one commit for the turn, however many of its rows change.

    A turn tagged the same way again is reported, not duplicated; a turn that
    auto-capture observed is labeled in place (same id); every other row of
    the turn that carries the other label moves with it.
    """
    check(row)
    outcome: dict[str, Any] = {}

    def plan(snap: Snapshot) -> Change | None:
        turn = turn_rows(snap, row)
        action, before, after = _primary(snap, row, turn)
        label = row["tag"]
        # the turn's other rows that carry the other verdict move with it
        others = [
            r
            for r in turn.values()
            if r["id"] != after["id"]
            and r.get("tag") in rows.LABELS
            and r.get("tag") != label
        ]
        also = [(str(r["id"]), str(r["kind"]), _shape_kind(r, label)) for r in others]
        previous = None if before is None else str(before.get("kind"))
        outcome.update(action=action, row=after, previous=previous, also=also)
        if action == "duplicate" and not also:
            return None
        files: dict[str, bytes | None] = {}
        if action != "duplicate":
            check(after)
            files[rows.row_path(after["id"])] = jsonio.canonical(after)
        for other, (other_id, _, kind) in zip(others, also, strict=True):
            moved = {**other, "kind": kind, "tag": rows.TAG_OF_KIND[kind]}
            files[rows.row_path(other_id)] = jsonio.canonical(moved)
        return _tag_change(row, action, after, previous, also, files, redaction)

    oid = store.write(plan)
    if oid is None:
        outcome["action"] = "duplicate"
    elif outcome["action"] == "duplicate":
        outcome["action"] = "move"  # only the turn's other rows moved
    return TagResult(
        action=outcome["action"],
        row=outcome["row"],
        previous_kind=outcome["previous"],
        commit=None if oid is None else str(oid),
        also=outcome["also"],
    )


def _tag_change(
    row: dict[str, Any],
    action: str,
    after: dict[str, Any],
    previous: str | None,
    also: list[tuple[str, str, str]],
    files: dict[str, bytes | None],
    redaction: str | None,
) -> Change:
    """The commit of one tag: its summary, the moved rows in the body, trailers."""
    words = rows.first_words(after)
    main_id = after["id"] if action != "duplicate" else also[0][0]
    trailers = {
        "Action": "move" if action == "duplicate" else action,
        "Row": main_id,
        "Kind": after["kind"] if action != "duplicate" else also[0][2],
        "Tag": row["tag"],
        "Source": source_trailer(row),
    }
    if action == "tag":
        summary = f"{row['tag']} {after['id']}: {words}"
    elif action == "duplicate":
        _, old, new = also[0]
        summary = f"move {main_id} {old} -> {new}: {words}"
        trailers["From"] = old
    else:
        summary = f"{action} {after['id']} {previous} -> {after['kind']}: {words}"
        trailers["From"] = str(previous)
    others = [a for a in also if a[0] != main_id]
    if others:
        trailers["Also"] = ", ".join(a[0] for a in others)
    lines = [f"also {i} {old} -> {new} (the same turn)" for i, old, new in others]
    body = "\n".join([*([row["note"]] if row.get("note") else []), *lines])
    return Change(
        summary=_fit(summary),
        files=files,
        trailers=trailers,
        body=body,
        redaction=redaction,
    )


def check(row: dict[str, Any]) -> None:
    """Raise RowValidationError naming the first problem of ``row``."""
    problems = schemas.row_problems(row)
    if problems:
        raise RowValidationError(f"the row is invalid: {problems[0]}")


def write_out(path: Path, row: dict[str, Any]) -> None:
    """Append ``row`` as one line of a JSONL file (created 0600)."""
    check(row)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror}") from None
    with os.fdopen(fd, "ab") as f:
        f.write(jsonio.line(row))


def source_trailer(row: dict[str, Any]) -> str:
    """``pi <session id> <first entry>..<last entry>`` for the commit trailer."""
    source = row.get("source") or {}
    ids = source.get("entry_ids") or ["?"]
    return f"{source.get('host')} {source.get('session_id')} {ids[0]}..{ids[-1]}"


def _fit(summary: str, limit: int = 72) -> str:
    summary = " ".join(summary.split())
    return summary if len(summary) <= limit else summary[: limit - 1] + "…"


# -- listing ---------------------------------------------------------------------


def recent(store: Store, limit: int, kind: str | None = None) -> list[dict[str, Any]]:
    """The rows most recently tagged, moved or changed, newest first, as now."""
    head = store.head
    if head is None:
        return []
    found: list[dict[str, Any]] = []
    seen: set[str] = set()
    snap = store.snapshot(head)
    for commit in first_parent(store, head):
        row_id = commit.message_trailers.get("Machine-Row")
        if not row_id or row_id in seen:
            continue
        seen.add(row_id)
        try:
            path = rows.row_path(row_id)
        except UsageError:
            continue
        data = snap.read(path)
        if data is None:
            continue  # removed since
        row = parse_row(data, path)
        if kind is None or row.get("kind") == kind:
            found.append(row)
            if len(found) >= limit:
                break
    return found


def first_parent(store: Store, head: Commit) -> Iterator[Commit]:
    """Commits from ``head`` back along first parents."""
    walker = store.repo.walk(head.id, pygit2.enums.SortMode.TOPOLOGICAL)
    walker.simplify_first_parent()
    yield from walker
