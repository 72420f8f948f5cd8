"""Merging a remote's rows into the branch, row by row.

A path changed on one side only is taken, the same change on both sides is
fine, and two different changes of one path are a conflict that stops the
pull with nothing committed, unless ``prefer`` names the side to keep (the
other version stays in history: nothing is dropped). The merge is planned
under the writer lock against the newest commit, as every write is.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field

import pygit2
from pygit2 import Commit
from pygit2 import Oid

from machine_git.rows import rows
from machine_git.store import treediff
from machine_git.store.change import Change
from machine_git.store.change import Redaction
from machine_git.store.store import Snapshot
from machine_git.store.store import Store
from machine_git.sync import hooks
from machine_git.sync.conflicts import Conflict
from machine_git.sync.conflicts import conflict_of


@dataclass
class PullResult:
    """What a pull did.

    ``status`` is ``up-to-date``, ``empty`` (the remote has no commits),
    ``fast-forward`` (also: a store with nothing of its own took the remote's
    history), ``merge`` or ``conflict`` (nothing committed). ``versions`` and
    ``runs`` name the versions and run refs that arrived.
    """

    remote: str
    status: str
    commit: str | None = None
    added: int = 0
    changed: int = 0
    removed: int = 0
    conflicts: list[Conflict] = field(default_factory=list)
    resolved: list[str] = field(default_factory=list)
    prefer: str | None = None
    versions: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)


class _Conflicted(Exception):
    def __init__(self, conflicts: list[Conflict]) -> None:
        super().__init__(f"{len(conflicts)} conflicts")
        self.conflicts = conflicts


def merge_rows(
    store: Store, name: str, theirs: Commit, prefer: str | None
) -> PullResult:
    result = PullResult(name, "merge", prefer=prefer)

    def plan(snap: Snapshot) -> Change | None:
        # Planned under the lock against the newest commit: a retry starts over.
        result.added = result.changed = result.removed = 0
        result.resolved = []
        repo = snap.repo
        ours = snap.commit
        if ours is None:
            return None
        base_id = repo.merge_base(ours.id, theirs.id)
        if base_id == theirs.id:
            result.status = "up-to-date"
            return None
        base = repo[base_id].peel(Commit).tree if base_id is not None else None
        mine = {p: new for p, _, new in treediff.changed_blobs(repo, base, ours.tree)}
        files: dict[str, bytes | None] = {}
        conflicts: list[Conflict] = []
        for path, old, new in treediff.changed_blobs(repo, base, theirs.tree):
            current = mine.get(path, old)
            if path in mine:
                if mine[path] == new:
                    continue  # the same change on both sides
                if prefer is None:
                    conflicts.append(conflict_of(repo, path, mine[path], new))
                    continue
                result.resolved.append(path)
                if prefer == "ours":
                    continue
            files[path] = None if new is None else repo[new].peel(pygit2.Blob).data
            count_change(result, path, current, new)
        if conflicts:
            raise _Conflicted(conflicts)
        return Change(
            summary=f"merge {name}: {counts_text(result)} from {name}",
            files=files,
            trailers=_trailers(name, prefer, result.resolved),
            body=_resolution_body(prefer, result.resolved),
            # Rows taken from the remote are stored bytes from another store,
            # redacted there (or kept by an explicit, recorded --no-redact).
            redaction=Redaction.KEPT,
        )

    try:
        oid = store.merge(theirs.id, plan)
    except _Conflicted as c:
        return PullResult(name, "conflict", conflicts=c.conflicts)
    result.commit = str(oid) if oid is not None else commit_hex(store.head)
    return result


def count_change(
    result: PullResult, path: str, old: Oid | None, new: Oid | None
) -> None:
    if rows.id_of_path(path) is None:
        return
    if old is None:
        result.added += 1
    elif new is None:
        result.removed += 1
    else:
        result.changed += 1


def counts_text(result: PullResult) -> str:
    """``+3 rows``, then ``, ~1 changed`` and ``, -1 removed`` if any."""
    text = f"+{hooks.count(result.added, 'row')}"
    if result.changed:
        text += f", ~{result.changed} changed"
    if result.removed:
        text += f", -{result.removed} removed"
    return text


def _trailers(name: str, prefer: str | None, resolved: list[str]) -> dict[str, str]:
    trailers = {"Action": "merge", "Remote": name}
    if resolved and prefer is not None:
        trailers["Prefer"] = prefer
        trailers["Resolved"] = " ".join(rows.id_of_path(p) or p for p in resolved)
    return trailers


def _resolution_body(prefer: str | None, resolved: list[str]) -> str:
    if not resolved or prefer is None:
        return ""
    lines = [
        f"Resolved with --prefer {prefer} (the other side's version stays in history):"
    ]
    lines += [f"{rows.id_of_path(p) or p}: {prefer}" for p in resolved]
    return "\n".join(lines)


def commit_hex(commit: Commit | None) -> str | None:
    return str(commit.id) if commit is not None else None
