"""What the branch has been at: the branch, its reflog and the refs, as plain files.

git skips what it cannot read; recover must see it. The branch's reflog
(machine never expires it) lists every commit the branch has been at, so
the newest intact one can be found even when the branch file is garbage.
A file that cannot be read reads as empty bytes, one that is missing as None.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterable
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from machine_git.core import jsonio
from machine_git.store.damage import packed_refs
from machine_git.store.layout import BRANCH
from machine_git.store.layout import REFLOG

HEX40 = re.compile(r"^[0-9a-f]{40}$")
_ZERO = "0" * 40


@dataclass
class Step:
    """A commit the branch has been at: its id, first line and time.

    ``time`` is ISO 8601 with offset (:func:`utc_time`), None when the commit
    cannot be read.
    """

    commit: str
    summary: str
    time: str | None


class Entry(NamedTuple):
    """One line of the reflog: the branch moved from ``old`` to ``new``.

    A tuple of strings and an int, which Python's cyclic collector stops
    tracking: a year's reflog is a million of them, and as tracked objects
    every collection would walk them all again.
    """

    old: str
    new: str
    when: int
    message: str


def reflog(path: Path) -> list[Entry]:
    """The branch's reflog, oldest first; unreadable lines are skipped."""
    data = read_file(path / REFLOG) or b""
    found: list[Entry] = []
    for raw in data.split(b"\n"):
        found += _parse(raw)
    return found


# Blocks read from the end of the reflog; a year of tags is a million lines.
_BLOCK = 1 << 16


def newest_first(path: Path) -> Iterator[Entry]:
    """The reflog's entries newest first, read from the end of the file.

    The same entries as ``reversed(reflog(path))``, but only as far as the
    caller goes: a healthy store's diagnosis stops at the newest line,
    where reading a million-line reflog whole held hundreds of MB.
    """
    try:
        f = open(path / REFLOG, "rb")  # noqa: SIM115 - closed below, generator
    except OSError:
        return  # missing, or unreadable: no entries, as reflog() says
    with f:
        try:
            pos = f.seek(0, os.SEEK_END)
            tail = b""
            while pos > 0:
                step = min(_BLOCK, pos)
                pos -= step
                f.seek(pos)
                lines = (f.read(step) + tail).split(b"\n")
                tail = lines[0]  # the start of its line may be in the next block
                for raw in reversed(lines[1:]):
                    yield from reversed(_parse(raw))
            yield from reversed(_parse(tail))
        except OSError:
            return


def _parse(raw: bytes) -> list[Entry]:
    """The entries of one line of the file (str.splitlines may see several).

    A line is decoded alone: no UTF-8 sequence holds a newline byte, so this
    reads exactly what decoding the whole file and splitting it did.
    """
    found: list[Entry] = []
    for line in raw.decode("utf-8", "replace").splitlines():
        head, _, message = line.partition("\t")
        parts = head.split(" ")
        if len(parts) < 4 or not (HEX40.match(parts[0]) and HEX40.match(parts[1])):
            continue
        try:
            when = int(parts[-2])
        except ValueError:
            when = 0
        found.append(Entry(parts[0], parts[1], when, message))
    return found


def commits_been_at(branch: str | None, entries: list[Entry]) -> list[str]:
    """The commits the branch has been at, newest first, each once.

    One pass: a store used for a year has a reflog line per tag, so the
    membership test is a set's (a list's made this quadratic: 95 minutes
    at a million lines).
    """
    return list(commits_newest_first(branch, reversed(entries)))


def commits_newest_first(branch: str | None, newest: Iterable[Entry]) -> Iterator[str]:
    """:func:`commits_been_at` as the reflog is read, newest first."""
    seen: set[str] = set()
    for commit in itertools.chain((branch or "",), (e.new for e in newest)):
        if commit not in seen and commit != _ZERO and HEX40.match(commit):
            seen.add(commit)
            yield commit


def branch_value(path: Path) -> tuple[str | None, str | None]:
    """(the id the branch names, or None; the problem with it, or None)."""
    loose = read_file(path / "refs" / "heads" / "main")
    if loose is not None:
        text = loose.decode("ascii", "replace").strip()
        if HEX40.match(text):
            return text, None
        what = "is empty" if not text else "holds no commit id"
        if text.startswith("ref:"):
            what = f"points at another ref ({text[4:].strip()[:60]})"
        return None, f"the branch {BRANCH} {what}"
    packed = read_file(path / "packed-refs")
    if packed is not None:
        for oid, name in packed_refs(packed)[0]:
            if name == BRANCH:
                return oid, None
    if (path / REFLOG).is_file() and reflog(path):
        return None, f"the branch {BRANCH} is missing"
    return None, None


def ref_values(path: Path) -> dict[str, str]:
    """Every ref's name and what it holds (an id, or whatever is there)."""
    packed = read_file(path / "packed-refs") or b""
    named = {name: oid for oid, name in packed_refs(packed)[0]}
    folder = path / "refs"
    for file in sorted(folder.rglob("*")) if folder.is_dir() else []:
        if file.is_file() and not file.name.endswith(".lock"):
            text = (read_file(file) or b"").decode("ascii", "replace").strip()
            named[str(file.relative_to(path))] = text
    return named


def undone_steps(entries: Iterable[Entry], intact: str | None) -> list[Step]:
    """The branch's steps after it was last at ``intact``, newest first.

    ``entries``: the reflog newest first (:func:`newest_first`, or a list
    reversed).
    """
    after: list[Entry] = []
    for entry in entries:
        if entry.new == intact:
            break
        after.append(entry)
    return [Step(e.new, reflog_summary(e.message), utc_time(e.when)) for e in after]


def reflog_summary(message: str) -> str:
    # libgit2 writes "commit: <summary>" for a commit made on the branch.
    return message.removeprefix("commit: ").removeprefix("commit (initial): ")


def read_file(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError:
        return b""


def utc_time(timestamp: float) -> str:
    """A time as recover's JSON and records give it: ISO 8601 with offset."""
    return jsonio.timestamp(timestamp)


def shown_time(moment: str | None) -> str:
    """``2026-12-01 04:09 UTC`` for the terminal; ``?`` for an unread time."""
    if moment is None:
        return "?"
    return datetime.fromisoformat(moment).strftime("%Y-%m-%d %H:%M UTC")
