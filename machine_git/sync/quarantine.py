"""A pull's quarantine: fetched objects wait in a repository of their own until checked.

``git fetch`` writes into a fresh bare repository inside the store's own
folder (``machine/incoming-<pid>``) that borrows the store's objects (an
alternate: only what is new arrives, and the store's refs are offered to the
remote as what we have), with git checking every object as it comes
(``fetch.fsckObjects``). Nothing in the store changes while machine's rules
run (incoming.py). :func:`keep` then moves the new objects into the store
(each pack before its index, as git does; loose objects one by one) and
writes the tracking refs, under the store's writer lock, so ``machine gc``
never sees the objects without their refs. Leaving the ``with`` block
removes the folder: a refused pull leaves no ref and no object behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pygit2
from pygit2 import Oid

from machine_git.core.errors import RemoteError
from machine_git.store.disk import private_umask
from machine_git.store.layout import BRANCH
from machine_git.store.layout import WORK
from machine_git.store.objects import guard
from machine_git.store.store import Store
from machine_git.sync import transport
from machine_git.sync.shared_refs import SHARED
from machine_git.sync.shared_refs import STAGED

_PACK_ORDER = (".pack", ".rev", ".idx")  # the index last: it makes a pack visible


@dataclass
class Fetched:
    """What a fetch brought, still in quarantine."""

    folder: Path
    refs: dict[str, Oid]  # the remote's main, versions and run refs, by name
    repo: pygit2.Repository  # the store's objects, then the quarantine's

    @property
    def objects(self) -> Path:
        return self.folder / "objects"

    @property
    def main(self) -> Oid | None:
        return self.refs.get(BRANCH)


@contextlib.contextmanager
def fetch(store: Store, name: str, url: str) -> Iterator[Fetched | None]:
    """Fetch ``url``'s main, versions and run refs into a quarantine.

    None if the remote has no main. The folder is removed on leaving.
    """
    folder = store.path / WORK / f"incoming-{os.getpid()}"
    shutil.rmtree(folder, ignore_errors=True)  # a killed pull's, same pid
    try:
        with private_umask():
            made = pygit2.init_repository(str(folder), bare=True)
        (folder / "objects" / "info").mkdir(parents=True, exist_ok=True)
        own = (store.path / "objects").resolve()
        (folder / "objects" / "info" / "alternates").write_text(f"{own}\n")
        _copy_ssh_command(store, made)
        yield _fetch(store, folder, name, url)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _copy_ssh_command(store: Store, made: pygit2.Repository) -> None:
    # A core.sshCommand of the store's (a key, a jump host) applies here too.
    with contextlib.suppress(KeyError, pygit2.GitError):
        command = store.repo.config["core.sshCommand"]
        if command:
            made.config["core.sshCommand"] = str(command)


_IN = "refs/in/"  # the remote's refs, in quarantine, under refs/in/<their name>


def _fetch(store: Store, folder: Path, name: str, url: str) -> Fetched | None:
    # Fetched under refs/in/: git would refuse to write a branch that names
    # something other than a commit, and machine says why in its own words.
    done = transport.run(
        folder,
        "-c",
        "fetch.fsckObjects=true",
        "-c",
        "transfer.fsckObjects=true",
        "fetch",
        "--quiet",
        "--no-tags",
        "--no-write-fetch-head",
        url,
        f"+{BRANCH}:{_IN}{BRANCH.removeprefix('refs/')}",
        *(f"+{p}*:{_IN}{p.removeprefix('refs/')}*" for p in SHARED),
        what=f"pull from {name}",
    )
    if done.returncode != 0:
        if "couldn't find remote ref" in done.stderr:
            return None
        checked = _object_error(done.stderr)
        if checked is not None:
            raise RemoteError(f"{name} is refused: {checked}; nothing was pulled")
        raise RemoteError(
            f"cannot fetch from {name} ({url}): {transport.first_error(done.stderr)}"
        )
    # git takes nothing from a shallow copy (it warns "shallow roots are not
    # allowed to be updated" and succeeds): that is no empty remote.
    if (folder / "shallow").exists() or "shallow" in done.stderr:
        raise RemoteError(
            f"{name} is refused: it is a shallow copy (its history is cut short); "
            "pull from a full copy; nothing was pulled"
        )
    repo = guard(pygit2.Repository(str(folder)))
    refs: dict[str, Oid] = {}
    for ref in repo.references:
        target = repo.references[ref].target
        theirs = f"refs/{ref.removeprefix(_IN)}"
        if not ref.startswith(_IN) or not isinstance(target, Oid):
            continue
        if theirs == BRANCH or theirs.startswith(tuple(SHARED)):
            refs[theirs] = target
    checker = guard(pygit2.Repository(str(store.path)), also=[folder / "objects"])
    return Fetched(folder, refs, checker)


def _object_error(stderr: str) -> str | None:
    # git's object checks say "error: object <id>: <check>: <message>" first
    # and "fatal: ... failed" after: the object's line is the reason.
    for line in stderr.splitlines():
        if line.startswith("error: object "):
            return line[len("error: ") :].strip()
    if "shallow" in stderr:
        return "it is a shallow copy (its history is cut short); pull from a full copy"
    if "promisor remote" in stderr:  # a partial clone (--filter) lacking objects
        return (
            "it is a partial copy (some of its objects are only on its own "
            "remote); pull from a full copy"
        )
    return None


def keep(store: Store, fetched: Fetched, name: str) -> None:
    """Move the checked objects into the store and write the tracking refs.

    The remote's main goes to ``refs/remotes/<name>/main``, its versions and
    run refs under ``refs/machine/remotes/<name>/`` (gone ones are dropped).
    """
    staged = f"{STAGED}{name}/"
    since = time.time() - 2.0  # margin for filesystems with coarse mtimes
    with store.locked():
        _move_objects(fetched.objects, store.path / "objects")
        refs = store.repo.references
        main = fetched.main
        if main is not None:
            refs.create(f"refs/remotes/{name}/main", main, force=True)
        wanted = {
            f"{staged}{ref.removeprefix('refs/')}": oid
            for ref, oid in fetched.refs.items()
            if ref != BRANCH
        }
        for ref in [r for r in refs if r.startswith(staged) and r not in wanted]:
            refs.delete(ref)
        for ref, oid in wanted.items():
            refs.create(ref, oid, force=True)
    from machine_git.sync import hooks

    hooks.fix_permissions(store.path, since=since)


def _move_objects(source: Path, target: Path) -> None:
    packs = source / "pack"
    if packs.is_dir():
        for index in sorted(packs.glob("pack-*.idx")):
            for suffix in _PACK_ORDER:
                _move(index.with_suffix(suffix), target / "pack")
    for fanout in sorted(source.glob("[0-9a-f][0-9a-f]")):
        for loose in sorted(fanout.iterdir()):
            _move(loose, target / fanout.name)


def _move(path: Path, folder: Path) -> None:
    if not path.exists():
        return
    folder.mkdir(mode=0o700, exist_ok=True)
    destination = folder / path.name
    if destination.exists():
        return  # the same name is the same content: an object we already had
    os.replace(path, destination)
