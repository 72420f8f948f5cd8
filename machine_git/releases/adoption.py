"""Adopting records written before signing: one signed commit vouches for them.

A store written by a machine without signing holds unsigned release and run
records, made honestly, that the audit reports as tampering. A signer
adopts them with one commit (signed, like every commit that writes
``adopted.json``) that lists each unsigned commit by id and tree id. The
audit then accepts exactly those commits' missing signatures; their content
is still checked as every record's is.

The rule that keeps adoption from laundering forgeries: only a commit older
than the first signed commit on the first-parent line may be adopted (an
ancestor of it). Once anything is signed, an unsigned record written after
it can only be a forgery (machine signs every such commit), so no
adoption, by the command or by hand, ever covers one.
"""

from __future__ import annotations

from dataclasses import dataclass

import pygit2
from pygit2 import Commit
from pygit2 import Oid

from machine_git.core import jsonio
from machine_git.store import signing
from machine_git.store.signing import ADOPTED
from machine_git.store.signing import SIGNERS
from machine_git.store.store import Change
from machine_git.store.store import Snapshot
from machine_git.store.store import Store

ADOPT = "adopt"  # the commit's Action trailer


@dataclass(frozen=True)
class Entry:
    """One unsigned commit, as an adoption records it."""

    commit: str
    tree: str
    wrote: tuple[str, ...]  # the signed records it writes, as the audit named them

    def to_json(self) -> dict[str, object]:
        return {"commit": self.commit, "tree": self.tree, "wrote": list(self.wrote)}


@dataclass(frozen=True)
class Unsigned:
    """A commit the audit found unsigned: adoptable, or why not."""

    entry: Entry
    refused: str | None = None  # why it cannot be adopted


def entries_at(data: bytes | None) -> list[Entry]:
    """The entries an ``adopted.json`` holds (an unreadable one holds none)."""
    try:
        value = jsonio.loads(data) if data else {}
        return [
            Entry(str(e["commit"]), str(e["tree"]), tuple(str(p) for p in e["wrote"]))
            for e in value.get("adopted", [])
        ]
    except (ValueError, KeyError, TypeError, AttributeError):
        return []


def first_signed(commit: Commit | None) -> Commit | None:
    """The oldest signed commit on the first-parent line ending at ``commit``."""
    found = None
    while commit is not None:
        if signing.split_commit(commit.read_raw())[0] is not None:
            found = commit
        commit = commit.parents[0] if commit.parents else None
    return found


def _older(repo: pygit2.Repository, boundary: Commit | None, commit: str) -> bool:
    """Is ``commit`` an ancestor of ``boundary`` (any commit when there is none)?"""
    if boundary is None:
        return True
    try:
        return bool(repo.descendant_of(boundary.id, Oid(hex=commit)))
    except (KeyError, ValueError, pygit2.GitError):
        return False


def candidates(
    store: Store, unsigned: dict[str, list[str]], other: set[str]
) -> list[Unsigned]:
    """The unsigned commits (commit -> records the audit named) and whether each
    may be adopted; ``other`` holds commits with other problems too."""
    repo = store.repo
    boundary = first_signed(store.head)
    out = []
    for hexid, wrote in unsigned.items():
        commit = repo[Oid(hex=hexid)].peel(Commit)
        entry = Entry(hexid, str(commit.tree_id), tuple(sorted(wrote)))
        refused = None
        if any(p.split("/", 1)[0] in (SIGNERS, ADOPTED) for p in wrote):
            refused = "it changes who may sign"
        elif hexid in other:
            refused = "its records are not what machine writes either"
        elif not _older(repo, boundary, hexid):
            assert boundary is not None
            refused = (
                f"it is not older than signed commit {str(boundary.id)[:12]}: "
                "machine signed everything since, so it is forged"
            )
        out.append(Unsigned(entry, refused))
    return out


def adopt(store: Store, entries: list[Entry]) -> str | None:
    """Write the adoption (one signed commit); None when nothing is new."""
    if not entries:
        return None

    def plan(snap: Snapshot) -> Change | None:
        held = entries_at(snap.read(ADOPTED))
        known = {e.commit for e in held}
        new = [e for e in entries if e.commit not in known]
        if not new:
            return None
        value = {"adopted": [e.to_json() for e in [*held, *new]]}
        return Change(
            summary=f"signers adopt: {len(new)} commits written before signing",
            files={ADOPTED: jsonio.canonical(value)},
            trailers={"Action": ADOPT},
        )

    oid = store.write(plan)
    return None if oid is None else str(oid)


def vouched(
    repo: pygit2.Repository, adoptions: list[tuple[Commit, str]]
) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """What signed adoption commits vouch for: {commit: "adopted by ..."}, and
    (adoption commit, problem) for each entry that is not honoured."""
    accepted: dict[str, str] = {}
    problems: list[tuple[str, str]] = []
    for commit, signer in adoptions:
        short = str(commit.id)[:12]
        parent = commit.parents[0] if commit.parents else None
        before = {e.commit for e in entries_at(_read(parent))}
        boundary = first_signed(commit)
        for entry in entries_at(_read(commit)):
            if entry.commit in before or entry.commit in accepted:
                continue
            why = _refused(repo, commit, boundary, entry)
            if why is None:
                accepted[entry.commit] = f"adopted by {signer} in commit {short}"
            else:
                problems.append(
                    (str(commit.id), f"adopts commit {entry.commit[:12]}, {why}")
                )
    return accepted, problems


def _refused(
    repo: pygit2.Repository, adoption: Commit, boundary: Commit | None, entry: Entry
) -> str | None:
    try:
        commit = repo[Oid(hex=entry.commit)].peel(Commit)
    except (KeyError, ValueError, pygit2.GitError):
        return "which is not in the history"
    if str(commit.tree_id) != entry.tree:
        return f"whose tree is not the {entry.tree[:12]} it recorded"
    if not repo.descendant_of(adoption.id, commit.id):
        return "which is not in the history before it"
    if not _older(repo, boundary, entry.commit):
        return "which is not older than the first signed commit"
    return None


def _read(commit: Commit | None) -> bytes | None:
    if commit is None:
        return None
    try:
        return commit.tree[ADOPTED].peel(pygit2.Blob).data
    except (KeyError, ValueError, pygit2.GitError):
        return None


def review(store: Store, tampered: list[tuple[str, str, str]]) -> list[Unsigned]:
    """The unsigned commits among the audit's (file, commit, message) findings."""
    from machine_git.releases import trust  # the audit's wording of "unsigned"

    unsigned: dict[str, list[str]] = {}
    other: set[str] = set()
    for file, commit, message in tampered:
        if trust.UNSIGNED in message:
            unsigned.setdefault(commit, []).append(file)
        else:
            other.add(commit)
    return candidates(store, unsigned, other)
