"""Which rows a training run learns from: rows of one kind at a commit, minus
the rows the eval set in force holds out.

Written once, here: the validate command, run preparation (the export a run
trains on), the eval set and lineage all select rows this way, so what one of
them counts is what the others train on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING
from typing import NamedTuple
from typing import cast

from pygit2 import Commit

from machine_git.rows import context
from machine_git.rows import rows
from machine_git.store.store import Store
from machine_git.store.store import parse_row

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Row
    from machine_git.train.evals import HeldOut


class Selected(NamedTuple):
    """One row of the selection, and whether the eval set holds it out."""

    row_id: str
    row: Row
    held_out: bool


class Selection(NamedTuple):
    """The trained rows (id order) and how many the eval set held out."""

    items: list[tuple[str, Row]]
    held_out: int
    eval_id: str | None


def training_rows(
    store: Store,
    commit: Commit,
    kind: str,
    *,
    keep_held_out: bool = False,
    held_out: HeldOut | None = None,
    where: tuple[str, ...] = (),
) -> Iterator[Selected]:
    """Rows of ``kind`` at ``commit`` in id order, each marked held out or not.

    Held out means the eval set in force now keeps it out of training (its
    row, or any row of its sessions or of its content); ``held_out`` names
    another rule (lineage: the eval set an older run held out, which a later
    draw may have replaced). ``keep_held_out`` yields those too (marked);
    otherwise they are skipped. Each row carries its context (system prompt
    and tools) inline, read at ``commit``. ``where`` keeps only the rows
    whose labels meet it (``quality>=4``: tagging.labels.Where).
    """
    from machine_git.rows.labels import Where
    from machine_git.train import evals

    keep = Where.parse(where)
    keep_out = evals.held_out(store) if held_out is None else held_out
    read = store.snapshot(commit).read
    for path, data in store.iter_row_blobs(commit):
        row_id = rows.id_of_path(path)
        if row_id is None:
            continue
        row = cast("Row", parse_row(data, path))  # a stored row: schema-checked
        if row.get("kind") != kind or not keep.holds(row):
            continue
        row = context.inline(row, read)
        held = keep_out.excludes(row)
        if held and not keep_held_out:
            continue
        yield Selected(row_id, row, held)


def select(
    store: Store, commit: Commit, kind: str, where: tuple[str, ...] = ()
) -> Selection:
    """The rows a run of ``kind`` trains on at ``commit``, and what was held out."""
    from machine_git.train import evals

    items: list[tuple[str, Row]] = []
    held = 0
    for chosen in training_rows(store, commit, kind, keep_held_out=True, where=where):
        if chosen.held_out:
            held += 1
        else:
            items.append((chosen.row_id, chosen.row))
    return Selection(items, held, evals.held_out(store).eval_id)
