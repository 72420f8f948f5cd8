"""What Pi's footer reads: the row counts cache, kept fresh by every write.

The Pi extension shows the project's row counts after each turn and each tag
without starting a process: it reads ``<store>/machine/stats.json`` (written
by ``stats.counts``: ``{"commit": ..., "counts": {...}}``) and compares its
commit with the store's branch. So every command that commits calls
``refresh`` afterwards, which brings the cache up to the new head by diffing
the one commit just made. A store without a cache has no reader yet: refresh
then does nothing, so a write never pays for counting a large store (the
extension's first ``machine data --json`` builds the cache).
"""

from __future__ import annotations

from pathlib import Path

from machine_git.store import WORK
from machine_git.store import Store

CACHE_FILE = "stats.json"  # the name stats.py writes


def cache_path(store: Store) -> Path:
    """Where the counts cache of ``store`` lives."""
    return store.path / WORK / CACHE_FILE


def refresh(store: Store) -> None:
    """Bring an existing counts cache up to the newest commit (cheap: one diff)."""
    if cache_path(store).is_file():
        from machine_git import stats  # only then: machine good stays lean

        stats.counts(store)
