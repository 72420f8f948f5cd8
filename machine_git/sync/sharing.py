"""Sharing a store: remotes, push, pull, and a working clone for hand edits.

Transport is the git CLI (``git -C <store> fetch|push``), so ssh keys,
credential helpers and proxies work as for any git repository, under the
rules of machine_git/sync/transport.py (allowed transports only, no prompts, a
time limit); the rest (merge base, merging rows, moving the branch) is pygit2.

What travels: the branch (rows, settings, run records, releases and their
whole history), versions (``refs/tags/*``) and run refs (``refs/runs/*``).
Each part is a module of its own: remotes.py, shared_refs.py (a name means
one commit everywhere), push.py, pull.py (fetch and check), merge.py (row by
row), conflicts.py (showing one), clone.py. The commands use them from here.
"""

from __future__ import annotations

from machine_git.sync.clone import Cloned
from machine_git.sync.clone import clone
from machine_git.sync.clone import clone_for_editing
from machine_git.sync.conflicts import Conflict
from machine_git.sync.conflicts import FieldDiff
from machine_git.sync.conflicts import diff_fields
from machine_git.sync.merge import PullResult
from machine_git.sync.merge import counts_text
from machine_git.sync.pull import PREFER
from machine_git.sync.pull import fetch
from machine_git.sync.pull import pull
from machine_git.sync.push import PushResult
from machine_git.sync.push import push
from machine_git.sync.remotes import DEFAULT_REMOTE
from machine_git.sync.remotes import Remote
from machine_git.sync.remotes import add_remote
from machine_git.sync.remotes import get_remote
from machine_git.sync.remotes import remotes

__all__ = [
    "DEFAULT_REMOTE",
    "PREFER",
    "Cloned",
    "Conflict",
    "FieldDiff",
    "PullResult",
    "PushResult",
    "Remote",
    "add_remote",
    "clone",
    "clone_for_editing",
    "counts_text",
    "diff_fields",
    "fetch",
    "get_remote",
    "pull",
    "push",
    "remotes",
]
