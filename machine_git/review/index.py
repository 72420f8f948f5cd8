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
from functools import cached_property
from typing import TYPE_CHECKING
from typing import Any
from typing import TypedDict
from typing import cast

from pygit2 import Commit
from pygit2 import Tree

from machine_git.core import jsonio
from machine_git.core.errors import UsageError
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

    @cached_property
    def ordered(self) -> list[Summary]:
        """Newest first (by when the row was made), computed once per index."""
        return sorted(
            self.rows.values(), key=lambda s: (s["created_at"], s["id"]), reverse=True
        )

    def tools(self) -> list[str]:
        return sorted({t for s in self.rows.values() for t in s["tools"]})

    def hosts(self) -> list[str]:
        return sorted({s["host"] for s in self.rows.values() if s["host"]})


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


def _build(store: Store, commit: Commit, base: Index | None) -> Index:
    repo = store.repo
    objects = Objects(repo)
    summaries: dict[str, Summary] = dict(base.rows) if base is not None else {}
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
        try:
            row = jsonio.loads(objects.blob(new))
        except ValueError:
            row = {"id": row_id, "kind": "unreadable"}
        if isinstance(row, dict):
            summaries[row_id] = summarize(row, str(new))
    return Index(str(commit.id), summaries)


def _rows_tree(store: Store, commit: Any) -> Tree | None:
    if commit is None:
        return None
    return store.rows_tree(commit.peel(Commit))


# -- filters -------------------------------------------------------------------


@dataclass(frozen=True)
class Filters:
    """Browse's filters; empty strings mean "any"."""

    kind: str = ""
    host: str = ""
    tool: str = ""
    note: str = ""
    query: str = ""
    errors: bool = False
    since: str = ""
    until: str = ""

    def __post_init__(self) -> None:
        for name, value in (("from", self.since), ("to", self.until)):
            if value and not _DATE.match(value):
                raise UsageError(f"bad {name} date {value!r}: expected YYYY-MM-DD")

    def matches(self, s: Summary) -> bool:
        words = self.query.casefold().split()
        return (
            (not self.kind or s["kind"] == self.kind)
            and (not self.host or s["host"] == self.host)
            and (not self.tool or self.tool in s["tools"])
            and (not self.errors or s["error"])
            and (not self.note or self.note.casefold() in s["note"].casefold())
            and (not self.since or s["created_at"][:10] >= self.since)
            and (not self.until or s["created_at"][:10] <= self.until)
            and all(w in s["text"] for w in words)
        )


def select(index: Index, filters: Filters) -> list[Summary]:
    """The rows of ``index`` that pass ``filters``, newest first."""
    return [s for s in index.ordered if filters.matches(s)]
