"""The store: one private bare git repository per project, and its one write path.

``store`` opens, reads and commits (every change is a ``change.Change``
written under the writer lock of ``locking``, O(1) objects per commit with
``trees``); ``objects`` reads objects so damage is an error, never a hang;
``bulk`` writes a large commit as one pack; ``gc`` packs; ``damage`` tells a
damaged store from an empty one; ``reflog``, ``layout`` and ``disk`` are the
files and modes around the repository; ``stats`` keeps row counts; ``settings``
the committed settings; ``parallel`` reads a whole version in processes.

May use: sessions, rows, secrets, core, bundled (pyproject.toml:
[tool.importlinter]).
"""

from __future__ import annotations
