"""Tagging: a validated row becomes one commit (or one JSONL line with --out)."""

from __future__ import annotations

import contextlib
import copy
import fcntl
import os
import stat
import time
from pathlib import Path
from typing import Any

from machine_git import inputs
from machine_git import jsonio
from machine_git import paths
from machine_git import rows
from machine_git import schemas
from machine_git.errors import FileWriteError
from machine_git.errors import RowValidationError
from machine_git.errors import UsageError
from machine_git.plain import Plain
from machine_git.store import Change
from machine_git.store import Redaction
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


def tag(
    store: Store, row: dict[str, Any], redaction: Redaction = Redaction.CHECK
) -> TagResult:
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
    redaction: Redaction,
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
    """Append ``row`` as one line of a JSONL file (created 0600): all or nothing.

    On any failure (a full disk, a size limit, Ctrl-C) the file is cut back
    to the size it had, so it never ends in half a line. Writers of one file
    take turns (an flock), so cutting back never takes another's line. A
    character device (/dev/null, /dev/stdout) gets the line as it is; a FIFO
    is refused, never waited on.
    """
    check(row)
    line = jsonio.line(row)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_NOCTTY
    try:
        fd = os.open(path, flags | os.O_CLOEXEC, 0o600)
    except OSError as e:
        raise paths.write_error(path, e) from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode):
            _append_whole(fd, path, line)
        elif stat.S_ISCHR(mode):
            os.set_blocking(fd, True)
            try:
                _write_all(fd, line)
            except OSError as e:
                raise paths.write_error(path, e) from None
        else:
            raise UsageError(
                f"output path {str(path)!r} is not a regular file "
                f"({inputs.kind_of(mode)})"
            )
    finally:
        os.close(fd)


def _append_whole(fd: int, path: Path, line: bytes) -> None:
    _lock(fd, path)
    before = os.fstat(fd).st_size
    try:
        _write_all(fd, line)
        os.fsync(fd)  # a full disk can surface only here (delayed allocation)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, before)
            os.fsync(fd)
        if isinstance(e, OSError):
            raise paths.write_error(path, e) from None
        raise


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _lock(fd: int, path: Path, wait: float = 10.0) -> None:
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise FileWriteError(
                    f"cannot write {path}: another process holds it locked"
                ) from None
            time.sleep(0.01)
        except OSError:
            return  # no locks on this filesystem: append unguarded


def source_trailer(row: dict[str, Any]) -> str:
    """``pi <session id> <first entry>..<last entry>`` for the commit trailer."""
    source = row.get("source") or {}
    ids = source.get("entry_ids") or ["?"]
    return f"{source.get('host')} {source.get('session_id')} {ids[0]}..{ids[-1]}"


def _fit(summary: str, limit: int = 72) -> str:
    summary = " ".join(summary.split())
    return summary if len(summary) <= limit else summary[: limit - 1] + "…"
