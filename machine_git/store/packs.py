"""Checking a store's packs, and taking apart one that is damaged.

A flipped bit in a pack is found without inflating anything: a pack's index
(version 2) keeps the CRC32 of every object's bytes, and ``zlib.crc32`` runs
at memory speed (a 100 MB pack in a tenth of a second). An index that does
not read can be built again from its pack (``git index-pack``).

A damaged pack cannot be mended in place, nor can one object be taken out of
it, and git gc stops at the first object it cannot read. So ``machine
recover`` takes the pack apart: every object that still reads becomes a
loose object, the pack is set aside, and what did not read is then simply
missing, which recover already knows how to leave behind.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import struct
import subprocess
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

import pygit2

from machine_git.store import bulk

_MAGIC = b"\xfftOc"
_TRAILER = 20  # a pack ends with the SHA-1 of what comes before
_BIG = 0x80000000  # an offset with this bit set indexes the 64-bit table
_READ_ERRORS = (KeyError, ValueError, OSError, pygit2.GitError)


@dataclass
class Pack:
    """One pack of a store and what is wrong with it (nothing: ``problem`` None)."""

    path: Path  # the .pack file
    problem: str | None = None
    damaged: list[str] = field(default_factory=list)  # object ids whose CRC fails
    index_only: bool = False  # only the .idx is damaged: it can be built again


class _IndexError(Exception):
    """A pack index that cannot be read."""


def check(objects: Path) -> list[Pack]:
    """Every pack under ``objects/pack``, each checked object by object."""
    found: list[Pack] = []
    for pack in sorted((objects / "pack").glob("pack-*.pack")):
        if bulk.interrupted(pack):
            continue  # a bulk write killed before its index: a leftover (bulk.py)
        found.append(_check(pack))
    for index in sorted((objects / "pack").glob("pack-*.idx")):
        if not index.with_suffix(".pack").exists():
            found.append(Pack(index.with_suffix(".pack"), "its data file is missing"))
    return found


def _check(pack: Path) -> Pack:
    try:
        # Checked mapped: a million rows' index is 180 MB, read only if damaged.
        named = _index_trailer(pack.with_suffix(".idx"))
    except (_IndexError, OSError, ValueError) as e:
        return Pack(pack, f"its index does not read ({e})", index_only=True)
    try:
        with (
            pack.open("rb") as f,
            mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m,
        ):
            damaged = _damaged(m, pack, named)
    except (OSError, ValueError) as e:  # ValueError: an empty file cannot be mapped
        names = read_index(pack.with_suffix(".idx"))[0]
        return Pack(pack, f"it does not read ({e})", damaged=names)
    if not damaged:
        return Pack(pack)
    if len(damaged) == 1:
        return Pack(pack, "1 object in it does not match its checksum", damaged)
    return Pack(
        pack, f"{len(damaged)} objects in it do not match their checksums", damaged
    )


def _damaged(m: mmap.mmap, pack: Path, named: bytes) -> list[str]:
    """``named``: the pack checksum its index holds (:func:`_index_trailer`)."""
    # (A function of its own: the map closes only once no view is left.)
    data = memoryview(m)
    # A pack ends with the SHA-1 of all before it, which its index repeats:
    # one hash at memory speed says it is whole; else look object by object.
    trailer = bytes(data[-_TRAILER:])
    whole = hashlib.sha1(data[:-_TRAILER], usedforsecurity=False).digest()
    if whole == trailer == named:
        return []
    names, crcs, offsets = read_index(pack.with_suffix(".idx"))
    return list(_crc_failures(data, names, crcs, offsets))


def _crc_failures(
    data: memoryview, names: list[str], crcs: list[int], offsets: list[int]
) -> Iterator[str]:
    end_of_objects = len(data) - _TRAILER
    order = sorted(range(len(names)), key=offsets.__getitem__)
    for position, i in enumerate(order):
        start = offsets[i]
        end = (
            offsets[order[position + 1]]
            if position + 1 < len(order)
            else end_of_objects
        )
        if (
            end > end_of_objects
            or start >= end
            or zlib.crc32(data[start:end]) != crcs[i]
        ):
            yield names[i]


def _index_trailer(index: Path) -> bytes:
    """The pack checksum a sound index names, the index checked in place.

    The same checks as :func:`_index_bytes` (size, magic, own checksum) on
    the mapped file, so a healthy store's index is never copied to the heap.
    """
    with index.open("rb") as f:
        if os.fstat(f.fileno()).st_size < 8 + 1024 + 40:
            raise _IndexError("not a version 2 pack index")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return _trailer_of(m)


def _trailer_of(m: mmap.mmap) -> bytes:
    # (A function of its own: the map closes only once no view is left.)
    data = memoryview(m)
    try:
        if bytes(data[:4]) != _MAGIC:
            raise _IndexError("not a version 2 pack index")
        if hashlib.sha1(data[:-20], usedforsecurity=False).digest() != data[-20:]:
            raise _IndexError("its checksum does not match")
        return bytes(data[-40:-20])
    finally:
        data.release()


def _index_bytes(index: Path) -> bytes:
    data = index.read_bytes()
    if len(data) < 8 + 1024 + 40 or data[:4] != _MAGIC:
        raise _IndexError("not a version 2 pack index")
    if hashlib.sha1(data[:-20], usedforsecurity=False).digest() != data[-20:]:
        raise _IndexError("its checksum does not match")
    return data


def read_index(
    index: Path, data: bytes | None = None
) -> tuple[list[str], list[int], list[int]]:
    """(object ids, CRC32s, offsets) of a version 2 pack index."""
    data = _index_bytes(index) if data is None else data
    (version,) = struct.unpack(">I", data[4:8])
    count = struct.unpack(">256I", data[8 : 8 + 1024])[255]
    base = 8 + 1024
    if version != 2 or len(data) < base + count * 28 + 40:
        raise _IndexError("not a version 2 pack index")
    names = [data[base + 20 * i : base + 20 * i + 20].hex() for i in range(count)]
    base += 20 * count
    crcs = list(struct.unpack(f">{count}I", data[base : base + 4 * count]))
    base += 4 * count
    small = struct.unpack(f">{count}I", data[base : base + 4 * count])
    base += 4 * count
    offsets = []
    for value in small:
        if value & _BIG:
            at = base + 8 * (value & ~_BIG)
            (value,) = struct.unpack(">Q", data[at : at + 8])
        offsets.append(value)
    return names, crcs, offsets


def rebuild_index(pack: Path) -> bool:
    """Build the index of ``pack`` again from its data; True if it could be."""
    target = pack.with_suffix(".idx.rebuilt")
    try:
        done = subprocess.run(
            ["git", "index-pack", "-o", str(target), str(pack)],
            capture_output=True,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except OSError:
        return False
    if done.returncode != 0:
        target.unlink(missing_ok=True)
        return False
    target.chmod(0o600)
    os.replace(target, pack.with_suffix(".idx"))
    return True


def unpack_readable(
    pack: Pack, repo: pygit2.Repository, objects: Path
) -> tuple[int, list[str]]:
    """Write every object of ``pack`` that reads as a loose object in ``objects``.

    ``repo`` reads the store (guarded); the objects whose CRC failed are not
    even tried. Returns (how many were written, the ids that did not read).
    """
    try:
        names, _, _ = read_index(pack.path.with_suffix(".idx"))
    except (_IndexError, OSError):
        return 0, []
    writer = pygit2.Odb()
    writer.add_backend(pygit2.OdbBackendLoose(str(objects), -1, False, 0o700, 0o600), 1)
    skip = set(pack.damaged)
    lost: list[str] = [name for name in names if name in skip]
    written = 0
    for name in names:
        if name in skip:
            continue
        try:
            kind, data = repo.read(name)
        except _READ_ERRORS:
            lost.append(name)  # a delta on a damaged base
            continue
        writer.write(int(kind), data)
        written += 1
    return written, lost


def companions(pack: Path) -> list[Path]:
    """The files that belong to ``pack`` (index, reverse index, bitmap, ...)."""
    stem = pack.with_suffix("")
    return [p for p in pack.parent.glob(stem.name + ".*") if p.is_file()]
