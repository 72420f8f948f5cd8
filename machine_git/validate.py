"""Validating rows wherever they are: JSONL files, single JSON rows, the store."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

import pygit2

from machine_git import jsonio
from machine_git import parallel
from machine_git import rows
from machine_git import schemas
from machine_git.errors import DamagedStoreError
from machine_git.objects import CorruptObjectError
from machine_git.objects import Objects
from machine_git.store import BRANCH
from machine_git.store import Store

if TYPE_CHECKING:
    from machine_git.recover import Diagnosis


@dataclass(frozen=True)
class Finding:
    """``file:line: json-path: problem``; ``damage``: an object did not read."""

    file: str
    line: int
    path: str
    problem: str
    damage: bool = False

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.path}: {self.problem}"

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "path": self.path,
            "problem": self.problem,
        }


@dataclass
class Tally:
    """How many rows were checked, and how many objects did not read."""

    rows: int = 0
    damaged: int = 0


@dataclass
class StoreReport:
    """``validate --store``: the rows' findings and the store's diagnosis."""

    rows: int
    findings: list[Finding]
    diagnosis: Diagnosis


def check_whole_store(path: Path) -> StoreReport:
    """Every row of the newest commit, then the store itself (recover.diagnose).

    The findings name every row that did not read; the diagnosis what is
    damaged in the store, and where it can go back to.
    """
    tally = Tally()
    findings: list[Finding] = []
    verified: str | None = None
    try:
        store = Store.open(path)
        findings = list(check_store(store, tally))
        head = store.head
        if tally.damaged == 0 and head is not None:
            verified = str(head.id)  # every tree and blob just read cleanly
    except DamagedStoreError:
        pass  # the diagnosis says what is damaged
    from machine_git import recover  # validate --store alone needs it

    return StoreReport(tally.rows, findings, recover.diagnose(path, verified))


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
    objects = Objects(store.repo)
    try:
        commit = store.head
    except DamagedStoreError as e:
        tally.damaged += 1
        yield Finding(BRANCH, 0, "$", str(e), damage=True)
        return
    if commit is None:
        return  # a store being created has no commit yet
    try:
        root = objects.tree(commit.tree_id)
    except _READ_ERRORS as e:
        tally.damaged += 1
        yield Finding(BRANCH, 0, "$", f"corrupt root tree: {_why(e)}", damage=True)
        return
    if rows.ROWS_DIR not in root:
        return
    try:
        top = objects.tree(root[rows.ROWS_DIR].id)
    except _READ_ERRORS as e:
        tally.damaged += 1
        problem = f"unreadable tree object: {_why(e)}"
        yield Finding(rows.ROWS_DIR, 0, "$", problem, damage=True)
        return
    pieces = parallel.parts(top, f"{rows.ROWS_DIR}/")
    workers = parallel.jobs(objects, pieces)
    for found, count in parallel.run(objects, pieces, _check_part, workers):
        tally.rows += count
        tally.damaged += sum(1 for f in found if f.damage)
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
        problem = f"unreadable tree object: {_why(e)}"
        yield Finding(prefix.rstrip("/"), 0, "$", problem, damage=True)
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
        problem = f"missing or corrupt object: {_why(e)}"
        yield Finding(path, 0, "$", problem, damage=True)
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
