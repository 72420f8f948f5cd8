"""Rows: what one tag writes. Ids, paths in the store, and building a row.

A row is one JSON file at ``rows/<id[0:2]>/<id[2:4]>/<id>.json``. The two-level
fan-out keeps every tree a commit rewrites at <= 256 entries, so a tag writes
the same handful of objects at 100 rows and at 100,000 (perf.md §2, layout b2).
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Mapping
from datetime import UTC
from datetime import datetime
from typing import TYPE_CHECKING
from typing import Any
from typing import cast

from machine_git.core import jsonio
from machine_git.core.errors import StoreError
from machine_git.core.errors import TurnError
from machine_git.core.errors import UsageError

if TYPE_CHECKING:
    # A type only: rows sit below the session readers, which build on them.
    from machine_git.rows.rowtypes import AssistantRecord
    from machine_git.rows.rowtypes import Kind
    from machine_git.rows.rowtypes import Message
    from machine_git.rows.rowtypes import ObservedRow
    from machine_git.rows.rowtypes import Record
    from machine_git.rows.rowtypes import Row
    from machine_git.rows.rowtypes import Tag
    from machine_git.sessions import Turn

ROWS_DIR = "rows"
ID_LENGTH = 12
_ID = re.compile(r"^[0-9a-f]{12}$")
_PREFIX = re.compile(r"^[0-9a-f]{1,12}$")

# label -> (kind of an answer row, kind of a trace row)
LABELS: dict[str, tuple[Kind, Kind]] = {
    "good": ("train", "traces"),
    "bad": ("rejected", "rejected"),
}
TAG_OF_KIND: dict[str, Tag] = {
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


def parse(data: bytes, where: str) -> Row:
    """A stored row, or a StoreError naming the file if it is not a JSON object.

    Typed as a row, not checked again: every row reached the store through
    Store.write or a hook, which validate it against its schema (``machine
    validate --store`` checks them all).
    """
    return cast(
        "Row", jsonio.load_object(data, where, StoreError, "a JSON object (a row)")
    )


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
    trace: bool = False,
    note: str | None = None,
    rewrite: str | None = None,
    reasoning: bool = False,
    parent: str | None = None,
    created_at: str | None = None,
    context: bool = True,
) -> Row:
    """The row for ``turn`` under ``label``: good, bad, or observed.

    A turn that was aborted or ended with an error is a failure worth keeping
    as bad: its row holds what the agent said before it stopped (maybe
    nothing) and ``failure``, the stop reason and the error as recorded. Good
    refuses it, and so does observed (only finished runs are recorded).
    ``parent``: the row an observed run (a fork) corrects. The row carries
    the turn's context (system prompt and tools) inline, or ``None`` when the
    host does not record it or ``context`` is False; the store keeps it once,
    by hash (machine_git/rows/context.py).
    """
    if label == "observed":
        return _observed(turn, parent, reasoning, note, context)
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
        acted = any(r["role"] in ("assistant", "tool") for r in turn.records)
        ended = "it ended on a tool call" if acted else "nothing came after the prompt"
        raise TurnError(
            f"the last turn has no answer yet ({ended}); "
            "tag it with --as TEXT to supply one"
        )
    row: dict[str, object] = {
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
        messages: list[Message] = [{"role": "user", "content": turn.user_text}]
        if turn.user_images:
            messages[0]["images"] = turn.user_images
        if final:  # a failed turn may have said nothing before it stopped
            messages.append({"role": "assistant", "content": final})
        row["messages"] = messages
    if rewrite is not None and answer is not None and rewrite != answer:
        row["original_answer"] = answer
    if failed:
        row["failure"] = {"stop_reason": turn.stop_reason, "error": turn.error}
    return cast("Row", row)  # the store checks it against its schema


def _observed(
    turn: Turn, parent: str | None, reasoning: bool, note: str | None, context: bool
) -> ObservedRow:
    """The observed row of ``turn``; a run that failed is not recorded."""
    if turn.stop_reason in FAILED:
        why = f": {turn.error}" if turn.error else ""
        raise TurnError(f"the run {_ended(turn.stop_reason)}{why}; nothing observed")
    source = turn.source()
    if parent is not None:
        source["parent_row"] = parent
    return {
        "id": make_id(turn.host, turn.session_id, turn.entry_ids, "observed"),
        "kind": "observed",
        "tag": "observed",
        "created_at": now(),
        "note": note or None,
        "source": source,
        "context": turn.context if context else None,
        "trajectory": [
            r for r in turn.records if reasoning or r["role"] != "reasoning"
        ],
    }


def shape_kind(row: Row, label: str) -> Kind:
    """The kind ``row`` takes under ``label``: by its shape, as machine move does."""
    answer_kind, trace_kind = LABELS[label]
    return trace_kind if "trajectory" in row else answer_kind


def judged(
    row: Row, label: str, note: str | None = None, answer: str | None = None
) -> Row:
    """A copy of ``row`` judged ``label``: its kind, the note, and ``answer``
    in place of its own (the agent's first answer kept in ``original_answer``).

    How a tag labels the observed row of its turn, and ``machine label``.
    """
    after = with_kind(copy.deepcopy(row), shape_kind(row, label))
    if note:
        after["note"] = note
    if answer is not None:
        rewrite_answer(after, answer)
    return after


def with_kind(row: Row, kind: str) -> Row:
    """A copy of ``row`` as a row of ``kind``, with the tag that kind has.

    Rows move between kinds of one shape (train and rejected hold messages;
    traces, rejected and observed a trajectory); the store checks the result.
    """
    return cast("Row", {**row, "kind": kind, "tag": TAG_OF_KIND[kind]})


def _trajectory(
    records: list[Record], rewrite: str | None, reasoning: bool
) -> list[Record]:
    out = [
        cast("Record", dict(r))
        for r in records
        if reasoning or r["role"] != "reasoning"
    ]
    if rewrite is None:
        return out
    last = out[-1]
    if last["role"] == "assistant" and isinstance(last["content"], str):
        last["content"] = rewrite
    else:
        out.append(_answer(rewrite, _stamp_of(last) or now()))
    return out


def _answer(text: str, stamp: str) -> AssistantRecord:
    return {"role": "assistant", "content": text, "timestamp": stamp}


def _stamp_of(record: Record) -> str | None:
    stamp = record.get("timestamp")  # a meta record has none
    return stamp if isinstance(stamp, str) else None


def _ended(stop_reason: str | None) -> str:
    return "was aborted" if stop_reason == "aborted" else "ended with an error"


def first_words(row: Mapping[str, Any], limit: int = 60) -> str:
    """The start of the user's message, on one line, for listings.

    Of any row as it reads: listings also show rows of old commits and the
    sides of a diff, which may not be valid rows.
    """
    text = ""
    for message in row.get("messages") or row.get("trajectory") or []:
        if isinstance(message, dict) and message.get("role") == "user":
            text = str(message.get("content") or "")
            break
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def body(row: Row) -> list[Message] | list[Record]:
    """The row's conversation: its messages, or its trajectory records."""
    if "messages" in row:
        return row["messages"]
    if "trajectory" in row:
        return row["trajectory"]
    return []


# -- answers ---------------------------------------------------------------------


# The one line every command refuses a blank answer with: --as on good, bad
# and label, rewrite, edit and import.
BLANK_ANSWER = "the answer is empty or only whitespace"


def check_answer(text: str | None) -> None:
    """UsageError if an answer given on the command line is blank."""
    if text is not None and not text.strip():
        raise UsageError(BLANK_ANSWER)


def blank_answer(row: Mapping[str, Any]) -> str | None:
    """The JSON path of an answer in ``row`` that is only whitespace, or None.

    An assistant text that is ``""`` is no answer (the schemas say where one
    is needed); one of spaces and newlines is an answer of nothing, which a
    model would learn to give.
    """
    for key in ("messages", "trajectory"):
        items = row.get(key)
        for i, item in enumerate(items if isinstance(items, list) else []):
            if not isinstance(item, dict) or item.get("role") != "assistant":
                continue
            content = item.get("content")
            if isinstance(content, str) and content and not content.strip():
                return f"$.{key}[{i}].content"
    for key in ("original_answer",):
        value = row.get(key)
        if isinstance(value, str) and not value.strip():
            return f"$.{key}"
    return None


def final_answer(row: Row) -> str | None:
    """The row's last assistant text (messages or trajectory)."""
    for item in reversed(body(row)):
        if item["role"] == "assistant" and _spoken(item):
            return str(item["content"])
    return None


def rewrite_answer(row: Row, text: str) -> None:
    """Put ``text`` in place of the final answer; the first original is kept."""
    old = final_answer(row)
    if old == text:
        return
    if old is not None and "original_answer" not in row:
        row["original_answer"] = old
    set_final_answer(row, text)


def set_final_answer(row: Row, text: str) -> None:
    """Replace the last assistant text, or append an answer if there is none."""
    if "messages" in row:
        messages = row["messages"]
        for message in reversed(messages):
            if message["role"] == "assistant" and _spoken(message):
                message["content"] = text
                return
        messages.append({"role": "assistant", "content": text})
    elif "trajectory" in row:
        records = row["trajectory"]
        for record in reversed(records):
            if record["role"] == "assistant" and _spoken(record):
                record["content"] = text
                return
        stamp = _stamp_of(records[-1]) if records else None
        records.append(_answer(text, stamp or now()))
    else:
        raise UsageError(f"row {row['id']} has no conversation to rewrite")


def _spoken(item: Message | Record) -> bool:
    content = item.get("content")
    return isinstance(content, str) and bool(content)
