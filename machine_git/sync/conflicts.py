"""Showing a conflict: both versions of a file, and the JSON paths where they differ.

Values are shown as compact JSON, cut at a couple of hundred characters; a
deleted side and an absent field are named as such.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pygit2
from pygit2 import Oid

from machine_git.core import jsonio
from machine_git.history import diff
from machine_git.rows import rows

_SHOWN = 200  # characters of a conflicting value shown before "…"
_ABSENT = object()


@dataclass(frozen=True)
class FieldDiff:
    """One JSON path whose value differs, both values shown as compact JSON."""

    path: str
    ours: str
    theirs: str


@dataclass(frozen=True)
class Conflict:
    """A file both sides changed differently: both versions, and where they differ."""

    path: str
    row_id: str | None
    ours: Any  # the parsed file, or None if this side deleted it
    theirs: Any
    fields: list[FieldDiff]


def conflict_of(
    repo: pygit2.Repository, path: str, ours: Oid | None, theirs: Oid | None
) -> Conflict:
    mine, other = _parsed(repo, ours), _parsed(repo, theirs)
    if mine is None or other is None:
        fields = [FieldDiff("$", _show(mine, "(deleted)"), _show(other, "(deleted)"))]
    else:
        # Values equal in Python but not in bytes (1 and true): show it all.
        fields = diff_fields(mine, other) or [
            FieldDiff("$", _show(mine, ""), _show(other, ""))
        ]
    return Conflict(path, rows.id_of_path(path), mine, other, fields)


def _parsed(repo: pygit2.Repository, oid: Oid | None) -> Any:
    if oid is None:
        return None
    data = repo[oid].peel(pygit2.Blob).data
    try:
        return jsonio.loads(data)
    except jsonio.JSONDecodeError:
        return data.decode("utf-8", "replace")


def diff_fields(ours: Any, theirs: Any, where: str = "$") -> list[FieldDiff]:
    """Every JSON path at which the two versions differ (as machine diff finds them)."""
    return [
        FieldDiff(
            change.path,
            _show(_ABSENT if change.old is diff.MISSING else change.old, "(absent)"),
            _show(_ABSENT if change.new is diff.MISSING else change.new, "(absent)"),
        )
        for change in diff.diff_values(ours, theirs, where)
    ]


def _show(value: Any, missing: str) -> str:
    if value is _ABSENT or (value is None and missing == "(deleted)"):
        return missing
    text = jsonio.compact(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"
