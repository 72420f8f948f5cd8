"""Pins: the commit that names a version of the data."""

from __future__ import annotations

import pygit2
from pygit2 import Commit

from machine_git.rows import rows


def data_commit(commit: Commit) -> Commit:
    """The commit at or before ``commit`` where its rows last changed.

    Run records, eval sets and settings are commits too; pinning the commit
    that made the rows what they are means "train on HEAD" names the same
    data before and after ``machine train sft`` commits its record.
    """
    current = commit
    while current.parents:
        parent = current.parents[0]
        if _rows_tree(parent) != _rows_tree(current):
            break
        current = parent
    return current


def _rows_tree(commit: Commit) -> pygit2.Oid | None:
    try:
        return commit.tree[rows.ROWS_DIR].id
    except KeyError:
        return None
