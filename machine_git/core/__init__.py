"""What every room may use: errors, environment, paths, bytes and output.

The exceptions and their exit codes (``errors``), ``MACHINE_*`` variables
(``env``), where a project's store lives (``paths``), canonical JSON
(``jsonio``), bounded reads of user files (``inputs``), progress and terminal
tables, git's own progress bars, and the pydantic record loader (``models``).
Nothing here knows what a row or a store is.

May use: nothing of machine's (pyproject.toml: [tool.importlinter]).
"""

from __future__ import annotations
