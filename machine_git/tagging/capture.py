"""Auto-capture's two inputs to a tag: is ``auto`` on, and which row a fork continues.

``machine observe --if-auto`` records a run only when the project's ``auto``
setting is on; a run forked from a row (agents/fork.py) names that row in
``MACHINE_FORK_PARENT``. Both are read on the tag path, so they live here,
below the agents package that writes them.
"""

from __future__ import annotations

from pathlib import Path

from machine_git.core import env
from machine_git.core.errors import UsageError
from machine_git.rows import rows
from machine_git.store import settings
from machine_git.store.store import Store
from machine_git.store.store import exists as store_exists

PARENT_ENV = "MACHINE_FORK_PARENT"


def auto_on(location: Path) -> bool:
    """The project's ``auto`` setting; a store that does not exist is off."""
    if not store_exists(location):
        return False
    return settings.auto(Store.open(location))


def parent_from_env() -> str | None:
    """The row a forked run continues (``MACHINE_FORK_PARENT``), if any."""
    value = env.text(PARENT_ENV)
    if value is None:
        return None
    value = value.strip()
    try:
        return rows.check_id(value)
    except UsageError:
        raise UsageError(
            f"{PARENT_ENV}={value!r} is not a row id (12 hex characters)"
        ) from None
