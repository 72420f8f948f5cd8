"""Per-project settings, committed to the store as ``settings.json``."""

from __future__ import annotations

from typing import Any

from machine_git import jsonio
from machine_git.store import Store

SETTINGS = "settings.json"
DEFAULTS: dict[str, Any] = {"auto": False}


def read(store: Store) -> dict[str, Any]:
    """The settings as of the newest commit, with defaults filled in."""
    data = store.snapshot().read(SETTINGS)
    value: Any = {} if data is None else jsonio.loads(data)
    return {**DEFAULTS, **(value if isinstance(value, dict) else {})}
