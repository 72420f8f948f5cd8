"""Rows: what one tag writes, its types, its context and its schemas.

``rowtypes`` gives rows and trajectory records their types; ``rows`` their
ids, paths and building; ``context`` the system prompt and tools a turn ran
with, stored once by hash; ``schemas`` the JSON Schemas every row is checked
against before it is written; ``formats`` the line formats rows are exported
and imported as. Pure data: nothing here opens a store.

May use: secrets, core, bundled (pyproject.toml: [tool.importlinter]).
"""

from __future__ import annotations
