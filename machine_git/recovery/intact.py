"""Which commits read whole: the commit, and every tree and blob it reaches.

Objects are read through an objects-only repository (objects.py), each once;
what read cleanly is remembered, so checking the branch's many commits costs
about what checking the newest does. The rows one commit has that another
has not are what going back from it loses.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from collections.abc import Iterator

import pygit2
from pygit2 import Oid
from pygit2.enums import SortMode

from machine_git.rows import rows
from machine_git.store.damage import reason
from machine_git.store.objects import CorruptObjectError
from machine_git.store.objects import Objects
from machine_git.store.reflog import Entry
from machine_git.store.reflog import Step
from machine_git.store.reflog import utc_time

READ_ERRORS = (KeyError, ValueError, OSError, pygit2.GitError, CorruptObjectError)


class Checker:
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
        self.broken: dict[Oid, str] = {}  # commits whose history does not read
        self.verified = verified

    def content(self, commit: str) -> str | None:
        """None if ``commit`` and all it reaches read cleanly, else why not."""
        oid = Oid(hex=commit)
        try:
            tree_id = self.objects.commit(oid).tree_id
        except READ_ERRORS as e:
            return f"commit {commit[:12]} is {damage_of(e)}"
        if commit == self.verified:
            return None
        why = self._tree(tree_id, "")
        return None if why is None else f"commit {commit[:12]}: {why}"

    def history(self, commit: str) -> str | None:
        """None if every commit in the history of ``commit`` reads, else why not.

        Each commit is read once for all the commits asked about: diagnosis
        asks about every commit the branch has been at, a reflog line per
        tag, so a walk per question would be quadratic in the history.
        """
        if commit in self.histories:
            return self.histories[commit]
        start = Oid(hex=commit)
        if start in self.whole_history:
            return None
        if not self.deep and not self.whole_history and not self.broken:
            # libgit2's own walk (reads guarded) is the fast path for the first
            # question; only when it fails does the walk below find which
            # commit is damaged. Later questions take that walk, which stops
            # at what was read (libgit2's, with the read commits hidden, would
            # walk them again).
            with contextlib.suppress(*READ_ERRORS):
                walk = self.objects.repo.walk(start, SortMode.NONE)
                self.whole_history |= {c.id for c in walk}
                self.histories[commit] = None
                return None
        why = self._history_of(start)
        self.histories[commit] = why
        return why

    def _history_of(self, start: Oid) -> str | None:
        """Why the history of ``start`` does not read (None: it does).

        Depth first, each commit answered after its parents, and every answer
        kept (``whole_history``, ``broken``) for the later questions.
        """
        pending: list[tuple[Oid, bool]] = [(start, False)]
        parents: dict[Oid, list[Oid]] = {}
        while pending:
            oid, ready = pending.pop()
            if oid in self.whole_history or oid in self.broken:
                continue
            if ready:
                self._settle(oid, parents.pop(oid))
                continue
            why = self._own(oid, parents)
            if why is not None:
                self.broken[oid] = why
                continue
            pending.append((oid, True))
            pending.extend((p, False) for p in reversed(parents[oid]))
        return self.broken.get(start)

    def _own(self, oid: Oid, parents: dict[Oid, list[Oid]]) -> str | None:
        """Why commit ``oid`` itself does not read; its parents go in ``parents``."""
        try:
            read = self.objects.commit(oid)
        except READ_ERRORS as e:
            return f"commit {str(oid)[:12]} in the history is {damage_of(e)}"
        if self.deep and (bad := self._tree(read.tree_id, "")) is not None:
            return f"commit {str(oid)[:12]} in the history: {bad}"
        parents[oid] = list(read.parent_ids)
        return None

    def _settle(self, oid: Oid, parents: list[Oid]) -> None:
        """``oid`` read, and so did its parents' histories, or the first did not."""
        bad = next((self.broken[p] for p in parents if p in self.broken), None)
        if bad is None:
            self.whole_history.add(oid)
        else:
            self.broken[oid] = bad

    def names(self, oid: str) -> str | None:
        """None if the object a ref names (a commit, or a tag of one) reads."""
        try:
            self.commit_of(oid)
        except READ_ERRORS as e:
            kind = self.kind_of(oid)
            if kind in ("blob", "tree"):
                # It reads: the ref is wrong, not the object (a row's blob,
                # the branch's tree). Recover drops the ref and keeps it.
                return f"names {oid[:12]}, a {kind}, not a commit"
            return f"names {oid[:12]}, which is {damage_of(e)}"
        return None

    def kind_of(self, oid: str) -> str | None:
        """``blob``, ``tree``, ``commit`` or ``tag``; None if it does not read."""
        try:
            return str(self.objects.repo[oid].type_str)
        except READ_ERRORS:
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
        except READ_ERRORS as e:
            self.bad[oid] = f"tree {where or '/'} ({str(oid)[:12]}) is {damage_of(e)}"
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
        except READ_ERRORS as e:
            return f"{where} ({str(oid)[:12]}) is {damage_of(e)}"
        self.good.add(oid)
        return None


def lost_rows(
    objects: Objects, intact: str, current: str
) -> tuple[list[str], list[str]]:
    """Rows ``current`` has that ``intact`` has not (or not so); and what is unread."""
    try:
        now = objects.commit(Oid(hex=current)).tree_id
    except READ_ERRORS as e:
        return [], [f"the rows of commit {current[:12]} ({damage_of(e)})"]
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
    except READ_ERRORS as e:
        yield where.rstrip("/") or "/", damage_of(e)
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


def step_of(checker: Checker, commit: str, entries: Iterable[Entry]) -> Step:
    try:
        obj = checker.objects.commit(Oid(hex=commit))
        summary = (obj.message or "").splitlines()[:1] or [""]
        return Step(commit, summary[0], utc_time(obj.commit_time))
    except READ_ERRORS:
        message = next((e.message for e in entries if e.new == commit), "")
        return Step(commit, message, None)


def damage_of(e: BaseException) -> str:
    return "missing" if isinstance(e, KeyError) else f"damaged ({reason(e)})"
