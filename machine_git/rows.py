"""Rows: what one tag writes. Ids, paths in the store, and building a row.

A row is one JSON file at ``rows/<id[0:2]>/<id[2:4]>/<id>.json``. The two-level
fan-out keeps every tree a commit rewrites at <= 256 entries, so a tag writes
the same handful of objects at 100 rows and at 100,000 (perf.md §2, layout b2).
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC
from datetime import datetime
from typing import Any

from machine_git.errors import TurnError
from machine_git.errors import UsageError
from machine_git.sessions import Record
from machine_git.sessions import Turn

ROWS_DIR = "rows"
ID_LENGTH = 12
_ID = re.compile(r"^[0-9a-f]{12}$")
_PREFIX = re.compile(r"^[0-9a-f]{1,12}$")

# label -> (kind of an answer row, kind of a trace row)
LABELS = {"good": ("train", "traces"), "bad": ("rejected", "rejected")}
TAG_OF_KIND = {
    "train": "good",
    "traces": "good",
    "rejected": "bad",
    "observed": "observed",
}


# Stop reasons of a turn that failed: only bad keeps it (with ``failure``).
FAILED = ("aborted", "error")

# The shapes one turn can be stored in, each under its own id: a tag's answer
# (messages), a tag's trace (--trace) and an observed run (auto-capture).
SHAPES = ("answer", "trace", "observed")


def make_id(host: str, session_id: str, entry_ids: list[str], shape: str) -> str:
    """The id of a turn's row: the same turn and shape always get the same id.

    ``shape`` is ``answer`` (good/bad) or ``trace`` (--trace), so a turn can be
    both a train row and a trace; good and bad of one shape share an id, which
    is how re-tagging with the other label becomes a move.
    """
    key = "\x00".join([host, session_id, entry_ids[0], entry_ids[-1], shape])
    return hashlib.sha256(key.encode()).hexdigest()[:ID_LENGTH]


def row_path(row_id: str) -> str:
    """Where row ``row_id`` lives in the store's tree."""
    check_id(row_id)
    return f"{ROWS_DIR}/{row_id[0:2]}/{row_id[2:4]}/{row_id}.json"


def id_of_path(path: str) -> str | None:
    """The row id of a tree path, or None if the path is not a row."""
    parts = path.split("/")
    if len(parts) != 4 or parts[0] != ROWS_DIR or not parts[3].endswith(".json"):
        return None
    row_id = parts[3][:-5]
    if not _ID.match(row_id) or parts[1] != row_id[0:2] or parts[2] != row_id[2:4]:
        return None
    return row_id


def check_id(row_id: str) -> str:
    """A full row id, or a one-line error."""
    if not _ID.match(row_id):
        raise UsageError(f"bad row id {row_id!r}: expected 12 hex characters")
    return row_id


def check_prefix(prefix: str) -> str:
    """An id or id prefix (1-12 hex characters), or a one-line error."""
    if not _PREFIX.match(prefix):
        raise UsageError(f"bad row id {prefix!r}: expected 1 to 12 hex characters")
    return prefix


def now() -> str:
    """The current time as the rows' ISO 8601 timestamp."""
    moment = datetime.now(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def build(
    turn: Turn,
    *,
    label: str,
    trace: bool,
    note: str | None = None,
    rewrite: str | None = None,
    reasoning: bool = False,
    created_at: str | None = None,
    context: bool = True,
) -> dict[str, Any]:
    """The row for tagging ``turn`` as ``label`` (good or bad).

    A turn that was aborted or ended with an error is a failure worth keeping
    as bad: its row holds what the agent said before it stopped (maybe
    nothing) and ``failure``, the stop reason and the error as recorded. Only
    good refuses it. The row carries the turn's context (system prompt and
    tools) inline, or ``None`` when the host does not record it or
    ``context`` is False; the store keeps it once, by hash
    (machine_git/context.py).
    """
    failed = turn.stop_reason in FAILED
    if failed and label != "bad":
        why = f": {turn.error}" if turn.error else ""
        raise TurnError(
            f"the last turn {_ended(turn.stop_reason)}{why}; nothing tagged "
            "(machine bad keeps a failed turn)"
        )
    answer_kind, trace_kind = LABELS[label]
    kind = trace_kind if trace else answer_kind
    answer = turn.answer
    if answer is None and rewrite is None and not failed:
        raise TurnError(
            "the last turn has no answer yet (it ended on a tool call); "
            "tag it with --as TEXT to supply one"
        )
    row: dict[str, Any] = {
        "id": make_id(
            turn.host, turn.session_id, turn.entry_ids, "trace" if trace else "answer"
        ),
        "kind": kind,
        "tag": TAG_OF_KIND[kind],
        "created_at": created_at or now(),
        "note": note or None,
        "source": turn.source(),
        "context": turn.context if context else None,
    }
    if trace:
        row["trajectory"] = _trajectory(turn.records, rewrite, reasoning)
    else:
        final = rewrite if rewrite is not None else answer
        row["messages"] = [{"role": "user", "content": turn.user_text}]
        if final:  # a failed turn may have said nothing before it stopped
            row["messages"].append({"role": "assistant", "content": final})
    if rewrite is not None and answer is not None and rewrite != answer:
        row["original_answer"] = answer
    if failed:
        row["failure"] = {"stop_reason": turn.stop_reason, "error": turn.error}
    return row


def _trajectory(
    records: list[Record], rewrite: str | None, reasoning: bool
) -> list[Record]:
    out = [dict(r) for r in records if reasoning or r["role"] != "reasoning"]
    if rewrite is None:
        return out
    last = out[-1]
    if last["role"] == "assistant" and isinstance(last.get("content"), str):
        last["content"] = rewrite
    else:
        stamp = last.get("timestamp") or now()
        out.append({"role": "assistant", "content": rewrite, "timestamp": stamp})
    return out


def _ended(stop_reason: str | None) -> str:
    return "was aborted" if stop_reason == "aborted" else "ended with an error"


def first_words(row: dict[str, Any], limit: int = 60) -> str:
    """The start of the user's message, on one line, for listings."""
    text = ""
    for message in row.get("messages") or row.get("trajectory") or []:
        if isinstance(message, dict) and message.get("role") == "user":
            text = str(message.get("content") or "")
            break
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
