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

import copy
import os
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any

from machine_git import capture
from machine_git import history
from machine_git import jsonio
from machine_git import lookup
from machine_git import redaction
from machine_git import rows
from machine_git import settings
from machine_git.errors import TurnError
from machine_git.errors import UsageError
from machine_git.sessions import Turn
from machine_git.store import Change
from machine_git.store import Redaction
from machine_git.store import Snapshot
from machine_git.store import Store
from machine_git.store import exists as store_exists
from machine_git.store import parse_row

SHAPE = "observed"
PARENT_ENV = "MACHINE_FORK_PARENT"
# label -> kind of the labeled row: observed rows carry a trajectory
LABEL_KINDS = {"good": "traces", "bad": "rejected"}


@dataclass
class Observed:
    """What observing did: ``observed`` (a new row) or ``duplicate``."""

    action: str
    row: dict[str, Any]
    commit: str | None = None
    redacted: dict[str, int] = field(default_factory=dict)


def auto_on(location: Path) -> bool:
    """The project's ``auto`` setting; a store that does not exist is off."""
    if not store_exists(location):
        return False
    return settings.auto(Store.open(location))


def parent_from_env() -> str | None:
    """The row a forked run continues (``MACHINE_FORK_PARENT``), if any."""
    value = os.environ.get(PARENT_ENV, "").strip()
    if not value:
        return None
    try:
        return rows.check_id(value)
    except UsageError:
        raise UsageError(
            f"{PARENT_ENV}={value!r} is not a row id (12 hex characters)"
        ) from None


def build(
    turn: Turn,
    *,
    parent: str | None = None,
    reasoning: bool = False,
    note: str | None = None,
) -> dict[str, Any]:
    """The observed row of ``turn``; a run that failed is not recorded."""
    if turn.stop_reason in {"error", "aborted"}:
        how = "was aborted" if turn.stop_reason == "aborted" else "ended with an error"
        why = f": {turn.error}" if turn.error else ""
        raise TurnError(f"the run {how}{why}; nothing observed")
    source = turn.source()
    if parent is not None:
        source["parent_row"] = parent
    return {
        "id": rows.make_id(turn.host, turn.session_id, turn.entry_ids, SHAPE),
        "kind": "observed",
        "tag": "observed",
        "created_at": rows.now(),
        "note": note or None,
        "source": source,
        "trajectory": [
            dict(r) for r in turn.records if reasoning or r["role"] != "reasoning"
        ],
    }


def observe(store: Store, row: dict[str, Any], redact: bool = True) -> Observed:
    """Commit an observed row, unless its turn is stored already (in any shape).

    The run's content is cleared of secrets first, like every tagged row;
    ``redact=False`` keeps them and says so in the commit.
    """
    found: dict[str, int] = {}
    if redact:
        row, found = redaction.redact_row(row)
    capture.check(row)
    path = rows.row_path(row["id"])
    seen: dict[str, Any] = {}

    def plan(snap: Snapshot) -> Change | None:
        existing = snap.read(path)
        if existing is not None:
            # Already observed, or observed and labeled since: never undo a label.
            seen["row"] = parse_row(existing, path)
            return None
        tagged = capture.turn_rows(snap, row)
        if tagged:
            # The turn was tagged (/good, /bad) before it was observed: it is
            # in the dataset already, once.
            seen["row"] = next(iter(tagged.values()))
            return None
        parent = row["source"].get("parent_row")
        trailers = {
            "Action": "observe",
            "Row": row["id"],
            "Kind": "observed",
            "Tag": "observed",
            "Source": capture.source_trailer(row),
        }
        if parent:
            trailers["Parent"] = parent
        return Change(
            summary=_fit(f"observed {row['id']}: {rows.first_words(row)}"),
            files={path: jsonio.canonical(row)},
            trailers=trailers,
            body=f"fork of {parent}" if parent else (row.get("note") or ""),
            redaction=Redaction.SCANNED if redact else Redaction.OFF,
        )

    oid = store.write(plan)
    if "row" in seen:
        return Observed("duplicate", seen["row"])
    return Observed("observed", row, str(oid) if oid is not None else None, found)


def recent(store: Store, limit: int) -> list[dict[str, Any]]:
    """Unlabeled observed rows, most recently recorded first."""
    return history.recent(store, limit, "observed")


# -- labeling --------------------------------------------------------------------


@dataclass
class Labeled:
    """The row before and after labeling, and the commit."""

    before: dict[str, Any]
    after: dict[str, Any]
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
    from machine_git import edits

    if verdict not in LABEL_KINDS:
        raise UsageError(f"label must be good or bad, not {verdict!r}")
    if rewrite is not None and not rewrite.strip():
        raise UsageError("the --as answer is empty")
    row_id = lookup.resolve_id(store, prefix)
    path = rows.row_path(row_id)
    seen: dict[str, Any] = {}

    def plan(snap: Snapshot) -> Change | None:
        data = snap.read(path)
        if data is None:
            raise UsageError(f"row {row_id} was removed meanwhile")
        before = parse_row(data, path)
        if before.get("kind") != "observed":
            if before.get("tag") == verdict:  # labeled (or tagged) so already
                seen.update(before=before, after=before)
                return None
            raise UsageError(
                f"row {row_id} is a {before.get('kind')} row, not observed; "
                f"use machine move {row_id} --to {verdict}"
            )
        after = copy.deepcopy(before)
        after["kind"] = LABEL_KINDS[verdict]
        after["tag"] = rows.TAG_OF_KIND[after["kind"]]
        if rewrite is not None:
            old = edits.final_answer(after)
            if old != rewrite:
                if old is not None and "original_answer" not in after:
                    after["original_answer"] = old
                edits.set_final_answer(after, rewrite)
        if note:
            after["note"] = note
        fresh = rewrite is not None or bool(note)
        if fresh:
            # new words (an answer, a note) are scanned like a new tag
            after, _ = redaction.redact_row(after)
        capture.check(after)
        seen.update(before=before, after=after)
        return Change(
            summary=_fit(
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
    return Labeled(seen["before"], seen["after"], str(oid) if oid is not None else None)


def _fit(summary: str, limit: int = 72) -> str:
    summary = " ".join(summary.split())
    return summary if len(summary) <= limit else summary[: limit - 1] + "…"
