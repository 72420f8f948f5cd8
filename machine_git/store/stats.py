"""Row counts per kind, kept cheap: a cache beside the repository, brought up
to date by diffing the cached commit against the newest one.

Counting by reading every row costs seconds at 100,000 rows; the diff from
the cached commit touches only the rows that changed since (usually one).
The store keeps the cache itself: every commit ends in :func:`follow`
(store.py), so Pi's footer, which reads the file without starting a process,
sees the new counts at once.

The cache is derived from git and checked before it is believed: it must be
``{"commit": <40 hex>, "counts": {<known kind>: <int >= 0>}, "check": ...}``,
its commit must read, and ``check`` (a digest of the other two) must match,
so a hand edit or a garbled file is noticed. Anything else, and any count
that a diff would take below zero, means a full recount. A cache problem is
never an error: the counts are always the store's.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from typing import TYPE_CHECKING
from typing import Any

import pygit2
from pygit2 import Commit

from machine_git.core import jsonio
from machine_git.core.errors import StoreError
from machine_git.rows import rows
from machine_git.rows.schemas import KINDS
from machine_git.store.layout import WORK
from machine_git.store.objects import CorruptObjectError
from machine_git.store.objects import Objects
from machine_git.store.treediff import changed_blobs

if TYPE_CHECKING:
    from machine_git.store.store import Store

CACHE_FILE = "stats.json"  # in <store>/machine/; Pi's footer reads it too
INVALID = "invalid"  # rows whose kind cannot be read (never written by machine)
_KNOWN = (*KINDS, INVALID)
_HEX = re.compile(r"^[0-9a-f]{40}$")
# Reading a damaged commit or row while counting: recount from the head.
_READ_ERRORS = (KeyError, ValueError, pygit2.GitError, CorruptObjectError)


class _Wrong(Exception):
    """The cached counts cannot be right (a count went below zero)."""


def counts(store: Store, at: Commit | None = None) -> dict[str, int]:
    """How many rows of each kind the newest commit (or ``at``) holds."""
    head = store.head
    if head is None:
        return dict.fromkeys(KINDS, 0)
    if at is not None and at.id != head.id:
        # Start from the head's (cached) counts and walk the difference.
        result = counts(store)
        try:
            _apply(store, result, head, at)
        except _Wrong:
            result = _full(store, at)
        return result
    cached = _read_cache(store)
    if cached is not None and cached[0] == str(head.id):
        return cached[1]
    result = _from(store, cached, head)
    _write_cache(store, str(head.id), result)
    return result


def kept(store: Store, at: Commit) -> dict[str, int] | None:
    """The counts at ``at`` when they cost little (a progress bar's total).

    That is when a count is kept and ``at`` is the newest commit: the cache,
    or the cache plus a small diff. Otherwise None: counting would read
    every row, as much work as what the total is for.
    """
    if _read_cache(store) is None:
        return None
    with contextlib.suppress(StoreError, OSError, *_READ_ERRORS):
        head = store.head
        if head is not None and head.id == at.id:
            return counts(store)
    return None


def seed(store: Store, commit: str, known: dict[str, int]) -> None:
    """Start the cache at ``commit`` with counts its writer knows (an import
    into a store without rows), so progress bars have a total at once."""
    if (store.path / WORK / CACHE_FILE).is_file():
        return  # kept already: follow() brought it up to date
    result = dict.fromkeys(KINDS, 0)
    result.update({k: n for k, n in known.items() if k in KINDS})
    _write_cache(store, commit, result)


def follow(store: Store) -> None:
    """Bring an existing cache up to the newest commit; called after each commit.

    A store whose cache was never built has no reader yet: nothing is done,
    so a commit never pays for counting a large store (the first ``machine
    data`` builds it). Best effort: the commit is done whatever happens here.
    """
    if not (store.path / WORK / CACHE_FILE).is_file():
        return
    with contextlib.suppress(StoreError, OSError, *_READ_ERRORS):
        counts(store)


def _from(
    store: Store, cached: tuple[str, dict[str, int]] | None, head: Commit
) -> dict[str, int]:
    """The head's counts: the cache plus a diff when it can be, else a recount."""
    if cached is not None:
        try:
            # Any commit that reads will do, not only an ancestor: its counts
            # plus the diff to the head are the head's counts.
            base = Objects(store.repo).commit(pygit2.Oid(hex=cached[0]))
            result = dict(cached[1])
            _apply(store, result, base, head)
            return result
        except (_Wrong, *_READ_ERRORS):
            pass  # a damaged or unknown base, or wrong counts: count again
    return _full(store, head)


def _full(store: Store, commit: Commit) -> dict[str, int]:
    result = dict.fromkeys(KINDS, 0)
    _apply(store, result, None, commit)
    return result


def _apply(
    store: Store, result: dict[str, int], base: Commit | None, to: Commit
) -> None:
    objects = Objects(store.repo)
    old_tree = objects.tree(base.tree_id) if base is not None else None
    for path, old, new in changed_blobs(
        store.repo, old_tree, objects.tree(to.tree_id), objects=objects
    ):
        if rows.id_of_path(path) is None:
            continue
        if old is not None:
            _bump(result, _kind(objects, old), -1)
        if new is not None:
            _bump(result, _kind(objects, new), +1)


def _kind(objects: Objects, oid: pygit2.Oid) -> str:
    try:
        row = jsonio.loads(objects.blob(oid))
    except ValueError:
        return INVALID
    kind = row.get("kind") if isinstance(row, dict) else None
    return kind if kind in KINDS else INVALID


def _bump(result: dict[str, int], kind: str, by: int) -> None:
    result[kind] = result.get(kind, 0) + by
    if result[kind] < 0:
        raise _Wrong(kind)
    if result[kind] == 0 and kind not in KINDS:
        del result[kind]


def _check(commit: str, result: dict[str, int]) -> str:
    text = jsonio.canonical({"commit": commit, "counts": result})
    return hashlib.sha256(text).hexdigest()[:16]


def _read_cache(store: Store) -> tuple[str, dict[str, int]] | None:
    """(commit, counts) if the cache file is well formed and unaltered."""
    try:
        value: Any = jsonio.loads((store.path / WORK / CACHE_FILE).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(value, dict):
        return None
    commit, found = value.get("commit"), value.get("counts")
    if not isinstance(commit, str) or not _HEX.match(commit):
        return None
    if not isinstance(found, dict) or not all(
        k in _KNOWN and type(v) is int and v >= 0 for k, v in found.items()
    ):
        return None
    if value.get("check") != _check(commit, found):
        return None
    return commit, dict.fromkeys(KINDS, 0) | found


def _write_cache(store: Store, commit: str, result: dict[str, int]) -> None:
    # Best effort: a read-only store still answers, it just recounts.
    target = store.path / WORK / CACHE_FILE
    tmp = target.with_name(f"{CACHE_FILE}.{os.getpid()}.tmp")
    record = {"commit": commit, "counts": result, "check": _check(commit, result)}
    with contextlib.suppress(OSError):
        old = os.umask(0o077)
        try:
            tmp.write_bytes(jsonio.line(record))
            os.replace(tmp, target)
        finally:
            os.umask(old)
            with contextlib.suppress(OSError):
                tmp.unlink()
