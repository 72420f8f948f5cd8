"""Verifying release records from history: every byte under releases/ accounted for.

The audit walks every commit reachable from the tips, oldest first. A commit
that changes ``releases/`` must be exactly one release step: it may only add
files, and the files it changes (anywhere in the tree) must be the bytes the
step's function (``steps.py``) produces from the commit's parent and the
inputs the new record carries. A commit whose trailers claim a release step
but that writes no release record is a forged trailer; a merge may only
combine release records its parents already hold. A release id that was
preregistered once is never preregistered again, even after its files were
removed. Trailers are never trusted: they only have to agree with the content.

What "verified" means for a check: the Tinker service's answers cannot be
recomputed offline, so the audit takes them as the check's input and
recomputes everything else (the cases from the frozen eval set and holdouts,
every score, every gate, the verdict, the number) and the digest chain
(``prereg_sha256``, ``previous_sha256``, and for trial and activation the
sha256 of the check and trial they rest on). A forged verdict, a reference
changed after the fact, a removed or reordered check, or a check against
edited gates is found; answers invented wholesale and consistent with
themselves are not, and nothing offline could find them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterable
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any

import pygit2
from pygit2 import Commit
from pygit2 import Oid
from pygit2 import Tree

from machine_git import __version__
from machine_git.core import jsonio
from machine_git.core.errors import MachineError
from machine_git.core.errors import ReleaseRecordError
from machine_git.core.errors import TamperedReleaseError
from machine_git.history import history
from machine_git.history.diff import MISSING
from machine_git.history.diff import diff_values
from machine_git.history.diff import show_value
from machine_git.recovery.validate import Finding
from machine_git.releases import adoption
from machine_git.releases import steps
from machine_git.releases import trust
from machine_git.releases.records import RELEASES
from machine_git.releases.records import Activation
from machine_git.releases.records import Check
from machine_git.releases.records import Prereg
from machine_git.releases.records import Trial
from machine_git.releases.records import check_number
from machine_git.releases.records import holdouts_path
from machine_git.releases.records import load
from machine_git.releases.records import split
from machine_git.store.signing import ADOPTED
from machine_git.store.signing import parse_signers
from machine_git.store.store import WORK
from machine_git.store.store import Change
from machine_git.store.store import Snapshot
from machine_git.store.store import Store
from machine_git.store.treediff import changed_blobs

APPEND_ONLY = "(release records are append-only)"
_CLAIM = b"Machine-Action: release-"
CACHE = "release-audit.json"
_CACHE_VERSION = f"4/{__version__}"  # a new machine re-audits everything once
_KNOWN = ("prereg.json", "holdouts.jsonl", "trial.json", "activation.json")


@dataclass(frozen=True)
class Tamper:
    """One release record (or trailer) that no release step accounts for."""

    file: str
    commit: str
    message: str  # "changed in commit <short> ..."
    field: str = "$"
    step_of: str | None = None  # the release whose step wrote a file outside it

    @property
    def release(self) -> str | None:
        parts = self.file.split("/")
        found, _ = split(f"{self.file}/x" if len(parts) == 2 else self.file)
        return found or self.step_of

    def __str__(self) -> str:
        where = "" if self.field == "$" else f"{self.field} "
        return f"{self.file}: {where}{self.message}"

    def finding(self) -> Finding:
        """As ``machine validate --store`` prints it (``file:line: path: ...``)."""
        return Finding(self.file, 1, self.field, self.message)


@dataclass
class Audit:
    """What the history says about every release."""

    tampered: list[Tamper] = field(default_factory=list)
    written: dict[str, str] = field(default_factory=dict)  # path -> commit
    registered: dict[str, list[str]] = field(default_factory=dict)  # id -> commits
    # The student the signed history chose (settings.json alone is never believed).
    student: dict[str, Any] | None = None
    activations: list[str] = field(default_factory=list)  # release ids, in order
    signers: list[str] = field(default_factory=list)  # allowed_signers lines trusted
    # Unsigned commits a signer adopted: commit -> "adopted by NAME in commit C".
    adopted: dict[str, str] = field(default_factory=dict)

    def copy(self) -> Audit:
        return Audit(
            list(self.tampered),
            dict(self.written),
            {k: list(v) for k, v in self.registered.items()},
            None if self.student is None else dict(self.student),
            list(self.activations),
            list(self.signers),
            dict(self.adopted),
        )

    def verified(self) -> trust.Verified:
        """The signed state at the tip this audit covered."""
        lines = "".join(f"{line}\n" for line in self.signers).encode()
        return trust.Verified(self.student, tuple(parse_signers(lines)))

    @property
    def active(self) -> str | None:
        """The one active release: the last activated that is not tampered."""
        for rid in reversed(self.activations):
            if not self.of(rid):
                return rid
        return None

    def of(self, release_id: str) -> list[Tamper]:
        return [t for t in self.tampered if t.release == release_id]

    def require_clean(self, release_id: str) -> None:
        """Refuse to go on with a tampered release (one line: its first problem)."""
        found = self.of(release_id)
        if found:
            raise TamperedReleaseError(
                f"{release_id} was tampered with: {found[0]}; "
                "preregister a new release id"
            )

    def elsewhere(self) -> list[Tamper]:
        """Tampered signed records outside any release: runs, the student, signers."""
        return [t for t in self.tampered if t.release is None]

    def require_run_clean(self, release_id: str | None, run_id: str) -> None:
        """Refuse a run record (and a release resting on it) that was tampered
        with: its claims are never used."""
        path = f"runs/{run_id}.json"
        found = [t for t in self.tampered if t.file == path]
        if found:
            whose = (
                f"{release_id} rests on run {run_id}, whose"
                if release_id
                else (f"run {run_id}'s")
            )
            raise TamperedReleaseError(f"{whose} record was tampered with: {found[0]}")

    def since(self, path: str) -> str:
        """The commit that wrote ``path`` (the empty string if none did)."""
        return self.written.get(path, "")


def verify(
    repo: pygit2.Repository,
    tips: Iterable[Oid],
    since: tuple[Oid, Audit] | None = None,
) -> Audit:
    """Check every commit reachable from ``tips`` that touches release records.

    ``since`` is an earlier audit and the tip it covered: only the commits
    not reachable from that tip are walked (the audit of a commit's history
    never changes, since a commit names its history).
    """
    result = Audit() if since is None else since[1].copy()
    walker = None
    for tip in tips:
        if walker is None:
            walker = repo.walk(
                tip, pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.REVERSE
            )
        else:
            walker.push(tip)
    if walker is not None and since is not None:
        walker.hide(since[0])
    # Oldest first, so a parent's releases/ tree id is already known: one tree
    # read per commit; only commits that change releases/ (or claim to) cost more.
    known: dict[Oid, Oid | None] = {}
    signed = trust.Walk(repo, result.verified())
    for commit in walker or []:
        mine = known[commit.id] = _releases_id(commit)
        before = [
            known[p] if p in known else _releases_id(repo[p].peel(Commit))
            for p in commit.parent_ids
        ]
        changed = any(b != mine for b in before) or (not before and mine is not None)
        if changed or _CLAIM in commit.raw_message:
            _Step(repo, commit, result).verify(changed)
        unsigned = signed.see(commit)
        if unsigned is not None:
            path, message = unsigned
            result.tampered.append(Tamper(path, str(commit.id), message))
    _adopt(repo, result, signed.adoptions)
    state = signed.verified()
    result.student = state.student
    result.signers = [s.line() for s in state.signers]
    return result


def _adopt(
    repo: pygit2.Repository, result: Audit, adoptions: list[tuple[Commit, str]]
) -> None:
    """Accept the missing signatures signed adoptions vouch for (nothing else)."""
    accepted, problems = adoption.vouched(repo, adoptions)
    result.adopted.update(accepted)
    for commit, message in problems:
        result.tampered.append(Tamper(ADOPTED, commit, message))
    if result.adopted:
        result.tampered = [
            t
            for t in result.tampered
            if not (t.commit in result.adopted and trust.UNSIGNED in t.message)
        ]


def of_store(store: Store) -> Audit:
    """The audit of the store's branch, walking only what is new since last time.

    The last result is kept in ``<store>/machine/release-audit.json`` (outside
    git: never pushed or cloned), keyed by the branch tip it covered and
    machine's version. A tip that is no longer an ancestor (history rewritten
    in a store without the hook) or an unreadable file means a full walk.
    """
    head = store.head
    if head is None:
        return Audit()
    cache = store.path / WORK / CACHE
    since = _load(cache, store.repo)
    if since is not None and since[0] != head.id:
        try:
            ahead = store.repo.descendant_of(head.id, since[0])
        except (KeyError, ValueError, pygit2.GitError):
            ahead = False
        since = since if ahead else None
    if since is not None and since[0] == head.id:
        return since[1]
    result = verify(store.repo, [head.id], since)
    _save(cache, head.id, result)
    return result


def _load(path: Path, repo: pygit2.Repository) -> tuple[Oid, Audit] | None:
    try:
        value = jsonio.loads(path.read_bytes())
        if value.get("version") != _CACHE_VERSION:
            return None
        tip = Oid(hex=value["tip"])
        repo[tip]  # gone after a gc of rewritten history: start over
        return tip, Audit(
            tampered=[Tamper(**t) for t in value["tampered"]],
            written=dict(value["written"]),
            registered={k: list(v) for k, v in value["registered"].items()},
            student=value["student"],
            activations=list(value["activations"]),
            signers=list(value["signers"]),
            adopted=dict(value["adopted"]),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError, pygit2.GitError):
        return None


def _save(path: Path, tip: Oid, result: Audit) -> None:
    value = {
        "version": _CACHE_VERSION,
        "tip": str(tip),
        "tampered": [dataclasses.asdict(t) for t in result.tampered],
        "written": result.written,
        "registered": result.registered,
        "student": result.student,
        "activations": result.activations,
        "signers": result.signers,
        "adopted": result.adopted,
    }
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(jsonio.canonical(value))
        os.replace(tmp, path)
    except OSError:
        # A read-only store is still audited, just not remembered.
        with contextlib.suppress(OSError):
            tmp.unlink()


def pushed(
    repo: pygit2.Repository, commits: list[Commit], store_path: Path | None = None
) -> list[tuple[Commit, list[Tamper]]]:
    """The pushed commits that tamper with release records, with their problems.

    The walk starts at the pushed commits, so it covers their whole history
    (an id preregistered long ago is still taken); with ``store_path``, the
    store's last audit spares the part of it already verified.
    """
    since = _load(store_path / WORK / CACHE, repo) if store_path else None
    found = verify(repo, [c.id for c in commits], since)
    out = []
    for commit in commits:
        mine = [t for t in found.tampered if t.commit == str(commit.id)]
        if mine:
            out.append((commit, mine))
    return out


def _releases_id(commit: Commit) -> Oid | None:
    try:
        return commit.tree[RELEASES].id
    except KeyError:
        return None


class _Step:
    """One commit under audit."""

    def __init__(self, repo: pygit2.Repository, commit: Commit, result: Audit):
        self.repo = repo
        self.commit = commit
        self.result = result
        self.hex = str(commit.id)
        self.short = self.hex[:12]
        self.flagged: set[str] = set()
        self.rid: str | None = None  # the release whose step this commit takes

    def tamper(self, path: str, message: str, where: str = "$") -> None:
        self.flagged.add(path)
        self.result.tampered.append(Tamper(path, self.hex, message, where, self.rid))

    def verify(self, changed: bool) -> None:
        parents = self.commit.parents
        if len(parents) > 1:
            self._merge()
        elif changed:
            self._one_step(parents[0] if parents else None)
        else:
            self._forged_trailer()

    # -- commits that claim a step they do not take --------------------------------

    def _forged_trailer(self) -> None:
        entry = history.entry(self.commit)
        if not entry.action.startswith("release-"):
            return
        rid = entry.trailers.get("Release") or "?"
        self.tamper(
            f"{RELEASES}/{rid}",
            f"{entry.action} claimed by the trailers of commit {self.short}, "
            "which writes no release record (a forged trailer)",
        )

    # -- merges ------------------------------------------------------------------------

    def _merge(self) -> None:
        mine = _release_files(self.repo, self.commit)
        theirs = [_release_files(self.repo, p) for p in self.commit.parents]
        for path in sorted(set().union(*theirs) - set(mine)):
            self.tamper(path, f"removed in merge commit {self.short} {APPEND_ONLY}")
        for path, oid in sorted(mine.items()):
            if any(side.get(path) == oid for side in theirs):
                continue
            verb = "changed" if any(path in side for side in theirs) else "added"
            self.tamper(
                path,
                f"{verb} in merge commit {self.short}, which no parent holds "
                f"{APPEND_ONLY}",
            )
        first = theirs[0]
        touched = {split(p)[0] for p in mine if first.get(p) != mine[p]}
        snap = Snapshot(self.repo, self.commit)
        for rid in sorted(r for r in touched if r is not None):
            try:
                links = steps.broken_links(steps.folder(snap, rid))
            except MachineError:
                continue  # a record that fails its model was reported where added
            for path, where in links:
                self.tamper(
                    path,
                    f"joined in merge commit {self.short} to records it does not "
                    "name (two histories of one release)",
                    where,
                )
        self._forged_trailer()

    # -- one release step --------------------------------------------------------------

    def _one_step(self, parent: Commit | None) -> None:
        before = parent.tree if parent is not None else None
        changes = list(changed_blobs(self.repo, before, self.commit.tree))
        added: dict[str, Oid] = {}
        for path, old, new in changes:
            if not path.startswith(f"{RELEASES}/"):
                continue
            if old is not None:
                verb = "removed" if new is None else "changed"
                where = "$" if new is None else self._first_field(old, new)[0]
                self.tamper(path, f"{verb} in commit {self.short} {APPEND_ONLY}", where)
            elif new is not None:
                added[path] = new
                self.result.written.setdefault(path, self.hex)
        groups: dict[str | None, list[str]] = {}
        for path in added:
            groups.setdefault(split(path)[0], []).append(path)
        for rid, paths in sorted(groups.items(), key=lambda kv: str(kv[0])):
            if rid is None or len(groups) > 1:
                for path in paths:
                    self._unwritten(path)
                continue
            self._recompute(parent, rid, {p: added[p] for p in paths}, changes)

    def _unwritten(self, path: str) -> None:
        self.tamper(
            path, f"added in commit {self.short}, but no release step writes it"
        )

    def _recompute(
        self,
        parent: Commit | None,
        rid: str,
        added: dict[str, Oid],
        changes: list[tuple[str, Oid | None, Oid | None]],
    ) -> None:
        self.rid = rid
        names = {split(p)[1]: p for p in added}
        step, primary = _step_of(names)
        if step is None or primary is None:
            for path in added:
                self._unwritten(path)
            return
        if step == steps.NEW:
            self._registration(rid, primary)
        snap = Snapshot(self.repo, parent)
        try:
            expected = self._expected(snap, rid, step, primary, added)
        except ReleaseRecordError as e:
            detail = str(e).removeprefix(f"{primary}: ")
            self.tamper(primary, f"added in commit {self.short}, but {detail}")
            return
        except (MachineError, ValueError, KeyError, TypeError, pygit2.GitError) as e:
            # ReleaseError (the step refuses), and whatever hand-made data
            # the step trips over: never a traceback, always a finding.
            why = str(e) if isinstance(e, MachineError) else f"{type(e).__name__}: {e}"
            self.tamper(
                primary,
                f"added in commit {self.short}, but release-{step} refuses: {why}",
            )
            return
        self._compare(snap, step, expected.files, changes)
        if step == steps.ACTIVATE:
            self.result.activations.append(rid)
        entry = history.entry(self.commit)
        claimed = (entry.action, entry.trailers.get("Release"))
        if claimed != (f"release-{step}", rid) and primary not in self.flagged:
            self.tamper(
                primary,
                f"added in commit {self.short}, whose trailers say "
                f"{entry.action} {claimed[1] or ''}".rstrip()
                + f", not release-{step} {rid}",
            )

    def _registration(self, rid: str, primary: str) -> None:
        earlier = self.result.registered.setdefault(rid, [])
        prior = [
            c for c in earlier if self.repo.descendant_of(self.commit.id, Oid(hex=c))
        ]
        earlier.append(self.hex)
        if prior:
            self.tamper(
                primary,
                f"added in commit {self.short}, but {rid} was preregistered in "
                f"commit {prior[0][:12]}; a release id is never reused",
            )

    def _expected(
        self,
        snap: Snapshot,
        rid: str,
        step: str,
        primary: str,
        added: dict[str, Oid],
    ) -> Change:
        data = self._blob(added[primary])
        if step == steps.NEW:
            prereg = load(Prereg, data, primary)
            extra = added.get(holdouts_path(rid))
            holdouts = None if extra is None else self._blob(extra)
            return steps.preregister(snap, steps.inputs_of(prereg), holdouts)
        if step == steps.CHECK:
            check = load(Check, data, primary)
            return steps.check(
                snap, rid, check.samples(), check.created_at, check.sampling
            )
        if step == steps.TRIAL:
            return steps.trial(snap, rid, load(Trial, data, primary).at)
        return steps.activate(snap, rid, load(Activation, data, primary).at)

    def _compare(
        self,
        snap: Snapshot,
        step: str,
        expected: dict[str, bytes | None],
        changes: list[tuple[str, Oid | None, Oid | None]],
    ) -> None:
        want = {p: b for p, b in expected.items() if b != snap.read(p)}
        got = {path: (old, new) for path, old, new in changes}
        for path in sorted(set(want) | set(got)):
            if path in self.flagged:
                continue
            old, new = got.get(path, (None, None))
            verb = "added" if old is None else "removed" if new is None else "changed"
            if path not in want:
                name = split(path)[1]
                if path.startswith(f"{RELEASES}/") and not _known(name):
                    self._unwritten(path)
                else:
                    self.tamper(
                        path,
                        f"{verb} in commit {self.short}, but release-{step} "
                        "does not write it",
                    )
            elif path not in got:
                self.tamper(
                    path,
                    f"left as it was in commit {self.short}, but release-{step} "
                    "writes it",
                )
            elif new is None or self._blob(new) != want[path]:
                self._mismatch(path, verb, step, want[path], new)

    def _mismatch(
        self, path: str, verb: str, step: str, want: bytes | None, new: Oid | None
    ) -> None:
        where, expected, actual = "$", "nothing", "something"
        if want is not None and new is not None:
            where, expected, actual = self._first_field_of(want, self._blob(new))
        self.tamper(
            path,
            f"{verb} in commit {self.short}, but release-{step} writes "
            f"{expected} from the state before it (not {actual})",
            where,
        )

    def _first_field(self, old: Oid, new: Oid) -> tuple[str, str, str]:
        return self._first_field_of(self._blob(old), self._blob(new))

    def _first_field_of(self, want: bytes, have: bytes) -> tuple[str, str, str]:
        try:
            a, b = jsonio.loads(want), jsonio.loads(have)
        except ValueError:
            return "$", "other bytes", "these"
        for change in diff_values(a, b):
            shown = [
                "nothing" if v is MISSING else show_value(v)
                for v in (change.old, change.new)
            ]
            return change.path, shown[0], shown[1]
        return "$", "canonical JSON", "other bytes of the same values"

    def _blob(self, oid: Oid) -> bytes:
        return self.repo[oid].peel(pygit2.Blob).data


def _step_of(names: dict[str, str]) -> tuple[str | None, str | None]:
    """Which step added these files (names inside one release folder)."""
    if "prereg.json" in names:
        return steps.NEW, names["prereg.json"]
    numbered = sorted(n for n in names if check_number(n) is not None)
    if numbered:
        return steps.CHECK, names[numbered[0]]
    if "trial.json" in names:
        return steps.TRIAL, names["trial.json"]
    if "activation.json" in names:
        return steps.ACTIVATE, names["activation.json"]
    return None, None


def _known(name: str) -> bool:
    return name in _KNOWN or check_number(name) is not None


def _release_files(repo: pygit2.Repository, commit: Commit) -> dict[str, Oid]:
    """Every file under ``releases/`` at ``commit``, by path."""
    out: dict[str, Oid] = {}
    top = _releases_id(commit)
    if top is None:
        return out
    pending: list[tuple[str, Oid]] = [(RELEASES, top)]
    while pending:
        prefix, oid = pending.pop()
        obj = repo[oid]
        if not isinstance(obj, Tree):
            out[prefix] = oid
            continue
        pending.extend((f"{prefix}/{e.name}", e.id) for e in obj)
    return out
