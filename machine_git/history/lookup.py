"""Finding rows by id or unique id prefix, without reading the whole store.

The fan-out is by id, so a prefix of four or more characters names one leaf
folder (``rows/ab/cd/``); shorter prefixes scan only the folders they match.
"""

from __future__ import annotations

import pygit2
from pygit2 import Commit
from pygit2 import Tree
from pygit2.enums import FileMode

from machine_git.core.errors import AmbiguousIdError
from machine_git.core.errors import RowNotFoundError
from machine_git.rows import rows
from machine_git.store.store import Store


def matching_ids(store: Store, prefix: str, commit: Commit | None = None) -> list[str]:
    """Every row id at ``commit`` (default: newest) that starts with ``prefix``."""
    rows.check_prefix(prefix)
    snap = store.snapshot(commit)
    if snap.tree is None or rows.ROWS_DIR not in snap.tree:
        return []
    top = store.repo[snap.tree[rows.ROWS_DIR].id].peel(Tree)
    found: list[str] = []
    for first in _subtrees(store.repo, top, prefix[0:2]):
        for second in _subtrees(store.repo, first, prefix[2:4]):
            found.extend(
                e.name[:-5]
                for e in second
                if e.name and e.name.endswith(".json") and e.name.startswith(prefix)
            )
    return sorted(found)


def resolve_id(store: Store, prefix: str, commit: Commit | None = None) -> str:
    """The one row id ``prefix`` names; one line if none or several do."""
    found = matching_ids(store, prefix, commit)
    if not found:
        raise RowNotFoundError(f"no row {prefix!r} in the store")
    if len(found) > 1:
        shown = ", ".join(found[:10]) + (", ..." if len(found) > 10 else "")
        raise AmbiguousIdError(
            f"row id {prefix!r} is ambiguous: {len(found)} rows match ({shown})"
        )
    return found[0]


def _subtrees(repo: pygit2.Repository, tree: Tree, part: str) -> list[Tree]:
    if len(part) == 2:
        if part not in tree:
            return []
        entry = tree[part]
        return [repo[entry.id].peel(Tree)] if entry.filemode == FileMode.TREE else []
    return [
        repo[e.id].peel(Tree)
        for e in tree
        if e.filemode == FileMode.TREE and (e.name or "").startswith(part)
    ]
