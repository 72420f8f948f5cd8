"""Named versions: annotated git tags on a commit of the store."""

from __future__ import annotations

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


@dataclass
class Version:
    name: str
    commit: Commit
    message: str


def create(
    store: Store, name: str, commit: Commit, message: str | None = None
) -> Version:
    """Name ``commit``; a name is given once and never moves."""
    paths.check_name(name, "version name")
    ref = f"{TAGS}{name}"
    if not pygit2.reference_is_valid_name(ref):
        raise UsageError(f"version name {name!r} is not a valid git tag name")
    text = f"version {name}"
    if message:  # a note the user typed: redacted like every text machine writes
        from machine_git.redaction import redact_message

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
    return Version(name, commit, text)


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
