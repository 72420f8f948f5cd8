"""Where things are in a store: its one branch, the reflog, machine's own files.

A store is a bare git repository; these names are shared by every module that
reads or writes one, including the ones that must work when git cannot open
it (damage.py, recover.py and the modules it uses).
"""

from __future__ import annotations

BRANCH = "refs/heads/main"
REFLOG = "logs/refs/heads/main"  # the branch's reflog, inside the store
WORK = "machine"  # our own files inside the bare repository (git ignores them)
# In WORK, while a bulk write's pack is in place and the branch has not
# moved to its commit yet: bulk-<pack name> (bulk.settle).
BULK_MARK = "bulk-"
LAYOUT = 1
MARKER = "machine.json"
HEAD_TEXT = b"ref: refs/heads/main\n"  # the only HEAD a machine store has
IDENTITY = ("machine", "machine@localhost")  # the committer, and the default author
