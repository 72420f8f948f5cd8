"""Telling damage from absence: a damaged store is never taken for an empty one.

The branch, its reflog (machine never expires it), HEAD and the refs are read
as plain files where git would skip what it cannot read; damage is one line
naming the store, what is wrong, and the way out (``machine recover``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pygit2
from pygit2 import Commit
from pygit2 import Oid
from pygit2.enums import ObjectType

from machine_git.core.errors import RECOVER_HINT
from machine_git.core.errors import DamagedStoreError
from machine_git.core.errors import ReadOnlyStoreError
from machine_git.store.layout import BRANCH
from machine_git.store.layout import REFLOG
from machine_git.store.objects import CorruptObjectError
from machine_git.store.objects import open_repository

_HEX40 = re.compile(r"^[0-9a-f]{40}$")


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


def refuse_headless(path: Path) -> None:
    """DamagedStoreError if the store at ``path`` lost its HEAD file."""
    # No HEAD, but the branch has a history: a damaged store, not a new one
    # (creating one here would hide the rows it holds). Without a history it
    # is a store being created (git's folders come before HEAD), by another
    # process or by one that was killed: Store.create finishes it.
    if has_history(path):
        raise damaged(path, "its HEAD file is missing")


def open_store_repository(path: Path) -> pygit2.Repository:
    """The store's repository, or one line: unreadable (permissions) or damaged."""
    try:
        return open_repository(path)
    except (pygit2.GitError, OSError) as e:
        text = str(e)
        if "ermission denied" in text:
            raise ReadOnlyStoreError(
                f"{path}: cannot read the store ({text})"
            ) from None
        raise damaged(path, f"git cannot open it ({text})") from None


def unborn_branch(repo: pygit2.Repository) -> bool:
    """True if the branch has no commit yet (a store whose creation was cut)."""
    try:
        return repo.references.get(BRANCH) is None
    except (pygit2.GitError, ValueError, OSError):
        return False  # there is a branch, damaged: Store.head says how


def unborn(path: Path) -> bool:
    """True if git finds no commit at the store's HEAD (or cannot open it)."""
    try:
        return pygit2.Repository(str(path)).head_is_unborn
    except pygit2.GitError:
        return True
