"""Row counts per kind, kept cheap: a cache beside the repository, brought up
to date by diffing the cached commit against the newest one.

Counting by reading every row costs seconds at 100,000 rows; the diff from
the cached commit touches only the rows that changed since (usually one).
The cache is derived from git, never trusted blindly: it names the commit it
describes, and a missing or unreadable cache is rebuilt.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import pygit2
from pygit2 import Commit

from machine_git import jsonio
from machine_git import rows
from machine_git.schemas import KINDS
from machine_git.store import WORK
from machine_git.store import Store
from machine_git.treediff import changed_blobs

_CACHE = "stats.json"


def counts(store: Store, at: Commit | None = None) -> dict[str, int]:
    """How many rows of each kind the newest commit (or ``at``) holds."""
    head = store.head
    result = dict.fromkeys(KINDS, 0)
    if head is None:
        return result
    if at is not None and at.id != head.id:
        # Start from the head's (cached) counts and walk the difference.
        result = counts(store)
        _apply(store, result, head, at)
        return result
    cached = _read_cache(store)
    base: Commit | None = None
    if cached is not None:
        try:
            base = store.repo[cached["commit"]].peel(Commit)
            result.update(cached["counts"])
        except (KeyError, ValueError, pygit2.GitError):
            base, result = None, dict.fromkeys(KINDS, 0)
    if base is not None and base.id == head.id:
        return result
    _apply(store, result, base, head)
    _write_cache(store, str(head.id), result)
    return result


def _apply(
    store: Store, result: dict[str, int], base: Commit | None, to: Commit
) -> None:
    for path, old, new in changed_blobs(
        store.repo, base.tree if base is not None else None, to.tree
    ):
        if rows.id_of_path(path) is None:
            continue
        if old is not None:
            _bump(result, _kind(store, old), -1)
        if new is not None:
            _bump(result, _kind(store, new), +1)


def _kind(store: Store, oid: pygit2.Oid) -> str:
    try:
        row = jsonio.loads(store.repo[oid].peel(pygit2.Blob).data)
    except ValueError:
        return "invalid"
    kind = row.get("kind") if isinstance(row, dict) else None
    return kind if isinstance(kind, str) else "invalid"


def _bump(result: dict[str, int], kind: str, by: int) -> None:
    result[kind] = result.get(kind, 0) + by
    if result[kind] == 0 and kind not in KINDS:
        del result[kind]


def _read_cache(store: Store) -> dict[str, Any] | None:
    try:
        value = jsonio.loads((store.path / WORK / _CACHE).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(value, dict) or not isinstance(value.get("counts"), dict):
        return None
    return value


def _write_cache(store: Store, commit: str, result: dict[str, int]) -> None:
    # Best effort: a read-only store still answers, it just recounts.
    target = store.path / WORK / _CACHE
    tmp = target.with_name(f"{_CACHE}.{os.getpid()}.tmp")
    with contextlib.suppress(OSError):
        old = os.umask(0o077)
        try:
            tmp.write_bytes(jsonio.line({"commit": commit, "counts": result}))
            os.replace(tmp, target)
        finally:
            os.umask(old)
            with contextlib.suppress(OSError):
                tmp.unlink()
