"""Differences between dataset versions: rows, then fields, then records.

Rows are keyed by id; a modified row is compared field by field and reported
by JSON path. Conversations are aligned record by record (difflib on each
record's role and tool-call ids), so an inserted tool call shows up as one
added record rather than as every later index changing, and a tool call's
JSON arguments are compared key by key.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from collections.abc import Iterable
from dataclasses import dataclass
from dataclasses import field
from typing import Any

import pygit2
from pygit2 import Commit

from machine_git.core import jsonio
from machine_git.core import table
from machine_git.core.errors import TrainingError
from machine_git.history import history
from machine_git.history import revs
from machine_git.rows import context
from machine_git.rows import images
from machine_git.rows import rows
from machine_git.store.objects import Objects
from machine_git.store.store import Store
from machine_git.store.store import read_path
from machine_git.store.treediff import changed_blobs


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
_ALIGNED = frozenset({"trajectory", "messages"})


@dataclass(frozen=True)
class FieldChange:
    """One value that differs, at a JSON path; MISSING marks an absent side."""

    path: str
    old: Any
    new: Any

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path}
        if self.old is not MISSING:
            out["old"] = self.old
        if self.new is not MISSING:
            out["new"] = self.new
        return out


@dataclass
class RowChange:
    """How one row differs between two versions."""

    id: str
    status: str  # added | removed | modified | moved
    old: dict[str, Any] | None
    new: dict[str, Any] | None
    fields: list[FieldChange] = field(default_factory=list)

    @property
    def old_kind(self) -> str | None:
        return None if self.old is None else str(self.old.get("kind"))

    @property
    def new_kind(self) -> str | None:
        return None if self.new is None else str(self.new.get("kind"))

    def kinds(self) -> set[str]:
        return {k for k in (self.old_kind, self.new_kind) if k is not None}


@dataclass(frozen=True)
class FileChange:
    """A file outside ``rows/`` that differs (run records, evals, releases...)."""

    path: str
    status: str  # added | removed | changed

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "status": self.status}


@dataclass(frozen=True)
class Side:
    """One side of a diff: a commit, or the rows a training run learned from."""

    commit: Commit | None
    run: str | None = None  # a run id: only its training rows count
    rows: frozenset[str] | None = None  # those rows' ids (None: every row)

    @property
    def label(self) -> str:
        if self.run is not None:
            return self.run
        return "(empty)" if self.commit is None else str(self.commit.id)[:12]


@dataclass
class Diff:
    """Every row change between two commits, plus other files that changed."""

    old: Commit | None
    new: Commit
    rows: list[RowChange]
    other_files: list[FileChange]
    old_run: str | None = None
    new_run: str | None = None

    def summary(self) -> dict[str, dict[str, int]]:
        """Per kind: added, removed, modified, moved in, moved out."""
        out: dict[str, dict[str, int]] = {}

        def bump(kind: str | None, what: str) -> None:
            if kind is None:
                return
            counts = out.setdefault(
                kind,
                {
                    "added": 0,
                    "removed": 0,
                    "modified": 0,
                    "moved_in": 0,
                    "moved_out": 0,
                },
            )
            counts[what] += 1

        for change in self.rows:
            if change.status == "moved":
                bump(change.old_kind, "moved_out")
                bump(change.new_kind, "moved_in")
            elif change.status == "added":
                bump(change.new_kind, "added")
            elif change.status == "removed":
                bump(change.old_kind, "removed")
            else:
                bump(change.new_kind, "modified")
        return out


def diff_commits(
    store: Store, old: Commit | None, new: Commit, kinds: Iterable[str] | None = None
) -> Diff:
    """Row-level diff of ``old`` -> ``new``; cost follows the size of the change."""
    wanted = set(kinds) if kinds else None
    changes: list[RowChange] = []
    others: list[FileChange] = []
    contexts: list[FileChange] = []
    named: set[str] = set()
    repo = store.repo
    objects = Objects(repo)  # a damaged loose object: an error, not a hang
    old_tree = objects.tree(old.tree_id) if old is not None else None
    new_tree = objects.tree(new.tree_id)
    for path, a, b in changed_blobs(repo, old_tree, new_tree, objects=objects):
        row_id = rows.id_of_path(path)
        if row_id is None:
            item = FileChange(path, _status(a, b))
            shared = context.is_context_path(path) or images.is_image_path(path)
            (contexts if shared else others).append(item)
            continue
        before = _shown(_load(objects, a), repo, old_tree)
        after = _shown(_load(objects, b), repo, new_tree)
        change = row_change(row_id, before, after)
        # A context shows in the rows that name it, of any kind (a row left
        # out by --kind still owns it); alone (pruned) it is a file.
        named.update(_contexts_named(change))
        if wanted is None or change.kinds() & wanted:
            changes.append(change)
    changes.sort(key=lambda c: c.id)
    others.extend(f for f in contexts if f.path not in named)
    return Diff(old, new, changes, sorted(others, key=lambda f: f.path))


def _contexts_named(change: RowChange) -> set[str]:
    """The ``context/`` and ``images/`` paths the two sides of a row change name."""
    return {
        context.path_of(str(r[context.FIELD]["id"]))
        for r in (change.old, change.new)
        if r is not None
        and isinstance(r.get(context.FIELD), dict)
        and "id" in r[context.FIELD]
    } | {  # so does an image
        images.path_of(sha)
        for r in (change.old, change.new)
        if r is not None
        for sha in images.named(r)
    }


def diff_sides(
    store: Store, old: Side, new: Side, kinds: Iterable[str] | None = None
) -> Diff:
    """Like :func:`diff_commits`, but a side may stand for a run's training rows.

    A row counts on a run's side only if the run learned from it, so a row
    held out for the run's eval set is never "added"; rows whose bytes are
    the same on both sides are no change. Reads every row id of both trees.
    """
    assert new.commit is not None
    if old.rows is None and new.rows is None:
        return diff_commits(store, old.commit, new.commit, kinds)
    wanted = set(kinds) if kinds else None
    objects = Objects(store.repo)
    a = _members(store, objects, old)
    b = _members(store, objects, new)
    trees = [objects.tree(s.commit.tree_id) if s.commit else None for s in (old, new)]
    changes = []
    for row_id in sorted(a.keys() | b.keys()):
        if a.get(row_id) == b.get(row_id):
            continue
        change = row_change(
            row_id,
            _shown(_load(objects, a.get(row_id)), store.repo, trees[0]),
            _shown(_load(objects, b.get(row_id)), store.repo, trees[1]),
        )
        if wanted is None or change.kinds() & wanted:
            changes.append(change)
    plain = diff_commits(store, old.commit, new.commit, ())
    return Diff(old.commit, new.commit, changes, plain.other_files, old.run, new.run)


def _members(store: Store, objects: Objects, side: Side) -> dict[str, pygit2.Oid]:
    """Row id -> blob id of every row on this side (trees only, no blob read)."""
    out: dict[str, pygit2.Oid] = {}
    top = store.rows_tree(side.commit) if side.commit is not None else None
    pending = [(f"{rows.ROWS_DIR}/", top)] if top is not None else []
    while pending:
        prefix, tree = pending.pop()
        for entry in tree:
            path = f"{prefix}{entry.name}"
            if entry.type_str == "tree":
                pending.append((f"{path}/", objects.tree(entry.id)))
                continue
            row_id = rows.id_of_path(path)
            if row_id is not None and (side.rows is None or row_id in side.rows):
                out[row_id] = entry.id
    return out


def _is_run_ref(store: Store, text: str) -> bool:
    try:
        return f"{revs.RUN_REFS}{text}" in store.repo.references
    except (ValueError, pygit2.GitError):
        return False  # not a valid ref name (HEAD~2, a date): not a run


# The rows the run named by a run ref learned from, or None without its record.
RunRows = Callable[[Store, str], frozenset[str] | None]


def _status(old: pygit2.Oid | None, new: pygit2.Oid | None) -> str:
    return "added" if old is None else "removed" if new is None else "changed"


def compare(
    store: Store,
    old: str | None,
    new: str | None,
    kinds: Iterable[str] | None,
    run_rows: RunRows | None = None,
    warn: Callable[[str], None] | None = None,
) -> Diff:
    """``machine diff [OLD [NEW]]``: revisions by name; a run id means its rows.

    No revision: what the last commit changed. A training run's id stands for
    the rows that run learned from (its kind at its dataset commit, minus the
    eval rows it held out; only those its completed steps trained), so two
    run ids compare their training data. What a run learned from is the
    training layer's knowledge, so the caller passes it in as ``run_rows``
    (releases.lineage.run_rows): history stays below training.
    """
    if old is None:
        newer = revs.resolve(store, None)
        older = newer.parents[0] if newer.parents else None
        return diff_commits(store, older, newer, kinds)
    return diff_sides(
        store,
        _side(store, old, run_rows, warn),
        _side(store, new, run_rows, warn),
        kinds,
    )


def _side(
    store: Store,
    text: str | None,
    run_rows: RunRows | None,
    warn: Callable[[str], None] | None = None,
) -> Side:
    commit = revs.resolve(store, text)
    if text is None or run_rows is None or not _is_run_ref(store, text):
        return Side(commit)
    try:
        learned = run_rows(store, text)
    except TrainingError as e:
        # A damaged run record must not stop the diff: its data commit still is.
        if warn is not None:
            warn(f"{e} (comparing all rows at {str(commit.id)[:12]})")
        return Side(commit)
    if learned is None:
        return Side(commit)
    return Side(commit, text, learned)


def row_change(
    row_id: str, before: dict[str, Any] | None, after: dict[str, Any] | None
) -> RowChange:
    """Classify and field-diff one row."""
    if before is None:
        return RowChange(row_id, "added", None, after)
    if after is None:
        return RowChange(row_id, "removed", before, None)
    status = "moved" if before.get("kind") != after.get("kind") else "modified"
    return RowChange(row_id, status, before, after, diff_values(before, after))


def _shown(
    row: dict[str, Any] | None, repo: pygit2.Repository, tree: Any
) -> dict[str, Any] | None:
    # A row's context by hash is opaque: compare what it holds, field by field.
    if row is None:
        return None
    return context.shown(row, lambda path: read_path(repo, tree, path))


def _load(objects: Objects, oid: pygit2.Oid | None) -> dict[str, Any] | None:
    if oid is None:
        return None
    try:
        value = jsonio.loads(objects.blob(oid))
    except ValueError:
        return {"_unreadable": str(oid)}
    return value if isinstance(value, dict) else {"_not_an_object": value}


# -- values --------------------------------------------------------------------


def diff_values(old: Any, new: Any, path: str = "$") -> list[FieldChange]:
    """Every leaf that differs between two JSON values, by JSON path."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[FieldChange] = []
        for key in sorted(old.keys() | new.keys()):
            sub = f"{path}.{key}"
            if key not in old:
                out.append(FieldChange(sub, MISSING, new[key]))
            elif key not in new:
                out.append(FieldChange(sub, old[key], MISSING))
            elif (
                key in _ALIGNED
                and isinstance(old[key], list)
                and isinstance(new[key], list)
            ):
                out.extend(_diff_aligned(old[key], new[key], sub))
            else:
                out.extend(diff_values(old[key], new[key], sub))
        return out
    if isinstance(old, list) and isinstance(new, list):
        out = []
        # An image reference is one value: its hash, type and size go together.
        atomic = path.endswith(f".{images.FIELD}")
        for index in range(max(len(old), len(new))):
            sub = f"{path}[{index}]"
            if index >= len(old):
                out.append(FieldChange(sub, MISSING, new[index]))
            elif index >= len(new):
                out.append(FieldChange(sub, old[index], MISSING))
            elif atomic and old[index] != new[index]:
                out.append(FieldChange(sub, old[index], new[index]))
            else:
                out.extend(diff_values(old[index], new[index], sub))
        return out
    if isinstance(old, str) and isinstance(new, str) and path.endswith(".args"):
        # Tool-call arguments are a JSON string: compare them as JSON.
        parsed = _json_object(old), _json_object(new)
        if parsed[0] is not None and parsed[1] is not None and old != new:
            return diff_values(parsed[0], parsed[1], path)
    if old == new and type(old) is type(new):
        return []
    return [FieldChange(path, old, new)]


def _diff_aligned(old: list[Any], new: list[Any], path: str) -> list[FieldChange]:
    matcher = difflib.SequenceMatcher(
        None, [_signature(r) for r in old], [_signature(r) for r in new], autojunk=False
    )
    out: list[FieldChange] = []
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        if op == "equal":
            for i, j in zip(range(a0, a1), range(b0, b1), strict=True):
                out.extend(diff_values(old[i], new[j], f"{path}[{j}]"))
            continue
        paired = min(a1 - a0, b1 - b0) if op == "replace" else 0
        for k in range(paired):
            out.extend(diff_values(old[a0 + k], new[b0 + k], f"{path}[{b0 + k}]"))
        for i in range(a0 + paired, a1):
            out.append(FieldChange(f"{path}[{i}]", old[i], MISSING))
        for j in range(b0 + paired, b1):
            out.append(FieldChange(f"{path}[{j}]", MISSING, new[j]))
    return out


def _signature(record: Any) -> tuple[str, ...]:
    if not isinstance(record, dict):
        return ("?",)
    role = str(record.get("role"))
    calls = record.get("tool_calls")
    if isinstance(calls, list):
        return (role, *(str(c.get("id") if isinstance(c, dict) else c) for c in calls))
    if "tool_call_id" in record:
        return (role, str(record["tool_call_id"]))
    return (role,)


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = jsonio.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def show_value(value: Any, limit: int = 70) -> str:
    """A value on one line for the terminal."""
    if value is MISSING:
        return "(absent)"
    text = jsonio.compact(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


Reader = Callable[[str], bytes | None]
_IMAGE_AT = re.compile(rf"\.{images.FIELD}\[\d+\]$")


def shown_field(
    change: FieldChange, old_read: Reader, new_read: Reader, columns: int
) -> list[str]:
    """``change`` as lines for the terminal: ``path: old -> new``, cut to
    ``columns``. An image is its line instead of its reference's JSON (``-
    image 3f2a9c01b2d4 image/png 75 bytes 2x2``, read from that side's tree,
    ``+`` for the new side), under its path, never cut; a whole record is shown
    without its images, then one line for each."""
    old, new, path = change.old, change.new, change.path
    sides = (old_read, new_read)
    if _IMAGE_AT.search(path):
        return [f"{path}:", *_pictures([old], [new], *sides)]
    if path.endswith(f".{images.FIELD}") and _lists_or_missing(old, new):
        return [f"{path}:", *_pictures(old, new, *sides)]
    if _has_images(old) or _has_images(new):
        head = table.pair(
            f"{path}: ",
            show_value(_bare(old), columns),
            show_value(_bare(new), columns),
            columns,
        )
        return [head, *_pictures(_list_of(old), _list_of(new), *sides)]
    plain = show_value(old, columns), show_value(new, columns)
    return [table.pair(f"{path}: ", *plain, columns)]


def _pictures(old: Any, new: Any, old_read: Reader, new_read: Reader) -> list[str]:
    """``- image ...`` for each old image, ``+ image ...`` for each new one."""
    lines = [f"  - {images.describe(i, old_read)}" for i in _references(old)]
    return lines + [f"  + {images.describe(i, new_read)}" for i in _references(new)]


def _references(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        return []
    return [i for i in value if isinstance(i, dict)]


def _lists_or_missing(*values: Any) -> bool:
    return all(v is MISSING or isinstance(v, list) for v in values)


def _has_images(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get(images.FIELD), list)


def _bare(value: Any) -> Any:
    """A record without its images (they get their own lines)."""
    if not _has_images(value):
        return value
    return {k: v for k, v in value.items() if k != images.FIELD}


def _list_of(value: Any) -> Any:
    return value[images.FIELD] if _has_images(value) else MISSING


def touched(store: Store, commit: Commit) -> Diff:
    """The rows a commit changed, against its first parent."""
    return diff_commits(store, history.first_parent(store, commit), commit)
