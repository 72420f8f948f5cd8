"""The dataset's history: naming versions, walking commits, comparing them.

``revs`` turns what a user types (a version, ``HEAD~2``, a date) into a
commit; ``history`` walks commits for log, show and what entered when;
``diff`` compares versions row by row and field by field; ``versions`` names
them with annotated tags; ``lookup`` finds rows by id or prefix.

May use: store, sessions, rows, secrets, core, bundled (pyproject.toml:
[tool.importlinter]).
"""

from __future__ import annotations
