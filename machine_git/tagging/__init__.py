"""The tag path: a turn of an agent's session becomes a row, then a commit.

``tagging.tag`` is ``machine good``, ``bad`` and ``observe``; ``tagcommand``
parses them without click; ``turns`` makes a turn one row; ``edits`` changes
rows afterwards (rewrite, edit, rm, move, undo); ``outfile`` writes a row to
``--out`` instead; ``capture`` reads auto-capture's settings.

May use: recovery, history, store, sessions, rows, secrets, core, bundled
(pyproject.toml: [tool.importlinter]).
"""

from __future__ import annotations
