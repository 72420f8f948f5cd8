"""Reading git objects so that a damaged object is an error, never a hang.

libgit2 up to 1.9 loops forever, at full CPU, inflating a truncated loose
object (libgit2 #7342). A checked read in some places is not enough: a walk
of history, a revision like ``HEAD~3``, ``tree["rows/ab/cd/x.json"]`` or a
merge base all read objects inside libgit2. So every repository machine
opens is *guarded* (:func:`open_repository`, :func:`guard`): its object
database is libgit2's pack reader plus :class:`_Loose`, our own reader of
loose objects, and libgit2's loose reader is not in it at all. Whoever reads
an object, through whatever pygit2 call, a loose one is read here: one
``open`` of its one path (nothing is listed), then inflated and hashed in
Python, and a damaged one raises :class:`CorruptObjectError`.

Packs come first (libgit2 asks the pack reader before ours), so a packed
store pays nothing. Writes go to libgit2's own loose writer. A loose object
that exists but is damaged counts as absent when libgit2 asks whether to
write it, so writing the same content again (tagging the same turn) heals
it; the damaged file is set aside first, never deleted.
"""

from __future__ import annotations

import hashlib
import os
import time
import weakref
import zlib
from collections.abc import Iterator
from collections.abc import Sequence
from pathlib import Path

import pygit2
from pygit2.enums import ObjectType

from machine_git.core.errors import CorruptObjectError as CorruptObjectError

# git's object type numbers, as libgit2's callbacks take and return them.
_TYPES = {b"commit": 1, b"tree": 2, b"blob": 3, b"tag": 4}
_NAMES = {number: name.decode() for name, number in _TYPES.items()}
_PACKED_FIRST = 2  # libgit2 asks backends in order of priority, highest first
_LOOSE = 1  # (one objects folder: its pack reader, then its loose reader)
_STAGED = 3  # a bulk commit's objects in memory (bulk.py): read first, written to
_ASIDE = "damaged-objects"
_HEXSIZE = 40  # beside objects/, in the store's own folder

_guarded: weakref.WeakSet[pygit2.Repository] = weakref.WeakSet()


def open_repository(path: str | Path) -> pygit2.Repository:
    """The repository at ``path``, guarded (see the module docstring)."""
    return guard(pygit2.Repository(str(path)))


def guard(
    repo: pygit2.Repository,
    folder: str | Path | None = None,
    also: Sequence[str | Path] = (),
    staged: pygit2.OdbBackend | None = None,
) -> pygit2.Repository:
    """Make ``repo`` read loose objects only through :class:`_Loose`; idempotent.

    ``folder`` is the objects folder, for a repository opened without a path
    (:func:`objects_only`); ``also`` more objects folders to read (after it),
    like git's alternates. Damaged loose objects a write replaces are moved
    to ``damaged-objects`` in machine's own folder beside ``folder``.
    ``staged``, a backend in memory, is read before the rest, and every
    write goes to it instead of a loose file (a bulk commit, bulk.py).
    """
    if repo in _guarded:
        return repo
    if folder is None:
        folder = os.path.join(repo.path, "objects")
    odb = pygit2.Odb()
    if staged is not None:
        # libgit2 writes to the first backend (by priority) that can write.
        odb.add_backend(staged, _STAGED)
    priority = _PACKED_FIRST
    for objects in (folder, *also):
        objects = str(objects)
        aside = os.path.join(os.path.dirname(objects), "machine", _ASIDE)
        odb.add_backend(pygit2.OdbBackendPack(objects), priority)
        # libgit2 asks every backend when pygit2 reads an object: a damaged
        # copy in a folder read "also" must not hide the good one before it.
        loose = _Loose(objects, aside, strict=priority == _PACKED_FIRST)
        odb.add_backend(loose, priority - 1)
        priority -= 2
    repo.set_odb(odb)
    _guarded.add(repo)
    return repo


def objects_only(path: str | Path) -> pygit2.Repository:
    """The objects of the repository at ``path``, guarded, and nothing else.

    No config, HEAD or refs are read: ``machine recover`` looks at the
    commits of a store whose git files may be what is damaged.
    """
    return guard(pygit2.Repository(), os.path.join(str(path), "objects"))


def inflate(path: str, name: str) -> tuple[bytes, bytes]:
    """(type, body) of the loose object file at ``path``, checked against ``name``.

    Raises FileNotFoundError if there is no such file, and CorruptObjectError
    if its bytes are not the object ``name`` (the hex id).
    """
    with open(path, "rb") as f:
        data = f.read()
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(data) + inflater.flush()
    except zlib.error as e:
        raise CorruptObjectError(f"{name}: not a zlib stream ({e})") from None
    if not inflater.eof:
        raise CorruptObjectError(f"{name}: truncated loose object")
    header, _, body = raw.partition(b"\0")
    kind, _, size = header.partition(b" ")
    if kind not in _TYPES or not size.isdigit() or int(size) != len(body):
        raise CorruptObjectError(f"{name}: bad loose object header")
    if hashlib.sha1(raw, usedforsecurity=False).hexdigest() != name:
        raise CorruptObjectError(f"{name}: content does not match the object id")
    return kind, body


def check_loose(path: str, name: str) -> None:
    """:func:`inflate`'s checks, in pieces: memory stays small for a huge object.

    The same errors as :func:`inflate` (a 512 MiB blob of zeros is half a
    megabyte on disk: reading it whole would take the whole 512 MiB).
    """
    inflater = zlib.decompressobj()
    digest = hashlib.sha1(usedforsecurity=False)
    header = b""
    in_body = False
    body = 0
    with open(path, "rb") as f:
        try:
            while not inflater.eof:
                if inflater.unconsumed_tail:
                    raw = inflater.decompress(inflater.unconsumed_tail, _PIECE)
                else:
                    data = f.read(_PIECE)
                    if not data:
                        break
                    raw = inflater.decompress(data, _PIECE)
                digest.update(raw)
                if in_body:
                    body += len(raw)
                    continue
                header += raw
                if b"\0" in header:
                    header, _, rest = header.partition(b"\0")
                    in_body, body = True, len(rest)
                elif len(header) > 64:  # no header is this long: drain the rest
                    header, in_body, body = b"?", True, -1
        except zlib.error as e:
            raise CorruptObjectError(f"{name}: not a zlib stream ({e})") from None
    if not inflater.eof:
        raise CorruptObjectError(f"{name}: truncated loose object")
    kind, _, size = header.partition(b" ")
    if not in_body or kind not in _TYPES or not size.isdigit() or int(size) != body:
        raise CorruptObjectError(f"{name}: bad loose object header")
    if digest.hexdigest() != name:
        raise CorruptObjectError(f"{name}: content does not match the object id")


_PIECE = 1 << 20


class _Loose(pygit2.OdbBackend):
    """libgit2's view of the loose objects, read in Python (pygit2's callbacks)."""

    def __init__(self, folder: str, aside: str, strict: bool = True) -> None:
        super().__init__()
        self.folder = folder
        self.aside = aside
        self.strict = strict  # False: a damaged object here is "not here"
        # objects/xx folders seen missing: a packed store has few loose
        # objects, and pygit2 asks every backend for every object it reads.
        # Forgotten on refresh (libgit2 refreshes, then asks again, before it
        # calls an object missing), so an object written since is found.
        self.absent: set[str] = set()
        # libgit2's own writer: atomic (temp file, rename), fsync as the
        # store sets it (store.py), new files 0600 and folders 0700.
        self.writer = pygit2.Odb()
        self.writer.add_backend(
            pygit2.OdbBackendLoose(folder, -1, False, 0o700, 0o600), _LOOSE
        )

    def _path(self, name: str) -> str:
        return os.path.join(self.folder, name[:2], name[2:])

    def read_cb(self, oid: pygit2.Oid) -> tuple[int, bytes]:
        return self._read(str(oid))

    def _read(self, name: str) -> tuple[int, bytes]:
        if name[:2] in self.absent:
            raise KeyError(name)  # libgit2: "not here", ask the next backend
        try:
            kind, body = inflate(self._path(name), name)
        except (FileNotFoundError, NotADirectoryError):
            if not os.path.isdir(os.path.join(self.folder, name[:2])):
                self.absent.add(name[:2])
            raise KeyError(name) from None
        except OSError as e:
            if not self.strict:
                raise KeyError(name) from None
            raise CorruptObjectError(f"{name}: unreadable ({e.strerror})") from None
        except CorruptObjectError:
            if not self.strict:
                raise KeyError(name) from None
            raise
        return _TYPES[kind], body

    def read_header_cb(self, oid: pygit2.Oid) -> tuple[int, int]:
        # The type and size from the first inflated bytes: a size is asked
        # for to decide whether to read an object at all (Objects.blob).
        name = str(oid)
        if name[:2] not in self.absent:
            try:
                with open(self._path(name), "rb") as f:
                    head = zlib.decompressobj().decompress(f.read(4096), 64)
            except (OSError, zlib.error):
                head = b""  # missing or damaged: the whole read says which
            header, nul, _ = head.partition(b"\0")
            kind, _, size = header.partition(b" ")
            if nul and kind in _TYPES and size.isdigit():
                return _TYPES[kind], int(size)
        kind_number, body = self.read_cb(oid)
        return kind_number, len(body)

    def read_prefix_cb(self, prefix: str) -> tuple[int, bytes, pygit2.Oid]:
        # pygit2 reads every object by "prefix", full ids too, and libgit2 then
        # asks every backend: for a full id, one open() and no listing.
        if len(prefix) == _HEXSIZE:
            kind, body = self._read(prefix)
            return kind, body, pygit2.Oid(hex=prefix)
        oid = self.exists_prefix_cb(prefix)
        kind, body = self._read(str(oid))
        return kind, body, oid

    def exists_prefix_cb(self, prefix: str) -> pygit2.Oid:
        if len(prefix) == _HEXSIZE:
            if not os.path.exists(self._path(prefix)):
                raise KeyError(prefix)
            return pygit2.Oid(hex=prefix)
        fan, rest = prefix[:2], prefix[2:]
        try:
            with os.scandir(os.path.join(self.folder, fan)) as entries:
                names = [
                    fan + e.name
                    for e in entries
                    if len(e.name) == 38 and e.name.startswith(rest)
                ]
        except OSError:
            names = []
        if not names:
            raise KeyError(prefix)
        if len(names) > 1:
            raise ValueError(prefix)  # libgit2: ambiguous
        return pygit2.Oid(hex=names[0])

    def exists_cb(self, oid: pygit2.Oid) -> bool:
        # Asked before every write: a damaged copy must not stop a good one
        # being written. A stat when there is no file (the usual answer).
        name = str(oid)
        try:
            inflate(self._path(name), name)
        except (OSError, CorruptObjectError):
            return False
        return True

    def refresh_cb(self) -> None:
        # libgit2 calls this when no backend had an object, then asks again.
        self.absent.clear()

    def write_cb(self, oid: pygit2.Oid, data: bytes, kind: int) -> None:
        self.absent.discard(str(oid)[:2])
        path = self._path(str(oid))
        if os.path.lexists(path):  # damaged (exists_cb said no): keep it aside
            set_aside(path, self.aside, str(oid))
        for attempt in range(_WRITE_TRIES):
            try:
                self.writer.write(kind, data)
                return
            except OSError as e:
                # A packer (gc.py, in the background) runs git prune-packed,
                # which removes each objects/xx folder it empties: between
                # libgit2 making the folder and renaming its file into it,
                # the folder can go. git's own writers make it again and
                # retry; so do we (libgit2 makes it again on each write).
                if "No such file or directory" not in str(e):
                    raise
                if attempt == _WRITE_TRIES - 1:
                    raise


_WRITE_TRIES = 5


def set_aside(path: str, folder: str, name: str) -> str:
    """Move the damaged object file ``path`` into ``folder``; its new path."""
    os.makedirs(folder, mode=0o700, exist_ok=True)
    target = os.path.join(folder, f"{name}.{time.time_ns()}")
    os.replace(path, target)
    return target


def damaged_loose(folder: str | Path) -> Iterator[tuple[str, str]]:
    """(path, why) of every loose object file in ``folder`` that does not read.

    Lists and inflates every loose object: for ``machine recover`` and
    ``validate --store``, never for an ordinary read.
    """
    try:
        fans = sorted(e.name for e in os.scandir(folder) if len(e.name) == 2)
    except OSError:
        return
    for fan in fans:
        try:
            with os.scandir(os.path.join(folder, fan)) as entries:
                names = sorted(e.name for e in entries if len(e.name) == 38)
        except OSError:
            continue
        for rest in names:
            path = os.path.join(folder, fan, rest)
            try:
                check_loose(path, fan + rest)
            except FileNotFoundError:
                continue  # packed since it was listed
            except (OSError, CorruptObjectError) as e:
                yield path, _why(e)


def _why(e: BaseException) -> str:
    if isinstance(e, CorruptObjectError):
        return str(e).partition(": ")[2] or str(e)
    return getattr(e, "strerror", None) or str(e)


MIB = 1024 * 1024
# The largest file machine reads from a store (validate) or takes from a
# remote (sync/incoming.py): a row of a long session is a few MiB.
MAX_BLOB = 64 * MIB


def mib(size: int) -> str:
    """``512.0 MiB``, or ``300 bytes`` below one MiB."""
    return f"{size / MIB:.1f} MiB" if size >= MIB else f"{size} bytes"


class TooLargeError(ValueError):
    """A blob over the size a reader asked for; it was not read."""


class Objects:
    """Typed reads of one repository's commits, trees and blobs (guarded)."""

    def __init__(self, repo: pygit2.Repository) -> None:
        self.repo = guard(repo)

    def commit(self, oid: pygit2.Oid) -> pygit2.Commit:
        """The commit ``oid``; KeyError if missing, CorruptObjectError if damaged."""
        return self._read(oid, ObjectType.COMMIT).peel(pygit2.Commit)

    def tree(self, oid: pygit2.Oid) -> pygit2.Tree:
        """The tree ``oid``."""
        return self._read(oid, ObjectType.TREE).peel(pygit2.Tree)

    def blob(
        self, oid: pygit2.Oid, verify: bool = False, limit: int | None = None
    ) -> bytes:
        """The bytes of blob ``oid``; ``verify`` hashes a packed one too.

        Whole-store reads turn libgit2's own re-hashing off (parallel.py's
        bulk_reads); ``verify`` is then the check, a plain SHA-1 at a third
        of its cost. Loose objects are always hashed (:class:`_Loose`).
        ``limit``: a blob larger than that (by its header, read first) is
        not read: :class:`TooLargeError`.
        """
        if limit is not None:
            header, size = self.repo.odb.read_header(oid)
            if header == ObjectType.BLOB and size > limit:
                raise TooLargeError(
                    f"a file of {mib(size)} is over the {mib(limit)} limit "
                    "for a file; not read"
                )
        kind, data = self.repo.read(oid)
        if kind != ObjectType.BLOB:
            raise CorruptObjectError(f"{oid}: a {_NAMES.get(kind, '?')}, not a blob")
        if verify:
            digest = hashlib.sha1(b"blob %d\0" % len(data), usedforsecurity=False)
            digest.update(data)
            if digest.digest() != oid.raw:
                raise CorruptObjectError(f"{oid}: content does not match the object id")
        return data

    def _read(self, oid: pygit2.Oid, kind: ObjectType) -> pygit2.Object:
        obj = self.repo[oid]
        if obj.type != kind:
            raise CorruptObjectError(
                f"{oid}: a {obj.type_str}, not a {type_name(int(kind))}"
            )
        return obj


def type_name(number: int) -> str:
    """``blob`` for git's object type number 3."""
    return _NAMES.get(number, str(number))
