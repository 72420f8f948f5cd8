"""A turn is in the dataset once: the commit that puts a turn's row in the store.

One turn can be stored under three ids, one per shape (rows.make_id of its
host, session and entries): its answer (``machine good``/``bad``), its trace
(``--trace``) and its observed run (auto-capture). So before a row of a turn
is written, the rows of its other shapes are read (three reads, whatever the
size of the store), and:

- a tag of a turn tagged the same way already is reported, not repeated;
- a tag of a turn that auto-capture observed labels that observed row (same
  id) instead of adding a second row;
- a new label moves every other row of the turn to it, in the same commit;
- an observation of a turn that is already stored, in any shape, records
  nothing.

The store validates every row this writes (the one schema check of a tag).
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Any
from typing import Literal
from typing import NamedTuple
from typing import cast

from machine_git.core import jsonio
from machine_git.core.plain import Plain
from machine_git.rows import context
from machine_git.rows import images
from machine_git.rows import rows
from machine_git.store import settings
from machine_git.store.store import Change
from machine_git.store.store import Redaction
from machine_git.store.store import Snapshot
from machine_git.store.store import Store
from machine_git.store.store import fit

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Row

Action = Literal["tag", "label", "move", "duplicate", "observed"]


class Moved(NamedTuple):
    """Another row of the turn, moved to the new label with it."""

    id: str
    old_kind: str
    new_kind: str


class Committed(Plain):
    """What committing a turn's row did.

    ``action``: ``tag`` (a new row), ``label`` (the turn's observed row
    judged), ``move`` (the other label), ``duplicate`` (nothing new), or
    ``observed`` (a new observed row). ``row`` is the row as stored,
    ``previous_kind`` its kind before, ``also`` the turn's other rows moved.
    """

    __slots__ = ("action", "also", "commit", "previous_kind", "row")

    def __init__(
        self,
        action: Action,
        row: Row,
        previous_kind: str | None = None,
        commit: str | None = None,
        also: list[Moved] | None = None,
    ) -> None:
        self.action = action
        self.row = row
        self.previous_kind = previous_kind
        self.commit = commit
        self.also: list[Moved] = also if also is not None else []


def commit(store: Store, row: Row, redaction: Redaction) -> Committed:
    """Commit ``row``, a tag's row or an observed run, as its turn allows."""
    if row["kind"] == "observed":
        return _observe(store, row, redaction)
    return _tag(store, row, redaction)


def turn_rows(snap: Snapshot, row: Row) -> dict[str, Row]:
    """The rows stored for ``row``'s turn, by shape (answer, trace, observed)."""
    source = row["source"]
    host, session, entries = (
        source.get("host"),
        source.get("session_id"),
        source.get("entry_ids"),
    )
    if not (isinstance(host, str) and isinstance(session, str) and entries):
        return {}
    found: dict[str, Row] = {}
    for shape in rows.SHAPES:
        path = rows.row_path(rows.make_id(host, session, list(entries), shape))
        data = snap.read(path)
        if data is not None:
            found[shape] = rows.parse(data, path)
    return found


def source_trailer(row: Row) -> str:
    """``pi <session id> <first entry>..<last entry>`` for the commit trailer."""
    source = row["source"]
    ids = source.get("entry_ids") or ["?"]
    return f"{source.get('host')} {source.get('session_id')} {ids[0]}..{ids[-1]}"


# -- a tag ---------------------------------------------------------------------------


def _tag(store: Store, row: Row, redaction: Redaction) -> Committed:
    """One commit for the turn, however many of its rows change."""
    outcome: list[Committed] = []

    def plan(snap: Snapshot) -> Change | None:
        turn = turn_rows(snap, row)
        action, before, after = _primary(snap, row, turn)
        label = row["tag"]
        # the turn's other rows that carry the other verdict move with it
        others = [
            r
            for r in turn.values()
            if r["id"] != after["id"] and r["tag"] in rows.LABELS and r["tag"] != label
        ]
        also = [Moved(r["id"], r["kind"], rows.shape_kind(r, label)) for r in others]
        previous = None if before is None else str(before["kind"])
        files: dict[str, bytes | None] = {}
        if action != "duplicate":
            after, contexts = _with_context(snap, after)
            files[rows.row_path(after["id"])] = jsonio.canonical(after)
            files.update(contexts)
        outcome[:] = [Committed(action, after, previous, None, also)]
        if action == "duplicate" and not also:
            return None
        for other, moved in zip(others, also, strict=True):
            files[rows.row_path(moved.id)] = jsonio.canonical(
                rows.with_kind(other, moved.new_kind)
            )
        return _tag_change(row, outcome[0], files, redaction)

    oid = store.write(plan)
    done = outcome[0]
    if oid is None:
        done.action = "duplicate"
    elif done.action == "duplicate":
        done.action = "move"  # only the turn's other rows moved
    done.commit = None if oid is None else str(oid)
    return done


def _primary(
    snap: Snapshot, row: Row, turn: dict[str, Row]
) -> tuple[Action, Row | None, Row]:
    """What the tag does to its own row: (action, row before, row after).

    The row itself if it exists or the turn has no observed row; else the
    observed row, labeled (or moved, if it was labeled before).
    """
    path = rows.row_path(row["id"])
    data = snap.read(path)
    existing = rows.parse(data, path) if data is not None else None
    observed = turn.get("observed")
    if existing is None and observed is not None and observed["id"] != row["id"]:
        after = rows.judged(
            observed, row["tag"], row.get("note"), rows.final_answer(row)
        )
        if observed["kind"] == "observed":
            return "label", observed, after
        existing, row = observed, after  # labeled before: same label, or a move
    if existing is None:
        return "tag", None, row
    if existing["kind"] == row["kind"]:
        return "duplicate", existing, existing
    return "move", existing, row


def _tag_change(
    row: Row,
    done: Committed,
    files: dict[str, bytes | None],
    redaction: Redaction,
) -> Change:
    """The commit of one tag: its summary, the moved rows in the body, trailers."""
    after, also = done.row, done.also
    words = rows.first_words(after)
    only_moves = done.action == "duplicate"
    main_id = after["id"] if not only_moves else also[0].id
    trailers = {
        "Action": "move" if only_moves else done.action,
        "Row": main_id,
        "Kind": after["kind"] if not only_moves else also[0].new_kind,
        "Tag": row["tag"],
        "Source": source_trailer(row),
    }
    if done.action == "tag":
        summary = f"{row['tag']} {after['id']}: {words}"
    elif only_moves:
        summary = f"move {main_id} {also[0].old_kind} -> {also[0].new_kind}: {words}"
        trailers["From"] = also[0].old_kind
    else:
        summary = (
            f"{done.action} {after['id']} {done.previous_kind} -> {after['kind']}: "
            f"{words}"
        )
        trailers["From"] = str(done.previous_kind)
    others = [a for a in also if a.id != main_id]
    if others:
        trailers["Also"] = ", ".join(a.id for a in others)
    lines = [
        f"also {a.id} {a.old_kind} -> {a.new_kind} (the same turn)" for a in others
    ]
    note = row.get("note")
    body = "\n".join([*([note] if note else []), *lines])
    return Change(
        summary=fit(summary),
        files=files,
        trailers=trailers,
        body=body,
        redaction=redaction,
    )


# -- an observed run -----------------------------------------------------------------


def _observe(store: Store, row: Row, redaction: Redaction) -> Committed:
    """Commit an observed row, unless its turn is stored already (in any shape)."""
    path = rows.row_path(row["id"])
    seen: list[Row] = []
    kept: list[Row] = []  # the row as stored (its context by hash)

    def plan(snap: Snapshot) -> Change | None:
        existing = snap.read(path)
        if existing is not None:
            # Already observed, or observed and labeled since: never undo a label.
            seen[:] = [rows.parse(existing, path)]
            return None
        tagged = turn_rows(snap, row)
        if tagged:
            # The turn was tagged (/good, /bad) before it was observed: it is
            # in the dataset already, once.
            seen[:] = [next(iter(tagged.values()))]
            return None
        parent = row["source"].get("parent_row")
        trailers = {
            "Action": "observe",
            "Row": row["id"],
            "Kind": "observed",
            "Tag": "observed",
            "Source": source_trailer(row),
        }
        if parent:
            trailers["Parent"] = parent
        stored, contexts = _with_context(snap, row)
        kept[:] = [stored]
        return Change(
            summary=fit(f"observed {row['id']}: {rows.first_words(row)}"),
            files={path: jsonio.canonical(stored), **contexts},
            trailers=trailers,
            body=f"fork of {parent}" if parent else (row.get("note") or ""),
            redaction=redaction,
        )

    oid = store.write(plan)
    if seen:
        return Committed("duplicate", seen[0])
    stored = kept[0] if kept else row
    return Committed("observed", stored, None, None if oid is None else str(oid))


def _with_context(snap: Snapshot, row: Row) -> tuple[Row, dict[str, bytes | None]]:
    """``row`` with its context and images as hashes, and their files if the
    store lacks them: each distinct context and image is stored once."""

    def present(where: str) -> bool:
        return context.in_tree(snap.tree, where)

    stored, files = context.stored(cast("dict[str, Any]", row), present)
    if images.has_images(stored):
        # Each image once, by content, stripped of its metadata.
        stored, pictures = images.stored(stored, present, settings.image_limit(snap))
        files.update(pictures)
    return cast("Row", stored), files
