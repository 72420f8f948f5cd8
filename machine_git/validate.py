"""Validating rows wherever they are: JSONL files, single JSON rows, the store."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pygit2

from machine_git import jsonio
from machine_git import rows
from machine_git import schemas
from machine_git.store import Store


@dataclass(frozen=True)
class Finding:
    """``file:line: json-path: problem``."""

    file: str
    line: int
    path: str
    problem: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.path}: {self.problem}"


@dataclass
class Tally:
    """How many rows were checked."""

    rows: int = 0


def invalid_count(findings: list[Finding]) -> int:
    """How many rows (or lines) had at least one problem."""
    return len({(f.file, f.line) for f in findings})


def check_file(path: Path, tally: Tally) -> Iterator[Finding]:
    """Check a ``.jsonl`` file line by line, or a ``.json`` file as one row."""
    name = str(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        yield Finding(name, 0, "$", f"cannot read: {e.strerror}")
        return
    if path.suffix == ".json":
        tally.rows += 1
        yield from _check_bytes(name, 1, data)
        return
    for number, text in enumerate(data.split(b"\n"), start=1):
        if not text.strip():
            continue
        tally.rows += 1
        yield from _check_bytes(name, number, text)


def _check_bytes(name: str, line: int, data: bytes) -> Iterator[Finding]:
    try:
        value = jsonio.loads(data)
    except jsonio.JSONDecodeError as e:
        yield Finding(name, line, "$", f"not valid JSON ({e})")
        return
    for problem in schemas.row_problems(value):
        yield Finding(name, line, problem.path, problem.message)


def check_store(store: Store, tally: Tally) -> Iterator[Finding]:
    """Check every row of the newest commit: schema, id, path and byte form."""
    head = store.head
    if head is None:
        return
    try:
        top = head.tree[rows.ROWS_DIR] if rows.ROWS_DIR in head.tree else None  # noqa: SIM401
    except pygit2.GitError as e:
        yield Finding(rows.ROWS_DIR, 0, "$", f"unreadable tree: {e}")
        return
    if top is None:
        return
    yield from _walk(store.repo, store.repo[top.id], f"{rows.ROWS_DIR}/", tally)


def _walk(
    repo: pygit2.Repository, obj: pygit2.Object, prefix: str, tally: Tally
) -> Iterator[Finding]:
    try:
        tree = obj.peel(pygit2.Tree)
        entries = [(e.name or "", e.id, e.filemode) for e in tree]
    except pygit2.GitError as e:
        yield Finding(prefix.rstrip("/"), 0, "$", f"unreadable tree object: {e}")
        return
    for name, oid, mode in entries:
        path = f"{prefix}{name}"
        try:
            target = repo[oid]
        except (KeyError, ValueError, pygit2.GitError) as e:
            tally.rows += 1
            yield Finding(path, 0, "$", f"missing or corrupt object {oid}: {e}")
            continue
        if mode == pygit2.enums.FileMode.TREE:
            yield from _walk(repo, target, f"{path}/", tally)
            continue
        tally.rows += 1
        row_id = rows.id_of_path(path)
        if row_id is None:
            yield Finding(path, 1, "$", "not a row path (rows/ab/cd/<12 hex>.json)")
            continue
        data = target.peel(pygit2.Blob).data
        found = list(_check_bytes(path, 1, data))
        yield from found
        if found:
            continue
        value = jsonio.loads(data)
        if value.get("id") != row_id:
            yield Finding(
                path, 1, "$.id", f"{value.get('id')!r} does not match the file name"
            )
        elif jsonio.canonical(value) != data:
            yield Finding(path, 1, "$", "not canonical JSON (sorted keys, indent 2)")
