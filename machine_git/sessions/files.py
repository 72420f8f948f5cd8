"""Reading session files: JSON lines, whole JSON documents, and which are whose.

Every reader loads through here, so a missing file, an unreadable one, a
corrupt line or a line of the wrong shape is handled the same way for every
host: one-line SessionError/TurnError, or a line counted in the ReadReport.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from machine_git.core import inputs
from machine_git.core import jsonio
from machine_git.core.errors import SessionError
from machine_git.core.errors import TurnError
from machine_git.sessions import ReadReport

MAX_LINE = 64 * 1024 * 1024  # a line this long is not a session entry
_FIRST_LINE = 4 * 1024 * 1024
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def read_bytes(path: Path) -> bytes:
    """The file's bytes, or a one-line error; an empty file is a TurnError.

    Only a regular file is read (a FIFO would block, /dev/zero never end),
    up to inputs.SESSION_LIMIT; a leading UTF-8 byte-order mark is dropped.
    """
    try:
        data = inputs.read(path, inputs.SESSION_LIMIT)
    except inputs.Unreadable as e:
        if e.missing:
            raise SessionError(f"{path}: no such session file") from None
        if e.folder:
            raise SessionError(f"{path}: is a folder, not a session file") from None
        raise SessionError(f"{path}: cannot read session: {e}") from None
    if not data.strip():
        raise TurnError(f"{path}: the session file is empty")
    return data


def json_lines(data: bytes, report: ReadReport) -> list[tuple[int, dict[str, Any]]]:
    """The JSON objects of a JSONL file with their line numbers (1-based).

    Lines that do not parse, or parse to something other than an object, are
    skipped and counted as corrupt: a crash mid-write leaves a torn last line.
    """
    rows: list[tuple[int, dict[str, Any]]] = []
    for number, text in inputs.numbered_lines(data):
        try:
            if len(text) > MAX_LINE:
                raise ValueError("line too long")
            value = jsonio.loads(text)
        except ValueError:
            value = _lenient(text)
            if value is None:
                report.corrupt_lines.append(number)
                continue
            report.repaired_lines.append(number)
        if not isinstance(value, dict):
            report.corrupt_lines.append(number)
            continue
        rows.append((number, value))
    return rows


def _lenient(text: bytes) -> Any:
    """A line the agents' own parsers read but strict JSON does not, or None.

    JavaScript's JSON.parse (Pi, Claude Code) accepts a lone surrogate escape
    (``\\ud83d``, half an emoji a tool cut in two) and Node decodes invalid
    UTF-8 as U+FFFD; both become U+FFFD here, so the line is kept as the
    agent kept it rather than dropped and its turn cut short.
    """
    if len(text) > MAX_LINE:
        return None
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError:
        decoded = text.decode("utf-8", errors="replace")
    else:
        if _SURROGATE_ESCAPE.search(decoded) is None:
            return None  # broken for another reason: strict JSON was right
    try:
        value = json.loads(decoded)
    except (ValueError, RecursionError):
        return None
    return _replace_surrogates(value)


def _replace_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_replace_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {
            _replace_surrogates(k): _replace_surrogates(v) for k, v in value.items()
        }
    return value


def load_jsonl(
    path: Path,
    report: ReadReport,
    key: str | None = None,
    known: frozenset[str] = frozenset(),
) -> list[tuple[int, dict[str, Any]]]:
    """:func:`json_lines` of the file at ``path``; no object at all is an error.

    With ``key`` (the field that names a line's kind), only the lines of a
    ``known`` kind are kept: a line without a string there is corrupt, one of
    another kind is counted as of unknown type.
    """
    rows = json_lines(read_bytes(path), report)
    if not rows:
        raise SessionError(f"{path}: no readable line in the session file")
    if key is None:
        return rows
    kept: list[tuple[int, dict[str, Any]]] = []
    for number, row in rows:
        kind = row.get(key)
        if not isinstance(kind, str):
            report.corrupt_lines.append(number)
        elif kind not in known:
            report.unknown_types.append((number, kind))
        else:
            kept.append((number, row))
    return kept


def load_json(path: Path) -> Any:
    """The file parsed as one JSON document, or a one-line error."""
    data = read_bytes(path)
    try:
        return jsonio.loads(data)
    except ValueError as e:
        raise SessionError(f"{path}: not valid JSON ({e})") from None


def first_object(path: Path) -> dict[str, Any] | None:
    """The first line of a JSONL file parsed, if it is an object."""
    try:
        with inputs.open_regular(path) as f:
            first = f.readline(_FIRST_LINE)
        value = jsonio.loads(first.removeprefix(inputs.BOM))
    except (OSError, ValueError, inputs.Unreadable):
        return None
    return value if isinstance(value, dict) else None


def head_objects(path: Path, lines: int = 20) -> Iterator[dict[str, Any]]:
    """The objects among the first ``lines`` lines of a JSONL file (none if
    it cannot be read): where a session writes down its working directory."""
    try:
        with path.open("rb") as f:
            for _ in range(lines):
                line = f.readline(MAX_LINE)
                if not line:
                    return
                try:
                    value = jsonio.loads(line)
                except ValueError:
                    continue
                if isinstance(value, dict):
                    yield value
    except OSError:
        return


def inside(cwd: Any, project: Path) -> bool:
    """True if the folder ``cwd`` is ``project`` or inside it."""
    if not isinstance(cwd, str) or not cwd:
        return False
    folder, root = _resolved(cwd), _resolved(str(project))
    return folder is not None and root is not None and folder.is_relative_to(root)


@functools.lru_cache(maxsize=1024)
def _resolved(path: str) -> Path | None:
    # Cached: a thousand sessions of a few projects name a few folders, and
    # resolving (symlinks) is most of the cost of finding a session.
    try:
        return Path(path).resolve()
    except (OSError, ValueError):
        return None


def mtime(path: Path) -> float | None:
    """When the file was last written, or None if it is gone."""
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def newest(paths: Iterable[Path]) -> Path | None:
    """The most recently written of ``paths`` (None if there is none)."""
    best: tuple[float, str] | None = None
    for path in paths:
        stamp = mtime(path)
        if stamp is not None and (best is None or (stamp, str(path)) > best):
            best = (stamp, str(path))
    return Path(best[1]) if best else None


def check_whole(path: Path, report: ReadReport, first: int, last: int) -> None:
    """Refuse a turn from line ``first`` to ``last`` with an unreadable line inside."""
    inside = [n for n in report.corrupt_lines if first < n < last]
    if inside:
        raise TurnError(cut_short(path, report, max(inside) + 1))


def cut_short(path: Path, report: ReadReport, line: int) -> str:
    """Why a turn is refused: an unreadable line (before ``line``) stands in it.

    A turn that runs through a line that cannot be read is refused, naming
    the line, rather than read from after it as if it began there.
    """
    lines = sorted(report.corrupt_lines)
    before = [n for n in lines if n < line] or lines
    shown = ", ".join(str(n) for n in before[:5])
    noun = "line" if len(before) == 1 else "lines"
    return (
        f"{path}: {noun} {shown} cannot be read and the turn runs through it "
        "(refusing the turn rather than cutting it short)"
    )


def entries_until(ids: list[str], entry: str | None, path: Path) -> int:
    """How many rows to keep so the turn ends at ``entry`` (all if None)."""
    if entry is None:
        return len(ids)
    for index in range(len(ids) - 1, -1, -1):
        if ids[index] == entry:
            return index + 1
    raise SessionError(f"{path}: no entry {entry!r} in this session")
