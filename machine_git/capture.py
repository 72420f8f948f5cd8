"""Tagging: a validated row becomes one commit (or one JSONL line with --out)."""

from __future__ import annotations

import contextlib
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
from machine_git.store import Snapshot
from machine_git.store import Store
from machine_git.store import parse_row


class TagResult(Plain):
    """What tagging did: ``tag`` (new row), ``move`` (other label), ``duplicate``."""

    __slots__ = ("action", "commit", "previous_kind", "row")

    def __init__(
        self,
        action: str,
        row: dict[str, Any],
        previous_kind: str | None = None,
        commit: str | None = None,
    ) -> None:
        self.action = action
        self.row = row
        self.previous_kind = previous_kind
        self.commit = commit


def tag(store: Store, row: dict[str, Any], redaction: str | None = None) -> TagResult:
    """Commit ``row``. A turn tagged the same way again is reported, not duplicated."""
    check(row)
    path = rows.row_path(row["id"])
    outcome: dict[str, Any] = {}

    def plan(snap: Snapshot) -> Change | None:
        existing_bytes = snap.read(path)
        existing = (
            parse_row(existing_bytes, path) if existing_bytes is not None else None
        )
        trailers = {
            "Action": "tag",
            "Row": row["id"],
            "Kind": row["kind"],
            "Tag": row["tag"],
            "Source": source_trailer(row),
        }
        words = rows.first_words(row)
        if existing is None:
            outcome.update(action="tag", previous=None)
            summary = f"{row['tag']} {row['id']}: {words}"
        elif existing.get("kind") == row["kind"]:
            outcome.update(
                action="duplicate", previous=existing.get("kind"), row=existing
            )
            return None
        else:
            previous = str(existing.get("kind"))
            outcome.update(action="move", previous=previous)
            trailers["Action"] = "move"
            trailers["From"] = previous
            summary = f"move {row['id']} {previous} -> {row['kind']}: {words}"
        return Change(
            summary=_fit(summary),
            files={path: jsonio.canonical(row)},
            trailers=trailers,
            body=row.get("note") or "",
            redaction=redaction,
        )

    oid = store.write(plan)
    return TagResult(
        action=outcome["action"],
        row=outcome.get("row", row),
        previous_kind=outcome.get("previous"),
        commit=str(oid) if oid is not None else None,
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
