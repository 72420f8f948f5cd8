"""Reading git objects so that a damaged loose object is an error, not a hang.

libgit2 up to 1.9 loops forever inflating a truncated loose object (libgit2
#7342). Readers of many objects (export, validate --store, diff) go through
:class:`Objects`, which lists the loose objects once and inflates and hashes
those itself before libgit2 sees them. A packed store (machine packs itself)
pays a set lookup per object; the few thousand loose objects of recent tags
cost what libgit2 would have spent on them.
"""

from __future__ import annotations

import hashlib
import os
import zlib

import pygit2

_KINDS = (b"blob", b"tree", b"commit", b"tag")


class CorruptObjectError(Exception):
    """An object whose bytes are not the object its id names."""


class Objects:
    """Reads the trees and blobs of one repository, checking loose objects first."""

    def __init__(self, repo: pygit2.Repository) -> None:
        self.repo = repo
        self.folder = os.path.join(repo.path, "objects")
        self.loose: set[str] = set()
        try:
            fans = [e.name for e in os.scandir(self.folder) if len(e.name) == 2]
        except OSError:
            fans = []
        for fan in fans:
            try:
                with os.scandir(os.path.join(self.folder, fan)) as entries:
                    self.loose.update(
                        fan + e.name for e in entries if len(e.name) == 38
                    )
            except OSError:
                continue

    def check(self, oid: pygit2.Oid) -> tuple[bytes, bytes] | None:
        """(type, body) of ``oid`` if it is a loose object (checked), else None."""
        name = str(oid)
        if name not in self.loose:
            return None
        try:
            with open(os.path.join(self.folder, name[:2], name[2:]), "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None  # packed since the listing: libgit2 reads it from the pack
        inflater = zlib.decompressobj()
        try:
            raw = inflater.decompress(data) + inflater.flush()
        except zlib.error as e:
            raise CorruptObjectError(f"{name}: not a zlib stream ({e})") from None
        if not inflater.eof:
            raise CorruptObjectError(f"{name}: truncated loose object")
        header, _, body = raw.partition(b"\0")
        kind, _, size = header.partition(b" ")
        if kind not in _KINDS or not size.isdigit() or int(size) != len(body):
            raise CorruptObjectError(f"{name}: bad loose object header")
        if hashlib.sha1(raw, usedforsecurity=False).hexdigest() != name:
            raise CorruptObjectError(f"{name}: content does not match the object id")
        return kind, body

    def tree(self, oid: pygit2.Oid) -> pygit2.Tree:
        """The tree ``oid``."""
        self.check(oid)
        return self.repo[oid].peel(pygit2.Tree)

    def blob(self, oid: pygit2.Oid, verify: bool = False) -> bytes:
        """The bytes of blob ``oid``; ``verify`` hashes a packed one too.

        Whole-store reads turn libgit2's own re-hashing off (parallel.py's
        bulk_reads); ``verify`` is then the check, a plain SHA-1 at a third
        of its cost.
        """
        loose = self.check(oid)
        if loose is not None:  # inflated and hashed already
            if loose[0] != b"blob":
                raise CorruptObjectError(f"{oid}: not a blob")
            return loose[1]
        kind, data = self.repo.read(oid)
        if kind != pygit2.enums.ObjectType.BLOB:
            raise CorruptObjectError(f"{oid}: not a blob")
        if verify:
            digest = hashlib.sha1(b"blob %d\0" % len(data), usedforsecurity=False)
            digest.update(data)
            if digest.digest() != oid.raw:
                raise CorruptObjectError(f"{oid}: content does not match the object id")
        return data
