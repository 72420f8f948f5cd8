"""Validating rows wherever they are: JSONL files, single JSON rows, the store.

A file is checked as what it is, decided by its first line: machine rows
(``kind`` and ``id``), or the lines ``machine export`` writes and ``machine
import`` reads (``schemas/line-*.schema.json``): tinker or OpenAI chat
``messages`` lines, dpo preference pairs, or trajectory-v1 ``trajectory``
lines. Chat lines with a null ``content`` are OpenAI's (tinker's renderers
need strings); without one they are both, and checked as tinker's.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Generator
from collections.abc import Iterator
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import BinaryIO
from typing import Protocol

import pygit2

from machine_git.core import inputs
from machine_git.core import jsonio
from machine_git.core.errors import DamagedStoreError
from machine_git.core.errors import MachineError
from machine_git.core.progress import QUIET
from machine_git.core.progress import Progress
from machine_git.rows import context
from machine_git.rows import images
from machine_git.rows import rows
from machine_git.rows import schemas
from machine_git.store import parallel
from machine_git.store.objects import MAX_BLOB
from machine_git.store.objects import CorruptObjectError
from machine_git.store.objects import Objects
from machine_git.store.objects import TooLargeError
from machine_git.store.packread import PackBlobs
from machine_git.store.store import BRANCH
from machine_git.store.store import Store

if TYPE_CHECKING:
    from machine_git.recovery.diagnosis import Diagnosis


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


ROWS = "rows"
# Each format a file can be checked as (machine_git/rows/formats), and how a
# summary names one line; a file of chat lines that do not show whose they
# are is tinker's and OpenAI's alike.
FORMATS = {
    ROWS: "row",
    "tinker": "tinker/openai chat line",
    "openai": "openai chat line",
    "dpo": "dpo pair",
    "openai-dpo": "openai-dpo pair",
    "traces": "trajectory line",
    "sharegpt": "sharegpt conversation",
    "hf": "hf record",
}
_CHAT = ("tinker", "openai")


@dataclass
class Tally:
    """How many rows (and lines of other formats) were checked, each file's
    format, and how many store objects did not read."""

    rows: int = 0
    lines: dict[str, int] = field(default_factory=dict)  # format -> lines
    formats: dict[str, str] = field(default_factory=dict)  # file -> format
    damaged: int = 0


@dataclass
class StoreReport:
    """``validate --store``: the rows' findings and the store's diagnosis."""

    rows: int
    findings: list[Finding]
    diagnosis: Diagnosis


def check_whole_store(path: Path, progress: Progress = QUIET) -> StoreReport:
    """Every row of the newest commit, then the store itself (diagnosis.diagnose).

    The findings name every row that did not read; the diagnosis what is
    damaged in the store, and where it can go back to. ``progress`` counts
    the rows as they are checked.
    """
    tally = Tally()
    findings: list[Finding] = []
    verified: str | None = None
    try:
        store = Store.open(path)
        findings = list(check_store(store, tally, progress))
        head = store.head
        if tally.damaged == 0 and head is not None:
            verified = str(head.id)  # every tree and blob just read cleanly
    except DamagedStoreError:
        pass  # the diagnosis says what is damaged
    from machine_git.recovery import diagnosis  # validate --store alone needs it

    return StoreReport(tally.rows, findings, diagnosis.diagnose(path, verified))


def invalid_count(findings: list[Finding]) -> int:
    """How many rows (or lines) had at least one problem."""
    return len({(f.file, f.line) for f in findings})


def check_file(
    source: Path | BinaryIO,
    tally: Tally,
    name: str | None = None,
    fmt: str | None = None,
) -> Iterator[Finding]:
    """Check a ``.jsonl`` file line by line, or a ``.json`` file as one row.

    ``source`` is a path or a stream (standard input, always JSONL); ``name``
    is how findings name it (default: the path, or ``<stdin>``). ``fmt``
    (a key of FORMATS) is what every line must be; without it the first line
    decides (:func:`file_format`). A line of any other format is checked as
    ``machine import`` reads it: its schema, then its reader.
    """
    path = source if isinstance(source, Path) else None
    name = name or (str(path) if path is not None else inputs.STDIN_NAME)
    try:
        items = _items(source, path, fmt)
    except (inputs.Unreadable, MachineError) as e:
        yield Finding(name, 0, "$", f"cannot read: {e}")
        return
    named = fmt is not None
    fmt = fmt or file_format(items[0][1] if items else b"")
    chat = _Chat(fmt if named and fmt in _CHAT else None, named)
    tally.formats[name] = fmt
    counted = 0
    for number, text in items:
        tally.rows += 1
        counted += 1
        yield from _check_line(name, number, text, fmt, chat)
    if fmt in _CHAT:
        fmt = chat.flavor or "tinker"
        tally.formats[name] = fmt
    if fmt != ROWS:
        tally.lines[fmt] = tally.lines.get(fmt, 0) + counted


def _items(
    source: Path | BinaryIO, path: Path | None, fmt: str | None
) -> list[tuple[int, bytes]]:
    from machine_git.rows.formats import hf  # pyarrow only for a Parquet file

    if hf.is_parquet(path) and fmt == "hf":
        assert path is not None
        return hf.parquet_records(path)
    if isinstance(source, Path):
        data = inputs.read(source, inputs.JSONL_LIMIT)
    else:
        data = inputs.read_stream(source, inputs.JSONL_LIMIT)
    if path is not None and path.suffix == ".json":
        return [(1, data)]
    return list(inputs.numbered_lines(data))


@dataclass
class _Chat:
    """The flavour of a file of chat lines: named, or shown by its first line
    that only one of tinker and OpenAI allows; ``named``: by --format."""

    flavor: str | None
    named: bool


def file_format(first: bytes) -> str:
    """The format of a file (a key of FORMATS) whose first row or line is
    ``first``: rows unless that line is of another known shape."""
    from machine_git.rows import formats

    try:
        value = jsonio.loads(first)
    except jsonio.JSONDecodeError:
        return ROWS
    return formats.detect(value) or ROWS


def _check_line(
    name: str, line: int, data: bytes, fmt: str, chat: _Chat
) -> list[Finding]:
    if fmt == ROWS:
        return _parse(name, line, data)[1]
    from machine_git.rows import formats

    try:
        value = jsonio.loads(data)
    except jsonio.JSONDecodeError as e:
        return [Finding(name, line, "$", f"not valid JSON ({e})")]
    if not isinstance(value, dict):
        return [Finding(name, line, "$", "a line must be a JSON object")]
    shape = formats.detect(value)
    if fmt in _CHAT and shape in _CHAT:
        flavor = formats.chat_flavor(value)
        if flavor is not None and chat.flavor is None:
            chat.flavor = flavor
        elif flavor is not None and flavor != chat.flavor and not chat.named:
            return [_other(name, line, flavor, chat.flavor or fmt, chat.named)]
        shape = fmt = chat.flavor or fmt
    if fmt != "hf" and shape is not None and shape != fmt:
        return [_other(name, line, shape, fmt, chat.named)]
    found: list[tuple[str, str]] = []
    formats.read_line(fmt, value, found)
    return [Finding(name, line, p, m) for p, m in found]


_SHAPE_NAMES = {
    ROWS: "a machine row",
    "tinker": "a chat (messages) line",
    "openai": "an openai chat line",
    "dpo": "a dpo pair",
    "openai-dpo": "an openai-dpo pair",
    "traces": "a trajectory line",
    "sharegpt": "a sharegpt conversation",
}


def _other(name: str, line: int, shape: str, fmt: str, named: bool) -> Finding:
    why = "--format says" if named else "its first line decides"
    return Finding(
        name, line, "$", f"{_SHAPE_NAMES[shape]} in a file of {FORMATS[fmt]}s ({why})"
    )


def _parse(name: str, line: int, data: bytes) -> tuple[Any, list[Finding]]:
    """The row in ``data`` and its problems (parsed once: rows can be big)."""
    try:
        value = jsonio.loads(data)
    except jsonio.JSONDecodeError as e:
        return None, [Finding(name, line, "$", f"not valid JSON ({e})")]
    problems = schemas.row_problems(value)
    return value, [Finding(name, line, p.path, p.message) for p in problems]


def check_store(
    store: Store, tally: Tally, progress: Progress = QUIET
) -> Iterator[Finding]:
    """Check every row of the newest commit: schema, id, path and byte form.

    Damaged git objects (the commit, a tree, a row's blob) are findings too,
    never a traceback: this is the command to run when something is wrong.
    """
    objects = Objects(store.repo)
    _PACKED.clear()  # the packs as they are now, of this store only
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
    known = yield from _check_contexts(objects, root)
    # Images too: a sha256 names a context or an image, never both (one is
    # JSON, the other a PNG or JPEG), so one set holds the good ones.
    known |= yield from _check_images(objects, root)
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
    from machine_git.store import stats  # the total of the progress bar, if kept

    counted = stats.kept(store, commit)
    total = None if counted is None else sum(counted.values())
    progress.begin("checking rows", total)
    work = functools.partial(_check_part, known)
    try:
        for found, count in parallel.run(objects, pieces, work, workers):
            tally.rows += count
            tally.damaged += sum(1 for f in found if f.damage)
            progress.advance(count)
            yield from found
    finally:
        _PACKED.clear()  # unmapped: a long-lived process keeps no old packs
    progress.end()


def _check_contexts(
    objects: Objects, root: pygit2.Tree
) -> Generator[Finding, None, frozenset[str]]:
    """Findings for each ``context/`` file; the ids of the good ones."""
    return (yield from _check_stored(objects, root, context, MAX_BLOB))


def _check_images(
    objects: Objects, root: pygit2.Tree
) -> Generator[Finding, None, frozenset[str]]:
    """Findings for each ``images/`` file; the ids of the good ones."""
    return (yield from _check_stored(objects, root, images, None))


class _Stored(Protocol):
    """A folder of files kept once by their sha256 (rows.context, rows.images)."""

    def stored_ids(self, tree: Any) -> set[str]: ...
    def path_of(self, sha: str) -> str: ...
    def file_problems(self, path: str, data: bytes) -> list[str]: ...


def _check_stored(
    objects: Objects, root: pygit2.Tree, kind: _Stored, limit: int | None
) -> Generator[Finding, None, frozenset[str]]:
    good: set[str] = set()
    for sha in sorted(kind.stored_ids(root)):
        path = kind.path_of(sha)
        try:
            data = objects.blob(root[path].id, verify=True, limit=limit)
        except TooLargeError as e:
            yield Finding(path, 0, "$", str(e))
            continue
        except _READ_ERRORS as e:
            yield Finding(path, 0, "$", f"missing or corrupt object: {_why(e)}")
            continue
        problems = kind.file_problems(path, data)
        for problem in problems:
            yield Finding(path, 1, "$", problem)
        if not problems:
            good.add(sha)
    return frozenset(good)


def _check_part(
    known: frozenset[str], objects: Objects, path: str, oid: pygit2.Oid, is_tree: bool
) -> tuple[list[Finding], int]:
    """The findings of one entry of ``rows/`` and all below it, and its rows.

    ``known``: the stored contexts a row may name.
    """
    # Runs in a worker process for a large store: module level, picklable.
    tally = Tally()
    found: list[Finding] = []
    packed = _pack_blobs(objects)
    if is_tree:
        _walk(objects, packed, oid, f"{path}/", tally, known, found)
    else:
        tally.rows += 1
        _check_row(objects, packed, path, oid, known, found)
    return found, tally.rows


# The packs of the store being checked, mapped once per process (a worker
# of parallel.py maps its own); check_store drops them before and after.
_PACKED: dict[str, PackBlobs] = {}


def _pack_blobs(objects: Objects) -> PackBlobs:
    folder = os.path.join(objects.repo.path, "objects")
    found = _PACKED.get(folder)
    if found is None:
        found = _PACKED[folder] = PackBlobs(folder)
    return found


_READ_ERRORS = (KeyError, ValueError, OSError, pygit2.GitError, CorruptObjectError)


def _why(e: BaseException) -> str:
    text = str(e).strip("'\"")
    if isinstance(e, KeyError):
        return f"{text}: no such object"
    return text or type(e).__name__


def _walk(
    objects: Objects,
    packed: PackBlobs,
    tree_id: pygit2.Oid,
    prefix: str,
    tally: Tally,
    known: frozenset[str],
    found: list[Finding],
) -> None:
    try:
        # type_str, not filemode (an enum built per entry): see trees.walk_blobs.
        entries = [
            (e.name or "", e.id, e.type_str == "tree") for e in objects.tree(tree_id)
        ]
    except _READ_ERRORS as e:
        problem = f"unreadable tree object: {_why(e)}"
        found.append(Finding(prefix.rstrip("/"), 0, "$", problem, damage=True))
        return
    for name, oid, is_tree in entries:
        path = f"{prefix}{name}"
        if is_tree:
            _walk(objects, packed, oid, f"{path}/", tally, known, found)
        else:
            tally.rows += 1
            _check_row(objects, packed, path, oid, known, found)


def _check_row(
    objects: Objects,
    packed: PackBlobs,
    path: str,
    oid: pygit2.Oid,
    known: frozenset[str],
    found: list[Finding],
) -> None:
    # Run once per row: findings are appended (rare), never yielded.
    key = oid.raw
    data = packed.blob(key, MAX_BLOB)
    if data is None or _hash(data) != key:
        try:
            # The size from the object's header first: a huge blob (a remote's
            # 512 MiB of zeros) is a finding, never read into memory.
            data = objects.blob(oid, verify=True, limit=MAX_BLOB)
        except TooLargeError as e:
            found.append(Finding(path, 0, "$", str(e)))
            return
        except _READ_ERRORS as e:
            problem = f"missing or corrupt object: {_why(e)}"
            found.append(Finding(path, 0, "$", problem, damage=True))
            return
    row_id = rows.id_of_path(path)
    if row_id is None:
        problem = "not a row path (rows/ab/cd/<12 hex>.json)"
        found.append(Finding(path, 1, "$", problem))
        return
    try:
        value = _loads(data)
    except jsonio.JSONDecodeError:
        found += _parse(path, 1, data)[1]
        return
    if not _valid(value):
        found += _parse(path, 1, data)[1]  # the problems, each with its path
    elif value.get("id") != row_id:
        problem = f"{value.get('id')!r} does not match the file name"
        found.append(Finding(path, 1, "$.id", problem))
    elif jsonio.canonical(value) != data:
        problem = "not canonical JSON (sorted keys, indent 2)"
        found.append(Finding(path, 1, "$", problem))
    else:
        # the context it names is in the store (context/<sha>.json, valid)
        if value.get(context.FIELD) is not None:
            named = context.reference_problem(
                value, lambda p: context.sha_of_path(p) in known
            )
            if named is not None:
                found.append(Finding(path, 1, "$.context", named))
        # The bytes are canonical JSON, so a row with any "images" key has
        # these bytes in it; without them there is no image to look up.
        if _IMAGES_KEY in data:
            pictured = images.reference_problem(
                value, lambda p: images.sha_of_path(p) in known
            )
            if pictured is not None:
                found.append(Finding(path, 1, "$", pictured))


_IMAGES_KEY = f'"{images.FIELD}"'.encode()
_loads = jsonio.loads


def _valid(value: Any) -> bool:
    """True exactly when ``schemas.row_problems(value)`` is empty, in fewer
    calls: it runs for every row, and nearly every row is valid."""
    if not isinstance(value, dict):
        return False
    kind = value.get("kind")
    return kind in schemas.KINDS and schemas.validator(kind).is_valid(value)


def _hash(data: bytes) -> bytes:
    """The git id of a blob of ``data`` (what Objects.blob's verify checks)."""
    digest = hashlib.sha1(b"blob %d\0" % len(data), usedforsecurity=False)
    digest.update(data)
    return digest.digest()
