"""Observed runs: unlabeled trajectories recorded by auto-capture, labeled later.

An observed row is the whole run (user, tool calls, results, answer) with
kind and tag ``observed``. It never counts as good until someone labels it:
``label`` turns it into a traces row (good) or a rejected row (bad) in one
commit that keeps its id and path, so ``machine log ID`` shows both steps.
Its id comes from the session and the run's entries with the shape
``observed``, so recording the same run twice (after ``agent_end`` and again
at a compaction boundary) finds the row and changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import NamedTuple

from machine_git.core import jsonio
from machine_git.core.errors import UsageError
from machine_git.history import history
from machine_git.history import lookup
from machine_git.rows import rows
from machine_git.secrets import redaction
from machine_git.store.store import Change
from machine_git.store.store import Redaction
from machine_git.store.store import Snapshot
from machine_git.store.store import Store
from machine_git.store.store import fit
from machine_git.tagging.capture import PARENT_ENV as PARENT_ENV  # re-exported
from machine_git.tagging.capture import auto_on as auto_on  # re-exported
from machine_git.tagging.capture import (
    parent_from_env as parent_from_env,  # re-exported
)

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Row


def recent(store: Store, limit: int) -> list[Row]:
    """Unlabeled observed rows, most recently recorded first."""
    return history.recent(store, limit, "observed")


# -- labeling --------------------------------------------------------------------


class Labeled(NamedTuple):
    """The row before and after labeling, and the commit."""

    before: Row
    after: Row
    commit: str | None


def label(
    store: Store,
    prefix: str,
    verdict: str,
    rewrite: str | None = None,
    note: str | None = None,
) -> Labeled:
    """Turn observed row ``prefix`` into traces (good) or rejected (bad).

    A row that already carries ``verdict`` is left as it is (no commit).
    """
    if verdict not in rows.LABELS:
        raise UsageError(f"label must be good or bad, not {verdict!r}")
    rows.check_answer(rewrite)
    row_id = lookup.resolve_id(store, prefix)
    path = rows.row_path(row_id)
    seen: list[Row] = []

    def plan(snap: Snapshot) -> Change | None:
        data = snap.read(path)
        if data is None:
            raise UsageError(f"row {row_id} was removed meanwhile")
        before = rows.parse(data, path)
        if before.get("kind") != "observed":
            if before.get("tag") == verdict:  # labeled (or tagged) so already
                seen[:] = [before, before]
                return None
            raise UsageError(
                f"row {row_id} is a {before.get('kind')} row, not observed; "
                f"use machine move {row_id} --to {verdict}"
            )
        after = rows.judged(before, verdict, note, rewrite)
        fresh = rewrite is not None or bool(note)
        if fresh:
            # new words (an answer, a note) are scanned like a new tag
            after, _ = redaction.redact_row(after)
        seen[:] = [before, after]
        return Change(
            summary=fit(
                f"label {row_id} observed -> {after['kind']}: {rows.first_words(after)}"
            ),
            files={path: jsonio.canonical(after)},
            trailers={
                "Action": "label",
                "Row": row_id,
                "Kind": after["kind"],
                "Tag": after["tag"],
                "From": "observed",
            },
            body=str(after["note"]) if note else "",  # the note as redacted
            redaction=Redaction.SCANNED if fresh else Redaction.KEPT,
        )

    oid = store.write(plan)
    return Labeled(seen[0], seen[1], None if oid is None else str(oid))


def label_many(
    store: Store, ids: Sequence[str], verdict: str, note: str | None = None
) -> tuple[int, str | None]:
    """Label the observed rows ``ids`` ``verdict`` in one commit (one undo).

    Rows that carry ``verdict`` already are left as they are; any other row
    that is not observed is refused, and nothing is written. Returns how many
    rows changed and the commit.
    """
    if verdict not in rows.LABELS:
        raise UsageError(f"label must be good or bad, not {verdict!r}")
    wanted = sorted({rows.check_id(i) for i in ids})
    if not wanted:
        raise UsageError("no rows to label")
    done: list[int] = [0]

    def plan(snap: Snapshot) -> Change | None:
        files: dict[str, bytes | None] = {}
        kinds: set[str] = set()
        for row_id in wanted:
            path = rows.row_path(row_id)
            data = snap.read(path)
            if data is None:
                raise UsageError(
                    f"row {row_id} was removed meanwhile; nothing was written"
                )
            before = rows.parse(data, path)
            if before.get("kind") != "observed":
                if before.get("tag") == verdict:
                    continue
                raise UsageError(
                    f"row {row_id} is a {before.get('kind')} row, not observed; "
                    "nothing was written"
                )
            after = rows.judged(before, verdict, note)
            if note:
                after, _ = redaction.redact_row(after)
            kinds.add(after["kind"])
            files[path] = jsonio.canonical(after)
        done[0] = len(files)
        if not files:
            return None
        listed = "\n".join(rows.id_of_path(p) or p for p in sorted(files))
        return Change(
            summary=fit(
                f"label {len(files)} row{'s' if len(files) != 1 else ''} "
                f"observed -> {', '.join(sorted(kinds))}"
                + (f": {note}" if note else "")
            ),
            files=files,
            trailers={
                "Action": "label",
                "Rows": str(len(files)),
                "Kind": ", ".join(sorted(kinds)),
                "Tag": verdict,
                "From": "observed",
            },
            body=(f"{note}\n\n" if note else "") + listed,
            redaction=Redaction.SCANNED if note else Redaction.KEPT,
        )

    oid = store.write(plan)
    return done[0], None if oid is None else str(oid)
