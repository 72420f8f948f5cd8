"""What is damaged in a store, and what going back to intact data costs.

:func:`diagnose` looks at a store the way git would not dare to: it reads
HEAD, the config, the branch and ``packed-refs`` as plain files (reflog.py),
and the commits through an objects-only repository (intact.py), so whatever
file is damaged, it can still say what is wrong. The newest commit the
branch has been at whose commit and every tree and blob it reaches read
cleanly is the *newest intact commit*, and the rows it does not have are
what going back loses. It only reads; recover.py takes the step.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any
from typing import Generic
from typing import TypeVar

import pygit2

from machine_git.core.errors import RECOVER_HINT
from machine_git.core.errors import DamagedStoreError
from machine_git.core.errors import DiskFullError
from machine_git.core.errors import ReadOnlyStoreError
from machine_git.core.errors import StoreError
from machine_git.recovery.intact import Checker
from machine_git.recovery.intact import lost_rows
from machine_git.recovery.intact import step_of
from machine_git.store import packs
from machine_git.store.damage import packed_refs
from machine_git.store.layout import BRANCH
from machine_git.store.layout import HEAD_TEXT
from machine_git.store.objects import damaged_loose
from machine_git.store.objects import objects_only
from machine_git.store.reflog import HEX40
from machine_git.store.reflog import Entry
from machine_git.store.reflog import Step
from machine_git.store.reflog import branch_value
from machine_git.store.reflog import commits_newest_first
from machine_git.store.reflog import newest_first
from machine_git.store.reflog import read_file
from machine_git.store.reflog import ref_values
from machine_git.store.reflog import shown_time
from machine_git.store.reflog import undone_steps


@dataclass
class Diagnosis:
    """What is damaged in a store, and what going back to intact data means.

    ``intact`` is the newest commit whose commit, trees and blobs read
    cleanly (None: nothing is); the recover commit gets its tree, and
    ``parent`` (the newest commit whose whole history also reads) as its
    parent. ``lost`` are the rows the damaged state has that ``intact``
    does not (or has in another version); ``unlisted`` names what could not
    be read to list them; ``undone`` the branch's steps after ``intact``.
    """

    store: str
    problems: list[str] = field(default_factory=list)
    branch: str | None = None
    intact: Step | None = None
    parent: str | None = None
    lost: list[str] = field(default_factory=list)
    unlisted: list[str] = field(default_factory=list)
    undone: list[Step] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)
    damaged_files: list[str] = field(default_factory=list)
    damaged_refs: list[str] = field(default_factory=list)
    damaged_commits: list[str] = field(default_factory=list)
    damaged_packs: list[str] = field(default_factory=list)
    rebuildable: list[str] = field(default_factory=list)  # packs: index only
    remote: str | None = None

    @property
    def damaged(self) -> bool:
        return bool(self.problems)

    def to_json(self) -> dict[str, Any]:
        value = asdict(self)
        value["damaged"] = self.damaged
        return value


def diagnose(
    path: Path, verified: str | None = None, thorough: bool = False
) -> Diagnosis:
    """What is damaged in the store at ``path``; reads only.

    ``verified`` is a commit whose trees and blobs the caller has just read
    cleanly (``validate --store``), so they are not read twice. ``thorough``
    reads every tree and blob of the whole history, as git gc does (recover
    and a failed gc ask for it; it is the default once damage is found).
    """
    found = Diagnosis(str(path))
    _check_files(path, found)
    if not (path / "objects").is_dir():
        found.problems.append("the objects folder is missing")
        return found
    repo = objects_only(path)
    for file, why in damaged_loose(path / "objects"):
        found.damaged_files.append(file)
        found.problems.append(f"object {id_of(file)} is damaged ({why})")
    _check_packs(path, found)
    # With a damaged object somewhere, a commit is whole only when its whole
    # history's trees and blobs read too (git gc reads them all); otherwise
    # reading each old commit object is enough, and far cheaper.
    deep = thorough or bool(found.damaged_files or found.damaged_packs)
    checker = Checker(repo, verified, deep)
    _choose(path, found, checker)
    _check_refs(path, found, checker)
    if found.damaged and found.intact is not None:
        found.repairs.append(
            f"commit the tree of {found.intact.commit[:12]} as a recover step"
            + (f" on {found.parent[:12]}" if found.parent else " (a new root)")
        )
    return found


def _check_packs(path: Path, found: Diagnosis) -> None:
    for pack in packs.check(path / "objects"):
        if pack.problem is None:
            continue
        found.problems.append(f"pack {pack.path.name}: {pack.problem}")
        if pack.index_only:
            found.rebuildable.append(str(pack.path))
            found.repairs.append(f"build the index of {pack.path.name} again")
        else:
            found.damaged_packs.append(str(pack.path))
            found.repairs.append(
                f"take {pack.path.name} apart: what reads becomes loose objects"
            )


def _check_files(path: Path, found: Diagnosis) -> None:
    head = read_file(path / "HEAD")
    if head != HEAD_TEXT:
        found.problems.append("HEAD is " + ("missing" if head is None else "damaged"))
        found.repairs.append("write HEAD")
    try:
        pygit2.Config(str(path / "config"))
    except (pygit2.GitError, OSError) as e:
        found.problems.append(f"the git config is damaged ({e})")
        found.repairs.append("write the git config again (remotes kept)")
    packed = read_file(path / "packed-refs")
    if packed is not None:
        bad = len(packed_refs(packed)[1])
        if bad:
            found.problems.append(f"packed-refs has {count_of(bad, 'unreadable line')}")
            found.repairs.append("drop the unreadable lines of packed-refs")


def _choose(path: Path, found: Diagnosis, checker: Checker) -> None:
    """Fill ``branch``, ``intact``, ``parent``, ``lost`` and ``undone``."""
    branch, problem = branch_value(path)
    found.branch = branch
    if problem is not None:
        found.problems.append(problem)
        found.repairs.append(f"write {BRANCH} again")
    # The reflog is read from its end and only as far as needed: a healthy
    # store stops at its newest line (a year of tags is a million lines).
    entries = _Replay(newest_first(path))
    candidates = _Replay(commits_newest_first(branch, entries))
    if branch is not None and problem is None:
        why = checker.content(branch) or checker.history(branch)
        if why is not None:
            found.problems.append(why)
    for index, commit in enumerate(candidates):
        if checker.content(commit) is None:
            # oldest first: the message of the first line that names it
            found.intact = step_of(checker, commit, _OldestFirst(entries))
            found.parent = next(
                (c for c in candidates.since(index) if checker.whole(c)), None
            )
            break
    # Commits the branch has been at that do not read whole: recover sets
    # their files aside (git gc stops at a readable commit that reaches a
    # missing object; a missing commit is only a warning to it). Reading
    # every one of them is for a damaged store only.
    if found.damaged or checker.deep:
        found.damaged_commits = [c for c in candidates if not checker.whole(c)]
    current = branch or next(iter(candidates), None)
    if found.intact is not None and current not in (None, found.intact.commit):
        found.lost, found.unlisted = lost_rows(
            checker.objects, found.intact.commit, current
        )
    found.undone = undone_steps(entries, found.intact.commit if found.intact else None)


T = TypeVar("T")


class _Replay(Generic[T]):
    """An iterator read once, as far as asked, that can be walked again."""

    def __init__(self, source: Iterator[T]) -> None:
        self._source = source
        self._read: list[T] = []

    def __iter__(self) -> Iterator[T]:
        return self.since(0)

    def since(self, index: int) -> Iterator[T]:
        while True:
            if index < len(self._read):
                yield self._read[index]
                index += 1
                continue
            item = next(self._source, _END)
            if item is _END:
                return
            self._read.append(item)  # type: ignore[arg-type]


_END = object()


class _OldestFirst:
    """The whole reflog oldest first, read only when a damaged commit needs it."""

    def __init__(self, newest: _Replay[Entry]) -> None:
        self._newest = newest

    def __iter__(self) -> Iterator[Entry]:
        return reversed(list(self._newest))


def _check_refs(path: Path, found: Diagnosis, checker: Checker) -> None:
    """Refs other than the branch (versions, runs, remotes) that name no object.

    git gc stops at any such ref; recover keeps it in the record and drops it.
    """
    for name, oid in sorted(ref_values(path).items()):
        if name == BRANCH:
            continue
        why = "holds no object id" if not HEX40.match(oid) else checker.names(oid)
        thorough = found.damaged or checker.deep  # else: the object reads
        if why is None and thorough and not checker.whole(checker.commit_of(oid)):
            why = f"names {oid[:12]}, a damaged commit or one whose history is"
        if why is not None:
            found.problems.append(f"the ref {name} {why}")
            found.damaged_refs.append(name)
    if found.damaged_refs:
        refs = ", ".join(found.damaged_refs)
        found.repairs.append(f"set aside the damaged refs ({refs})")


def describe(found: Diagnosis, limit: int = 20) -> list[str]:
    """The diagnosis as lines a person reads: damage, the way back, its cost."""
    lines = [f"damaged: {problem}" for problem in found.problems[:limit]]
    if len(found.problems) > limit:
        lines.append(f"damaged: ... and {len(found.problems) - limit} more")
    if not found.damaged:
        return lines
    step = found.intact
    if step is None:
        lines.append("no commit the branch has been at is intact")
        return lines
    source = (
        f"{found.remote}'s newest commit" if found.remote else "newest intact commit"
    )
    when = f"({shown_time(step.time)})" if step.time else ""
    lines.append(f"{source}: {step.commit[:12]} {step.summary} {when}".rstrip())
    lost = ", ".join(found.lost[:limit]) + (", ..." if len(found.lost) > limit else "")
    lines.append(
        f"going back to it loses {count_of(len(found.lost), 'row')}"
        + (f": {lost}" if found.lost else "")
    )
    lines += [f"  and what {what} holds" for what in found.unlisted[:limit]]
    if found.undone:
        lines.append(f"it undoes {count_of(len(found.undone), 'step')} of the branch:")
        lines += [f"  {shown_time(s.time)}  {s.summary}" for s in found.undone[:limit]]
    return lines


def way_out(found: Diagnosis) -> str:
    """The one line that says what to run next about a damaged store."""
    if found.intact is None:
        return (
            "nothing intact to go back to: restore it from a remote with "
            "'machine recover --from REMOTE --yes'"
        )
    return "'machine recover' shows the step back, 'machine recover --yes' takes it"


def count_of(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def id_of(file: str | Path) -> str:
    p = Path(file)
    return p.parent.name + p.name


def damage_or(path: Path, e: StoreError, doing: str) -> StoreError:
    """``e``, or a DamagedStoreError if the store is damaged.

    git says damage its own way each time ("bad object", "inflate: data
    stream error", ...), so when a git command fails the store is diagnosed
    rather than git's words parsed. ``doing`` completes "git cannot ...".
    """
    if isinstance(e, DiskFullError | ReadOnlyStoreError):
        return e
    found = diagnose(path, thorough=True)
    if not found.damaged:
        return e
    return DamagedStoreError(
        f"damaged store {path}: {found.problems[0]}; git cannot {doing} "
        f"({RECOVER_HINT})"
    )
