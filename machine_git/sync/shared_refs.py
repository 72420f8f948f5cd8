"""The refs that travel with the branch: versions and run refs.

Versions (``refs/tags/*``) and run refs (``refs/runs/*``) go with the
branch on push and pull. A name means one commit everywhere: a version or
run ref that names another commit on the remote than here is a conflict,
and nothing moves. Fetched ones wait under ``refs/machine/remotes/<remote>/``
until compared with ours.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pygit2
from pygit2 import Commit
from pygit2 import Oid

from machine_git.core.errors import ConflictError
from machine_git.store.disk import private_objects
from machine_git.store.store import Store

# Fetched ones wait under STAGED/<remote>/ until compared with ours.
SHARED = {"refs/tags/": "version", "refs/runs/": "run ref"}
STAGED = "refs/machine/remotes/"


@dataclass(frozen=True)
class RefClash:
    """One name (a version, a run ref) on two different commits."""

    ref: str
    ours: Oid
    theirs: Oid

    def __str__(self) -> str:
        return (
            f"{describe(self.ref)} (here {str(self.ours)[:12]}, "
            f"there {str(self.theirs)[:12]})"
        )


def describe(ref: str) -> str:
    """``version v1``, ``run ref sft-…``."""
    for prefix, noun in SHARED.items():
        if ref.startswith(prefix):
            return f"{noun} {ref.removeprefix(prefix)}"
    return ref


def is_shared(ref: str) -> bool:
    return ref.startswith(tuple(SHARED))


def peeled(repo: pygit2.Repository, oid: Oid) -> Oid:
    """The commit a ref's target names (a tag object names one)."""
    try:
        return repo[oid].peel(Commit).id
    except (KeyError, ValueError, pygit2.GitError):
        return oid


def compare_refs(
    repo: pygit2.Repository,
    ours: dict[str, Oid],
    theirs: dict[str, Oid],
    their_commits: dict[str, Oid],
) -> tuple[list[str], list[RefClash]]:
    """Refs of ``ours`` the other side lacks, and names on two commits."""
    missing: list[str] = []
    clashes: list[RefClash] = []
    for ref, target in sorted(ours.items()):
        if ref not in theirs:
            missing.append(ref)
            continue
        if theirs[ref] == target:
            continue
        mine, other = peeled(repo, target), their_commits[ref]
        if mine != other:  # two tag objects of one commit are one version
            clashes.append(RefClash(ref, mine, other))
    return missing, clashes


def local_refs(repo: pygit2.Repository) -> dict[str, Oid]:
    out: dict[str, Oid] = {}
    for ref in repo.references:
        if is_shared(ref):
            target = repo.references[ref].target
            if isinstance(target, Oid):
                out[ref] = target
    return out


def clash_error(clashes: list[RefClash], remote: str, verb: str) -> ConflictError:
    shown = "; ".join(str(c) for c in clashes[:3])
    more = f"; and {len(clashes) - 3} more" if len(clashes) > 3 else ""
    return ConflictError(
        f"{remote} has {shown}{more}; nothing was {verb}. A name never moves: "
        "keep one side's under a new name and delete the other (see "
        "docs/recovery.md, 'Sharing conflicts')"
    )


def names_under(refs: Iterable[str], prefix: str) -> list[str]:
    return [r.removeprefix(prefix) for r in refs if r.startswith(prefix)]


def staged_refs(repo: pygit2.Repository, name: str) -> dict[str, Oid]:
    """The fetched versions and run refs of ``name``, under their own names."""
    prefix = f"{STAGED}{name}/"
    out: dict[str, Oid] = {}
    for ref in repo.references:
        if ref.startswith(prefix):
            local = f"refs/{ref[len(prefix) :]}"
            target = repo.references[ref].target
            if is_shared(local) and isinstance(target, Oid):
                out[local] = target
    return out


def take_refs(store: Store, refs: dict[str, Oid]) -> None:
    if not refs:
        return
    with store.locked(), private_objects(store):
        for ref, target in refs.items():
            if ref not in store.repo.references:
                store.repo.references.create(ref, target)
