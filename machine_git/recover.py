"""Getting a damaged store back: the newest intact commit, as a recorded step.

:func:`diagnose` looks at a store the way git would not dare to: it reads
HEAD, the config, the branch and ``packed-refs`` as plain files, and the
commits through an objects-only repository (objects.py), so whatever file
is damaged, it can still say what is wrong. The branch's reflog (machine
never expires it) lists every commit the branch has been at; the newest of
them whose commit and every tree and blob it reaches read cleanly is the
*newest intact commit*, and the rows it does not have are what going back
loses.

:func:`recover` makes that step, under the writer lock: it repairs the small
files (HEAD, config, ``packed-refs``, a branch file holding garbage), sets
damaged loose objects aside, and commits the intact tree with a
``Machine-Action: recover`` trailer naming the damaged commit, so ``machine
log`` shows it. Nothing is deleted: what it replaced or set aside is kept in
``<store>/machine/damaged/<time>/`` with a ``record.json``. A ref to the
damaged commit would be the obvious way to keep it findable, but git gc
refuses to run while any ref reaches a missing or damaged object; so the
commit id is in the trailer, the reflog and the record, and its object
file in the record folder.

:func:`restore` does the same from a remote: it fetches the remote's branch
into a fresh repository inside the store's folder (nothing local is trusted
while fetching), checks it, and adopts it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import asdict
from dataclasses import dataclass
from dataclasses import field
from datetime import UTC
from datetime import datetime
from pathlib import Path
from typing import Any

import pygit2
from pygit2 import Oid
from pygit2.enums import SortMode

from machine_git import jsonio
from machine_git import packs
from machine_git import rows
from machine_git.errors import DamagedStoreError
from machine_git.errors import RemoteError
from machine_git.objects import CorruptObjectError
from machine_git.objects import Objects
from machine_git.objects import damaged_loose
from machine_git.objects import guard
from machine_git.objects import objects_only
from machine_git.objects import open_repository
from machine_git.store import BRANCH
from machine_git.store import REFLOG
from machine_git.store import WORK
from machine_git.store import Store
from machine_git.store import clear_stale_ref_lock
from machine_git.store import configure
from machine_git.store import packed_refs
from machine_git.store import reason
from machine_git.store import writer_lock

RECORDS = "damaged"  # <store>/machine/damaged/<time>/: what recover replaced
HEAD_TEXT = b"ref: refs/heads/main\n"  # the only HEAD a machine store has
_HEX = re.compile(r"^[0-9a-f]{40}$")
_READ_ERRORS = (KeyError, ValueError, OSError, pygit2.GitError, CorruptObjectError)
_ZERO = "0" * 40
_URL = re.compile(r"^\s*url\s*=\s*(.+?)\s*$")


@dataclass
class Step:
    """A commit the branch has been at: its id, first line and time (UTC)."""

    commit: str
    summary: str
    time: str


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


@dataclass
class Recovery:
    """What :func:`recover` or :func:`restore` did (``commit`` None: dry run)."""

    diagnosis: Diagnosis
    commit: str | None = None
    record: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            **self.diagnosis.to_json(),
            "done": self.commit is not None,
            "commit": self.commit,
            "record": self.record,
        }


@dataclass
class _Entry:
    old: str
    new: str
    when: int
    message: str


# -- looking ---------------------------------------------------------------------


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
        found.problems.append(f"object {_id_of(file)} is damaged ({why})")
    _check_packs(path, found)
    # With a damaged object somewhere, a commit is whole only when its whole
    # history's trees and blobs read too (git gc reads them all); otherwise
    # reading each old commit object is enough, and far cheaper.
    deep = thorough or bool(found.damaged_files or found.damaged_packs)
    checker = _Checker(repo, verified, deep)
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
    head = _read(path / "HEAD")
    if head != HEAD_TEXT:
        found.problems.append("HEAD is " + ("missing" if head is None else "damaged"))
        found.repairs.append("write HEAD")
    try:
        pygit2.Config(str(path / "config"))
    except (pygit2.GitError, OSError) as e:
        found.problems.append(f"the git config is damaged ({e})")
        found.repairs.append("write the git config again (remotes kept)")
    packed = _read(path / "packed-refs")
    if packed is not None:
        bad = len(packed_refs(packed)[1])
        if bad:
            found.problems.append(f"packed-refs has {_count(bad, 'unreadable line')}")
            found.repairs.append("drop the unreadable lines of packed-refs")


def _choose(path: Path, found: Diagnosis, checker: _Checker) -> None:
    """Fill ``branch``, ``intact``, ``parent``, ``lost`` and ``undone``."""
    branch, problem = _branch(path)
    found.branch = branch
    if problem is not None:
        found.problems.append(problem)
        found.repairs.append(f"write {BRANCH} again")
    entries = reflog(path)
    candidates = _candidates(branch, entries)
    if branch is not None and problem is None:
        why = checker.content(branch) or checker.history(branch)
        if why is not None:
            found.problems.append(why)
    for index, commit in enumerate(candidates):
        if checker.content(commit) is None:
            found.intact = _step(checker, commit, entries)
            found.parent = next(
                (c for c in candidates[index:] if checker.whole(c)), None
            )
            break
    # Commits the branch has been at that do not read whole: recover sets
    # their files aside (git gc stops at a readable commit that reaches a
    # missing object; a missing commit is only a warning to it). Reading
    # every one of them is for a damaged store only.
    if found.damaged or checker.deep:
        found.damaged_commits = [c for c in candidates if not checker.whole(c)]
    current = branch or (candidates[0] if candidates else None)
    if found.intact is not None and current not in (None, found.intact.commit):
        found.lost, found.unlisted = _lost(
            checker.objects, found.intact.commit, current
        )
    found.undone = _undone(entries, found.intact.commit if found.intact else None)


def _check_refs(path: Path, found: Diagnosis, checker: _Checker) -> None:
    """Refs other than the branch (versions, runs, remotes) that name no object.

    git gc stops at any such ref; recover keeps it in the record and drops it.
    """
    for name, oid in sorted(_ref_values(path).items()):
        if name == BRANCH:
            continue
        why = "holds no object id" if not _HEX.match(oid) else checker.names(oid)
        thorough = found.damaged or checker.deep  # else: the object reads
        if why is None and thorough and not checker.whole(checker.commit_of(oid)):
            why = f"names {oid[:12]}, a damaged commit or one whose history is"
        if why is not None:
            found.problems.append(f"the ref {name} {why}")
            found.damaged_refs.append(name)
    if found.damaged_refs:
        refs = ", ".join(found.damaged_refs)
        found.repairs.append(f"set aside the damaged refs ({refs})")


def _ref_values(path: Path) -> dict[str, str]:
    """Every ref's name and what it holds (an id, or whatever is there)."""
    packed = _read(path / "packed-refs") or b""
    named = {name: oid for oid, name in packed_refs(packed)[0]}
    folder = path / "refs"
    for file in sorted(folder.rglob("*")) if folder.is_dir() else []:
        if file.is_file() and not file.name.endswith(".lock"):
            text = (_read(file) or b"").decode("ascii", "replace").strip()
            named[str(file.relative_to(path))] = text
    return named


def _candidates(branch: str | None, entries: list[_Entry]) -> list[str]:
    """The commits the branch has been at, newest first, each once."""
    seen: list[str] = []
    for commit in [branch or "", *(e.new for e in reversed(entries))]:
        if _HEX.match(commit) and commit != _ZERO and commit not in seen:
            seen.append(commit)
    return seen


def _branch(path: Path) -> tuple[str | None, str | None]:
    """(the id the branch names, or None; the problem with it, or None)."""
    loose = _read(path / "refs" / "heads" / "main")
    if loose is not None:
        text = loose.decode("ascii", "replace").strip()
        if _HEX.match(text):
            return text, None
        what = "is empty" if not text else "holds no commit id"
        if text.startswith("ref:"):
            what = f"points at another ref ({text[4:].strip()[:60]})"
        return None, f"the branch {BRANCH} {what}"
    packed = _read(path / "packed-refs")
    if packed is not None:
        for oid, name in packed_refs(packed)[0]:
            if name == BRANCH:
                return oid, None
    if (path / REFLOG).is_file() and reflog(path):
        return None, f"the branch {BRANCH} is missing"
    return None, None


def reflog(path: Path) -> list[_Entry]:
    """The branch's reflog, oldest first; unreadable lines are skipped."""
    data = _read(path / REFLOG) or b""
    found: list[_Entry] = []
    for line in data.decode("utf-8", "replace").splitlines():
        head, _, message = line.partition("\t")
        parts = head.split(" ")
        if len(parts) < 4 or not (_HEX.match(parts[0]) and _HEX.match(parts[1])):
            continue
        try:
            when = int(parts[-2])
        except ValueError:
            when = 0
        found.append(_Entry(parts[0], parts[1], when, message))
    return found


def _step(checker: _Checker, commit: str, entries: list[_Entry]) -> Step:
    try:
        obj = checker.objects.commit(Oid(hex=commit))
        summary = (obj.message or "").splitlines()[:1] or [""]
        return Step(commit, summary[0], _when(obj.commit_time))
    except _READ_ERRORS:
        message = next((e.message for e in entries if e.new == commit), "")
        return Step(commit, message, "")


def _undone(entries: list[_Entry], intact: str | None) -> list[Step]:
    """The branch's steps after it was last at ``intact``, newest first."""
    after: list[_Entry] = []
    for entry in reversed(entries):
        if entry.new == intact:
            break
        after.append(entry)
    return [Step(e.new, _summary(e.message), _when(e.when)) for e in after]


def _summary(message: str) -> str:
    # libgit2 writes "commit: <summary>" for a commit made on the branch.
    return message.removeprefix("commit: ").removeprefix("commit (initial): ")


class _Checker:
    """Reads commits, trees and blobs once each, remembering what was intact."""

    def __init__(
        self, repo: pygit2.Repository, verified: str | None, deep: bool = False
    ) -> None:
        self.objects = Objects(repo)
        self.deep = deep  # a whole history means its trees and blobs too
        self.good: set[Oid] = set()  # trees and blobs that read, and all below
        self.bad: dict[Oid, str] = {}
        self.whole_history: set[Oid] = set()  # commits whose history reads
        self.histories: dict[str, str | None] = {}
        self.verified = verified

    def content(self, commit: str) -> str | None:
        """None if ``commit`` and all it reaches read cleanly, else why not."""
        oid = Oid(hex=commit)
        try:
            tree_id = self.objects.commit(oid).tree_id
        except _READ_ERRORS as e:
            return f"commit {commit[:12]} is {_damage(e)}"
        if commit == self.verified:
            return None
        why = self._tree(tree_id, "")
        return None if why is None else f"commit {commit[:12]}: {why}"

    def history(self, commit: str) -> str | None:
        """None if every commit in the history of ``commit`` reads, else why not."""
        if commit in self.histories:
            return self.histories[commit]
        if not self.deep:
            # libgit2's own walk (reads guarded) is the fast path; only when
            # it fails does the walk below find which commit is damaged.
            with contextlib.suppress(*_READ_ERRORS):
                walk = self.objects.repo.walk(Oid(hex=commit), SortMode.NONE)
                self.whole_history |= {c.id for c in walk}
                self.histories[commit] = None
                return None
        pending = [Oid(hex=commit)]
        seen: set[Oid] = set()
        why: str | None = None
        while pending and why is None:
            oid = pending.pop()
            if oid in seen or oid in self.whole_history:
                continue
            try:
                read = self.objects.commit(oid)
            except _READ_ERRORS as e:
                why = f"commit {str(oid)[:12]} in the history is {_damage(e)}"
                break
            if self.deep and (bad := self._tree(read.tree_id, "")) is not None:
                why = f"commit {str(oid)[:12]} in the history: {bad}"
            pending.extend(read.parent_ids)
            seen.add(oid)
        if why is None:
            self.whole_history |= seen  # each of them has a whole history too
        self.histories[commit] = why
        return why

    def names(self, oid: str) -> str | None:
        """None if the object a ref names (a commit, or a tag of one) reads."""
        try:
            self.commit_of(oid)
        except _READ_ERRORS as e:
            return f"names {oid[:12]}, which is {_damage(e)}"
        return None

    def commit_of(self, oid: str) -> str:
        """The commit ``oid`` is, or the annotated tag ``oid`` names."""
        return str(self.objects.repo[oid].peel(pygit2.Commit).id)

    def whole(self, commit: str) -> bool:
        return self.content(commit) is None and self.history(commit) is None

    def _tree(self, oid: Oid, where: str) -> str | None:
        if oid in self.good:
            return None
        if oid in self.bad:
            return self.bad[oid]
        try:
            entries = [(e.name or "", e.id, e.type_str) for e in self.objects.tree(oid)]
        except _READ_ERRORS as e:
            self.bad[oid] = f"tree {where or '/'} ({str(oid)[:12]}) is {_damage(e)}"
            return self.bad[oid]
        for name, child, kind in entries:
            why = (
                self._tree(child, f"{where}{name}/")
                if kind == "tree"
                else self._blob(child, f"{where}{name}")
            )
            if why is not None:
                self.bad[oid] = why
                return why
        self.good.add(oid)
        return None

    def _blob(self, oid: Oid, where: str) -> str | None:
        if oid in self.good:
            return None
        try:
            self.objects.blob(oid, verify=True)
        except _READ_ERRORS as e:
            return f"{where} ({str(oid)[:12]}) is {_damage(e)}"
        self.good.add(oid)
        return None


def _lost(objects: Objects, intact: str, current: str) -> tuple[list[str], list[str]]:
    """Rows ``current`` has that ``intact`` has not (or not so); and what is unread."""
    try:
        now = objects.commit(Oid(hex=current)).tree_id
    except _READ_ERRORS as e:
        return [], [f"the rows of commit {current[:12]} ({_damage(e)})"]
    before = objects.commit(Oid(hex=intact)).tree_id
    lost: list[str] = []
    unlisted: list[str] = []
    for path, problem in _changed(objects, before, now, ""):
        if problem is not None:
            unlisted.append(f"{path} ({problem})")
        elif (row_id := rows.id_of_path(path)) is not None:
            lost.append(row_id)
    return sorted(lost), unlisted


def _changed(
    objects: Objects, old: Oid | None, new: Oid, where: str
) -> Iterator[tuple[str, str | None]]:
    """Blob paths of ``new`` not in ``old`` as they are; unreadable trees named."""
    try:
        theirs = {e.name or "": (e.id, e.type_str) for e in objects.tree(new)}
    except _READ_ERRORS as e:
        yield where.rstrip("/") or "/", _damage(e)
        return
    mine = {e.name or "": (e.id, e.type_str) for e in objects.tree(old)} if old else {}
    for name, (oid, kind) in sorted(theirs.items()):
        if mine.get(name, (None, ""))[0] == oid:
            continue
        if kind == "tree":
            before = mine.get(name)
            old_sub = before[0] if before is not None and before[1] == "tree" else None
            yield from _changed(objects, old_sub, oid, f"{where}{name}/")
        else:
            yield f"{where}{name}", None


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
    lines.append(f"{source}: {step.commit[:12]} {step.summary} ({step.time})".rstrip())
    lost = ", ".join(found.lost[:limit]) + (", ..." if len(found.lost) > limit else "")
    lines.append(
        f"going back to it loses {_count(len(found.lost), 'row')}"
        + (f": {lost}" if found.lost else "")
    )
    lines += [f"  and what {what} holds" for what in found.unlisted[:limit]]
    if found.undone:
        lines.append(f"it undoes {_count(len(found.undone), 'step')} of the branch:")
        lines += [f"  {s.time}  {s.summary}" for s in found.undone[:limit]]
    return lines


def way_out(found: Diagnosis) -> str:
    """The one line that says what to run next about a damaged store."""
    if found.intact is None:
        return (
            "nothing intact to go back to: restore it from a remote with "
            "'machine recover --from REMOTE --yes'"
        )
    return "'machine recover' shows the step back, 'machine recover --yes' takes it"


# -- recovering ------------------------------------------------------------------


def recover(path: Path, confirm: bool = False) -> Recovery:
    """Go back to the newest intact commit; with ``confirm`` False, only say how."""
    found = diagnose(path, thorough=True)
    if not confirm:
        # An index that does not read hides its pack's objects: recover
        # builds it again first and only then knows what is intact.
        return Recovery(found if found.rebuildable else _refuse_if_lost(path, found))
    with writer_lock(path):
        found = diagnose(path, thorough=True)
        record = None
        if found.rebuildable:
            record = _new_record(path)
            for pack in found.rebuildable:
                _keep(Path(pack).with_suffix(".idx"), record / "packs")
                packs.rebuild_index(Path(pack))
            found = diagnose(path, thorough=True)
        _refuse_if_lost(path, found)
        if not found.damaged:
            return Recovery(found, record=str(record) if record else None)
        assert found.intact is not None  # _refuse_if_lost
        return _apply(path, found, found.intact.commit, found.parent, record=record)


def _refuse_if_lost(path: Path, found: Diagnosis) -> Diagnosis:
    if found.damaged and found.intact is None:
        raise DamagedStoreError(
            f"damaged store {path}: {found.problems[0]}, and no commit it has "
            "been at is intact; nothing to go back to (restore it from a "
            "remote: machine recover --from REMOTE)"
        )
    return found


def _apply(
    path: Path,
    found: Diagnosis,
    tree_of: str,
    parent: str | None,
    fetched: Path | None = None,
    record: Path | None = None,
) -> Recovery:
    """Repair, set aside, commit ``tree_of``'s tree on ``parent``: the step itself."""
    source = fetched if fetched is not None else path
    tree = Objects(objects_only(source)).commit(Oid(hex=tree_of)).tree_id
    record = record or _new_record(path)
    _take_apart(path, found, record)
    _set_aside(path, found, record)  # tree_of's commit too, if it is left behind
    _repair_files(path, found, record)
    if fetched is not None:
        _adopt_objects(fetched, path)
    repo = open_repository(path)
    oid = _commit(repo, found, tree, tree_of, parent, record.relative_to(path))
    _record(record, found, str(oid))
    Store(path, repo)._after_commit()  # counts cache, auto-pack
    return Recovery(found, str(oid), str(record))


def _new_record(path: Path) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    record = path / WORK / RECORDS / stamp
    old = os.umask(0o077)
    try:
        record.mkdir(parents=True, mode=0o700)
    finally:
        os.umask(old)
    return record


def _repair_files(path: Path, found: Diagnosis, record: Path) -> None:
    head = _read(path / "HEAD")
    if head != HEAD_TEXT:
        _keep(path / "HEAD", record)
        _write(path / "HEAD", HEAD_TEXT)
    packed = _read(path / "packed-refs")
    dropped = set(found.damaged_refs)
    if packed is not None:
        good, bad = packed_refs(packed)
        kept = [(oid, name) for oid, name in good if name not in dropped]
        if bad or len(kept) < len(good):
            _keep(path / "packed-refs", record)
            # No header: it would promise peeled tags, and git peels them
            # itself without one.
            text = "".join(f"{oid} {name}\n" for oid, name in kept)
            _write(path / "packed-refs", text.encode())
    for name in dropped:
        _keep(path / name, record / "refs", move=True, name=name.replace("/", "%"))
        _keep(
            path / "logs" / name,
            record / "logs",
            move=True,
            name=name.replace("/", "%"),
        )
    branch_file = path / "refs" / "heads" / "main"
    if found.branch is None and branch_file.exists():
        _keep(branch_file, record, move=True)  # garbage: the step writes it anew
    with contextlib.suppress(pygit2.GitError, OSError):
        pygit2.Config(str(path / "config"))
        return
    _rewrite_config(path, record)


def _rewrite_config(path: Path, record: Path) -> None:
    damaged = _read(path / "config") or b""
    _keep(path / "config", record, move=True)
    _write(
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


def _take_apart(path: Path, found: Diagnosis, record: Path) -> None:
    """Damaged packs: what reads becomes loose objects, the pack goes aside."""
    if not found.damaged_packs:
        return
    repo = objects_only(path)
    for pack in packs.check(path / "objects"):
        if str(pack.path) in found.damaged_packs:
            packs.unpack_readable(pack, repo, path / "objects")
    # The multi-pack index names the packs: git writes it again.
    folder = path / "objects" / "pack"
    _keep(folder / "multi-pack-index", record / "packs", move=True)
    for name in found.damaged_packs:
        for file in packs.companions(Path(name)):
            _keep(file, record / "packs", move=True)


def _set_aside(path: Path, found: Diagnosis, record: Path) -> None:
    """Move damaged loose objects, and damaged commits, into the record.

    Afterwards git sees them as missing. A commit the reflog names that is
    missing is only a warning to git gc; one it can read that reaches a
    missing object (a blob, a parent) stops gc for good.
    """
    files = list(found.damaged_files)
    keep = _kept_commits(path, found.parent)
    # The damaged commits, and the tag objects of dropped versions: git
    # prune follows a recent unreachable tag and stops at a missing commit.
    values = _ref_values(path)
    dropped = [values.get(name, "") for name in found.damaged_refs]
    files += [
        str(path / "objects" / oid[:2] / oid[2:])
        for oid in [*found.damaged_commits, *dropped]
        if _HEX.match(oid) and oid not in keep
    ]
    for file in dict.fromkeys(files):
        if os.path.exists(file):
            _keep(Path(file), record / "objects", move=True, name=_id_of(file))


def _kept_commits(path: Path, parent: str | None) -> set[str]:
    """``parent`` and its whole history: what the recover step builds on."""
    if parent is None:
        return set()
    walker = objects_only(path).walk(Oid(hex=parent), SortMode.NONE)
    return {str(c.id) for c in walker}


def _commit(
    repo: pygit2.Repository,
    found: Diagnosis,
    tree: Oid,
    tree_of: str,
    parent: str | None,
    record: Path,
) -> Oid:
    damaged = found.branch or "unreadable"
    lost = len(found.lost)
    summary = f"recover: back to {tree_of[:12]} ({_count(lost, 'row')} lost)"
    if found.remote is not None:
        summary = (
            f"recover from {found.remote}: {tree_of[:12]} ({_count(lost, 'row')} lost)"
        )
    body = "\n".join([*found.problems[:20], *(f"lost {r}" for r in found.lost[:200])])
    trailers = {
        "Action": "recover",
        "Damaged": damaged,
        "Restored": tree_of,
        "Record": str(record),
        "Lost": str(lost),
    }
    if found.remote is not None:
        trailers["Remote"] = found.remote
    message = f"{summary}\n\n{body}\n\n" + "".join(
        f"Machine-{k}: {v}\n" for k, v in trailers.items()
    )
    sig = pygit2.Signature("machine", "machine@localhost")
    parents = [Oid(hex=parent)] if parent is not None else []
    oid = repo.create_commit(None, sig, sig, message, tree, parents)
    clear_stale_ref_lock(Path(repo.path))
    repo.create_reference_direct(BRANCH, oid, True, message=summary)
    return oid


def _record(record: Path, found: Diagnosis, commit: str) -> None:
    value = {**found.to_json(), "commit": commit, "time": _when(int(time.time()))}
    _write(record / "record.json", jsonio.line(value))


# -- restoring from a remote -----------------------------------------------------


def restore(path: Path, name: str, confirm: bool = False) -> Recovery:
    """Adopt remote ``name``'s branch: fetch it apart, check it, then commit it."""
    found = diagnose(path, thorough=True)
    if not found.damaged:
        return Recovery(found)  # nothing to restore: pull brings their rows
    url = remote_url(path, name)
    with _fetched(path, name, url) as (fetched, head):
        found.remote = name
        checker = _Checker(_with_store_objects(fetched, path), None)
        why = checker.content(head) or checker.history(head)
        if why is not None:
            raise RemoteError(f"{name} ({url}) is damaged too: {why}; nothing changed")
        found.intact = _step(checker, head, [])
        found.parent = head
        current = found.branch or next(iter(_candidates(None, reflog(path))), None)
        found.lost, found.unlisted = [], []
        if current is not None and current != head:
            found.lost, found.unlisted = _lost(checker.objects, head, current)
        found.undone = [
            Step(e.new, _summary(e.message), _when(e.when))
            for e in reversed(reflog(path))
            if Oid(hex=e.new) not in checker.whole_history
        ]
        if not confirm:
            return Recovery(found)
        with writer_lock(path):
            done = _apply(path, found, head, head, fetched=fetched)
            _tracking(path, name, head)
            return done


def remote_url(path: Path, name: str) -> str:
    """The URL of remote ``name``, from the config or what is left of it."""
    try:
        url = pygit2.Config(str(path / "config"))[f"remote.{name}.url"]
    except KeyError:
        url = None
    except (pygit2.GitError, OSError):
        url = salvaged_remotes(
            (_read(path / "config") or b"").decode("utf-8", "replace")
        ).get(name)
    if not url:
        raise RemoteError(
            f"no remote {name!r} (add one with 'machine remote add {name} URL')"
        )
    return str(url)


@contextlib.contextmanager
def _fetched(path: Path, name: str, url: str) -> Iterator[tuple[Path, str]]:
    """A fresh repository in the store's folder holding only the remote's branch."""
    from machine_git import sync  # the git transport, with its rules

    folder = path / WORK / f"restore-{os.getpid()}"
    shutil.rmtree(folder, ignore_errors=True)
    old = os.umask(0o077)
    try:
        repo = pygit2.init_repository(str(folder), bare=True)
    finally:
        os.umask(old)
    try:
        repo.remotes.create(name, url)
        head = sync.fetch(Store(folder, repo), name)
        if head is None:
            raise RemoteError(f"{name} ({url}) has no commits to restore from")
        yield folder, str(head)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _with_store_objects(fetched: Path, path: Path) -> pygit2.Repository:
    # The fetched repository, reading the store's objects too (after its
    # own), so the rows going back loses can be listed against the branch.
    return guard(pygit2.Repository(str(fetched)), also=[path / "objects"])


def _adopt_objects(fetched: Path, path: Path) -> None:
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


def _tracking(path: Path, name: str, head: str) -> None:
    with contextlib.suppress(pygit2.GitError, ValueError):
        repo = open_repository(path)
        ref = f"refs/remotes/{name}/main"
        repo.create_reference_direct(ref, Oid(hex=head), True, message="recover")


# -- small helpers ---------------------------------------------------------------


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError:
        return b""


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    old = os.umask(0o077)
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        os.umask(old)


def _keep(
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


def _id_of(file: str | Path) -> str:
    p = Path(file)
    return p.parent.name + p.name


def _damage(e: BaseException) -> str:
    return "missing" if isinstance(e, KeyError) else f"damaged ({reason(e)})"


def _when(timestamp: int) -> str:
    return datetime.fromtimestamp(timestamp, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
