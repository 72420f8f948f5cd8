"""Bulk writes: a commit of many files goes into the store as one pack.

libgit2 writes every object as a loose file of its own and never packs: an
import of 20,000 rows left 37,000 loose files, then ``git gc --auto`` spent
14 s packing them. A commit of more than a handful of files (``_BULK`` in
store.py) is written as one pack instead, in three steps:

1. Staging. A second handle on the store (:func:`stage`) reads the store as
   every handle does (packs, then loose objects, guarded: objects.py), but
   in front of them sits :class:`Staged`, which keeps every object written
   in memory. The blobs, the trees (built by the same code as every commit)
   and the commit go there.
2. The pack. :func:`write_pack` writes the staged objects as one pack and its
   version 2 index, each object deflated whole (no deltas), under temporary
   names, private (0600) and fsynced. Then it renames them into
   ``objects/pack``, the pack first and its index last, and fsyncs the
   folder. git and libgit2 find a pack only through its index, so no reader
   sees a pack before it is whole. A handle opened earlier finds it too:
   libgit2 looks for new packs whenever an object is not found.
3. The ref. Only then does the branch move, by compare-and-swap (store.py).

The candidates, measured on 20,000 rows (70 MB, 37,486 objects; README,
"Bulk writes"): this writer 2.5-2.8 s, nearly all of it zlib; libgit2's
PackBuilder 17 s, since it searches deltas with a fixed depth of 50 (which
slows every later read, perf.md §3) and packs only objects already in an
object database; ``git fast-import`` of the same files 7-12 s, as it deltas
each blob against the one before. Deltas are left to ``git gc``, which
machine runs with a shallow depth (gc.py).

A kill at any moment leaves the store as it was, plus at most temporary
files, a pack renamed while its index still has its temporary name (a kill
between the two renames), or a whole pack that nothing refers to (a kill
before the ref moved). :func:`clean` removes the first two: every bulk write
calls it first, under the writer lock, and so does ``machine gc``. The third
is found by its mark: before its renames a bulk write leaves
``machine/bulk-<pack name>``, and removes it once the branch has moved (or
the pack is gone). A mark found under the writer lock is a dead writer's:
:func:`settle` removes its pack if no object of it is reachable from any ref
or reflog entry (git's own gc would explode it into loose objects, one file
each), else keeps the pack; the mark goes either way.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import struct
import zlib
from collections.abc import Iterable
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pygit2

from machine_git.core.progress import QUIET
from machine_git.core.progress import Progress
from machine_git.store.layout import BULK_MARK
from machine_git.store.layout import WORK
from machine_git.store.objects import guard

# Temporary files of a bulk write. Only machine writes them, and only under
# the store's writer lock: whoever holds the lock and finds one, finds a
# dead writer's.
TEMP = "tmp_machine_"
MARK = BULK_MARK
LEVEL = zlib.Z_DEFAULT_COMPRESSION  # git's own for packs (pack.compression)
_SIGNATURE = b"PACK"
_INDEX_MAGIC = b"\xfftOc"
_BIG = 0x80000000  # offsets from 2 GiB on go to the index's 64-bit table
_STEP = 256  # objects between two progress reports
_BLOB = 3  # git's type number


class Staged(pygit2.OdbBackend):
    """An object database backend in memory: what a bulk commit writes."""

    def __init__(self) -> None:
        super().__init__()
        self.objects: dict[bytes, tuple[int, bytes]] = {}

    def read_cb(self, oid: pygit2.Oid) -> tuple[int, bytes]:
        try:
            return self.objects[oid.raw]
        except KeyError:
            raise KeyError(str(oid)) from None  # libgit2: ask the next backend

    def read_header_cb(self, oid: pygit2.Oid) -> tuple[int, int]:
        kind, data = self.read_cb(oid)
        return kind, len(data)

    def read_prefix_cb(self, prefix: str) -> tuple[int, bytes, pygit2.Oid]:
        oid = self.exists_prefix_cb(prefix)
        kind, data = self.read_cb(oid)
        return kind, data, oid

    def exists_cb(self, oid: pygit2.Oid) -> bool:
        return oid.raw in self.objects

    def exists_prefix_cb(self, prefix: str) -> pygit2.Oid:
        if len(prefix) == 40:
            raw = bytes.fromhex(prefix)
            if raw in self.objects:
                return pygit2.Oid(raw=raw)
            raise KeyError(prefix)
        found = [raw for raw in self.objects if raw.hex().startswith(prefix)]
        if not found:
            raise KeyError(prefix)
        if len(found) > 1:
            raise ValueError(prefix)  # libgit2: ambiguous
        return pygit2.Oid(raw=found[0])

    def write_cb(self, oid: pygit2.Oid, data: bytes, kind: int) -> None:
        self.objects[oid.raw] = (kind, data)

    def refresh_cb(self) -> None:
        pass  # nothing on disk to look at again

    def blob(self, repo: pygit2.Repository, data: bytes) -> pygit2.Oid:
        """Stage ``data`` as a blob unless the store has it; its id.

        Like ``repo.create_blob``, but the bytes are kept as they are, not
        copied by libgit2 into a new bytes object: an import holds its rows
        once, not twice.
        """
        oid = pygit2.hash(data)
        if oid.raw not in self.objects and oid not in repo:
            self.objects[oid.raw] = (_BLOB, data)
        return oid

    def in_order(self, first: Iterable[pygit2.Oid]) -> list[tuple[bytes, int, bytes]]:
        """Every staged object as (id, type, bytes): ``first`` in its order, then
        the rest (objects of ``first`` already in the store are not staged)."""
        out: list[tuple[bytes, int, bytes]] = []
        for oid in first:
            found = self.objects.get(oid.raw)
            if found is not None:
                out.append((oid.raw, *found))
        if len(out) < len(self.objects):
            seen = {raw for raw, _, _ in out}
            out += [(r, k, d) for r, (k, d) in self.objects.items() if r not in seen]
        return out


def stage(path: Path) -> tuple[pygit2.Repository, Staged]:
    """A handle on the store at ``path`` whose writes stay in memory."""
    staged = Staged()
    return guard(pygit2.Repository(str(path)), staged=staged), staged


def write_pack(
    objects: Path,
    entries: list[tuple[bytes, int, bytes]],
    progress: Progress = QUIET,
) -> str:
    """Write ``entries`` (id, type, bytes) as one pack in ``objects/pack``.

    Returns the pack's name (the hex SHA-1 of its contents, as git names
    packs), or "" if a pack of that name was in place already (kept as it
    is). Call with the writer lock held and a private umask.
    """
    folder = objects / "pack"
    folder.mkdir(mode=0o700, exist_ok=True)
    clean(objects)
    temp_pack = folder / f"{TEMP}{os.getpid()}_{secrets.token_hex(6)}.pack"
    temp_index: Path | None = None
    try:
        with _create(temp_pack) as f:
            pack_hash, index_entries = _write_objects(f, entries, progress)
        name = pack_hash.hex()
        temp_index = folder / f"{TEMP}pack-{name}.idx"
        with _create(temp_index) as f:
            f.write(_index(index_entries, pack_hash))
            _sync(f)
    except BaseException:
        # A full disk, say: leave nothing behind (a kill leaves it to clean).
        for temp in (temp_pack, temp_index):
            if temp is not None:
                with contextlib.suppress(OSError):
                    temp.unlink()
        raise
    if (folder / f"pack-{name}.idx").exists():
        # The same objects are in place already (a retried write): that pack
        # may be referred to, so it is never replaced, nor removed by
        # :func:`discard`.
        for temp in (temp_pack, temp_index):
            temp.unlink()
        return ""
    mark = _mark(objects, name)
    mark.parent.mkdir(mode=0o700, exist_ok=True)
    with _create(mark) as f:  # before the pack is in place: see settle()
        _sync(f)
    _sync_folder(mark.parent)
    os.replace(temp_pack, folder / f"pack-{name}.pack")
    os.replace(temp_index, folder / f"pack-{name}.idx")
    _sync_folder(folder)
    return name


def _mark(objects: Path, name: str) -> Path:
    return objects.parent / WORK / f"{MARK}{name}"


def written(objects: Path, name: str) -> None:
    """The branch names pack ``name``'s commit now: its mark goes."""
    if name:
        with contextlib.suppress(OSError):  # a mark left is settled later
            _mark(objects, name).unlink()


def settle(path: Path) -> list[Path]:
    """Deal with the packs dead bulk writers left in the store at ``path``.

    For each mark (``machine/bulk-<name>``): a pack none of whose objects is
    reachable from any ref or reflog entry is removed (index first); a pack
    whose objects are reachable is kept. Then the mark goes. If git cannot
    tell (a damaged store), pack and mark stay. Call with the writer lock
    held and before anything is staged: a write made after the kill may name
    the pack's objects (libgit2 writes no object the store has), which the
    reachability check sees, but a write being planned is not committed yet.
    Returns what was removed (marks not included).
    """
    folder = path / WORK
    try:
        marks = [n for n in os.listdir(folder) if n.startswith(MARK)]
    except OSError:
        return []
    removed: list[Path] = []
    for mark in sorted(marks):
        name = mark.removeprefix(MARK)
        index = path / "objects" / "pack" / f"pack-{name}.idx"
        try:
            ids = _index_ids(index.read_bytes()) if index.exists() else set()
        except (OSError, ValueError):
            continue  # unreadable: leave it for recover to look at
        if ids:
            reached = _reachable_any(path, ids)
            if reached is None:
                continue
            if not reached:
                removed += _remove(index)
                removed += _remove(index.with_suffix(".pack"))
        with contextlib.suppress(FileNotFoundError):
            (folder / mark).unlink()
    return removed


def _index_ids(data: bytes) -> set[bytes]:
    """The object ids (hex, as bytes) a version 2 pack index lists."""
    if data[:8] != _INDEX_MAGIC + struct.pack(">I", 2) or len(data) < 8 + 1024:
        raise ValueError("not a version 2 pack index")
    (count,) = struct.unpack(">I", data[8 + 1020 : 8 + 1024])
    start = 8 + 1024
    names = data[start : start + 20 * count]
    if len(names) != 20 * count:
        raise ValueError("pack index cut short")
    return {names[i : i + 20].hex().encode() for i in range(0, len(names), 20)}


def _reachable_any(path: Path, ids: set[bytes]) -> bool | None:
    """True if any of ``ids`` is reachable from a ref or a reflog entry of
    the store; None if git could not list them."""
    import subprocess  # only when a dead writer left a mark

    command = ["git", "-C", str(path), "rev-list", "--objects", "--all", "--reflog"]
    try:
        listing = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        return None
    assert listing.stdout is not None
    found = False
    with listing:
        for line in listing.stdout:
            if line[:40] in ids:
                found = True
                listing.kill()  # one is enough: the pack stays
                break
    return True if found else (None if listing.returncode else False)


def discard(objects: Path, name: str) -> None:
    """Remove pack ``name`` that :func:`write_pack` wrote and nothing refers to.

    For a bulk write whose ref did not move (a full disk, a lost race): its
    pack would otherwise stay, unreferenced, until git gc. The index goes
    first, so no reader finds a pack without its data.
    """
    if not name:
        return
    folder = objects / "pack"
    for suffix in (".idx", ".pack"):
        with contextlib.suppress(FileNotFoundError):
            (folder / f"pack-{name}{suffix}").unlink()
    written(objects, name)  # the pack is gone: so goes its mark


def _write_objects(
    f: BinaryIO, entries: list[tuple[bytes, int, bytes]], progress: Progress
) -> tuple[bytes, list[tuple[bytes, int, int]]]:
    """Write the pack; (its SHA-1, then (id, CRC32, offset) of each object)."""
    digest = hashlib.sha1(usedforsecurity=False)
    header = _SIGNATURE + struct.pack(">II", 2, len(entries))
    f.write(header)
    digest.update(header)
    offset = len(header)
    index_entries: list[tuple[bytes, int, int]] = []
    progress.begin("packing objects", len(entries))
    for count, (raw, kind, data) in enumerate(entries, 1):
        body = _entry_header(kind, len(data)) + zlib.compress(data, LEVEL)
        index_entries.append((raw, zlib.crc32(body), offset))
        f.write(body)
        digest.update(body)
        offset += len(body)
        if count % _STEP == 0:
            progress.advance(_STEP)
    progress.advance(len(entries) % _STEP)
    progress.end()
    pack_hash = digest.digest()
    f.write(pack_hash)
    _sync(f)
    return pack_hash, index_entries


def _entry_header(kind: int, size: int) -> bytes:
    """An object's header in a pack: its type and size, 7 bits a byte."""
    byte = (kind << 4) | (size & 0x0F)
    size >>= 4
    out = bytearray()
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)


def _index(entries: list[tuple[bytes, int, int]], pack_hash: bytes) -> bytes:
    """A version 2 pack index (git's ``Documentation/gitformat-pack.txt``)."""
    entries = sorted(entries)
    count = len(entries)
    fanout = [0] * 256
    for raw, _, _ in entries:
        fanout[raw[0]] += 1
    total = 0
    for byte in range(256):
        total += fanout[byte]
        fanout[byte] = total
    small: list[int] = []
    large: list[int] = []
    for _, _, offset in entries:
        if offset < _BIG:
            small.append(offset)
        else:
            small.append(_BIG | len(large))
            large.append(offset)
    body = b"".join(
        [
            _INDEX_MAGIC,
            struct.pack(">I", 2),
            struct.pack(">256I", *fanout),
            b"".join(raw for raw, _, _ in entries),
            struct.pack(f">{count}I", *(crc for _, crc, _ in entries)),
            struct.pack(f">{count}I", *small),
            struct.pack(f">{len(large)}Q", *large),
            pack_hash,
        ]
    )
    return body + hashlib.sha1(body, usedforsecurity=False).digest()


@contextlib.contextmanager
def _create(path: Path) -> Iterator[BinaryIO]:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb", buffering=1 << 20) as f:
        yield f


def _sync(f: BinaryIO) -> None:
    f.flush()
    os.fsync(f.fileno())


def _sync_folder(folder: Path) -> None:
    # The renames are durable once the folder is: before the ref moves.
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def interrupted(pack: Path) -> bool:
    """True if ``pack`` is a bulk write's pack whose index was never put in place.

    Nothing can refer to its objects (the ref moves after both renames):
    it is a leftover, not a damaged pack.
    """
    return (
        not pack.with_suffix(".idx").exists()
        and (pack.parent / f"{TEMP}{pack.stem}.idx").exists()
    )


def clean(objects: Path) -> list[Path]:
    """Remove what killed bulk writes left in ``objects/pack``; what was removed.

    Call with the writer lock held: then no bulk write is running.
    """
    folder = objects / "pack"
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    removed: list[Path] = []
    for name in names:
        if not name.startswith(TEMP):
            continue
        target = folder / name
        pack = folder / name.removeprefix(TEMP)
        if name.endswith(".idx") and interrupted(pack.with_suffix(".pack")):
            removed += _remove(pack.with_suffix(".pack"))
        removed += _remove(target)
    return removed


def _remove(path: Path) -> list[Path]:
    try:
        path.unlink()
    except FileNotFoundError:
        return []
    return [path]
