"""Per-project settings, committed to the store as ``settings.json``.

A setting is part of the dataset's history (``machine log`` shows when
auto-capture was turned on), so it is a commit like any other change.
"""

from __future__ import annotations

from typing import Any

from machine_git import jsonio
from machine_git.store import Change
from machine_git.store import Snapshot
from machine_git.store import Store

SETTINGS = "settings.json"
DEFAULTS: dict[str, Any] = {"auto": False}


def read(store: Store) -> dict[str, Any]:
    """The settings as of the newest commit, with defaults filled in."""
    return {**DEFAULTS, **_stored(store.snapshot())}


def _stored(snap: Snapshot) -> dict[str, Any]:
    data = snap.read(SETTINGS)
    try:
        value: Any = {} if data is None else jsonio.loads(data)
    except ValueError:
        value = {}
    return value if isinstance(value, dict) else {}


def write(store: Store, key: str, value: Any) -> str | None:
    """Set one setting as a commit; returns the commit id, or None if unchanged."""

    def plan(snap: Snapshot) -> Change | None:
        current = _stored(snap)
        if key in current and current[key] == value:
            return None
        if key not in current and DEFAULTS.get(key, object()) == value:
            return None
        current[key] = value
        return Change(
            summary=f"set {key} = {jsonio.compact(value)}",
            files={SETTINGS: jsonio.canonical(current)},
            trailers={"Action": "setting", "Setting": key},
        )

    oid = store.write(plan)
    return None if oid is None else str(oid)
