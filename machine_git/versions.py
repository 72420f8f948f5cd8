"""Named versions: annotated git tags on a commit of the store."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pygit2
from pygit2 import Commit
from pygit2 import Signature
from pygit2.enums import ObjectType

from machine_git import paths
from machine_git.errors import ConflictError
from machine_git.errors import UsageError
from machine_git.store import Store
from machine_git.store import private_objects

TAGS = "refs/tags/"
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
    text = message or f"version {name}"
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
    return Version(name, commit, text)


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
