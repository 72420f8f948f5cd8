"""Rows out and in: exports as fine-tuning JSONL, and imports in one commit.

``export`` writes a revision in each format (tinker, openai, dpo, traces);
``importer`` takes rows from JSONL, checked and redacted, all or nothing. The
line formats themselves are rows/formats (validate reads them too).

May use: recovery, history, store, sessions, rows, secrets, core, bundled
(pyproject.toml: [tool.importlinter]).
"""

from __future__ import annotations
