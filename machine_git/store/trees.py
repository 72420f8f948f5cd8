"""Trees without an index: read one path, rewrite only the changed paths, walk.

A change rewrites only the trees on the path from each changed file to the
root (a TreeBuilder per level), so a tag writes O(1) objects whatever the
store's size. Reads go through :class:`machine_git.store.objects.Objects`, so a
damaged object is an error that names it, never a hang.
"""

from __future__ import annotations

from collections.abc import Iterator
from collections.abc import Mapping

import pygit2
from pygit2 import Oid
from pygit2 import Tree
from pygit2.enums import FileMode

from machine_git.store.objects import Objects


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


def write_tree(
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
        new = write_tree(repo, sub_base, sub, created)
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


def empty_tree(repo: pygit2.Repository, created: list[Oid]) -> Oid:
    """The empty tree (a store whose last file was deleted), written."""
    oid = repo.TreeBuilder().write()
    created.append(oid)
    return oid


def blobs_under(
    objects: Objects, path: str, oid: Oid, is_tree: bool
) -> Iterator[tuple[str, bytes]]:
    """Every (path, bytes) at or below one tree entry, in tree order."""
    if is_tree:
        yield from walk_blobs(objects, objects.tree(oid), f"{path}/")
    else:
        yield path, objects.blob(oid)


def walk_blobs(
    objects: Objects, tree: Tree, prefix: str
) -> Iterator[tuple[str, bytes]]:
    """Every (``prefix`` + path, bytes) below ``tree``, in tree order."""
    for entry in tree:
        path = f"{prefix}{entry.name}"
        # type_str, not filemode: building a FileMode enum per entry costs
        # 1.4 µs, a tenth of reading a small row.
        if entry.type_str == "tree":
            yield from walk_blobs(objects, objects.tree(entry.id), f"{path}/")
        else:
            # Objects.blob reads raw bytes (no Blob object: twice as fast for
            # a whole store), and a damaged loose object is an error, not a
            # hang (machine_git/store/objects.py).
            yield path, objects.blob(entry.id)
