"""The store's history: every commit reachable from a start, one walker for all.

History commands (``log``, ``log --id``, ``tagged``, ``show``, ``@{date}``,
``undo``, lineage, and the lookups of runs, evals and releases) read commits
through :func:`walk`. It follows every parent, so commits brought by a pull
(the other machine's tags, merged) are history like our own, in one order:
newest commit date first; commits of the same second child before parent;
and never a commit before the child it was reached from.

The walk costs the answer, not the dataset: a heap of commits by date holds
only the frontier, so ``log -n 20`` reads about 20 commits at 100,000 rows.
(libgit2's topological sort loads every commit before it yields the first.)
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC
from datetime import datetime
from typing import TYPE_CHECKING
from typing import Any

import pygit2
from pygit2 import Commit
from pygit2 import Oid
from pygit2 import Tree

from machine_git.core import jsonio
from machine_git.core.errors import UsageError
from machine_git.rows import rows
from machine_git.store import treediff
from machine_git.store.objects import Objects
from machine_git.store.store import Store

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Row


def _commit(repo: pygit2.Repository, oid: Oid) -> Commit:
    """Read one commit. Every commit the walker reads comes through here."""
    # Through the guarded reader (objects.py): a damaged loose object is an
    # error, not a hang, even for a repository not opened by machine.
    return Objects(repo).commit(oid)


# -- the walker ------------------------------------------------------------------


def walk(store: Store, start: Commit) -> Iterator[Commit]:
    """Every commit reachable from ``start``, newest first (see the module doc)."""
    return commits(store.repo, start)


def commits(repo: pygit2.Repository, start: Commit) -> Iterator[Commit]:
    """:func:`walk` for a bare repository."""
    seen: set[Oid] = {start.id}
    order = 0  # discovery order: first parents first, for equal dates
    frontier: list[tuple[int, int, Oid, Commit]] = [
        (-start.commit_time, order, start.id, start)
    ]
    while frontier:
        when = frontier[0][0]
        # Every commit of this second that the frontier holds or leads to,
        # then in topological order among themselves.
        group: list[tuple[int, Commit]] = []
        while frontier and frontier[0][0] == when:
            _, rank, _, commit = heapq.heappop(frontier)
            group.append((rank, commit))
        index = 0
        while index < len(group):
            for oid in group[index][1].parent_ids:
                if oid in seen:
                    continue
                seen.add(oid)
                order += 1
                parent = _commit(repo, oid)
                if -parent.commit_time == when:
                    group.append((order, parent))
                else:
                    heapq.heappush(
                        frontier, (-parent.commit_time, order, parent.id, parent)
                    )
            index += 1
        yield from _topological(group)


def _topological(group: list[tuple[int, Commit]]) -> Iterator[Commit]:
    """``group`` children first, ties in discovery order (Kahn's algorithm)."""
    if len(group) == 1:
        yield group[0][1]
        return
    members = {commit.id: (rank, commit) for rank, commit in group}
    children: dict[Oid, int] = dict.fromkeys(members, 0)
    for _, commit in group:
        for oid in commit.parent_ids:
            if oid in children:
                children[oid] += 1
    ready = [(rank, oid) for oid, (rank, _) in members.items() if children[oid] == 0]
    heapq.heapify(ready)
    while ready:
        _, oid = heapq.heappop(ready)
        commit = members[oid][1]
        yield commit
        for parent in commit.parent_ids:
            if parent in children:
                children[parent] -= 1
                if children[parent] == 0:
                    heapq.heappush(ready, (members[parent][0], parent))


# -- entries ---------------------------------------------------------------------


@dataclass
class Entry:
    """One commit as ``machine log`` shows it."""

    commit: Commit
    action: str
    summary: str
    trailers: dict[str, str]

    @property
    def short(self) -> str:
        return str(self.commit.id)[:12]

    @property
    def when(self) -> str:
        moment = datetime.fromtimestamp(self.commit.commit_time, tz=UTC)
        return moment.strftime("%Y-%m-%d %H:%M")

    def to_json(self) -> dict[str, Any]:
        return {
            "commit": str(self.commit.id),
            "time": jsonio.timestamp(self.commit.commit_time),
            "author": f"{self.commit.author.name} <{self.commit.author.email}>",
            "action": self.action,
            "summary": self.summary,
            "trailers": self.trailers,
            "parents": [str(p) for p in self.commit.parent_ids],
        }


def entry(commit: Commit) -> Entry:
    """Read a commit's action and trailers (``Machine-`` prefix removed)."""
    trailers = {
        k.removeprefix("Machine-"): v
        for k, v in commit.message_trailers.items()
        if k.startswith("Machine-")
    }
    action = trailers.get("Action") or (
        "merge" if len(commit.parent_ids) > 1 else "commit"
    )
    summary = commit.message.splitlines()[0] if commit.message else ""
    return Entry(commit, action, summary, trailers)


def log(
    store: Store,
    start: Commit,
    limit: int | None = None,
    kind: str | None = None,
    row_id: str | None = None,
) -> list[Entry]:
    """History newest first; ``kind`` and ``row_id`` filter it.

    A merge counts as changing a row (or a kind) only where it differs from
    every parent, as in git: the commits that made the change are listed
    themselves, whichever side of the merge they came from.
    """
    out: list[Entry] = []
    path = rows.row_path(row_id) if row_id is not None else None
    for commit in walk(store, start):
        if path is not None and not _touches(store, commit, path):
            continue
        item = entry(commit)
        if kind is not None and kind not in _kinds(store, commit, item):
            continue
        out.append(item)
        if limit is not None and len(out) >= limit:
            break
    return out


def _touches(store: Store, commit: Commit, path: str) -> bool:
    mine = _entry_id(commit.tree, path)
    if not commit.parent_ids:
        return mine is not None
    resolved = commit.message_trailers.get("Machine-Resolved", "").split()
    if rows.id_of_path(path) in resolved:
        return True  # a pull that kept one side of a conflict on this row
    return all(
        _entry_id(_commit(store.repo, p).tree, path) != mine for p in commit.parent_ids
    )


def _entry_id(tree: Tree | None, path: str) -> Oid | None:
    if tree is None:
        return None
    try:
        return tree[path].id
    except KeyError:
        return None


def _kinds(store: Store, commit: Commit, item: Entry) -> set[str]:
    found = {v for k, v in item.trailers.items() if k in ("Kind", "From")}
    if found or item.action in ("init", "setting"):
        return found
    # Commits made outside machine (merges, hand pushes): look at their rows.
    objects = Objects(store.repo)
    for path, old, new in own_changes(store, commit):
        if rows.id_of_path(path) is not None:
            found.update(_kind(objects, oid) for oid in (old, new) if oid is not None)
    return found


def _kind(objects: Objects, oid: Oid) -> str:
    try:
        value = jsonio.loads(objects.blob(oid))
    except ValueError:
        return "invalid"
    kind = value.get("kind") if isinstance(value, dict) else None
    return kind if isinstance(kind, str) else "invalid"


def own_changes(store: Store, commit: Commit) -> list[treediff.Change]:
    """The files a commit changed itself: for a merge, where it is unlike every
    parent (what a merge takes from one side is that side's change)."""
    parent = first_parent(store, commit)
    changed = treediff.changed_blobs(
        store.repo, parent.tree if parent is not None else None, commit.tree
    )
    if len(commit.parent_ids) < 2:
        return list(changed)
    others = [_commit(store.repo, p).tree for p in commit.parent_ids[1:]]
    return [
        (path, old, new)
        for path, old, new in changed
        if all(_entry_id(tree, path) != new for tree in others)
    ]


def first_parent(store: Store, commit: Commit) -> Commit | None:
    """The commit's first parent: the store's own line of history."""
    return _commit(store.repo, commit.parent_ids[0]) if commit.parent_ids else None


# -- what entered the dataset when -----------------------------------------------


def recent(store: Store, limit: int, kind: str | None = None) -> list[Row]:
    """Rows by when they entered the dataset or last changed, newest first, as now.

    However they came: a tag or an edit (one row, named in the commit), an
    import (many rows in one commit), or a pull (the other machine's commits,
    reached through the merge like our own).
    """
    head = store.head
    if head is None:
        return []
    found: list[Row] = []
    snap = store.snapshot(head)
    for _, row_id in by_recency(store, head):
        path = rows.row_path(row_id)
        data = snap.read(path)
        if data is None:
            continue  # removed since
        row = rows.parse(data, path)
        if kind is None or row["kind"] == kind:
            found.append(row)
            if len(found) >= limit:
                return found
    return found


def by_recency(
    store: Store, start: Commit, until: Oid | None = None
) -> Iterator[tuple[Oid, str]]:
    """Row ids by their newest change, newest first, each once, with the commit
    that made it: the order of :func:`recent` (and so of ``machine observed``
    and the review Queue), read as far as the caller needs; with ``until``,
    only the changes made after that commit."""
    seen: set[str] = set()
    for commit in walk(store, start):
        if commit.id == until:
            return
        for row_id in _rows_of(store, commit):
            if row_id not in seen:
                seen.add(row_id)
                yield commit.id, row_id


def _rows_of(store: Store, commit: Commit) -> list[str]:
    """The ids of the rows ``commit`` wrote or removed itself.

    A merge's rows arrive with the commits it merged, which the walk lists in
    their own place; only a merge's own changes (a resolved conflict) are its.
    """
    named = commit.message_trailers.get("Machine-Row")
    if named:
        try:
            return [rows.check_id(named)]
        except UsageError:
            return []
    return [
        row_id
        for path, _, _ in own_changes(store, commit)
        if (row_id := rows.id_of_path(path)) is not None
    ]
