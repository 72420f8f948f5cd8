"""The recover step itself: repair, set aside, and commit the intact tree.

The commit gets a ``Machine-Action: recover`` trailer naming the damaged
commit, so ``machine log`` shows it, and a ``record.json`` beside what was
kept (salvage.py). A ref to the damaged commit would be the obvious way to
keep it findable, but git gc refuses to run while any ref reaches a missing
or damaged object; so the commit id is in the trailer, the reflog and the
record, and its object file in the record folder.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pygit2
from pygit2 import Oid

from machine_git.core import jsonio
from machine_git.recovery.diagnosis import Diagnosis
from machine_git.recovery.diagnosis import count_of
from machine_git.recovery.salvage import adopt_objects
from machine_git.recovery.salvage import forget_in_reflogs
from machine_git.recovery.salvage import new_record
from machine_git.recovery.salvage import repair_files
from machine_git.recovery.salvage import set_aside
from machine_git.recovery.salvage import take_apart
from machine_git.recovery.salvage import write_file
from machine_git.store.layout import BRANCH
from machine_git.store.locking import clear_stale_ref_lock
from machine_git.store.objects import Objects
from machine_git.store.objects import objects_only
from machine_git.store.objects import open_repository
from machine_git.store.reflog import utc_time
from machine_git.store.store import Store


@dataclass
class Recovery:
    """What :func:`recover` or :func:`restore` did (``commit`` None: dry run)."""

    diagnosis: Diagnosis
    commit: str | None = None
    record: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            **self.diagnosis.to_json(),
            "done": self.commit is not None,
            "commit": self.commit,
            "record": self.record,
        }


def apply(
    path: Path,
    found: Diagnosis,
    tree_of: str,
    parent: str | None,
    fetched: Path | None = None,
    record: Path | None = None,
) -> Recovery:
    """Repair, set aside, commit ``tree_of``'s tree on ``parent``: the step itself."""
    source = fetched if fetched is not None else path
    tree = Objects(objects_only(source)).commit(Oid(hex=tree_of)).tree_id
    record = record or new_record(path)
    take_apart(path, found, record)
    gone = set_aside(path, found, record)  # tree_of's commit too, if left behind
    repair_files(path, found, record)
    if fetched is not None:
        adopt_objects(fetched, path)
    repo = open_repository(path)
    oid = _commit(repo, found, tree, tree_of, parent, record.relative_to(path))
    forget_in_reflogs(path, gone, record)  # after the step's own entry
    _record(record, found, str(oid))
    Store(path, repo)._after_commit()  # counts cache, auto-pack
    return Recovery(found, str(oid), str(record))


def _commit(
    repo: pygit2.Repository,
    found: Diagnosis,
    tree: Oid,
    tree_of: str,
    parent: str | None,
    record: Path,
) -> Oid:
    damaged = found.branch or "unreadable"
    lost = len(found.lost)
    source = (
        "recover: back to" if found.remote is None else f"recover from {found.remote}:"
    )
    summary = f"{source} {tree_of[:12]} ({count_of(lost, 'row')} lost)"
    body = "\n".join([*found.problems[:20], *(f"lost {r}" for r in found.lost[:200])])
    trailers = {
        "Action": "recover",
        "Damaged": damaged,
        "Restored": tree_of,
        "Record": str(record),
        "Lost": str(lost),
    }
    if found.remote is not None:
        trailers["Remote"] = found.remote
    message = f"{summary}\n\n{body}\n\n" + "".join(
        f"Machine-{k}: {v}\n" for k, v in trailers.items()
    )
    sig = pygit2.Signature("machine", "machine@localhost")
    parents = [Oid(hex=parent)] if parent is not None else []
    oid = repo.create_commit(None, sig, sig, message, tree, parents)
    clear_stale_ref_lock(Path(repo.path))
    repo.create_reference_direct(BRANCH, oid, True, message=summary)
    return oid


def _record(record: Path, found: Diagnosis, commit: str) -> None:
    value = {**found.to_json(), "commit": commit, "time": utc_time(time.time())}
    write_file(record / "record.json", jsonio.line(value))
