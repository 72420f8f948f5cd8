"""Restoring a damaged store from a remote, when nothing local is intact enough.

:func:`restore` fetches the remote's branch into a fresh repository inside
the store's folder (nothing local is trusted while fetching), checks that it
reads whole, and adopts it as a recover step (repair.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pygit2
from pygit2 import Oid

from machine_git.core.errors import RemoteError
from machine_git.recovery.diagnosis import diagnose
from machine_git.recovery.intact import Checker
from machine_git.recovery.intact import lost_rows
from machine_git.recovery.intact import step_of
from machine_git.recovery.repair import Recovery
from machine_git.recovery.repair import apply
from machine_git.recovery.salvage import salvaged_remotes
from machine_git.store.layout import WORK
from machine_git.store.locking import writer_lock
from machine_git.store.objects import guard
from machine_git.store.objects import open_repository
from machine_git.store.reflog import Step
from machine_git.store.reflog import commits_been_at
from machine_git.store.reflog import read_file
from machine_git.store.reflog import reflog
from machine_git.store.reflog import reflog_summary
from machine_git.store.reflog import utc_time
from machine_git.store.store import Store


def restore(path: Path, name: str, confirm: bool = False) -> Recovery:
    """Adopt remote ``name``'s branch: fetch it apart, check it, then commit it."""
    found = diagnose(path, thorough=True)
    if not found.damaged:
        return Recovery(found)  # nothing to restore: pull brings their rows
    url = remote_url(path, name)
    with _fetched(path, name, url) as (fetched, head):
        found.remote = name
        checker = Checker(_with_store_objects(fetched, path), None)
        why = checker.content(head) or checker.history(head)
        if why is not None:
            raise RemoteError(f"{name} ({url}) is damaged too: {why}; nothing changed")
        found.intact = step_of(checker, head, [])
        found.parent = head
        current = found.branch or next(iter(commits_been_at(None, reflog(path))), None)
        found.lost, found.unlisted = [], []
        if current is not None and current != head:
            found.lost, found.unlisted = lost_rows(checker.objects, head, current)
        found.undone = [
            Step(e.new, reflog_summary(e.message), utc_time(e.when))
            for e in reversed(reflog(path))
            if Oid(hex=e.new) not in checker.whole_history
        ]
        if not confirm:
            return Recovery(found)
        with writer_lock(path):
            done = apply(path, found, head, head, fetched=fetched)
            _tracking(path, name, head)
            return done


def remote_url(path: Path, name: str) -> str:
    """The URL of remote ``name``, from the config or what is left of it."""
    try:
        url = pygit2.Config(str(path / "config"))[f"remote.{name}.url"]
    except KeyError:
        url = None
    except (pygit2.GitError, OSError):
        url = salvaged_remotes(
            (read_file(path / "config") or b"").decode("utf-8", "replace")
        ).get(name)
    if not url:
        raise RemoteError(
            f"no remote {name!r} (add one with 'machine remote add {name} URL')"
        )
    return str(url)


@contextlib.contextmanager
def _fetched(path: Path, name: str, url: str) -> Iterator[tuple[Path, str]]:
    """A fresh repository in the store's folder holding only the remote's branch."""
    from machine_git.sync.pull import fetch  # the git transport, with its rules

    folder = path / WORK / f"restore-{os.getpid()}"
    shutil.rmtree(folder, ignore_errors=True)
    old = os.umask(0o077)
    try:
        repo = pygit2.init_repository(str(folder), bare=True)
    finally:
        os.umask(old)
    try:
        repo.remotes.create(name, url)
        head = fetch(Store(folder, repo), name)
        if head is None:
            raise RemoteError(f"{name} ({url}) has no commits to restore from")
        yield folder, str(head)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _with_store_objects(fetched: Path, path: Path) -> pygit2.Repository:
    # The fetched repository, reading the store's objects too (after its
    # own), so the rows going back loses can be listed against the branch.
    return guard(pygit2.Repository(str(fetched)), also=[path / "objects"])


def _tracking(path: Path, name: str, head: str) -> None:
    with contextlib.suppress(pygit2.GitError, ValueError):
        repo = open_repository(path)
        ref = f"refs/remotes/{name}/main"
        repo.create_reference_direct(ref, Oid(hex=head), True, message="recover")
