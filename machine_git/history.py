"""The store's history: one entry per commit, readable and filterable."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC
from datetime import datetime
from typing import Any

import pygit2
from pygit2 import Commit

from machine_git import diff
from machine_git import rows
from machine_git.store import Store


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
            "time": datetime.fromtimestamp(self.commit.commit_time, tz=UTC).isoformat(),
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


def walk(store: Store, start: Commit) -> Iterator[Commit]:
    """Commits from ``start`` back along first parents (merges are one step)."""
    walker = store.repo.walk(start.id, pygit2.enums.SortMode.TOPOLOGICAL)
    walker.simplify_first_parent()
    yield from walker


def log(
    store: Store,
    start: Commit,
    limit: int | None = None,
    kind: str | None = None,
    row_id: str | None = None,
) -> list[Entry]:
    """History newest first; ``kind`` and ``row_id`` filter it."""
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
    parent = commit.parents[0] if commit.parents else None
    return _entry_id(commit, path) != (_entry_id(parent, path) if parent else None)


def _entry_id(commit: Commit, path: str) -> pygit2.Oid | None:
    try:
        return commit.tree[path].id
    except KeyError:
        return None


def _kinds(store: Store, commit: Commit, item: Entry) -> set[str]:
    found = {v for k, v in item.trailers.items() if k in ("Kind", "From")}
    if found or item.action in ("init", "setting"):
        return found
    # Commits made outside machine (merges, hand pushes): look at their rows.
    parent = commit.parents[0] if commit.parents else None
    return {k for c in diff.diff_commits(store, parent, commit).rows for k in c.kinds()}


def touched(store: Store, commit: Commit) -> diff.Diff:
    """The rows a commit changed, against its first parent."""
    parent = commit.parents[0] if commit.parents else None
    return diff.diff_commits(store, parent, commit)
