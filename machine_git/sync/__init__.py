"""Sharing a store: remotes, push, pull, clones, and the hooks that guard them.

``remotes`` and ``transport`` (git for the network, allowed transports
only); ``push`` and ``pull`` (fetch, check, then ``merge`` row by row, showing
``conflicts``); ``shared_refs`` (versions and run refs travel with the
branch); ``clone`` (a working clone for hand edits); ``hooks`` (what the
store's pre-receive and a clone's pre-commit check); ``restore`` (a damaged
store from a remote); ``sharing`` gathers what the commands use.

May use: recovery, history, store, sessions, rows, secrets, core, bundled
(pyproject.toml: [tool.importlinter]).
"""

from __future__ import annotations
