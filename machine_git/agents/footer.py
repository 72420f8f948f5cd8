"""What Pi's footer reads: the row counts cache, which the store keeps itself.

The Pi extension shows the project's row counts after each turn and each tag
without starting a process: it reads ``<store>/machine/stats.json`` (written
by ``stats.counts``: ``{"commit": ..., "counts": {...}, "check": ...}``) and
compares its commit with the store's branch. Every commit brings the cache
up to the new head inside the store's write (``Store._after_commit`` calls
``stats.follow``), so no command has to remember it. A store without a cache
has no reader yet and is left without one, so a write never pays for
counting a large store (the extension's first ``machine data --json`` builds
the cache).
"""

from __future__ import annotations

from pathlib import Path

from machine_git.store.stats import CACHE_FILE
from machine_git.store.store import WORK
from machine_git.store.store import Store

__all__ = ["CACHE_FILE", "cache_path"]


def cache_path(store: Store) -> Path:
    """Where the counts cache of ``store`` lives."""
    return store.path / WORK / CACHE_FILE
