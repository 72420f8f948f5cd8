"""A run record's claims, recomputed from its data when it is read.

A signature says who wrote a run record (``trust.py``); this says that what
it claims is true of the store: the rows it exported and their sha256, from
its pinned dataset commit and the eval set it held out, and that every row
it says it trained on is one of them, never a held-out eval row.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING
from typing import Any

import pygit2
from pygit2 import Commit

from machine_git.core.errors import TamperedReleaseError
from machine_git.store.store import Store
from machine_git.store.store import parse_row

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Row
    from machine_git.train.evals import HeldOut


def held_out_by(store: Store, eval_id: Any) -> HeldOut:
    """The rule eval set ``eval_id`` applied, as drawn (None: it kept nothing out)."""
    from machine_git.train import evals

    if not eval_id:
        return evals.rule_of(None)
    path = evals.path_of(str(eval_id))
    data = store.snapshot(evals.commit_of(store, str(eval_id))).read(path)
    return evals.rule_of(parse_row(data, path) if data else {"id": str(eval_id)})


def claim_problems(store: Store, run: dict[str, Any]) -> list[str]:
    """What a run record claims that its data does not bear out; empty if none.

    The export is rebuilt from the pinned dataset commit with the eval set
    the run held out (training's own selection and rendering), so its row
    count and sha256 must be the record's; the trained rows must be rows of
    that export, never held-out eval rows. A signature says who wrote a
    record; this says it is true of the data.
    """
    from machine_git.train import runs
    from machine_git.train import selection

    dataset = run.get("dataset") or {}
    try:
        commit = store.repo.revparse_single(str(dataset.get("commit"))).peel(Commit)
    except (KeyError, ValueError, pygit2.GitError):
        return [f"dataset commit {str(dataset.get('commit'))[:12]} is not in the store"]
    fmt = "dpo" if run.get("method") == "dpo" else "tinker"
    context = dataset.get("context") is not False
    with_images = dataset.get("images") is not False
    eval_id = dataset.get("held_out_eval")
    items: list[tuple[str, Row]] = []
    held: set[str] = set()
    for chosen in selection.training_rows(
        store,
        commit,
        str(dataset.get("kind")),
        keep_held_out=True,
        held_out=held_out_by(store, eval_id),
        where=tuple(str(w) for w in dataset.get("where") or ()),
    ):
        if chosen.held_out:
            held.add(chosen.row_id)
        else:
            items.append((chosen.row_id, chosen.row))
    # The run's export rebuilt by the function that wrote it (rows, then any
    # rated pairs), so an honest record's count and sha256 match byte for byte.
    picked = selection.Selection(items, len(held), str(eval_id) if eval_id else None)
    digest = hashlib.sha256()
    exported: set[str] = set()
    lines = 0
    for row_id, line in runs.export_lines(
        store, commit, picked, fmt, context, with_images
    ):
        digest.update(line)
        exported.add(row_id)
        lines += 1
    at = str(commit.id)[:12]
    out: list[str] = []
    if dataset.get("rows") != lines:
        out.append(f"{dataset.get('rows')} rows exported ({lines} at {at})")
    if dataset.get("sha256") != digest.hexdigest():
        claimed = str(dataset.get("sha256"))[:12]
        out.append(
            f"export sha256 {claimed}… (the rows at {at} export as "
            f"{digest.hexdigest()[:12]}…)"
        )
    record = run.get("trained")
    done = record.get("rows") if isinstance(record, dict) else None
    for row_id in done if isinstance(done, list) else []:
        if row_id in held:
            out.append(f"held-out eval row {row_id} as trained")
        elif row_id not in exported:
            out.append(f"row {row_id} as trained, which its export does not hold")
    return out


def require_true_claims(store: Store, run: dict[str, Any]) -> None:
    """Refuse a run record whose claims its data does not bear out (tampering)."""
    found = claim_problems(store, run)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise TamperedReleaseError(
            f"run {run['id']}'s record claims {found[0]}{more}: "
            "its claims are checked against its data"
        )
