"""What arrives from a remote is untrusted: machine's rules, checked before a ref moves.

A pull fetches into a quarantine of its own (quarantine.py); a push into a
store waits in git's (the pre-receive hook, hooks.py). Either way git has
already checked each object as it arrived (``fetch.fsckObjects`` and
``receive.fsckObjects``: unsorted trees, duplicate entries, bad modes,
``..`` and ``.git`` names, ``.gitmodules``), and nothing of it is reachable
from a ref of the store yet. These are machine's rules on top:

- sizes (:func:`size_problems`): no blob over :data:`MAX_BLOB`, no tree over
  :data:`MAX_TREE`, no commit or tag over :data:`MAX_META` bytes, read from
  each new object's header before anything reads the object;
- paths (:func:`changed_files`): a commit's tree holds only the files machine
  writes (:data:`FILES`), each a regular file (100644), in the folders of
  those paths; a link, an executable, a submodule or any other name is
  refused where it first appears;
- contents (hooks.check_commits): each new file valid for its kind, with no
  secret in it;
- refs (:func:`ref_problems`, :func:`update_problems`): ``main`` names a
  commit; a version is an annotated tag of a commit on the store's history;
  a run ref names a commit on it; nothing else is taken. A push never
  deletes a ref, never moves a version or run ref, never drops a commit of
  ``main``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path

import pygit2
from pygit2 import Oid
from pygit2 import Tree
from pygit2.enums import FileMode
from pygit2.enums import ObjectType

from machine_git.recovery.validate import Finding
from machine_git.store.layout import BRANCH
from machine_git.store.objects import MAX_BLOB as MAX_BLOB  # re-exported
from machine_git.store.objects import MIB

MAX_TREE = 4 * MIB  # about 100,000 entries; rows/ab/cd/ holds a handful
MAX_META = 1 * MIB  # a commit or tag: its message and header

_HEX2 = "[0-9a-f]{2}"
_EVAL = r"evals/eval-[0-9a-f]{8}"
# Every file machine writes in a store's tree, by kind.
FILES: dict[str, re.Pattern[str]] = {
    "marker": re.compile(r"machine\.json"),
    "settings": re.compile(r"settings\.json"),
    # Who may sign release records (store/signing.py); the audit checks who
    # changed it.
    "signers": re.compile(r"allowed_signers"),
    # Unsigned records a signer adopted (releases/adoption.py); signed.
    "adoption": re.compile(r"adopted\.json"),
    "row": re.compile(rf"rows/({_HEX2})/({_HEX2})/\1\2[0-9a-f]{{8}}\.json"),
    "context": re.compile(rf"context/({_HEX2})/\1[0-9a-f]{{62}}\.json"),
    "run record": re.compile(r"runs/[a-z]+-[0-9a-f]{8}-[0-9a-f]{6}\.json"),
    "eval set": re.compile(rf"{_EVAL}\.json"),
    "eval result": re.compile(rf"{_EVAL}/results/[A-Za-z0-9_][A-Za-z0-9._-]*\.json"),
    # Under releases/, the release audit (releases/audit.py) verifies each
    # file against the release step that wrote it, and refuses any other.
    "release": re.compile(r"releases/[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*"),
}
# The folders those files live in.
_FOLDERS = re.compile(
    rf"rows(?:/{_HEX2}(?:/{_HEX2})?)?|context(?:/{_HEX2})?|runs"
    rf"|evals(?:/eval-[0-9a-f]{{8}}(?:/results)?)?|releases(?:/[A-Za-z0-9._-]+)*"
)
_MODES = {
    FileMode.LINK: "a symbolic link",
    FileMode.BLOB_EXECUTABLE: "an executable",
    FileMode.COMMIT: "a submodule (gitlink)",
}
_ZERO = "0" * 40

Changed = tuple[str, str, Oid | None, Oid]
"""(path, kind, old blob id or None, new blob id) of a file a commit brings."""


def kind_of(path: str) -> str | None:
    """The kind of file machine writes at ``path``, or None if it writes none there."""
    for kind, pattern in FILES.items():
        if pattern.fullmatch(path):
            return kind
    return None


# -- sizes -----------------------------------------------------------------------------


def new_objects(objects_dir: str | Path) -> Iterator[tuple[Oid, ObjectType, int]]:
    """Every object in one objects folder (loose and packed): id, type, size.

    Only that folder: not its alternates, so a quarantine lists exactly what
    arrived. Sizes come from each object's header, not its contents.
    """
    folder = str(objects_dir)
    seen: set[Oid] = set()
    if not os.path.isdir(folder):
        return
    for backend in (
        pygit2.OdbBackendPack(folder),
        pygit2.OdbBackendLoose(folder, 0, False),
    ):
        for oid in backend:
            if oid in seen:
                continue
            seen.add(oid)
            kind, size = backend.read_header(oid)
            yield oid, ObjectType(kind), size


def size_problems(objects: Iterator[tuple[Oid, ObjectType, int]]) -> list[str]:
    """One line per object over its limit (checked before it is read)."""
    out = []
    for oid, kind, size in objects:
        if kind == ObjectType.BLOB:
            limit, noun = MAX_BLOB, "a file"
        elif kind == ObjectType.TREE:
            limit, noun = MAX_TREE, "a tree"
        else:
            limit, noun = MAX_META, "a commit" if kind == ObjectType.COMMIT else "a tag"
        if size > limit:
            out.append(
                f"{noun} of {_mib(size)} ({str(oid)[:12]}) is over the "
                f"{_mib(limit)} limit for {noun.split()[1]}s"
            )
    return out


def _mib(size: int) -> str:
    return f"{size / MIB:.1f} MiB" if size >= MIB else f"{size} bytes"


# -- paths and modes -------------------------------------------------------------------


def changed_files(
    repo: pygit2.Repository,
    old: Tree | None,
    new: Tree,
    problems: list[Finding],
    prefix: str = "",
) -> Iterator[Changed]:
    """The files ``new`` adds or changes against ``old``, checked for place and mode.

    Only subtrees whose id (or mode) differ are read, so the cost follows the
    change. An entry machine would not write there is added to ``problems``
    (and not looked into); a regular file at a known path is yielded with
    its kind, for its contents to be checked.
    """
    before = _entries(old)
    seen: set[str] = set()
    for entry in new:
        name = _name(entry)
        path = f"{prefix}{name}"
        if name in seen:
            problems.append(_finding(path, "listed twice in one tree"))
            continue
        seen.add(name)
        mode = entry.filemode
        if before.get(name) == (entry.id, mode):
            continue
        if mode == FileMode.TREE:
            if not _FOLDERS.fullmatch(path):
                problems.append(_finding(path, "not a folder machine writes"))
                continue
            sub_old = None
            previous = before.get(name)
            if previous is not None and previous[1] == FileMode.TREE:
                sub_old = repo[previous[0]].peel(Tree)
            yield from changed_files(
                repo, sub_old, repo[entry.id].peel(Tree), problems, f"{path}/"
            )
            continue
        kind = kind_of(path)
        if mode != FileMode.BLOB:
            what = _MODES.get(FileMode(mode), f"mode {mode:o}")
            problems.append(_finding(path, f"{what}, not a regular file (100644)"))
        elif kind is None:
            problems.append(_finding(path, "not a file machine writes"))
        else:
            previous = before.get(name)
            old_blob = previous[0] if previous and previous[1] == mode else None
            yield path, kind, old_blob, entry.id


def _entries(tree: Tree | None) -> dict[str, tuple[Oid, int]]:
    if tree is None:
        return {}
    return {_name(e): (e.id, e.filemode) for e in tree}


def _name(entry: pygit2.Object) -> str:
    # As stored: a name that is not UTF-8 is shown escaped, and refused.
    return (entry.raw_name or b"").decode("utf-8", "backslashreplace")


def _finding(path: str, problem: str) -> Finding:
    return Finding(path, 1, "$", problem)


# -- refs ------------------------------------------------------------------------------

TAGS = "refs/tags/"
RUNS = "refs/runs/"


def describe(ref: str) -> str:
    """``main``, ``version v1``, ``run ref sft-…``, or the ref itself."""
    if ref == BRANCH:
        return "main"
    if ref.startswith(TAGS):
        return f"version {ref.removeprefix(TAGS)}"
    if ref.startswith(RUNS):
        return f"run ref {ref.removeprefix(RUNS)}"
    return ref


def target_problem(
    repo: pygit2.Repository, ref: str, oid: Oid, on_history: Callable[[Oid], bool]
) -> str | None:
    """Why ``ref`` may not name ``oid`` in a store; None if it may.

    ``on_history(commit)`` says whether a commit is on the store's history
    (``main`` as it is, or as it will be).
    """
    try:
        obj = repo[oid]
    except (KeyError, ValueError, pygit2.GitError):
        return f"{describe(ref)} names {str(oid)[:12]}, which was not sent"
    kind = obj.type_str
    if ref == BRANCH:
        return None if kind == "commit" else f"main names a {kind}, not a commit"
    if ref.startswith(TAGS):
        if kind != "tag":
            return f"{describe(ref)} names a {kind}, not an annotated tag of a commit"
        tag = obj.peel(pygit2.Tag)
        target = repo.get(tag.target)
        if target is None or target.type_str != "commit":
            what = "nothing" if target is None else f"a {target.type_str}"
            return f"{describe(ref)} tags {what}, not a commit"
        commit = target.id
    elif ref.startswith(RUNS):
        if kind != "commit":
            return f"{describe(ref)} names a {kind}, not a commit"
        commit = oid
    else:
        return f"{ref} is not a ref machine keeps (only main, versions and run refs)"
    if not on_history(commit):
        return f"{describe(ref)} names commit {str(commit)[:12]}, not on main's history"
    return None


def history_of(repo: pygit2.Repository, tips: list[Oid]) -> Callable[[Oid], bool]:
    """``on_history`` for :func:`target_problem`: ancestors of any of ``tips``."""

    def on_history(commit: Oid) -> bool:
        for tip in tips:
            if commit == tip:
                return True
            try:
                if repo.descendant_of(tip, commit):
                    return True
            except (KeyError, ValueError, pygit2.GitError):
                continue
        return False

    return on_history


def update_problems(
    repo: pygit2.Repository, updates: list[tuple[str, str, str]]
) -> list[str]:
    """Why a push's ref updates (``old new ref``) may not land; empty if they may.

    Nothing is deleted; a version or run ref is only ever created; ``main``
    only moves forward; every new target passes :func:`target_problem`
    against ``main`` as the push leaves it.
    """
    out: list[str] = []
    main = repo.references.get(BRANCH)
    tips = [main.target] if main is not None and isinstance(main.target, Oid) else []
    for _, new, ref in updates:
        if ref == BRANCH and new != _ZERO:
            tips.append(Oid(hex=new))
    on_history = history_of(repo, tips)
    for old, new, ref in updates:
        if new == _ZERO:
            out.append(f"deleting {describe(ref)} is not allowed")
            continue
        if ref != BRANCH and old != _ZERO and ref.startswith((TAGS, RUNS)):
            out.append(f"{describe(ref)} exists; a name never moves")
            continue
        problem = target_problem(repo, ref, Oid(hex=new), on_history)
        if problem is not None:
            out.append(problem)
        elif ref == BRANCH and old != _ZERO and not _forward(repo, old, new):
            out.append(
                f"main would lose commits ({old[:12]} is not an ancestor of "
                f"{new[:12]}); pull, then push again"
            )
    return out


def _forward(repo: pygit2.Repository, old: str, new: str) -> bool:
    try:
        return old == new or repo.descendant_of(Oid(hex=new), Oid(hex=old))
    except (KeyError, ValueError, pygit2.GitError):
        return False
