"""Is the store whole and valid, and getting it back when it is not.

``validate`` checks rows wherever they are (files, the store); ``diagnosis``
finds damage and what going back costs, ``intact`` which commits read whole;
``recover`` takes the step (``repair``), setting damaged objects aside
(``salvage``) and deleting nothing. Restoring from a remote is sync's.

May use: history, store, sessions, rows, secrets, core, bundled (pyproject.toml:
[tool.importlinter]).
"""

from __future__ import annotations
