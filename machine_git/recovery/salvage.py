"""Recover deletes nothing: what it replaces or sets aside is kept in a record.

The record is ``<store>/machine/damaged/<time>/``. The small files (HEAD,
config, ``packed-refs``, a branch holding garbage) are written again after
a copy is kept; damaged packs are taken apart (what reads becomes loose
objects); damaged loose objects and commits move into the record, so git
sees them as missing, which git gc accepts, where a damaged object stops it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from datetime import UTC
from datetime import datetime
from pathlib import Path

import pygit2
from pygit2 import Oid
from pygit2.enums import SortMode

from machine_git.recovery.diagnosis import Diagnosis
from machine_git.recovery.diagnosis import id_of
from machine_git.recovery.intact import READ_ERRORS
from machine_git.store import packs
from machine_git.store.damage import packed_refs
from machine_git.store.layout import HEAD_TEXT
from machine_git.store.layout import WORK
from machine_git.store.objects import objects_only
from machine_git.store.reflog import HEX40
from machine_git.store.reflog import read_file
from machine_git.store.reflog import ref_values
from machine_git.store.store import configure

RECORDS = "damaged"  # <store>/machine/damaged/<time>/: what recover replaced


def new_record(path: Path) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    record = path / WORK / RECORDS / stamp
    old = os.umask(0o077)
    try:
        record.mkdir(parents=True, mode=0o700)
    finally:
        os.umask(old)
    return record


def repair_files(path: Path, found: Diagnosis, record: Path) -> None:
    head = read_file(path / "HEAD")
    if head != HEAD_TEXT:
        keep_file(path / "HEAD", record)
        write_file(path / "HEAD", HEAD_TEXT)
    packed = read_file(path / "packed-refs")
    dropped = set(found.damaged_refs)
    if packed is not None:
        good, bad = packed_refs(packed)
        kept = [(oid, name) for oid, name in good if name not in dropped]
        if bad or len(kept) < len(good):
            keep_file(path / "packed-refs", record)
            # No header: it would promise peeled tags, and git peels them
            # itself without one.
            text = "".join(f"{oid} {name}\n" for oid, name in kept)
            write_file(path / "packed-refs", text.encode())
    for name in dropped:
        keep_file(path / name, record / "refs", move=True, name=name.replace("/", "%"))
        keep_file(
            path / "logs" / name,
            record / "logs",
            move=True,
            name=name.replace("/", "%"),
        )
    branch_file = path / "refs" / "heads" / "main"
    if found.branch is None and branch_file.exists():
        keep_file(branch_file, record, move=True)  # garbage: the step writes it anew
    with contextlib.suppress(pygit2.GitError, OSError):
        pygit2.Config(str(path / "config"))
        return
    _rewrite_config(path, record)


def _rewrite_config(path: Path, record: Path) -> None:
    damaged = read_file(path / "config") or b""
    keep_file(path / "config", record, move=True)
    write_file(
        path / "config",
        b"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n",
    )
    text = damaged.decode("utf-8", "replace")
    project = re.search(r"(?m)^\s*project\s*=\s*(.+?)\s*$", text)
    repo = pygit2.Repository(str(path))
    configure(repo, Path(project.group(1)) if project else None)
    for name, url in salvaged_remotes(text).items():
        with contextlib.suppress(pygit2.GitError, ValueError):
            repo.remotes.create(name, url)


def salvaged_remotes(text: str) -> dict[str, str]:
    """``name -> url`` of the ``[remote "name"]`` sections a damaged config holds."""
    found: dict[str, str] = {}
    current: str | None = None
    for line in text.splitlines():
        section = re.match(r'^\s*\[remote\s+"([^"]+)"\]', line)
        if section:
            current = section.group(1)
        elif line.strip().startswith("["):
            current = None
        elif current is not None and (
            url := re.match(r"^\s*url\s*=\s*(.+?)\s*$", line)
        ):
            found[current] = url.group(1)
    return found


def take_apart(path: Path, found: Diagnosis, record: Path) -> None:
    """Damaged packs: what reads becomes loose objects, the pack goes aside."""
    if not found.damaged_packs:
        return
    repo = objects_only(path)
    for pack in packs.check(path / "objects"):
        if str(pack.path) in found.damaged_packs:
            packs.unpack_readable(pack, repo, path / "objects")
    # The multi-pack index names the packs: git writes it again.
    folder = path / "objects" / "pack"
    keep_file(folder / "multi-pack-index", record / "packs", move=True)
    for name in found.damaged_packs:
        for file in packs.companions(Path(name)):
            keep_file(file, record / "packs", move=True)


def set_aside(path: Path, found: Diagnosis, record: Path) -> set[str]:
    """Move damaged loose objects, and damaged commits, into the record.

    Afterwards git sees them as missing. A commit the reflog names that is
    missing is only a warning to git gc; one it can read that reaches a
    missing object (a blob, a parent) stops gc for good. Returns the ids of
    what is gone (moved, or damaged commits left behind), for
    :func:`forget_in_reflogs`.
    """
    files = list(found.damaged_files)
    keep = _kept_commits(path, found.parent)
    # The damaged commits, and the tag objects of dropped versions: git
    # prune follows a recent unreachable tag and stops at a missing commit.
    values = ref_values(path)
    dropped = [
        oid
        for oid in (values.get(name, "") for name in found.damaged_refs)
        if _settable(path, oid)
    ]
    files += [
        str(path / "objects" / oid[:2] / oid[2:])
        for oid in [*found.damaged_commits, *dropped]
        if HEX40.match(oid) and oid not in keep
    ]
    gone = {c for c in found.damaged_commits if c not in keep}
    for file in dict.fromkeys(files):
        if os.path.exists(file):
            keep_file(Path(file), record / "objects", move=True, name=id_of(file))
            gone.add(id_of(file))
    return gone


_ZERO = "0" * 40


def forget_in_reflogs(path: Path, gone: set[str], record: Path) -> None:
    """The branch's reflogs without the commits recover set aside.

    ``git fsck --full`` calls an entry naming a missing object invalid: an
    entry that moved to one is dropped, one that moved from one starts from
    nothing (git's way of saying "created"). The reflogs as they were are
    kept in the record.
    """
    if not gone:
        return
    for log in (path / "logs" / "refs" / "heads" / "main", path / "logs" / "HEAD"):
        data = read_file(log)
        if data is None:
            continue
        kept: list[bytes] = []
        for line in data.splitlines(keepends=True):
            old, _, rest = line.partition(b" ")
            new = rest[:40].decode("ascii", "replace")
            if new in gone:
                continue
            if old.decode("ascii", "replace") in gone:
                line = _ZERO.encode() + b" " + rest
            kept.append(line)
        text = b"".join(kept)
        if text != data:
            keep_file(
                log, record / "logs", name=str(log.relative_to(path)).replace("/", "%")
            )
            write_file(log, text)


def _settable(path: Path, oid: str) -> bool:
    # A dropped ref's object goes with it only if it is a tag object or a
    # damaged commit: a blob or a tree that reads (a ref naming a row's
    # blob, the branch's tree) is live data the branch reaches.
    if not HEX40.match(oid):
        return False
    try:
        kind = objects_only(path)[oid].type_str
    except READ_ERRORS:
        return True  # it does not read: damaged
    return kind in ("tag", "commit")


def _kept_commits(path: Path, parent: str | None) -> set[str]:
    """``parent`` and its whole history: what the recover step builds on."""
    if parent is None:
        return set()
    walker = objects_only(path).walk(Oid(hex=parent), SortMode.NONE)
    return {str(c.id) for c in walker}


def keep_file(
    file: Path, record: Path, move: bool = False, name: str | None = None
) -> None:
    """Copy (or move) ``file`` into ``record``: recover deletes nothing."""
    if not os.path.lexists(file):
        return
    record.mkdir(parents=True, exist_ok=True, mode=0o700)
    dest = record / (name or file.name)
    if move:
        os.replace(file, dest)
    else:
        shutil.copyfile(file, dest)
    os.chmod(dest, 0o600)


def write_file(path: Path, data: bytes) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    old = os.umask(0o077)
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        os.umask(old)


def adopt_objects(fetched: Path, path: Path) -> None:
    """Move the fetched objects into the store: packs (data before index), loose."""
    source = fetched / "objects"
    target = path / "objects"
    for folder in ("pack", "info"):
        (target / folder).mkdir(parents=True, exist_ok=True, mode=0o700)
    packs = sorted((source / "pack").glob("pack-*"), key=lambda p: p.suffix != ".pack")
    loose = [p for p in source.glob("[0-9a-f][0-9a-f]/*") if len(p.name) == 38]
    for file in [*packs, *loose]:
        dest = target / file.relative_to(source)
        if dest.exists():
            continue
        dest.parent.mkdir(exist_ok=True, mode=0o700)
        os.chmod(file, 0o600)
        os.replace(file, dest)
