"""Training on Tinker, pinned to dataset commits (``machine train``).

Light modules (safe on any start-up path): ``stack``, ``config``, ``pins``,
``runs``, ``evals``, ``preflight``, ``service`` (the one place a Tinker
client is constructed). Heavy ones import torch, tinker and tinker-cookbook at
the top and are imported only inside the train commands, after
:func:`machine_git.train.stack.require`: ``rendering``, ``datasets``,
``validate``, ``loop``, ``trainer``, ``sampling``.

May use: tagging, export, sync, recovery, history, store, sessions, rows,
secrets, core, bundled (pyproject.toml: [tool.importlinter]).
"""

from __future__ import annotations
