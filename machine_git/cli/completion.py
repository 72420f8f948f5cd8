"""What the shell completes: row ids and revisions (versions, run ids).

Asked for by click's shell completion (``_MACHINE_COMPLETE=bash_complete``)
each time the user presses Tab, so it costs the answer, not the dataset: an
empty word offers the rows tagged most recently (history.recent reads about
as many commits as it lists), a prefix reads only the fan-out folders it
names (lookup.matching_ids). It never creates a store and never fails: a
word that cannot be completed gets no candidates.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from typing import NamedTuple

import pygit2

from machine_git.core.errors import MachineError
from machine_git.history import history
from machine_git.history import lookup
from machine_git.history.revs import RUN_REFS
from machine_git.history.versions import TAGS
from machine_git.rows import rows
from machine_git.store.store import Store

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Row

RECENT = 20  # rows offered for an empty word
MOST = 100  # candidates at most: a shell lists them all


class Candidate(NamedTuple):
    """One completion: the value and a few words about it (zsh, fish show them)."""

    value: str
    help: str


def row_ids(store_path: Path, prefix: str) -> list[Candidate]:
    """Row ids starting with ``prefix``, with the first words of each row."""
    store = _open(store_path)
    if store is None:
        return []
    try:
        if not prefix:
            found = history.recent(store, RECENT)
            return [Candidate(r["id"], _about(r)) for r in found]
        if not all(c in "0123456789abcdef" for c in prefix) or len(prefix) > 12:
            return []
        out: list[Candidate] = []
        for row_id in lookup.matching_ids(store, prefix)[:MOST]:
            row = store.read_row(row_id)
            out.append(Candidate(row_id, _about(row) if row is not None else ""))
        return out
    except (MachineError, pygit2.GitError, KeyError, ValueError, OSError):
        return []


def revisions(store_path: Path, prefix: str) -> list[Candidate]:
    """Version names and training run ids starting with ``prefix``."""
    store = _open(store_path)
    if store is None:
        return []
    out: list[Candidate] = []
    try:
        for ref in sorted(store.repo.references):
            for space, what in ((TAGS, "version"), (RUN_REFS, "training run")):
                name = ref.removeprefix(space)
                if ref.startswith(space) and name.startswith(prefix):
                    out.append(Candidate(name, what))
    except (pygit2.GitError, OSError):
        return []
    return out[:MOST]


def _open(store_path: Path) -> Store | None:
    if not (store_path / "HEAD").exists():
        return None  # completing never creates a store
    try:
        return Store.open(store_path)
    except MachineError:
        return None


def _about(row: Row) -> str:
    return f"{row['kind']}: {rows.first_words(row, 50)}"
