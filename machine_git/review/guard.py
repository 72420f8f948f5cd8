"""Compare-and-swap for actions taken from a page that may be out of date.

A page shows a row as it was when it was rendered; by the time the user
presses a key, another tab, Pi or the shell may have labeled, rewritten or
removed it. The library calls (``label``, ``rewrite``, ``undo``) plan their
commit against the newest tree under the store's lock; :class:`Guarded` adds
one check to that same plan, under that same lock: the row's blob (or the
branch's head, for undo) must still be the one the page showed. Otherwise
nothing is written and the user sees a conflict, never a lost label.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Mapping

from pygit2 import Oid

from machine_git.core.errors import ConflictError
from machine_git.history import history
from machine_git.rows import rows
from machine_git.store.store import Change
from machine_git.store.store import Snapshot
from machine_git.store.store import Store


def row_blob(snap: Snapshot, row_id: str) -> str | None:
    """The blob id of row ``row_id`` in ``snap``, or None if it has none."""
    if snap.tree is None:
        return None
    try:
        return str(snap.tree[rows.row_path(row_id)].id)
    except KeyError:
        return None


class Guarded(Store):
    """The same store, whose writes first check what the page saw."""

    def __init__(
        self,
        store: Store,
        *,
        row_id: str | None = None,
        blob: str | None = None,
        head: str | None = None,
        blobs: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(store.path, store.repo)
        self.row_id = row_id
        self.blob = blob
        self.head_seen = head
        self.blobs = blobs

    def write(self, plan: Callable[[Snapshot], Change | None]) -> Oid | None:
        def checked(snap: Snapshot) -> Change | None:
            self.check(snap)
            return plan(snap)

        return super().write(checked)

    def check(self, snap: Snapshot) -> None:
        """Raise ConflictError if the store moved away from what the page saw."""
        if self.row_id is not None and self.blob is not None:
            now = row_blob(snap, self.row_id)
            if now != self.blob:
                raise ConflictError(
                    f"row {self.row_id} changed since this page showed it "
                    f"({_what_happened(snap, self.row_id, now)}); nothing was written"
                )
        for row_id, blob in (self.blobs or {}).items():
            now = row_blob(snap, row_id)
            if now != blob:
                raise ConflictError(
                    f"row {row_id} changed since this page showed it "
                    f"({_what_happened(snap, row_id, now)}); nothing was written"
                )
        commit = snap.commit
        if (
            self.head_seen is not None
            and commit is not None
            and str(commit.id) != self.head_seen
        ):
            raise ConflictError(
                f"the store changed since this page showed it (newest: "
                f"{history.entry(commit).summary}); undo only undoes what the "
                "page showed, nothing was written"
            )


def _what_happened(snap: Snapshot, row_id: str, blob: str | None) -> str:
    if blob is None:
        return "it was removed"
    row = snap.row(row_id)
    kind = None if row is None else row["kind"]
    if snap.commit is not None:
        newest = history.entry(snap.commit)
        if newest.trailers.get("Row") == row_id:
            return f"now {kind}: {newest.summary}"
    return f"it is now a {kind} row"
