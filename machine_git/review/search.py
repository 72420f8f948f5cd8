"""Full-text search over every row: an SQLite FTS5 index in the store's cache folder.

Each row is one document with a column per part of a conversation: the user's
text, the answers (and the original answer of a rewrite), the thinking, tool
names, tool-call arguments, tool results and the note. A query is words
(each must appear), ``"quoted phrases"`` and field filters (``tool:bash``,
``args:"ls /tmp"``, ``result:error``, ``user:``, ``answer:``, ``thinking:``,
``note:``); it never reaches FTS5's own syntax, so no input is an error.

The index lives in ``<store>/machine/search.sqlite3`` (outside git, private
to the user) and records the commit it was built at. Brought up to the head,
it reads only the rows that differ between the two trees (as the row counts
and the in-memory summaries do), so a new tag costs one row; a missing or
unreadable file is built again from every row.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import threading
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pygit2
from pygit2 import Commit

from machine_git.core import jsonio
from machine_git.rows import rows
from machine_git.store.layout import WORK
from machine_git.store.objects import Objects
from machine_git.store.store import Store
from machine_git.store.treediff import changed_blobs

FILE = "search.sqlite3"
FIELDS = ("user", "answer", "thinking", "tool", "args", "result", "note")
_VERSION = "2"  # of the index's layout: another one is rebuilt
_TERM = re.compile(r'(?:(\w+):)?(?:"([^"]*)"?|(\S+))')
_WORD = re.compile(r"\w+")
_OPEN, _CLOSE = "\x02", "\x03"  # around matched words in a snippet
_BATCH = 2000  # rows per transaction while building
_INSERT = (
    f"INSERT INTO text (rowid, {', '.join(FIELDS)}) VALUES (?{', ?' * len(FIELDS)})"
)


def documents(row: Mapping[str, Any]) -> dict[str, str]:
    """The text of each field of one stored row (read as it is)."""
    parts: dict[str, list[str]] = {f: [] for f in FIELDS}
    items = row.get("trajectory") or row.get("messages") or []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict):
            _collect(item, parts)
    original = row.get("original_answer")
    if isinstance(original, str):
        parts["answer"].append(original)
    note = row.get("note")
    if isinstance(note, str):
        parts["note"].append(note)
    return {f: "\n".join(t for t in v if t) for f, v in parts.items()}


def _collect(item: Mapping[str, Any], parts: dict[str, list[str]]) -> None:
    role = item.get("role")
    content = item.get("content")
    text = content if isinstance(content, str) else ""
    if role == "user":
        parts["user"].append(text)
    elif role == "tool":
        parts["result"].append(text)
    elif role == "reasoning":
        parts["thinking"].append(text)
    elif role == "assistant":
        parts["answer"].append(text)
        for key in ("reasoning_content", "thinking"):
            if isinstance(item.get(key), str):
                parts["thinking"].append(item[key])
    for call in item.get("tool_calls") or []:
        if not isinstance(call, dict):
            continue
        function = call.get("function")
        function = function if isinstance(function, dict) else {}
        name = call.get("name") or function.get("name")
        if isinstance(name, str):
            parts["tool"].append(name)
        args = call.get("args") if "args" in call else function.get("arguments")
        parts["args"].append(args if isinstance(args, str) else _json(args))


def _json(value: Any) -> str:
    return "" if value is None else jsonio.compact(value)


def match_expression(query: str) -> str:
    """The FTS5 expression for a user's query ("" if it holds no words).

    Every term becomes a quoted FTS5 string (its quotes doubled), so the
    user's text is never read as FTS5 syntax; a field filter names a column.
    """
    terms: list[str] = []
    for field, phrase, word in _TERM.findall(query):
        text = phrase if phrase else word
        if field and field not in FIELDS:  # "http://x" or "a:b" is just text
            text = f"{field}:{text}"
            field = ""
        if not _WORD.search(text):
            continue
        quoted = '"' + text.replace('"', '""') + '"'
        terms.append(f"{field} : {quoted}" if field else quoted)
    return " AND ".join(terms)


class Index:
    """The search index of one store, shared by the server's threads."""

    def __init__(self, store_path: Path) -> None:
        self.path = store_path / WORK / FILE
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def update(self, store: Store, head: Commit) -> int:
        """Bring the index to ``head``; how many rows it read."""
        with self._lock:
            db = self._open()
            built = _meta(db, "commit")
            old = _commit(store, built) if built else None
            if built == str(head.id):
                return 0
            if old is None and built:
                _clear(db)  # its commit is gone: start again
            return _index_changes(db, store, old, head)

    def ids(self, query: str) -> set[str]:
        """The ids of the rows matching ``query`` (no snippets: the cheap form)."""
        expression = match_expression(query)
        if not expression:
            return set()
        with self._lock:
            db = self._open()
            found = db.execute(
                "SELECT rowid FROM text WHERE text MATCH ?", (expression,)
            ).fetchall()
        return {_row_id(r[0]) for r in found}

    def snippets(
        self, query: str, ids: Iterable[str]
    ) -> dict[str, list[tuple[bool, str]]]:
        """A snippet of the match in each of the rows ``ids`` (a page of them).

        One lookup by rowid each: the match is read for those rows only, not
        for every row it holds (a common word is in most of them).
        """
        expression = match_expression(query)
        if not expression:
            return {}
        out: dict[str, list[tuple[bool, str]]] = {}
        with self._lock:
            db = self._open()
            for row_id in ids:
                found = db.execute(
                    "SELECT snippet(text, -1, ?, ?, '…', 12) FROM text "
                    "WHERE text MATCH ? AND rowid = ?",
                    (_OPEN, _CLOSE, expression, _rowid(row_id)),
                ).fetchone()
                if found is not None:
                    out[row_id] = _runs(found[0])
        return out

    def _open(self) -> sqlite3.Connection:
        if self._db is not None:
            return self._db
        try:
            db = _connect(self.path)
            if _meta(db, "version") != _VERSION:
                raise sqlite3.DatabaseError("another layout")
        except sqlite3.DatabaseError:
            # Unreadable, or of another layout: it is derived, build it again.
            with contextlib.suppress(OSError):
                self.path.unlink()
            db = _connect(self.path)
            _create(db)
        self._db = db
        return db


def _connect(path: Path) -> sqlite3.Connection:
    old = os.umask(0o077)  # the index holds the rows' text: private, as the store
    try:
        db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    finally:
        os.umask(old)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    found = db.execute(
        "SELECT count(*) FROM sqlite_master WHERE name IN ('text', 'meta')"
    ).fetchone()[0]
    if found == 0:
        _create(db)
    elif found != 2:
        raise sqlite3.DatabaseError("a partial index")
    return db


def _create(db: sqlite3.Connection) -> None:
    db.executescript(
        f"""
        DROP TABLE IF EXISTS text; DROP TABLE IF EXISTS docs; DROP TABLE IF EXISTS meta;
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE VIRTUAL TABLE text USING fts5({", ".join(FIELDS)},
            tokenize = 'unicode61 remove_diacritics 2');
        INSERT INTO meta VALUES ('version', '{_VERSION}');
        """
    )


def _clear(db: sqlite3.Connection) -> None:
    db.execute("BEGIN")
    db.execute("DELETE FROM text")
    db.execute("DELETE FROM meta WHERE key = 'commit'")
    db.execute("COMMIT")


def _meta(db: sqlite3.Connection, key: str) -> str | None:
    found = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if found is None else str(found[0])


def _commit(store: Store, oid: str) -> Commit | None:
    try:
        found = store.repo.get(oid)
    except (ValueError, pygit2.GitError):
        return None
    return found if isinstance(found, Commit) else None


def _index_changes(
    db: sqlite3.Connection, store: Store, old: Commit | None, head: Commit
) -> int:
    """Index the rows that differ between ``old`` (None: none) and ``head``."""
    objects = Objects(store.repo)
    old_tree = store.rows_tree(old) if old is not None else None
    changes = changed_blobs(
        store.repo, old_tree, store.rows_tree(head), f"{rows.ROWS_DIR}/", objects
    )
    read = 0
    db.execute("BEGIN")
    try:
        for count, (row_id, data) in enumerate(_rows_of(changes, objects), start=1):
            _forget(db, row_id)
            if data is not None:
                _add(db, row_id, data)
                read += 1
            if count % _BATCH == 0:  # a long build keeps its work as it goes
                db.execute("COMMIT")
                db.execute("BEGIN")
        db.execute("INSERT OR REPLACE INTO meta VALUES ('commit', ?)", (str(head.id),))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return read


def _rows_of(
    changes: Iterable[tuple[str, Any, Any]], objects: Objects
) -> Iterator[tuple[str, bytes | None]]:
    for path, _, new in changes:
        row_id = rows.id_of_path(path)
        if row_id is not None:
            yield row_id, None if new is None else objects.blob(new)


def _rowid(row_id: str) -> int:
    """A row's id (12 hex digits: 48 bits) is its document's rowid."""
    return int(row_id, 16)


def _row_id(rowid: int) -> str:
    return f"{rowid:012x}"


def _forget(db: sqlite3.Connection, row_id: str) -> None:
    db.execute("DELETE FROM text WHERE rowid = ?", (_rowid(row_id),))


def _add(db: sqlite3.Connection, row_id: str, data: bytes) -> None:
    try:
        row = jsonio.loads(data)
    except ValueError:
        return  # a blob that is not JSON has no text to find
    if not isinstance(row, dict):
        return
    fields = documents(row)
    db.execute(_INSERT, (_rowid(row_id), *(fields[f] for f in FIELDS)))


def _runs(snippet: str) -> list[tuple[bool, str]]:
    """A snippet as runs of plain and matched text (shown as text, marked)."""
    out: list[tuple[bool, str]] = []
    for part in re.split(f"({_OPEN}[^{_CLOSE}]*{_CLOSE})", snippet):
        if not part:
            continue
        if part.startswith(_OPEN):
            out.append((True, part[1:-1]))
        else:
            out.append((False, part))
    return out
