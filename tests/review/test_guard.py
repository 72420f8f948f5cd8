from __future__ import annotations

import pytest

from machine_git.core.errors import ConflictError
from machine_git.review.guard import Guarded
from machine_git.review.guard import row_blob
from machine_git.rows import rows
from machine_git.store.store import Store
from machine_git.tagging import edits
from tests.conftest import git


def first_row(store: Store) -> str:
    path, _ = next(iter(store.iter_row_blobs()))
    row_id = rows.id_of_path(path)
    assert row_id is not None
    return row_id


def test_a_write_goes_through_when_the_row_is_as_seen(store: Store) -> None:
    row_id = first_row(store)
    seen = row_blob(store.snapshot(), row_id)
    assert seen is not None
    done = edits.rewrite(Guarded(store, row_id=row_id, blob=seen), row_id, "New.")
    assert done.commit is not None
    assert row_blob(store.snapshot(), row_id) != seen


def test_a_write_is_refused_when_the_row_changed(store: Store) -> None:
    row_id = first_row(store)
    seen = row_blob(store.snapshot(), row_id)
    edits.rewrite(store, row_id, "Changed elsewhere.")
    head = git(store.path, "rev-parse", "HEAD")
    with pytest.raises(ConflictError, match=f"row {row_id} changed since this page"):
        edits.rewrite(Guarded(store, row_id=row_id, blob=seen), row_id, "Mine.")
    assert git(store.path, "rev-parse", "HEAD") == head
    with pytest.raises(ConflictError):  # a page that names no blob saw nothing
        edits.rewrite(Guarded(store, row_id=row_id, blob=""), row_id, "Mine.")


def test_undo_is_refused_when_the_head_moved(store: Store) -> None:
    seen = git(store.path, "rev-parse", "HEAD").strip()
    edits.rewrite(store, first_row(store), "Changed elsewhere.")
    with pytest.raises(ConflictError, match="the store changed since this page"):
        edits.undo(Guarded(store, head=seen))
    newest = git(store.path, "rev-parse", "HEAD").strip()
    target, commit = edits.undo(Guarded(store, head=newest))
    assert str(target.id) == newest and commit is not None
