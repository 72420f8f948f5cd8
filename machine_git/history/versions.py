"""Named versions: annotated git tags on a commit of the store.

``machine versions`` shows each version's row counts. A version never moves,
so the counts of its commit never change: they are kept, by commit id, in
``<store>/machine/versions.json`` and counted once (from the head's counts
and the difference to the version, machine_git/store/stats.py), not at every
listing. The file is checked before it is believed (commit ids, whole
numbers) and rebuilt entry by entry when it is not right.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from typing import Any

import pygit2
from pygit2 import Commit
from pygit2 import Signature
from pygit2.enums import ObjectType

from machine_git.core import jsonio
from machine_git.core import paths
from machine_git.core.errors import ConflictError
from machine_git.core.errors import UsageError
from machine_git.store import stats
from machine_git.store.store import WORK
from machine_git.store.store import Store
from machine_git.store.store import check_refs
from machine_git.store.store import private_objects

TAGS = "refs/tags/"
_COUNTS = "versions.json"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
# Names git (or machine's revisions) already give a meaning: a version named
# so would shadow it, or be shadowed, wherever a revision is read.
_RESERVED = {"HEAD", "FETCH_HEAD", "ORIG_HEAD", "MERGE_HEAD", "CHERRY_PICK_HEAD"}
_HEX = re.compile(r"[0-9a-fA-F]{4,40}")
_RELEASE = re.compile(r"BR-\d+")


@dataclass
class Version:
    name: str
    commit: Commit
    message: str


def create(
    store: Store, name: str, commit: Commit, message: str | None = None
) -> Version:
    """Name ``commit``; a name is given once and never moves."""
    check_name(store, name)
    ref = f"{TAGS}{name}"
    text = f"version {name}"
    if message:  # a note the user typed: redacted like every text machine writes
        from machine_git.secrets.redaction import redact_message

        text = redact_message(message)
    with store.locked():
        if ref in store.repo.references:
            existing = store.repo.references[ref].peel(Commit)
            raise ConflictError(
                f"version {name} already exists (at {str(existing.id)[:12]}); "
                "names never move, pick another"
            )
        sig = Signature("machine", "machine@localhost")
        with private_objects(store) as created:
            created.append(
                store.repo.create_tag(
                    name, commit.id, ObjectType.COMMIT, sig, text + "\n"
                )
            )
    made = Version(name, commit, text)
    counts(store, [made])  # now, while the head's counts are at hand
    return made


def check_name(store: Store, name: str) -> str:
    """Refuse a name that is unsafe, or that git would read as something else."""
    paths.check_name(name, "version name")
    why = None
    if name.startswith("-"):
        why = "may not start with '-' (it would read as an option)"
    elif name in _RESERVED or name in {"main", *store.repo.branches}:
        why = "is a name git already uses"
    elif _HEX.fullmatch(name):
        why = "looks like a commit id (4 to 40 hex characters)"
    elif _RELEASE.fullmatch(name):
        why = "looks like a release id (BR-NNN)"
    elif f"refs/runs/{name}" in store.repo.references:
        why = "is a training run id"
    elif not pygit2.reference_is_valid_name(f"{TAGS}{name}"):
        why = "is not a valid git tag name"
    if why is not None:
        raise UsageError(f"version name {name!r} {why}; pick another")
    return name


def listing(store: Store) -> list[Version]:
    """Every named version, oldest commit first."""
    check_refs(store.path, TAGS)  # a damaged tag is damage, not "no versions"
    found: list[Version] = []
    for ref in store.repo.references:
        if not ref.startswith(TAGS):
            continue
        target = store.repo.references[ref]
        commit = target.peel(Commit)
        obj = store.repo[target.target]
        message = obj.peel(pygit2.Tag).message if obj.type == ObjectType.TAG else ""
        found.append(Version(ref.removeprefix(TAGS), commit, message.strip()))
    found.sort(key=lambda v: (v.commit.commit_time, v.name))
    return found


def counts(store: Store, versions: list[Version]) -> dict[str, dict[str, int]]:
    """Row counts per kind of each version's commit, by commit id."""
    kept = _read_counts(store)
    counted = False
    for version in versions:
        key = str(version.commit.id)
        if key not in kept:
            kept[key] = stats.counts(store, version.commit)
            counted = True
    if counted:
        _write_counts(store, kept)
    return {str(v.commit.id): kept[str(v.commit.id)] for v in versions}


def _read_counts(store: Store) -> dict[str, dict[str, int]]:
    try:
        value: Any = jsonio.loads((store.path / WORK / _COUNTS).read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(value, dict):
        return {}
    return {
        key: found
        for key, found in value.items()
        if isinstance(key, str) and _COMMIT.match(key) and _numbers(found)
    }


def _numbers(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and type(n) is int and n >= 0 for k, n in value.items()
    )


def _write_counts(store: Store, kept: dict[str, dict[str, int]]) -> None:
    # Best effort: a read-only store still answers, it just counts again.
    target = store.path / WORK / _COUNTS
    tmp = target.with_name(f"{_COUNTS}.{os.getpid()}.tmp")
    with contextlib.suppress(OSError):
        old = os.umask(0o077)
        try:
            tmp.write_bytes(jsonio.canonical(kept))
            os.replace(tmp, target)
        finally:
            os.umask(old)
            with contextlib.suppress(OSError):
                tmp.unlink()
