"""``machine review``: a local web application over the project's store.

The Queue labels observed runs with the keyboard, Browse filters and searches
every row, Diff compares two revisions side by side, and the Runs, Releases and
Versions pages show training curves, gates and the dataset's composition. Every
action is the library call the CLI makes (``observe.label``, ``edits.rewrite``,
``edits.undo``), so it is one commit like any other.

It is an optional extra (``ui``, machine_git/core/extras.py): nothing outside
this package imports it, and this module imports none of the web stack, so
:func:`require` can say in one line what is missing.

May use: agents, releases, train, tagging, export, sync, recovery, history,
store, sessions, rows, secrets, core, bundled (pyproject.toml:
[tool.importlinter]).
"""

from __future__ import annotations

import importlib.util

from machine_git.core.errors import ReviewStackMissingError
from machine_git.core.extras import install_hint

INSTALL = install_hint("ui")
MODULES = ("starlette", "jinja2", "uvicorn")


def require() -> None:
    """Check the web stack is installed, or say in one line how to install it."""
    for name in MODULES:
        if importlib.util.find_spec(name) is None:
            raise ReviewStackMissingError(
                f"machine review needs its web stack ({name} is missing): {INSTALL}"
            )
