"""The git hooks' entry point: ``python -m machine_git.hooks <hook>``.

Like entry.py for ``machine``, this module sits above every package: the
checks live in sync/hooks.py (rows, secrets, refs) and releases/audit.py
(release records), and only here are they put together, so the sync layer
never imports the releases layer above it. Stores made by earlier versions
run their hooks by this module's name, so it keeps it. It also serves the
``machine-validate`` and ``machine-secrets`` console scripts, which other
repositories use as pre-commit hooks.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pygit2
from pygit2 import Commit

from machine_git.sync import hooks
from machine_git.sync.hooks import secrets_main
from machine_git.sync.hooks import validate_main

__all__ = ["audit", "main", "secrets_main", "validate_main"]


def audit(
    repo: pygit2.Repository, commits: list[Commit], git_dir: Path
) -> Sequence[tuple[Commit, Sequence[object]]]:
    """The releases layer's check of pushed release records."""
    # pydantic and the release modules load only when a push touches releases/.
    from machine_git.releases import audit as releases_audit

    return releases_audit.pushed(repo, commits, git_dir)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one installed hook: ``pre-receive``, ``post-receive`` or ``pre-commit``."""
    return hooks.main(argv, audit=audit)


if __name__ == "__main__":
    raise SystemExit(main())
