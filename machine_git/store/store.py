"""The store: one private bare git repository per project, written through pygit2.

Every change is one commit built without an index or a work tree: new blobs,
then only the trees on the path from each changed file to the root
(change.py, trees.py), then a commit whose ref update is a compare-and-swap
on the parent. Writers serialize on an ``flock`` that the kernel drops when
the process dies (locking.py), so a killed writer never leaves a lock behind.
A store that cannot be read is damage, never an empty store (damage.py);
its folders are 0700 and its files 0600 (disk.py).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pygit2
from pygit2 import Commit
from pygit2 import Oid
from pygit2 import Signature
from pygit2 import Tree

from machine_git.core import jsonio
from machine_git.core.errors import ConcurrentUpdateError
from machine_git.core.errors import NoStoreError
from machine_git.core.progress import QUIET
from machine_git.core.progress import Progress
from machine_git.rows import rows
from machine_git.store import autopack
from machine_git.store import change as change_mod
from machine_git.store.change import Change
from machine_git.store.change import Redaction
from machine_git.store.change import fit
from machine_git.store.change import parse_row
from machine_git.store.damage import check_refs
from machine_git.store.damage import damaged
from machine_git.store.damage import has_history
from machine_git.store.damage import open_store_repository
from machine_git.store.damage import read_commit
from machine_git.store.damage import refuse_headless
from machine_git.store.damage import unborn
from machine_git.store.damage import unborn_branch
from machine_git.store.disk import chmod_objects
from machine_git.store.disk import git_error
from machine_git.store.disk import os_error
from machine_git.store.disk import private_objects
from machine_git.store.disk import private_umask
from machine_git.store.layout import BRANCH
from machine_git.store.layout import BULK_MARK
from machine_git.store.layout import IDENTITY
from machine_git.store.layout import LAYOUT
from machine_git.store.layout import MARKER
from machine_git.store.layout import WORK
from machine_git.store.locking import clear_stale_ref_lock
from machine_git.store.locking import writer_lock
from machine_git.store.objects import Objects
from machine_git.store.objects import guard
from machine_git.store.trees import blobs_under
from machine_git.store.trees import empty_tree
from machine_git.store.trees import read_path
from machine_git.store.trees import walk_blobs
from machine_git.store.trees import write_tree

# The store's vocabulary, as callers have always imported it from here (some
# of them in modules other work is changing now): several are re-exported.
__all__ = [
    "BRANCH",
    "WORK",
    "Change",
    "Redaction",
    "Snapshot",
    "Store",
    "blobs_under",
    "check_refs",
    "configure",
    "exists",
    "fit",
    "parse_row",
    "private_objects",
    "read_path",
]

# The top-level entries whose changes are signed (store/signing.py says why).
SIGNED = frozenset(
    ("releases", "runs", "settings.json", "allowed_signers", "adopted.json")
)

# Files in one change above which its objects go into one pack (bulk.py):
# about 100 objects, where git itself starts keeping what it receives as a
# pack rather than loose objects (fetch.unpackLimit, fastimport.unpackLimit).
_BULK = 32
BULK = _BULK

# Durability: a tag reported as done must survive a crash, not only a kill.
# Costs ~2 ms a commit (perf.md §2), small next to process start-up.
pygit2.settings.enable_fsync_gitdir(True)

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Row


class Snapshot:
    """The tree a change is planned against (read under the writer lock)."""

    def __init__(self, repo: pygit2.Repository, commit: Commit | None) -> None:
        self.repo = repo
        self.commit = commit
        self.tree: Tree | None = (
            Objects(repo).tree(commit.tree_id) if commit is not None else None
        )

    def read(self, path: str) -> bytes | None:
        """The bytes at ``path``, or None."""
        return read_path(self.repo, self.tree, path)

    def row(self, row_id: str) -> Row | None:
        """Row ``row_id``, or None if there is none."""
        path = rows.row_path(row_id)
        data = self.read(path)
        return None if data is None else rows.parse(data, path)


Plan = Callable[[Snapshot], Change | None]
"""Decides a change on the store as it is once the writer lock is held."""


class Store:
    """A project's store. Open with :meth:`open` or :meth:`create`."""

    def __init__(self, path: Path, repo: pygit2.Repository) -> None:
        self.path = path
        # Every object read goes through the loose-object guard (objects.py).
        self.repo = guard(repo) if repo is not None else repo
        self.created = False  # made by this process (Store.create), not found
        # Where a bulk commit reports packing (the command line sets a bar).
        self.progress: Progress = QUIET

    # -- opening ---------------------------------------------------------------

    @classmethod
    def open(cls, path: Path) -> Store:
        """Open an existing store; one line if there is none, or it is damaged."""
        if not (path / "HEAD").exists():
            refuse_headless(path)
            raise NoStoreError(
                f"no store at {path} yet (tag a turn with 'machine good')"
            )
        repo = open_store_repository(path)
        store = cls(path, repo)
        if unborn_branch(repo):
            # Another process may be creating the store right now (it holds
            # the lock between init and the first commit), so decide under
            # the lock, where no writer is half-way through a commit.
            with store.locked(), private_umask():
                if unborn_branch(repo):
                    if has_history(path):
                        # The branch is gone but its reflog says it had
                        # commits: that is damage, never a new empty store.
                        raise damaged(path, f"the branch {BRANCH} is missing")
                    # A process was killed while creating the store: finish.
                    configure(repo, None)
                    store._initial_commit()
        return store

    @classmethod
    def create(cls, path: Path, project: Path | None = None) -> Store:
        """Open the store at ``path``, creating it (0700, bare, one commit) if new."""
        if (path / "HEAD").exists():
            return cls.open(path)
        refuse_headless(path)
        with private_umask():
            try:
                path.mkdir(parents=True, exist_ok=True, mode=0o700)
                (path / WORK).mkdir(exist_ok=True, mode=0o700)
            except OSError as e:
                raise os_error(path, e) from None
        store = cls(path, None)  # type: ignore[arg-type]  # repo set below, under the lock
        with store.locked(), private_umask():
            if not (path / "HEAD").exists() or unborn(path):
                repo = pygit2.init_repository(str(path), bare=True, initial_head="main")
                configure(repo, project)
                store.created = True
                # libgit2's template sample is an executable nobody runs.
                with contextlib.suppress(FileNotFoundError):
                    (path / "hooks" / "README.sample").unlink()
            store.repo = open_store_repository(path)
            store._initial_commit()
        return store

    def _initial_commit(self) -> None:
        if not self.repo.head_is_unborn:
            return
        marker = {"layout": LAYOUT, "created_by": "machine"}
        self._write_locked(
            lambda snap: Change(
                summary="init store",
                files={MARKER: jsonio.canonical(marker)},
                trailers={"Action": "init"},
            )
        )

    # -- reading ---------------------------------------------------------------

    @property
    def head(self) -> Commit | None:
        """The newest commit; None only for a store that has no commit yet.

        A branch that cannot be read, names a missing object or something
        other than a commit, or a newest commit that is damaged, is a
        DamagedStoreError: never mistaken for an empty store.
        """
        target = self.branch_target()
        if target is None:
            return None
        return read_commit(self.repo, self.path, target, "the branch's commit")

    def branch_target(self) -> Oid | None:
        """The id the branch names, unchecked; None only if it has no commit yet."""
        try:
            ref = self.repo.references.get(BRANCH)
        except (pygit2.GitError, ValueError, OSError) as e:
            raise damaged(
                self.path, f"the branch {BRANCH} cannot be read ({e})"
            ) from None
        if ref is None and has_history(self.path):
            ref = self._branch_after_first_commit()
        if ref is None:
            return None
        target = ref.target
        if not isinstance(target, Oid):
            raise damaged(
                self.path, f"the branch {BRANCH} points at {target}, not a commit"
            )
        return target

    def _branch_after_first_commit(self) -> pygit2.Reference:
        """The branch, seen missing while its reflog has entries.

        libgit2 appends to the reflog before it renames the new ref into
        place, so a reader racing the store's first commit can see that
        instant. Read again for a moment; a branch still missing is damage.
        """
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            time.sleep(0.01)
            with contextlib.suppress(pygit2.GitError, ValueError, OSError):
                ref = self.repo.references.get(BRANCH)
                if ref is not None:
                    return ref
        raise damaged(self.path, f"the branch {BRANCH} is missing")

    def snapshot(self, commit: Commit | None = None) -> Snapshot:
        """A read view at ``commit`` (default: the newest)."""
        return Snapshot(self.repo, commit if commit is not None else self.head)

    def read_row(self, row_id: str, commit: Commit | None = None) -> Row | None:
        """Row ``row_id`` as of ``commit`` (default: now), or None."""
        return self.snapshot(commit).row(row_id)

    def iter_row_blobs(
        self, commit: Commit | None = None
    ) -> Iterator[tuple[str, bytes]]:
        """Every (path, bytes) under ``rows/``, in tree order."""
        top = self.rows_tree(commit)
        if top is not None:
            yield from walk_blobs(Objects(self.repo), top, f"{rows.ROWS_DIR}/")

    def rows_tree(self, commit: Commit | None = None) -> Tree | None:
        """The ``rows/`` tree at ``commit`` (default: the newest), or None."""
        snap = self.snapshot(commit)
        if snap.tree is None or rows.ROWS_DIR not in snap.tree:
            return None
        return Objects(self.repo).tree(snap.tree[rows.ROWS_DIR].id)

    # -- writing ---------------------------------------------------------------

    def write(self, plan: Plan) -> Oid | None:
        """Plan a change against the newest tree and commit it, under the lock.

        ``plan`` sees the store as it is once the lock is held, so a decision
        like "already tagged" or "move from train" is made on the latest state.
        Returns the new commit id, or None if ``plan`` changed nothing.
        """
        return self._write(plan, None)

    def _write(self, plan: Plan, merged: Oid | None) -> Oid | None:
        with self.locked():
            self._settle_bulk()
            oid = self._write_locked(plan, merged)
            if oid is not None:
                self._after_commit()
            return oid

    def _settle_bulk(self) -> None:
        """A pack a killed bulk writer left goes before anything is staged.

        One listing of the store's own folder per write; bulk.py only loads
        if a dead writer left its mark (bulk.settle).
        """
        try:
            names = os.listdir(self.path / WORK)
        except OSError:
            return
        if any(n.startswith(BULK_MARK) for n in names):
            from machine_git.store import bulk

            bulk.settle(self.path)

    def _after_commit(self) -> None:
        """Keep the store's own caches: every commit ends here, under the lock.

        The counts cache (stats.py) follows the new head by one small diff,
        so no command can forget it (Pi's footer reads it). Auto-pack
        (autopack.py): libgit2 never packs; a count of one objects/xx folder
        decides, and about one tag in a thousand starts a packer in the
        background, which holds no lock a tag needs. Both are best effort:
        the commit is done and reported as done.
        """
        from machine_git.store import stats  # imports this module: load it late

        stats.follow(self)
        autopack.after_commit(self.path, self.repo)

    def _write_locked(self, plan: Plan, merged: Oid | None = None) -> Oid | None:
        for _ in range(5):
            snap = self.snapshot()
            change = plan(snap)
            if change is None:
                return None
            change_mod.check(change, snap.tree)
            signed = merged is None and any(
                path.split("/", 1)[0] in SIGNED for path in change.files
            )
            if signed:
                from machine_git.store import signing  # only for signed records

                signed = signing.wanted(snap, change)
                if signed:
                    signing.admit(snap, change, _author())
            try:
                with private_umask():
                    oid = self._commit(snap, change, merged, signed)
            except _Moved:
                continue  # someone outside machine (a push) moved the branch
            except pygit2.GitError as e:
                raise git_error(self.path, e) from None
            except OSError as e:
                raise os_error(self.path, e) from None
            return oid
        raise ConcurrentUpdateError(f"{self.path}: the branch kept moving; try again")

    def _commit(
        self,
        snap: Snapshot,
        change: Change,
        merged: Oid | None = None,
        signed: bool = False,
    ) -> Oid | None:
        bulky = len(change.files) > _BULK or change.stream is not None
        if bulky and not signed:  # a signed commit: never bulk
            return self._commit_bulk(snap, change, merged)
        repo = self.repo
        created: list[Oid] = []
        tree_id = change_mod.new_tree(repo, snap.tree, change, created)
        if merged is None and snap.tree is not None and tree_id == snap.tree.id:
            return None  # nothing changed: no empty commits
        author = _author()
        committer = Signature(*IDENTITY)
        parents = [snap.commit.id] if snap.commit is not None else []
        if merged is not None:
            parents.append(merged)  # a merge commit, even with our tree unchanged
        if signed:
            oid = self._signed_commit(snap, change.message(), tree_id, parents)
            created.append(oid)
            chmod_objects(self.path, created)
            return oid
        clear_stale_ref_lock(self.path)
        try:
            oid = repo.create_commit(
                BRANCH, author, committer, change.message(), tree_id, parents
            )
        except pygit2.GitError as e:
            if "not the first parent" in str(e) or "current tip" in str(e):
                raise _Moved from None
            raise
        created.append(oid)
        chmod_objects(self.path, created)
        return oid

    def _signed_commit(
        self, snap: Snapshot, message: str, tree_id: Oid, parents: list[Oid]
    ) -> Oid:
        """A commit signed as ``git commit -S`` with ``gpg.format=ssh`` signs it."""
        from machine_git.store import signing

        made: object = self.repo.create_commit_string(
            _author(), Signature(*IDENTITY), message, tree_id, list[str | Oid](parents)
        )
        content = str(made)  # the commit's text (pygit2's stub says Oid)
        signature = signing.sign(content.encode())
        oid = self.repo.create_commit_with_signature(content, signature)
        self._move_branch(snap, oid, f"commit: {message.splitlines()[0]}")
        return oid

    def _move_branch(self, snap: Snapshot, oid: Oid, reflog: str) -> None:
        """Point the branch at ``oid`` if it is still at ``snap``'s commit."""
        clear_stale_ref_lock(self.path)
        try:
            if snap.commit is None:
                self.repo.create_reference_direct(BRANCH, oid, False, message=reflog)
            else:
                ref = self.repo.references[BRANCH]
                if ref.target != snap.commit.id:
                    raise _Moved
                ref.set_target(oid, reflog)  # a compare-and-swap on ref.target
        except (pygit2.AlreadyExistsError, KeyError):
            raise _Moved from None
        except pygit2.GitError as e:
            if "does not match" in str(e):
                raise _Moved from None
            raise

    def _commit_bulk(
        self, snap: Snapshot, change: Change, merged: Oid | None = None
    ) -> Oid | None:
        """:meth:`_commit` for many files: every new object in one pack.

        The objects are built in memory, written as one pack (private,
        fsynced, renamed into place: machine_git/store/bulk.py), and only then does
        the branch move, by compare-and-swap on the parent, with the reflog
        entry libgit2 writes for a commit. Loose objects (one file each, then
        git gc to pack them) cost an import of 20,000 rows two minutes.
        """
        from machine_git.store import bulk

        staging, staged = bulk.stage(self.path)
        blobs: dict[str, Oid | None] = dict(change.blobs)
        if change.stream is not None:
            staged.streamed = change.stream.headers
        for path, data in change.files.items():
            blobs[path] = None if data is None else staged.blob(staging, data)
        trees: list[Oid] = []
        base = staging[snap.tree.id].peel(Tree) if snap.tree is not None else None
        tree_id = write_tree(staging, base, blobs, trees) or empty_tree(staging, trees)
        if merged is None and snap.tree is not None and tree_id == snap.tree.id:
            return None  # nothing changed: no empty commits
        parents = [snap.commit.id] if snap.commit is not None else []
        if merged is not None:
            parents.append(merged)  # a merge commit, even with our tree unchanged
        message = change.message()
        oid = staging.create_commit(
            None, _author(), Signature(*IDENTITY), message, tree_id, parents
        )
        # Commit, trees from the root down, then blobs in path order: the
        # order a whole-version read (export, validate) asks for them.
        order = [oid, *reversed(trees)]
        order += [blobs[p] for p in sorted(blobs) if blobs[p] is not None]  # type: ignore[misc]
        objects = self.path / "objects"
        if change.stream is not None:
            entries = staged.in_order(order)
            name = change.stream.finish(objects, entries, self.progress)
        else:
            name = bulk.write_pack(objects, staged.in_order(order), self.progress)
        kind = " (initial)" if not parents else " (merge)" if merged else ""
        reflog = f"commit{kind}: {message.splitlines()[0]}"
        try:
            self._move_branch(snap, oid, reflog)
            bulk.written(objects, name)
        except BaseException:
            # The branch did not move (a full disk, a lost race): nothing
            # refers to the pack, so it goes now, not at the next git gc.
            with contextlib.suppress(Exception):  # the first error is the one to say
                if self.branch_target() != oid:
                    bulk.discard(objects, name)
            raise
        return oid

    # -- merging (machine pull) ---------------------------------------------------

    def merge(self, other: Oid, plan: Plan) -> Oid | None:
        """Like :meth:`write`, but the commit gets ``other`` as its second parent.

        The commit is made even when the tree stays ours, so that ``other``
        becomes part of the history and the next push is a fast-forward.
        """
        return self._write(plan, other)

    def fast_forward(self, expected: Oid, target: Oid, message: str) -> bool:
        """Move the branch from ``expected`` to ``target``; False if it had moved."""
        with self.locked(), private_umask():
            ref = self.repo.references[BRANCH]
            if ref.target != expected:
                return False
            clear_stale_ref_lock(self.path)
            try:
                # set_target is a compare-and-swap on the value read above.
                ref.set_target(target, message)
            except pygit2.GitError as e:
                if "does not match" in str(e):
                    return False
                raise git_error(self.path, e) from None
            self._after_commit()
        return True

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the store's writer lock (an flock, released if we die)."""
        with writer_lock(self.path):
            yield


def exists(path: Path) -> bool:
    """True if there is a store at ``path``; damage if only part of one is there."""
    if (path / "HEAD").exists():
        return True
    refuse_headless(path)
    return False


def configure(repo: pygit2.Repository, project: Path | None) -> None:
    """machine's settings in the store's git config (new stores, and recover)."""
    config = repo.config
    config["core.logAllRefUpdates"] = "always"  # bare repos keep no reflog otherwise
    config["core.sharedRepository"] = "0600"  # git CLI writes (push, gc) stay private
    config["user.name"] = IDENTITY[0]
    config["user.email"] = IDENTITY[1]
    config["gc.autoDetach"] = "false"
    config["receive.denyDeletes"] = "true"
    config["machine.layout"] = str(LAYOUT)
    if project is not None:
        config["machine.project"] = str(project)


def _author() -> Signature:
    name = os.environ.get("GIT_AUTHOR_NAME")
    email = os.environ.get("GIT_AUTHOR_EMAIL")
    if not name or not email:
        try:
            config = pygit2.Config.get_global_config()
            name = name or config["user.name"]
            email = email or config["user.email"]
        except (KeyError, OSError, pygit2.GitError):
            pass
    return Signature(name or IDENTITY[0], email or IDENTITY[1])


class _Moved(Exception):
    """The branch moved between planning and committing."""


def author() -> Signature:
    """Who a commit made now is by (git's identity; machine's without one)."""
    return _author()
