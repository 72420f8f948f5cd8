"""Validating rows wherever they are: JSONL files, single JSON rows, the store."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pygit2

from machine_git import inputs
from machine_git import jsonio
from machine_git import parallel
from machine_git import rows
from machine_git import schemas
from machine_git.objects import CorruptObjectError
from machine_git.objects import Objects
from machine_git.store import BRANCH
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
        data = inputs.read(path, inputs.JSONL_LIMIT)
    except inputs.Unreadable as e:
        yield Finding(name, 0, "$", f"cannot read: {e}")
        return
    if path.suffix == ".json":
        tally.rows += 1
        yield from _check_bytes(name, 1, data)
        return
    for number, text in inputs.numbered_lines(data):
        tally.rows += 1
        yield from _check_bytes(name, number, text)


def _check_bytes(name: str, line: int, data: bytes) -> Iterator[Finding]:
    yield from _parse(name, line, data)[1]


def _parse(name: str, line: int, data: bytes) -> tuple[Any, list[Finding]]:
    """The row in ``data`` and its problems (parsed once: rows can be big)."""
    try:
        value = jsonio.loads(data)
    except jsonio.JSONDecodeError as e:
        return None, [Finding(name, line, "$", f"not valid JSON ({e})")]
    problems = schemas.row_problems(value)
    return value, [Finding(name, line, p.path, p.message) for p in problems]


def check_store(store: Store, tally: Tally) -> Iterator[Finding]:
    """Check every row of the newest commit: schema, id, path and byte form.

    Damaged git objects (the commit, a tree, a row's blob) are findings too,
    never a traceback: this is the command to run when something is wrong.
    """
    repo = store.repo
    objects = Objects(repo)
    try:
        target = repo.references[BRANCH].target
    except KeyError:
        return  # a store being created has no branch yet
    except pygit2.GitError as e:
        yield Finding(BRANCH, 0, "$", f"unreadable branch: {e}")
        return
    if not isinstance(target, pygit2.Oid):
        yield Finding(BRANCH, 0, "$", f"the branch points at {target}, not a commit")
        return
    try:
        objects.check(target)
        commit = repo[target].peel(pygit2.Commit)
        root = objects.tree(commit.tree_id)
    except _READ_ERRORS as e:
        yield Finding(BRANCH, 0, "$", f"corrupt commit or root tree: {_why(e)}")
        return
    if rows.ROWS_DIR not in root:
        return
    try:
        top = objects.tree(root[rows.ROWS_DIR].id)
    except _READ_ERRORS as e:
        yield Finding(rows.ROWS_DIR, 0, "$", f"unreadable tree object: {_why(e)}")
        return
    pieces = parallel.parts(top, f"{rows.ROWS_DIR}/")
    workers = parallel.jobs(objects, pieces)
    for found, count in parallel.run(objects, pieces, _check_part, workers):
        tally.rows += count
        yield from found


def _check_part(
    objects: Objects, path: str, oid: pygit2.Oid, is_tree: bool
) -> tuple[list[Finding], int]:
    """The findings of one entry of ``rows/`` and all below it, and its rows."""
    # Runs in a worker process for a large store: module level, picklable.
    tally = Tally()
    if is_tree:
        found = list(_walk(objects, oid, f"{path}/", tally))
    else:
        found = list(_check_row(objects, path, oid, tally))
    return found, tally.rows


_READ_ERRORS = (KeyError, ValueError, OSError, pygit2.GitError, CorruptObjectError)


def _why(e: BaseException) -> str:
    text = str(e).strip("'\"")
    if isinstance(e, KeyError):
        return f"{text}: no such object"
    return text or type(e).__name__


def _walk(
    objects: Objects, tree_id: pygit2.Oid, prefix: str, tally: Tally
) -> Iterator[Finding]:
    try:
        # type_str, not filemode (an enum built per entry): see store._walk_blobs.
        entries = [
            (e.name or "", e.id, e.type_str == "tree") for e in objects.tree(tree_id)
        ]
    except _READ_ERRORS as e:
        yield Finding(prefix.rstrip("/"), 0, "$", f"unreadable tree object: {_why(e)}")
        return
    for name, oid, is_tree in entries:
        path = f"{prefix}{name}"
        if is_tree:
            yield from _walk(objects, oid, f"{path}/", tally)
        else:
            yield from _check_row(objects, path, oid, tally)


def _check_row(
    objects: Objects, path: str, oid: pygit2.Oid, tally: Tally
) -> Iterator[Finding]:
    tally.rows += 1
    try:
        data = objects.blob(oid, verify=True)
    except _READ_ERRORS as e:
        yield Finding(path, 0, "$", f"missing or corrupt object: {_why(e)}")
        return
    row_id = rows.id_of_path(path)
    if row_id is None:
        yield Finding(path, 1, "$", "not a row path (rows/ab/cd/<12 hex>.json)")
        return
    value, found = _parse(path, 1, data)
    if found:
        yield from found
    elif value.get("id") != row_id:
        yield Finding(
            path, 1, "$.id", f"{value.get('id')!r} does not match the file name"
        )
    elif jsonio.canonical(value) != data:
        yield Finding(path, 1, "$", "not canonical JSON (sorted keys, indent 2)")
