"""An in-memory summary of every row at a commit, for Browse, search and the Queue.

Filtering and full-text search need every row's kind, host, tools, note, user
text and answer. Reading them all costs seconds at 100,000 rows, so a summary
per row is kept in memory, keyed by commit. A new commit is not re-read: its
index is the nearest cached one brought up to date with the blobs that differ
(``treediff.changed_blobs``), so the cost follows the size of the change, as
``machine data``'s counts cache does.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from dataclasses import replace
from functools import cached_property
from typing import TYPE_CHECKING
from typing import Any
from typing import TypedDict
from typing import cast

from pygit2 import Commit
from pygit2 import Oid
from pygit2 import Tree

from machine_git.core import jsonio
from machine_git.core.errors import UsageError
from machine_git.history import history
from machine_git.rows import rows
from machine_git.store.objects import Objects
from machine_git.store.store import Store
from machine_git.store.treediff import changed_blobs

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Row

_KEEP = 4  # indexes kept: the head, a version or two being browsed, the last head
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class Summary(TypedDict):
    """What Browse shows and filters on, for one row."""

    id: str
    blob: str
    kind: str
    host: str
    model: str
    created_at: str
    tag: str
    note: str
    words: str
    tools: list[str]
    error: bool
    text: str  # user text and answers, casefolded, for search


def summarize(row: Mapping[str, Any], blob: str) -> Summary:
    """The summary of one stored row (read as it is: a blob may hold anything)."""
    items = row.get("trajectory") or row.get("messages") or []
    users: list[str] = []
    tools: set[str] = set()
    error = False
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        role = item.get("role")
        if role == "user" and isinstance(item.get("content"), str):
            users.append(item["content"])
        for call in item.get("tool_calls") or []:
            name = call.get("name") or (call.get("function") or {}).get("name")
            if isinstance(name, str):
                tools.add(name)
        if role == "tool" and is_error(item):
            error = True
    source = row.get("source")
    source = source if isinstance(source, dict) else {}
    answer = rows.final_answer(cast("Row", row)) if isinstance(items, list) else None
    answers = [answer or "", str(row.get("original_answer") or "")]
    return Summary(
        id=str(row.get("id")),
        blob=blob,
        kind=str(row.get("kind")),
        host=str(source.get("host") or ""),
        model=str(source.get("model") or ""),
        created_at=str(row.get("created_at") or ""),
        tag=str(row.get("tag") or ""),
        note=str(row.get("note") or ""),
        words=rows.first_words(row, 80),
        tools=sorted(tools),
        error=error,
        text="\n".join([*users, *answers]).casefold(),
    )


def is_error(record: Mapping[str, Any]) -> bool:
    """A tool result that failed (``ok: false``, or the ``Error: `` prefix)."""
    content = record.get("content")
    return record.get("ok") is False or (
        isinstance(content, str) and content.startswith("Error: ")
    )


@dataclass
class Index:
    """Every row's summary at one commit."""

    commit: str
    rows: dict[str, Summary]
    # Row id -> when it last changed, as a rank (larger: newer), read from
    # history on first use: the order of ``machine observed``.
    recency: dict[str, int] | None = None
    largest: int = 0  # bytes of the largest row blob read (an upper bound)
    # Held while the recency is read (a walk of history): not the cache's
    # lock, so other pages are not held up meanwhile.
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @cached_property
    def ordered(self) -> list[Summary]:
        """Newest first (by when the row was made), computed once per index."""
        return sorted(
            self.rows.values(), key=lambda s: (s["created_at"], s["id"]), reverse=True
        )

    @cached_property
    def recorded(self) -> list[Summary]:
        """Newest change first, as ``machine observed`` lists rows.

        Only once :attr:`recency` is known (:meth:`Cache.recorded`).
        """
        ranks = self.recency or {}
        return sorted(
            self.rows.values(), key=lambda s: ranks.get(s["id"], 0), reverse=True
        )

    def of_kind(self, kind: str, recorded: bool = False) -> list[Summary]:
        """The rows of ``kind`` ("": every row) in one of the two orders,
        kept once computed: the Queue's and Browse's lists without a filter."""
        key = (kind, recorded)
        found = self._buckets.get(key)
        if found is None:
            every = self.recorded if recorded else self.ordered
            found = [s for s in every if s["kind"] == kind] if kind else every
            self._buckets[key] = found
        return found

    @cached_property
    def _buckets(self) -> dict[tuple[str, bool], list[Summary]]:
        return {}

    def tools(self) -> list[str]:
        return self._choices["tools"]

    def hosts(self) -> list[str]:
        return self._choices["host"]

    def models(self) -> list[str]:
        return self._choices["model"]

    def tags(self) -> list[str]:
        return self._choices["tag"]

    @cached_property
    def _choices(self) -> dict[str, list[str]]:
        """What the filters offer, each computed once per index."""
        found: dict[str, set[str]] = {"host": set(), "model": set(), "tag": set()}
        tools: set[str] = set()
        for s in self.rows.values():
            for name, seen in found.items():
                value = s[name]  # type: ignore[literal-required]
                if value:
                    seen.add(value)
            tools.update(s["tools"])
        return {**{k: sorted(v) for k, v in found.items()}, "tools": sorted(tools)}


class Cache:
    """Indexes by commit id, shared by the server's threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._indexes: OrderedDict[str, Index] = OrderedDict()

    def holds(self, commit: str) -> bool:
        """Whether the index of ``commit`` is built already."""
        with self._lock:
            return commit in self._indexes

    def at(self, store: Store, commit: Commit) -> Index:
        """The index of ``commit``, built from the nearest cached one."""
        key = str(commit.id)
        with self._lock:
            found = self._indexes.get(key)
            if found is not None:
                self._indexes.move_to_end(key)
                return found
            base = next(reversed(self._indexes.values()), None)
            index = _build(store, commit, base)
            self._indexes[key] = index
            while len(self._indexes) > _KEEP:
                self._indexes.popitem(last=False)
            return index

    def largest(self) -> int:
        """The size of the largest row the newest index has read (0: none yet)."""
        with self._lock:
            newest = next(reversed(self._indexes.values()), None)
            return newest.largest if newest is not None else 0

    def recorded(self, store: Store, commit: Commit) -> list[Summary]:
        """The rows at ``commit``, newest change first (as ``machine observed``)."""
        index = self.at(store, commit)
        with index.lock:
            if index.recency is None:
                index.recency = _recency(store, commit, index)
            return index.recorded


def _recency(store: Store, commit: Commit, index: Index) -> dict[str, int]:
    """Each row's rank by its newest change, from history: one walk, which
    stops once every row of ``index`` is placed."""
    ranks: dict[str, int] = {}
    wanted = len(index.rows)
    rank = 0
    for _, row_id in history.by_recency(store, commit):
        if row_id in index.rows:
            rank -= 1
            ranks[row_id] = rank
            if len(ranks) == wanted:
                break
    return ranks


def _newer_recency(store: Store, commit: Commit, base: Index, now: Index) -> None:
    """``now``'s ranks from ``base``'s: the rows changed since go on top."""
    if base.recency is None:
        return
    ranks = {k: v for k, v in base.recency.items() if k in now.rows}
    top = max(ranks.values(), default=0)
    changed = [
        row_id
        for _, row_id in history.by_recency(store, commit, until=Oid(hex=base.commit))
        if row_id in now.rows
    ]
    # Rows the walk did not reach (brought by a merge from before ``base``)
    # count as new.
    seen = set(changed)
    changed += [r for r in now.rows if r not in ranks and r not in seen]
    for offset, row_id in enumerate(reversed(changed), start=1):
        ranks[row_id] = top + offset
    now.recency = ranks


def _build(store: Store, commit: Commit, base: Index | None) -> Index:
    repo = store.repo
    objects = Objects(repo)
    summaries: dict[str, Summary] = dict(base.rows) if base is not None else {}
    largest = base.largest if base is not None else 0
    old_tree = _rows_tree(store, repo.get(base.commit)) if base is not None else None
    for path, _, new in changed_blobs(
        repo, old_tree, _rows_tree(store, commit), f"{rows.ROWS_DIR}/", objects
    ):
        row_id = rows.id_of_path(path)
        if row_id is None:
            continue
        if new is None:
            summaries.pop(row_id, None)
            continue
        data = objects.blob(new)
        largest = max(largest, len(data))
        try:
            row = jsonio.loads(data)
        except ValueError:
            row = {"id": row_id, "kind": "unreadable"}
        if isinstance(row, dict):
            summaries[row_id] = summarize(row, str(new))
    index = Index(str(commit.id), summaries, largest=largest)
    if base is not None:
        _newer_recency(store, commit, base, index)
    return index


def _rows_tree(store: Store, commit: Any) -> Tree | None:
    if commit is None:
        return None
    return store.rows_tree(commit.peel(Commit))


# -- filters -------------------------------------------------------------------


@dataclass(frozen=True)
class Filters:
    """Browse's and the Queue's filters; empty strings mean "any"."""

    kind: str = ""
    host: str = ""
    model: str = ""
    tag: str = ""
    tool: str = ""
    note: str = ""
    query: str = ""
    errors: bool = False
    since: str = ""
    until: str = ""
    # The rows the full-text index found for ``query`` (None: match the
    # summaries' user text and answers word by word, as at an old revision).
    found: frozenset[str] | None = None

    def __post_init__(self) -> None:
        for name, value in (("from", self.since), ("to", self.until)):
            if value and not _DATE.match(value):
                raise UsageError(f"bad {name} date {value!r}: expected YYYY-MM-DD")

    @cached_property
    def _words(self) -> list[str]:
        return self.query.casefold().split()

    def kind_only(self) -> bool:
        """Whether nothing but the kind is asked for (a list kept per index)."""
        return self == Filters(kind=self.kind)

    def matches(self, s: Summary) -> bool:
        words = self._words
        return (
            (not self.kind or s["kind"] == self.kind)
            and (not self.host or s["host"] == self.host)
            and (not self.model or s["model"] == self.model)
            and (not self.tag or s["tag"] == self.tag)
            and (not self.tool or self.tool in s["tools"])
            and (not self.errors or s["error"])
            and (not self.note or self.note.casefold() in s["note"].casefold())
            and (not self.since or s["created_at"][:10] >= self.since)
            and (not self.until or s["created_at"][:10] <= self.until)
            and (
                s["id"] in self.found
                if self.found is not None
                else all(w in s["text"] for w in words)
            )
        )


def select(index: Index, filters: Filters, recorded: bool = False) -> list[Summary]:
    """The rows of ``index`` that pass ``filters``, newest first (by when made;
    ``recorded``: by their newest change). Only those of the kind asked for
    are read."""
    candidates = index.of_kind(filters.kind, recorded)
    if filters.found is not None:
        # The search answered first: keep its rows, then the other filters.
        hits = filters.found
        candidates = [s for s in candidates if s["id"] in hits]
        filters = replace(filters, query="", found=None)
    if filters.kind_only():
        return candidates
    return [s for s in candidates if filters.matches(s)]
