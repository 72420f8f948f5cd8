"""The store: one private bare git repository per project, written through pygit2.

Every change is one commit built without an index or a work tree: new blobs,
then only the trees on the path from each changed file to the root (a
TreeBuilder per level), then a commit whose ref update is a compare-and-swap
on the parent. Writers serialize on an ``flock`` that the kernel drops when
the process dies, so a killed writer never leaves a lock behind.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import fcntl
import os
import re
import time
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

import pygit2
from pygit2 import Commit
from pygit2 import Oid
from pygit2 import Signature
from pygit2 import Tree
from pygit2.enums import FileMode
from pygit2.enums import ObjectType

from machine_git import context
from machine_git import env
from machine_git import gc
from machine_git import jsonio
from machine_git import rows
from machine_git import schemas
from machine_git.errors import RECOVER_HINT
from machine_git.errors import ConcurrentUpdateError
from machine_git.errors import DamagedStoreError
from machine_git.errors import DiskFullError
from machine_git.errors import ReadOnlyStoreError
from machine_git.errors import RowValidationError
from machine_git.errors import SecretFoundError
from machine_git.errors import StoreError
from machine_git.objects import CorruptObjectError
from machine_git.objects import Objects
from machine_git.objects import guard
from machine_git.objects import open_repository
from machine_git.plain import Plain

BRANCH = "refs/heads/main"
REFLOG = "logs/refs/heads/main"  # the branch's reflog, inside the store
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
LAYOUT = 1
MARKER = "machine.json"
WORK = "machine"  # our own files inside the bare repository (git ignores them)
LOCK_TIMEOUT_ENV = "MACHINE_LOCK_TIMEOUT"
_IDENTITY = ("machine", "machine@localhost")
_BULK = 32  # files in one change above which objects are flushed once, not each

# Durability: a tag reported as done must survive a crash, not only a kill.
# Costs ~2 ms a commit (perf.md §2), small next to process start-up.
pygit2.settings.enable_fsync_gitdir(True)

if TYPE_CHECKING:
    from machine_git.rowtypes import Row


class Redaction(enum.Enum):
    """How the rows of a change were cleared of secrets before they reached it."""

    SCANNED = "on"
    """The producer ran the scanner on them (redaction.redact_row)."""
    OFF = "off"
    """The user asked to keep secrets (--no-redact): a Machine-Redaction trailer."""
    KEPT = "kept"
    """Content carried over unchanged from rows the store holds (a move, undo)."""
    CHECK = "check"
    """Nobody scanned: the store scans every row and refuses any secret."""


class Change(Plain):
    """One commit's worth of change: files to write (bytes) or delete (None)."""

    __slots__ = ("body", "files", "redaction", "summary", "trailers")

    def __init__(
        self,
        summary: str,
        files: dict[str, bytes | None],
        trailers: dict[str, str] | None = None,
        body: str = "",
        redaction: Redaction = Redaction.CHECK,
    ) -> None:
        self.summary = summary
        self.files = files
        self.trailers: dict[str, str] = trailers if trailers is not None else {}
        self.body = body
        self.redaction = redaction

    def message(self) -> str:
        """The commit message: summary, body, then the machine trailers."""
        summary, body = self.summary, self.body
        if self.redaction is not Redaction.OFF:  # notes, --why, first words: user text
            from machine_git.redaction import redact_message

            summary, body = redact_message(summary), redact_message(body)
        text = summary.strip().replace("\n", " ") + "\n"
        if body.strip():
            text += "\n" + body.strip() + "\n"
        trailers = dict(self.trailers)
        if self.redaction is Redaction.OFF:
            trailers["Redaction"] = "off"
        if trailers:
            text += "\n" + "".join(
                f"Machine-{k}: {_one_line(v)}\n" for k, v in trailers.items()
            )
        return text


def _one_line(value: str) -> str:
    return " ".join(str(value).split())


def fit(summary: str, limit: int = 72) -> str:
    """A commit summary on one line of at most ``limit`` characters."""
    summary = " ".join(summary.split())
    return summary if len(summary) <= limit else summary[: limit - 1] + "…"


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


def read_path(repo: pygit2.Repository, tree: Tree | None, path: str) -> bytes | None:
    """The blob at ``path`` in ``tree``, or None if there is none.

    Each tree on the path is read through :class:`Objects`, one at a time, so
    a damaged one is named as such (libgit2's own path lookup asks whether
    it exists first, and a damaged object does not).
    """
    if tree is None:
        return None
    objects = Objects(repo)
    *folders, name = path.split("/")
    for folder in folders:
        if folder not in tree:
            return None
        entry = tree[folder]
        if entry.type_str != "tree":
            return None
        tree = objects.tree(entry.id)
    if name not in tree:
        return None
    entry = tree[name]
    if entry.filemode not in (FileMode.BLOB, FileMode.BLOB_EXECUTABLE):
        return None
    return objects.blob(entry.id)


class Store:
    """A project's store. Open with :meth:`open` or :meth:`create`."""

    def __init__(self, path: Path, repo: pygit2.Repository) -> None:
        self.path = path
        # Every object read goes through the loose-object guard (objects.py).
        self.repo = guard(repo) if repo is not None else repo
        self.created = False  # made by this process (Store.create), not found

    # -- opening ---------------------------------------------------------------

    @classmethod
    def open(cls, path: Path) -> Store:
        """Open an existing store; one line if there is none, or it is damaged."""
        if not (path / "HEAD").exists():
            _refuse_headless(path)
            raise StoreError(f"no store at {path} yet (tag a turn with 'machine good')")
        repo = _open_repository(path)
        store = cls(path, repo)
        if _unborn_branch(repo):
            # Another process may be creating the store right now (it holds
            # the lock between init and the first commit), so decide under
            # the lock, where no writer is half-way through a commit.
            with store.locked(), _private_umask():
                if _unborn_branch(repo):
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
        _refuse_headless(path)
        with _private_umask():
            try:
                path.mkdir(parents=True, exist_ok=True, mode=0o700)
                (path / WORK).mkdir(exist_ok=True, mode=0o700)
            except OSError as e:
                raise _os_error(path, e) from None
        store = cls(path, None)  # type: ignore[arg-type]  # repo set below, under the lock
        with store.locked(), _private_umask():
            if not (path / "HEAD").exists() or _unborn(path):
                repo = pygit2.init_repository(str(path), bare=True, initial_head="main")
                configure(repo, project)
                store.created = True
                # libgit2's template sample is an executable nobody runs.
                with contextlib.suppress(FileNotFoundError):
                    (path / "hooks" / "README.sample").unlink()
            store.repo = _open_repository(path)
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
            yield from _walk_blobs(Objects(self.repo), top, f"{rows.ROWS_DIR}/")

    def rows_tree(self, commit: Commit | None = None) -> Tree | None:
        """The ``rows/`` tree at ``commit`` (default: the newest), or None."""
        snap = self.snapshot(commit)
        if snap.tree is None or rows.ROWS_DIR not in snap.tree:
            return None
        return Objects(self.repo).tree(snap.tree[rows.ROWS_DIR].id)

    # -- writing ---------------------------------------------------------------

    def write(self, plan: Callable[[Snapshot], Change | None]) -> Oid | None:
        """Plan a change against the newest tree and commit it, under the lock.

        ``plan`` sees the store as it is once the lock is held, so a decision
        like "already tagged" or "move from train" is made on the latest state.
        Returns the new commit id, or None if ``plan`` changed nothing.
        """
        with self.locked():
            oid = self._write_locked(plan)
            if oid is not None:
                self._after_commit()
            return oid

    def _after_commit(self) -> None:
        """Keep the store's own caches: every commit ends here, under the lock.

        The counts cache (stats.py) follows the new head by one small diff,
        so no command can forget it (Pi's footer reads it). Auto-pack
        (gc.py): libgit2 never packs; a count of one objects/xx folder
        decides, and about one tag in a thousand runs `git gc --auto`.
        Both are best effort: the commit is done and reported as done.
        """
        from machine_git import stats  # imports this module: load it late

        stats.follow(self)
        gc.auto(self)

    def _write_locked(
        self, plan: Callable[[Snapshot], Change | None], merged: Oid | None = None
    ) -> Oid | None:
        for _ in range(5):
            snap = self.snapshot()
            change = plan(snap)
            if change is None:
                return None
            _validate_rows(change.files)
            if change.redaction is Redaction.CHECK:
                _refuse_secrets(change.files)
            # Contexts (context/<sha>): valid, named by their hash, and every
            # row's reference resolvable in the tree this commit makes.
            scan = change.redaction is Redaction.CHECK
            context.check_change(change.files, snap.tree, scan=scan)
            try:
                with _private_umask():
                    oid = self._commit(snap, change, merged)
            except _Moved:
                continue  # someone outside machine (a push) moved the branch
            except pygit2.GitError as e:
                raise _git_error(self.path, e) from None
            except OSError as e:
                raise _os_error(self.path, e) from None
            return oid
        raise ConcurrentUpdateError(f"{self.path}: the branch kept moving; try again")

    def _commit(
        self, snap: Snapshot, change: Change, merged: Oid | None = None
    ) -> Oid | None:
        repo = self.repo
        created: list[Oid] = []
        blobs: dict[str, Oid | None] = {}
        bulk = len(change.files) > _BULK
        if bulk:
            # fsync per object costs ~2 ms: for an import of thousands of rows,
            # write them unsynced and flush the filesystem once before the ref
            # moves, which keeps the order that matters (objects, then ref).
            pygit2.settings.enable_fsync_gitdir(False)
        try:
            for path, data in change.files.items():
                if data is None:
                    blobs[path] = None
                else:
                    blobs[path] = repo.create_blob(data)
                    created.append(blobs[path])  # type: ignore[arg-type]
            tree_id = _write_tree(repo, snap.tree, blobs, created) or _empty_tree(
                repo, created
            )
        finally:
            if bulk:
                pygit2.settings.enable_fsync_gitdir(True)
                os.sync()
        if merged is None and snap.tree is not None and tree_id == snap.tree.id:
            return None  # nothing changed: no empty commits
        author = _author()
        committer = Signature(*_IDENTITY)
        parents = [snap.commit.id] if snap.commit is not None else []
        if merged is not None:
            parents.append(merged)  # a merge commit, even with our tree unchanged
        self._clear_stale_ref_lock()
        try:
            oid = repo.create_commit(
                BRANCH, author, committer, change.message(), tree_id, parents
            )
        except pygit2.GitError as e:
            if "not the first parent" in str(e) or "current tip" in str(e):
                raise _Moved from None
            raise
        created.append(oid)
        _chmod_objects(self.path, created)
        return oid

    # -- merging (machine pull) ---------------------------------------------------

    def merge(
        self, other: Oid, plan: Callable[[Snapshot], Change | None]
    ) -> Oid | None:
        """Like :meth:`write`, but the commit gets ``other`` as its second parent.

        The commit is made even when the tree stays ours, so that ``other``
        becomes part of the history and the next push is a fast-forward.
        """
        with self.locked():
            oid = self._write_locked(plan, merged=other)
            if oid is not None:
                self._after_commit()
            return oid

    def fast_forward(self, expected: Oid, target: Oid, message: str) -> bool:
        """Move the branch from ``expected`` to ``target``; False if it had moved."""
        with self.locked(), _private_umask():
            ref = self.repo.references[BRANCH]
            if ref.target != expected:
                return False
            self._clear_stale_ref_lock()
            try:
                # set_target is a compare-and-swap on the value read above.
                ref.set_target(target, message)
            except pygit2.GitError as e:
                if "does not match" in str(e):
                    return False
                raise _git_error(self.path, e) from None
            self._after_commit()
        return True

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the store's writer lock (an flock, released if we die)."""
        with writer_lock(self.path):
            yield

    def _clear_stale_ref_lock(self) -> None:
        clear_stale_ref_lock(self.path)


@contextlib.contextmanager
def writer_lock(path: Path) -> Iterator[None]:
    """Hold the writer lock of the store at ``path``, even one git cannot open."""
    lock_path = path / WORK / "lock"
    try:
        with _private_umask():
            (path / WORK).mkdir(exist_ok=True, mode=0o700)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as e:
        raise _os_error(path, e) from None
    try:
        _acquire(fd, lock_path)
        yield
    finally:
        os.close(fd)  # closing drops the flock


class _Moved(Exception):
    """The branch moved between planning and committing."""


def clear_stale_ref_lock(path: Path) -> None:
    """Remove the branch's ``.lock`` left by a writer that died (lock held)."""
    # libgit2 writes refs/heads/main.lock for the instant of a ref update.
    # We hold the flock, so no machine process is updating the ref; a lock
    # that outlives a short grace period belongs to a writer that died.
    lock = path / "refs" / "heads" / "main.lock"
    deadline = time.monotonic() + 1.0
    while lock.exists():
        if time.monotonic() > deadline:
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()
            break
        time.sleep(0.02)


def damaged(path: Path, what: str) -> DamagedStoreError:
    """The one line for damage: where, what, and the way out."""
    return DamagedStoreError(f"damaged store {path}: {what} ({RECOVER_HINT})")


def read_commit(repo: pygit2.Repository, path: Path, oid: Oid, what: str) -> Commit:
    """Commit ``oid`` (``what`` names it in errors), or a DamagedStoreError."""
    short = str(oid)[:12]
    try:
        obj = repo[oid]
    except KeyError:
        raise damaged(path, f"{what} {short} is missing") from None
    except CorruptObjectError as e:
        raise damaged(path, f"{what} {short} is damaged ({reason(e)})") from None
    except (pygit2.GitError, OSError) as e:
        raise damaged(path, f"{what} {short} cannot be read ({e})") from None
    if obj.type != ObjectType.COMMIT:
        raise damaged(path, f"{what} {short} is a {obj.type_str}, not a commit")
    return obj.peel(Commit)


def reason(e: BaseException) -> str:
    """Why a read failed, without the object id the message starts with."""
    text = str(e).strip("'\"")
    if isinstance(e, KeyError):
        return "missing"
    head, sep, rest = text.partition(": ")
    return rest if sep and len(head) == 40 else text


def has_history(path: Path) -> bool:
    """True if the branch's reflog records a commit (machine never expires it)."""
    try:
        return (path / REFLOG).stat().st_size > 0
    except OSError:
        return False


def packed_refs(data: bytes) -> tuple[list[tuple[str, str]], list[str]]:
    """(the ``(id, ref)`` lines of a packed-refs file, the unreadable lines)."""
    good: list[tuple[str, str]] = []
    bad: list[str] = []
    for line in data.decode("utf-8", "replace").splitlines():
        if not line or line.startswith("#"):
            continue
        if line.startswith("^") and _HEX40.match(line[1:]):
            continue  # the peeled id of the tag above: git writes it again
        oid, _, name = line.partition(" ")
        if _HEX40.match(oid) and _valid_ref(name):
            good.append((oid, name))
        else:
            bad.append(line)
    return good, bad


def check_refs(path: Path, prefix: str) -> None:
    """DamagedStoreError for a ref under ``prefix`` that names no object id.

    libgit2 skips such a ref when it lists refs, and would list the rest as
    if it were all there is (``versions`` saying there are none).
    """
    folder = path / prefix
    files = sorted(folder.rglob("*")) if folder.is_dir() else []
    for file in files:
        if file.is_file() and not file.name.endswith(".lock"):
            try:
                text = file.read_bytes().decode("ascii", "replace").strip()
            except OSError as e:
                raise damaged(path, f"{file.relative_to(path)}: {e.strerror}") from None
            if not _HEX40.match(text):
                raise damaged(path, f"the ref {file.relative_to(path)} holds no id")
    try:
        data = (path / "packed-refs").read_bytes()
    except FileNotFoundError:
        return
    except OSError as e:
        raise damaged(path, f"packed-refs cannot be read ({e.strerror})") from None
    bad = packed_refs(data)[1]
    if bad:
        raise damaged(path, f"packed-refs has unreadable lines ({bad[0][:40]!r})")


def _valid_ref(name: str) -> bool:
    return name.startswith("refs/") and bool(pygit2.reference_is_valid_name(name))


def exists(path: Path) -> bool:
    """True if there is a store at ``path``; damage if only part of one is there."""
    if (path / "HEAD").exists():
        return True
    _refuse_headless(path)
    return False


def _refuse_headless(path: Path) -> None:
    # No HEAD, but the branch has a history: a damaged store, not a new one
    # (creating one here would hide the rows it holds). Without a history it
    # is a store being created (git's folders come before HEAD), by another
    # process or by one that was killed: Store.create finishes it.
    if has_history(path):
        raise damaged(path, "its HEAD file is missing")


def _open_repository(path: Path) -> pygit2.Repository:
    try:
        return open_repository(path)
    except (pygit2.GitError, OSError) as e:
        text = str(e)
        if "ermission denied" in text:
            raise ReadOnlyStoreError(
                f"{path}: cannot read the store ({text})"
            ) from None
        raise damaged(path, f"git cannot open it ({text})") from None


def _unborn_branch(repo: pygit2.Repository) -> bool:
    try:
        return repo.references.get(BRANCH) is None
    except (pygit2.GitError, ValueError, OSError):
        return False  # there is a branch, damaged: Store.head says how


def parse_row(data: bytes, where: str) -> dict[str, Any]:
    """A stored row's JSON, or a StoreError naming the file (rows.parse: typed)."""
    return jsonio.load_object(data, where, StoreError, "a JSON object (a row)")


def _refuse_secrets(files: Mapping[str, bytes | None]) -> None:
    # The fail-closed default for writers that did not redact: any secret left
    # in a row's content stops the commit before an object is written.
    from machine_git import redaction

    for path, data in files.items():
        if data is None or rows.id_of_path(path) is None:
            continue
        kinds = redaction.leaks(parse_row(data, path))
        if kinds:
            raise SecretFoundError(
                f"{path}: holds an unredacted secret ({', '.join(kinds)}); "
                "nothing was written"
            )


def _validate_rows(files: Mapping[str, bytes | None]) -> None:
    # The last gate before git: nothing under rows/ is written unless it is a
    # valid row, canonical, and stored at the path its id names.
    for path, data in files.items():
        if data is None or not path.startswith(f"{rows.ROWS_DIR}/"):
            continue
        row_id = rows.id_of_path(path)
        if row_id is None:
            raise RowValidationError(
                f"{path}: not a row path (rows/ab/cd/<12 hex>.json)"
            )
        row = parse_row(data, path)
        schemas.check_row(row, path)
        if row.get("id") != row_id:
            raise RowValidationError(
                f"{path}: row id {row.get('id')!r} does not match its path"
            )
        if jsonio.canonical(row) != data:
            raise RowValidationError(f"{path}: not canonical JSON")


def _write_tree(
    repo: pygit2.Repository,
    base: Tree | None,
    changes: Mapping[str, Oid | None],
    created: list[Oid],
) -> Oid | None:
    """Rewrite only the trees on the paths in ``changes``; None if empty."""
    builder = repo.TreeBuilder(base) if base is not None else repo.TreeBuilder()
    groups: dict[str, dict[str, Oid | None]] = {}
    for path, oid in changes.items():
        head, sep, rest = path.partition("/")
        if sep:
            groups.setdefault(head, {})[rest] = oid
        elif oid is None:
            if builder.get(head) is not None:
                builder.remove(head)
        else:
            builder.insert(head, oid, FileMode.BLOB)
    for name, sub in groups.items():
        existing = builder.get(name)
        sub_base = None
        if existing is not None and existing.filemode == FileMode.TREE:
            sub_base = repo[existing.id].peel(Tree)
        new = _write_tree(repo, sub_base, sub, created)
        if new is None:
            if existing is not None:
                builder.remove(name)
        else:
            builder.insert(name, new, FileMode.TREE)
    if len(builder) == 0:
        return None
    oid = builder.write()
    created.append(oid)
    return oid


def _empty_tree(repo: pygit2.Repository, created: list[Oid]) -> Oid:
    oid = repo.TreeBuilder().write()
    created.append(oid)
    return oid


def blobs_under(
    objects: Objects, path: str, oid: Oid, is_tree: bool
) -> Iterator[tuple[str, bytes]]:
    """Every (path, bytes) at or below one tree entry, in tree order."""
    if is_tree:
        yield from _walk_blobs(objects, objects.tree(oid), f"{path}/")
    else:
        yield path, objects.blob(oid)


def _walk_blobs(
    objects: Objects, tree: Tree, prefix: str
) -> Iterator[tuple[str, bytes]]:
    for entry in tree:
        path = f"{prefix}{entry.name}"
        # type_str, not filemode: building a FileMode enum per entry costs
        # 1.4 µs, a tenth of reading a small row.
        if entry.type_str == "tree":
            yield from _walk_blobs(objects, objects.tree(entry.id), f"{path}/")
        else:
            # Objects.blob reads raw bytes (no Blob object: twice as fast for
            # a whole store), and a damaged loose object is an error, not a
            # hang (machine_git/objects.py).
            yield path, objects.blob(entry.id)


def configure(repo: pygit2.Repository, project: Path | None) -> None:
    """machine's settings in the store's git config (new stores, and recover)."""
    config = repo.config
    config["core.logAllRefUpdates"] = "always"  # bare repos keep no reflog otherwise
    config["core.sharedRepository"] = "0600"  # git CLI writes (push, gc) stay private
    config["user.name"] = _IDENTITY[0]
    config["user.email"] = _IDENTITY[1]
    config["gc.autoDetach"] = "false"
    config["receive.denyDeletes"] = "true"
    config["machine.layout"] = str(LAYOUT)
    if project is not None:
        config["machine.project"] = str(project)


def _unborn(path: Path) -> bool:
    try:
        return pygit2.Repository(str(path)).head_is_unborn
    except pygit2.GitError:
        return True


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
    return Signature(name or _IDENTITY[0], email or _IDENTITY[1])


def _acquire(fd: int, lock_path: Path) -> None:
    timeout = env.seconds(LOCK_TIMEOUT_ENV, 60.0)
    deadline = time.monotonic() + timeout
    delay = 0.002
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise ConcurrentUpdateError(
                    f"another machine process has held {lock_path} for {timeout:.0f}s"
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.05)


def _chmod_objects(path: Path, oids: list[Oid]) -> None:
    # libgit2 writes loose objects read-only (0444 less the umask); the store's
    # promise is 0600 files, so set it on what we just wrote (a few syscalls).
    for oid in oids:
        hexid = str(oid)
        obj = path / "objects" / hexid[:2] / hexid[2:]
        with contextlib.suppress(FileNotFoundError):
            if obj.stat().st_mode & 0o777 != 0o600:
                obj.chmod(0o600)


@contextlib.contextmanager
def private_objects(store: Store) -> Iterator[list[Oid]]:
    """Write objects with a private umask, then give each mode 0600."""
    created: list[Oid] = []
    with _private_umask():
        yield created
    _chmod_objects(store.path, created)


@contextlib.contextmanager
def _private_umask() -> Iterator[None]:
    """New folders 0700 and files 0600, whoever creates them (us or libgit2)."""
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


def _os_error(path: Path, e: OSError) -> StoreError:
    if e.errno is None:
        # pygit2 raises libgit2's OS errors as OSError with only a message.
        return _git_error(path, e)
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFullError(
            f"{path}: no space left on the device; nothing was written"
        )
    if e.errno == errno.EFBIG:  # a file size limit (ulimit -f) is a full disk too
        return DiskFullError(f"{path}: file size limit reached; nothing was written")
    if e.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return ReadOnlyStoreError(f"{path}: the store is read-only ({e.strerror})")
    return StoreError(f"{path}: {e.strerror or e}")


def _git_error(path: Path, e: Exception) -> StoreError:
    text = str(e)
    if "corrupt" in text:  # libgit2: "corrupted loose reference file: HEAD"
        return damaged(path, f"git refused the write: {text}")
    if "No space left" in text or "Disk quota exceeded" in text:
        return DiskFullError(
            f"{path}: no space left on the device; nothing was written"
        )
    if "File too large" in text:
        return DiskFullError(f"{path}: file size limit reached; nothing was written")
    if "Read-only file system" in text or "Permission denied" in text:
        return ReadOnlyStoreError(f"{path}: the store is read-only ({text})")
    return StoreError(f"{path}: git refused the write: {text}")
