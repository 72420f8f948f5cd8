"""Who may write what a release rests on, checked commit by commit.

A commit that changes ``releases/``, ``runs/``, ``allowed_signers``, or the
student in ``settings.json`` must carry a valid SSH signature by a key the
store's ``allowed_signers`` listed before it (``signing.py``); the commit
that first adds ``allowed_signers`` is checked against the keys it adds
(trusted on first use). A merge writes nothing new there: each such file it
holds is one of its parents'. :class:`Walk` follows the history oldest
first and says, for each commit, what is wrong (one line per commit), and
which student the signed commits chose: ``settings.json`` is never believed
on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pygit2
from pygit2 import Commit
from pygit2 import Oid
from pygit2 import Tree

from machine_git.core.errors import UsageError
from machine_git.store import signing
from machine_git.store.signing import ADOPTED
from machine_git.store.signing import PROTECTED
from machine_git.store.signing import SIGNERS
from machine_git.store.signing import Signer
from machine_git.store.store import Change
from machine_git.store.store import Snapshot
from machine_git.store.store import Store
from machine_git.store.treediff import changed_blobs

SETTINGS = "settings.json"
UNSIGNED = "which is not signed by an allowed signer"
# A store written before signing has such records honestly: say the way out.
HINT = " (written before signing? see: machine release signers adopt)"
Student = dict[str, Any]
Entries = tuple[Oid | None, ...]


def signers_at(repo: pygit2.Repository, commit: Commit | None) -> list[Signer]:
    if commit is None:
        return []
    return signing.parse_signers(_blob(repo, _entry(commit.tree, SIGNERS)))


# -- reading: the walk ----------------------------------------------------------------


def entries(commit: Commit) -> Entries:
    """The ids of the protected top-level entries (cheap: no blob is read)."""
    return tuple(_entry(commit.tree, name) for name in PROTECTED)


@dataclass(frozen=True)
class Verified:
    """What the signed history says at one commit: the student, who may sign."""

    student: Student | None = None
    signers: tuple[Signer, ...] = ()


class Walk:
    """Signature checks for commits seen oldest first (parents before children).

    Each commit's :class:`Verified` state is its first parent's, changed only
    by a commit whose signature counts: an ``allowed_signers`` or student
    written by anyone else is reported and never believed, not even by the
    commits after it.
    """

    def __init__(self, repo: pygit2.Repository, base: Verified) -> None:
        self.repo = repo
        self.base = base  # what an earlier audit verified (commits not walked)
        self.known: dict[Oid, Entries] = {}
        self.states: dict[Oid, Verified] = {}
        self.last: Oid | None = None
        # Signed commits that write adopted.json, with their signer's name.
        self.adoptions: list[tuple[Commit, str]] = []
        self._signer = ""

    def verified(self) -> Verified:
        """The state at the last commit seen."""
        return self.base if self.last is None else self.states[self.last]

    def see(self, commit: Commit) -> tuple[str, str] | None:
        """(file, problem) if ``commit`` writes protected records it may not."""
        mine = self.known[commit.id] = entries(commit)
        parents = commit.parents
        before = [self._entries(p) for p in parents]
        self.states[commit.id] = self._state(parents[0]) if parents else Verified()
        self.last = commit.id
        if len(parents) == 1 and before[0] == mine:
            return None
        if not parents and all(e is None for e in mine):
            return None
        if len(parents) > 1:
            return self._merge(commit, mine, before)
        return self._single(commit, parents[0] if parents else None)

    def _entries(self, commit: Commit) -> Entries:
        found = self.known.get(commit.id)
        return found if found is not None else entries(commit)

    def _state(self, commit: Commit) -> Verified:
        return self.states.get(commit.id, self.base)

    # -- one commit -------------------------------------------------------------------

    def _single(self, commit: Commit, parent: Commit | None) -> tuple[str, str] | None:
        changed = _changed(self.repo, parent, commit)
        new_student = _student(self.repo, commit)
        old_student = _student(self.repo, parent) if parent is not None else {}
        needs = [
            (path, verb)
            for path, verb in changed
            if path != SETTINGS or new_student != old_student
        ]
        if not needs:
            return None
        reason = self._reason(commit, parent)
        if reason is not None:
            path, verb = _primary(needs)
            return path, f"{verb} in commit {str(commit.id)[:12]}, {reason}"
        state = self.states[commit.id]
        if new_student != old_student:
            state = Verified(new_student or None, state.signers)
        if any(path == SIGNERS for path, _ in changed):
            state = Verified(state.student, tuple(signers_at(self.repo, commit)))
        if any(path == ADOPTED for path, _ in changed):
            # The signer vouches for the whole state, the student included.
            state = Verified(new_student or None, state.signers)
            self.adoptions.append((commit, self._signer))
        self.states[commit.id] = state
        return None

    def _reason(self, commit: Commit, parent: Commit | None) -> str | None:
        """Why ``commit``'s signature does not count; None if it does."""
        allowed = list(self.states[commit.id].signers)
        first = parent is None or _entry(parent.tree, SIGNERS) is None
        if not allowed and first:
            allowed = signers_at(self.repo, commit)  # the first keys: on first use
        signature, payload = signing.split_commit(commit.read_raw())
        if signature is None:
            return UNSIGNED + HINT
        signer, why = signing.verify(payload, signature, allowed)
        self._signer = "" if signer is None else signer.name
        return None if signer is not None else why

    # -- merges -----------------------------------------------------------------------

    def _merge(
        self, commit: Commit, mine: Entries, before: list[Entries]
    ) -> tuple[str, str] | None:
        short = str(commit.id)[:12]
        parents = commit.parents
        states = [self._state(p) for p in parents]
        at = PROTECTED.index(SIGNERS)
        # The signers of the parent whose allowed_signers the merge kept.
        kept = [s for b, s in zip(before, states, strict=True) if b[at] == mine[at]]
        signers = kept[0].signers if kept else states[0].signers
        new_student = _student(self.repo, commit)
        sides = [_student(self.repo, p) for p in parents]
        if new_student not in sides:
            self.states[commit.id] = Verified(states[0].student, signers)
            problem = f"changed in merge commit {short}: a student no parent chose"
            return SETTINGS, problem
        chosen = states[sides.index(new_student)].student
        self.states[commit.id] = Verified(chosen, signers)
        for n, name in enumerate(PROTECTED):
            if name in ("releases", SETTINGS):
                continue  # the release audit checks merges of releases/
            if any(b[n] == mine[n] for b in before):
                continue
            theirs = [_files(self.repo, p, name) for p in parents]
            for path, oid in sorted(_files(self.repo, commit, name).items()):
                if not any(side.get(path) == oid for side in theirs):
                    return path, f"changed in merge commit {short}, no parent's"
        return None


def _primary(needs: list[tuple[str, str]]) -> tuple[str, str]:
    """The record a commit is reported by: a release's first, then a run's."""
    order = {name: n for n, name in enumerate(PROTECTED)}
    return min(needs, key=lambda pv: (order[pv[0].split("/", 1)[0]], pv[0]))


def _changed(
    repo: pygit2.Repository, parent: Commit | None, commit: Commit
) -> list[tuple[str, str]]:
    """(path, added|changed|removed) of every protected file ``commit`` changes."""
    out: list[tuple[str, str]] = []
    for name in PROTECTED:
        old = None if parent is None else _object(repo, parent.tree, name)
        new = _object(repo, commit.tree, name)
        if old is not None and new is not None and old.id == new.id:
            continue
        if isinstance(old, Tree) or isinstance(new, Tree):
            a = old if isinstance(old, Tree) else None
            b = new if isinstance(new, Tree) else None
            for path, was, now in changed_blobs(repo, a, b, prefix=f"{name}/"):
                out.append((path, _verb(was, now)))
            continue
        if old is None and new is None:
            continue
        out.append((name, _verb(old, new)))
    return out


def _verb(old: object, new: object) -> str:
    return "added" if old is None else "removed" if new is None else "changed"


def _student(repo: pygit2.Repository, commit: Commit) -> Student:
    """The student keys ``settings.json`` holds at ``commit`` (unset ones left out)."""
    return signing.student_of(_blob(repo, _entry(commit.tree, SETTINGS)))


def _files(repo: pygit2.Repository, commit: Commit, name: str) -> dict[str, Oid]:
    found = _object(repo, commit.tree, name)
    if not isinstance(found, Tree):
        return {} if found is None else {name: found.id}
    return {p: new for p, _, new in changed_blobs(repo, None, found, f"{name}/") if new}


def _entry(tree: Tree, name: str) -> Oid | None:
    try:
        return tree[name].id
    except KeyError:
        return None


def _object(repo: pygit2.Repository, tree: Tree, name: str) -> pygit2.Object | None:
    oid = _entry(tree, name)
    return None if oid is None else repo[oid]


def _blob(repo: pygit2.Repository, oid: Oid | None) -> bytes | None:
    if oid is None:
        return None
    try:
        return repo[oid].peel(pygit2.Blob).data
    except (KeyError, ValueError, pygit2.GitError):
        return None


# -- the commands: machine release signers ------------------------------------------


@dataclass(frozen=True)
class Listed:
    """One allowed signer as ``machine release signers`` shows it."""

    signer: Signer
    you: bool
    first: bool  # trusted on first use: the key that started the list

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.signer.name,
            "key": self.signer.key,
            "fingerprint": self.signer.fingerprint,
            "you": self.you,
            "first": self.first,
        }

    def line(self) -> str:
        notes = [n for n, on in (("you", self.you), ("first", self.first)) if on]
        tail = f"  ({', '.join(notes)})" if notes else ""
        return f"{self.signer.name}  {self.signer.fingerprint}{tail}"


def listing(store: Store) -> list[Listed]:
    """The store's allowed signers, the first (trusted on first use) marked."""
    head = store.head
    found = signers_at(store.repo, head)
    first = _first_signers(store.repo, head)
    own = _own_blob()
    return [Listed(s, s.blob == own, s.blob in first) for s in found]


def own(store: Store | None) -> Signer:
    """This user's key (made now if it is not there yet), as the store names it."""
    from machine_git.store.store import author

    mine = signing.own_key(author().email)
    if store is not None:
        for s in signers_at(store.repo, store.head):
            if s.blob == mine.blob:
                return s
    return mine


def add(store: Store, name: str, key: str) -> tuple[Signer, str | None]:
    """Allow ``key`` as ``name`` (one commit signed by an allowed signer).

    None as the commit when the key was already allowed under that name.
    """
    from machine_git.store.store import author

    signer = Signer(signing.check_name(name), signing.parse_key(key))

    def plan(snap: Snapshot) -> Change | None:
        current = signing.parse_signers(snap.read(SIGNERS))
        if not current:  # the first signer is whoever adds the second
            current = [signing.own_key(author().email)]
        if any(s.name == name and s.blob == signer.blob for s in current):
            return None
        taken = [s for s in current if s.name == name or s.blob == signer.blob]
        if taken:
            raise UsageError(
                f"{taken[0].name} ({taken[0].fingerprint}) is already allowed; "
                "a name and a key are each allowed once"
            )
        return Change(
            summary=f"signers add {name}: {signer.fingerprint}",
            files={SIGNERS: signing.render_signers([*current, signer])},
            trailers={"Action": "signers-add", "Signer": name},
        )

    oid = store.write(plan)
    return signer, None if oid is None else str(oid)


def _first_signers(repo: pygit2.Repository, head: Commit | None) -> set[bytes]:
    """The keys of the first ``allowed_signers`` on the first-parent line."""
    first: set[bytes] = set()
    current = head
    while current is not None:
        if _entry(current.tree, SIGNERS) is None:
            break
        first = {s.blob for s in signers_at(repo, current)}
        current = current.parents[0] if current.parents else None
    return first


def _own_blob() -> bytes | None:
    path = signing.key_path().with_name(f"{signing.KEY_NAME}.pub")
    try:
        return Signer("you", signing.parse_key(path.read_text())).blob
    except (OSError, UsageError):
        return None
