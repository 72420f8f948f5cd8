"""Reading whole blobs straight from a store's pack files, for whole-store reads.

``validate --store`` reads every row once, and most of that time was libgit2
inflating blobs with zlib, plus a Python callback per read (pygit2 reads by
"prefix", so libgit2 asks every backend, our loose reader too). Here a blob
stored whole in a pack (not as a delta) is found through the pack's index
(``.idx`` version 2, mapped, binary search), and inflated with ISA-L
(python-isal: about twice zlib's speed), or zlib where isal is missing.

This is only ever a fast path: anything else (a delta, a loose object, an
object over the size limit, an index or pack it does not understand, bytes
that do not inflate) is ``None``, and the caller reads the object as before.
The caller hashes what comes back against the id, so a wrong answer cannot
pass as a row: it is read again the old way, which reports it the old way.
"""

from __future__ import annotations

import mmap
import os
import struct
import zlib
from pathlib import Path
from typing import cast

try:  # ISA-L's inflate, about twice zlib's speed (bench/RESULTS.md)
    from isal.isal_zlib import decompress as _inflate
    from isal.isal_zlib import error as _isal_error

    # (isal's stub calls its error class an instance)
    _BAD_STREAM: tuple[type[Exception], ...] = (
        zlib.error,
        cast("type[Exception]", _isal_error),
    )
except ImportError:  # no wheel for this platform: the same bytes, slower
    from zlib import decompress as _inflate

    _BAD_STREAM = (zlib.error,)

_IDX_MAGIC = b"\377tOc"
_BLOB = 3  # git's object type number in a pack entry's header
_FANOUT = 8  # the fan-out table follows the magic and the version
_NAMES = _FANOUT + 256 * 4
_LARGE = 0x80000000  # an offset with this bit set indexes the 64-bit table


class _Pack:
    """One ``pack-*.pack`` and its ``.idx``, both mapped read-only."""

    def __init__(self, idx: mmap.mmap, pack: mmap.mmap) -> None:
        self.idx = idx
        self.pack = pack
        self.fanout = struct.unpack_from(">256I", idx, _FANOUT)
        self.count = self.fanout[255]
        self.offsets = _NAMES + self.count * 24  # after the names and the CRCs
        self.large = self.offsets + self.count * 4

    def offset(self, key: bytes) -> int | None:
        """Where object ``key`` (20 bytes) starts in the pack, or None."""
        idx = self.idx
        first = key[0]
        lo = self.fanout[first - 1] if first else 0
        hi = self.fanout[first]
        while lo < hi:
            mid = (lo + hi) >> 1
            at = _NAMES + 20 * mid
            if idx[at : at + 20] < key:
                lo = mid + 1
            else:
                hi = mid
        at = _NAMES + 20 * lo
        if lo >= self.count or idx[at : at + 20] != key:
            return None
        try:
            (where,) = struct.unpack_from(">I", idx, self.offsets + 4 * lo)
            if where & _LARGE:
                (where,) = struct.unpack_from(
                    ">Q", idx, self.large + 8 * (where & ~_LARGE)
                )
        except struct.error:  # an index cut short
            return None
        return int(where)

    def blob(self, at: int, limit: int) -> bytes | None:
        """The blob stored whole at ``at``; None for anything else."""
        pack = self.pack
        if at + 2 > len(pack):
            return None
        byte = pack[at]
        kind = (byte >> 4) & 7
        size = byte & 15
        shift = 4
        at += 1
        while byte & 0x80:
            if at >= len(pack) or shift > 60:
                return None
            byte = pack[at]
            size |= (byte & 0x7F) << shift
            shift += 7
            at += 1
        if kind != _BLOB or size > limit:
            return None  # a delta is resolved by libgit2; too large: not read
        # zlib never makes a stream longer than this (its compressBound).
        end = at + size + (size >> 12) + (size >> 14) + 64
        try:
            data = _inflate(pack[at:end])
        except _BAD_STREAM:  # damaged: read the old way, which reports it
            return None
        return data if len(data) == size else None


class PackBlobs:
    """The packs of one objects folder, as they were when this was made.

    A pack written later, or one gone since (``machine gc``), is simply not
    here: its blobs are ``None`` and read the usual way.
    """

    def __init__(self, objects: str | Path) -> None:
        self.packs: list[_Pack] = []
        folder = Path(objects) / "pack"
        try:
            names = sorted(folder.glob("pack-*.idx"))
        except OSError:
            names = []
        for idx_path in names:
            pack = _open(idx_path)
            if pack is not None:
                self.packs.append(pack)

    def blob(self, key: bytes, limit: int) -> bytes | None:
        """The blob ``key`` (a raw 20-byte id) if a pack holds it whole and it
        is at most ``limit`` bytes; else None. Not checked against ``key``:
        the caller hashes it."""
        for pack in self.packs:
            at = pack.offset(key)
            if at is not None:
                return pack.blob(at, limit)
        return None


def _open(idx_path: Path) -> _Pack | None:
    """The pack of ``idx_path`` mapped, or None if either file is unusable."""
    pack_path = idx_path.with_suffix(".pack")
    try:
        idx = _map(idx_path)
        pack = _map(pack_path)
    except (OSError, ValueError):
        return None
    if (
        len(idx) < _NAMES + 8
        or len(pack) < 12
        or idx[:4] != _IDX_MAGIC
        or idx[4:8] != b"\0\0\0\2"
        or pack[:4] != b"PACK"
        or pack[4:8] not in (b"\0\0\0\2", b"\0\0\0\3")
    ):
        return None
    found = _Pack(idx, pack)
    if len(idx) < found.large or found.count != struct.unpack_from(">I", pack, 8)[0]:
        return None  # truncated, or not this pack's index
    return found


def _map(path: Path) -> mmap.mmap:
    fd = os.open(path, os.O_RDONLY)
    try:
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)
