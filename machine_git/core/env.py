"""The ``MACHINE_*`` environment variables, read by one rule.

Unset or empty means the default; any other value must parse, or the command
stops with one line naming the variable and what it takes. Nothing is
silently ignored and nothing raises a traceback.
"""

from __future__ import annotations

import math
import os

from machine_git.core.errors import UsageError

# Every variable machine reads, and what it is for (docs/reference.md's table).
VARIABLES = {
    "MACHINE_DATA_DIR": "where stores live, an absolute path (default ~/.machine)",
    "MACHINE_JOBS": "worker processes for whole-store reads (1 = none)",
    "MACHINE_LOCK_TIMEOUT": "seconds to wait for another writer (default 60)",
    "MACHINE_TINKER_TIMEOUT": "seconds for each Tinker call (default 20)",
    "MACHINE_GIT_TIMEOUT": "seconds a push, pull or fetch may take (default 300)",
    "MACHINE_SECRETS_CACHE": "the secret engine's compiled rules (a private cache)",
    "MACHINE_SECRETS_DAEMON": "0: no warm scanner, each process loads the rules",
    "MACHINE_SECRETS_IDLE": "seconds the warm scanner waits idle (default 600)",
    "MACHINE_FORK_PARENT": "set by machine fork: the row the forked run corrects",
    "MACHINE_TEST_TINKER": "tests only: module:callable standing in for Tinker",
}


def text(name: str) -> str | None:
    """The variable's value, or None when unset or empty."""
    value = os.environ.get(name, "")
    return value if value.strip() else None


def seconds(name: str, default: float) -> float:
    """A positive number of seconds."""
    value = text(name)
    if value is None:
        return default
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number <= 0:
        raise UsageError(f"{name}={value!r}: expected a number of seconds above 0")
    return number


def count(name: str, default: int, minimum: int = 1) -> int:
    """A whole number of at least ``minimum``."""
    value = text(name)
    if value is None:
        return default
    try:
        number = int(value.strip())
    except ValueError:
        number = minimum - 1
    if number < minimum:
        raise UsageError(f"{name}={value!r}: expected a whole number >= {minimum}")
    return number
