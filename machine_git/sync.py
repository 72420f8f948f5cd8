"""Sharing a store: remotes, push, pull, and a working clone for hand edits.

Transport is the git CLI (``git -C <store> fetch|push``), so ssh keys,
credential helpers and proxies work as for any git repository; the rest
(merge base, merging rows, moving the branch) is pygit2.

A pull merges row by row: a path changed on one side only is taken, the same
change on both sides is fine, and two different changes of one path are a
conflict that stops the pull with nothing committed, unless ``prefer`` names
the side to keep (the other version stays in history: nothing is dropped).
Fetched commits are checked the way a store's pre-receive hook checks a
push, so no invalid row reaches the branch by a pull either.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import time
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any

import pygit2
from pygit2 import Commit
from pygit2 import Oid
from pygit2.enums import SortMode

from machine_git import diff
from machine_git import hooks
from machine_git import jsonio
from machine_git import paths
from machine_git import rows
from machine_git import treediff
from machine_git.errors import ConcurrentUpdateError
from machine_git.errors import ConflictError
from machine_git.errors import HookError
from machine_git.errors import RemoteError
from machine_git.errors import UsageError
from machine_git.store import BRANCH
from machine_git.store import WORK
from machine_git.store import Change
from machine_git.store import Snapshot
from machine_git.store import Store

DEFAULT_REMOTE = "origin"
PREFER = ("ours", "theirs")
# Variables that would point a git child at another repository than ours
# (set when machine runs inside a git hook).
_GIT_LOCAL_ENV = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_QUARANTINE_PATH",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
)
_SHOWN = 200  # characters of a conflicting value shown before "…"
_ABSENT = object()


@dataclass(frozen=True)
class Remote:
    """A remote of the store: a name and the URL git fetches from."""

    name: str
    url: str


# -- remotes ---------------------------------------------------------------------------


def add_remote(store: Store, name: str, url: str) -> Remote:
    """Add remote ``name``; a local path is kept absolute (git runs in the store)."""
    paths.check_name(name, "remote name")
    if not url or any(c in url for c in "\x00\n\r") or url.startswith("-"):
        raise UsageError(f"bad remote URL {url!r}")
    if _is_local(url):
        url = str(Path(url).expanduser().resolve())
    if name in store.repo.remotes.names():
        existing = store.repo.remotes[name].url
        raise ConflictError(f"remote {name!r} already exists ({existing})")
    store.repo.remotes.create(name, url)
    hooks.install_store_hooks(store.path)
    return Remote(name, url)


def remotes(store: Store) -> list[Remote]:
    """Every remote of the store, by name."""
    found = [Remote(r.name or "", r.url or "") for r in store.repo.remotes]
    return sorted(found, key=lambda r: r.name)


def get_remote(store: Store, name: str) -> Remote:
    """Remote ``name``, or a one-line error saying how to add it."""
    paths.check_name(name, "remote name")
    for remote in remotes(store):
        if remote.name == name:
            return remote
    raise RemoteError(
        f"no remote {name!r} (add one with 'machine remote add {name} URL')"
    )


def _is_local(url: str) -> bool:
    # git reads "host:path" (a colon before any slash) as ssh, like scp.
    return "://" not in url and not re.match(r"^[^/]*:", url)


# -- push ------------------------------------------------------------------------------


@dataclass
class PushResult:
    """``pushed`` (``commits`` new on the remote) or ``up-to-date``."""

    remote: str
    status: str
    commits: int = 0
    head: str | None = None


def push(store: Store, name: str = DEFAULT_REMOTE) -> PushResult:
    """Send the branch to remote ``name``; a diverged remote means pull first."""
    remote = get_remote(store, name)
    hooks.install_store_hooks(store.path)
    _ensure_remote_store_hooks(remote.url)
    head = store.head
    done = _run_git(store, "push", "--porcelain", name, f"{BRANCH}:{BRANCH}")
    flag, summary = _porcelain(done.stdout)
    if flag is None:
        raise RemoteError(
            f"cannot push to {name} ({remote.url}): {_first_error(done.stderr)}"
        )
    if flag == "=":
        return PushResult(name, "up-to-date", head=_hex(head))
    if flag == "!":
        if "remote rejected" in summary:
            said = [
                line[len("remote: ") :].rstrip()
                for line in done.stderr.splitlines()
                if line.startswith("remote: ") and line[len("remote: ") :].strip()
            ]
            reason = summary.partition("(")[2].rstrip(")") or summary
            raise RemoteError(f"{name} refused the push: {reason}", details=said)
        raise RemoteError(
            f"{name} has commits this store does not; "
            f"run 'machine pull {name}' first, then push again"
        )
    return PushResult(name, "pushed", _pushed_count(store, summary), _hex(head))


def _porcelain(stdout: str) -> tuple[str | None, str]:
    # git push --porcelain: "<flag>\t<from>:<to>\t<summary> (<reason>)".
    for line in stdout.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and parts[1].endswith(f":{BRANCH}"):
            return parts[0][:1], parts[2]
    return None, ""


def _pushed_count(store: Store, summary: str) -> int:
    head = store.head
    if head is None:
        return 0
    old = summary.split("..")[0] if ".." in summary else None
    walker = store.repo.walk(head.id, SortMode.NONE)
    if old is not None:
        with contextlib.suppress(KeyError, ValueError, pygit2.GitError):
            walker.hide(store.repo.revparse_single(old).id)
    return sum(1 for _ in walker)


def _ensure_remote_store_hooks(url: str) -> None:
    # A local remote that is itself a machine store gets its pre-receive
    # hook before we push, so it checks what we send even if it was made by
    # 'machine good' alone.
    local = url.removeprefix("file://")
    if not _is_local(local):
        return
    target = Path(local).expanduser()
    if (target / "HEAD").is_file() and (target / WORK).is_dir():
        # A hook someone wrote is left alone: it decides, not us.
        with contextlib.suppress(HookError):
            hooks.install_store_hooks(target)


# -- pull ------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldDiff:
    """One JSON path whose value differs, both values shown as compact JSON."""

    path: str
    ours: str
    theirs: str


@dataclass(frozen=True)
class Conflict:
    """A file both sides changed differently: both versions, and where they differ."""

    path: str
    row_id: str | None
    ours: Any  # the parsed file, or None if this side deleted it
    theirs: Any
    fields: list[FieldDiff]


@dataclass
class PullResult:
    """What a pull did.

    ``status`` is ``up-to-date``, ``empty`` (the remote has no commits),
    ``fast-forward``, ``merge`` or ``conflict`` (nothing committed).
    """

    remote: str
    status: str
    commit: str | None = None
    added: int = 0
    changed: int = 0
    removed: int = 0
    conflicts: list[Conflict] = field(default_factory=list)
    resolved: list[str] = field(default_factory=list)
    prefer: str | None = None


class _Conflicted(Exception):
    def __init__(self, conflicts: list[Conflict]) -> None:
        super().__init__(f"{len(conflicts)} conflicts")
        self.conflicts = conflicts


def pull(
    store: Store, name: str = DEFAULT_REMOTE, prefer: str | None = None
) -> PullResult:
    """Fetch remote ``name`` and merge it into the branch, row by row."""
    if prefer is not None and prefer not in PREFER:
        raise UsageError(f"--prefer must be one of {', '.join(PREFER)}")
    get_remote(store, name)
    hooks.install_store_hooks(store.path)
    theirs_id = fetch(store, name)
    if theirs_id is None:
        return PullResult(name, "empty")
    repo = store.repo
    theirs = repo[theirs_id].peel(Commit)
    checked = False
    for _ in range(5):
        ours = store.head
        if ours is None or ours.id == theirs.id:
            return PullResult(name, "up-to-date", commit=_hex(ours))
        base = repo.merge_base(ours.id, theirs.id)
        if base == theirs.id:
            return PullResult(name, "up-to-date", commit=_hex(ours))
        if not checked:
            _check_incoming(store, name, theirs.id, ours.id)
            checked = True
        if base == ours.id:
            if store.fast_forward(ours.id, theirs.id, f"pull {name}: fast-forward"):
                result = PullResult(name, "fast-forward", commit=str(theirs.id))
                for path, old, new in treediff.changed_blobs(
                    repo, ours.tree, theirs.tree
                ):
                    _count(result, path, old, new)
                return result
            continue  # the branch moved: look again
        return _merge(store, name, theirs, prefer)
    raise ConcurrentUpdateError(f"{store.path}: the branch kept moving; try again")


def fetch(store: Store, name: str) -> Oid | None:
    """Fetch ``name``'s main into ``refs/remotes/<name>/main``; None if it has none."""
    remote = get_remote(store, name)
    tracking = f"refs/remotes/{name}/main"
    done = _run_git(
        store,
        "fetch",
        "--quiet",
        "--no-tags",
        "--no-write-fetch-head",
        name,
        f"+{BRANCH}:{tracking}",
    )
    if done.returncode != 0:
        if "couldn't find remote ref" in done.stderr:
            return None
        raise RemoteError(
            f"cannot fetch from {name} ({remote.url}): {_first_error(done.stderr)}"
        )
    return store.repo.references[tracking].peel(Commit).id


def _check_incoming(store: Store, name: str, theirs: Oid, ours: Oid) -> None:
    walker = store.repo.walk(theirs, SortMode.TOPOLOGICAL | SortMode.REVERSE)
    walker.hide(ours)
    bad = hooks.check_commits(store.repo, (c.id for c in walker))
    if bad:
        raise RemoteError(
            f"{name} has {hooks.count(hooks.invalid_rows(bad), 'invalid row')} in "
            f"{hooks.count(len(bad), 'commit')}; nothing was merged",
            details=hooks.report(bad),
        )


def _merge(store: Store, name: str, theirs: Commit, prefer: str | None) -> PullResult:
    result = PullResult(name, "merge", prefer=prefer)

    def plan(snap: Snapshot) -> Change | None:
        # Planned under the lock against the newest commit: a retry starts over.
        result.added = result.changed = result.removed = 0
        result.resolved = []
        repo = snap.repo
        ours = snap.commit
        if ours is None:
            return None
        base_id = repo.merge_base(ours.id, theirs.id)
        if base_id == theirs.id:
            result.status = "up-to-date"
            return None
        base = repo[base_id].peel(Commit).tree if base_id is not None else None
        mine = {p: new for p, _, new in treediff.changed_blobs(repo, base, ours.tree)}
        files: dict[str, bytes | None] = {}
        conflicts: list[Conflict] = []
        for path, old, new in treediff.changed_blobs(repo, base, theirs.tree):
            current = mine.get(path, old)
            if path in mine:
                if mine[path] == new:
                    continue  # the same change on both sides
                if prefer is None:
                    conflicts.append(_conflict(repo, path, mine[path], new))
                    continue
                result.resolved.append(path)
                if prefer == "ours":
                    continue
            files[path] = None if new is None else repo[new].peel(pygit2.Blob).data
            _count(result, path, current, new)
        if conflicts:
            raise _Conflicted(conflicts)
        return Change(
            summary=f"merge {name}: {counts_text(result)} from {name}",
            files=files,
            trailers=_trailers(name, prefer, result.resolved),
            body=_resolution_body(prefer, result.resolved),
            # Rows taken from the remote are stored bytes from another store,
            # redacted there (or kept by an explicit, recorded --no-redact).
            redaction="kept",
        )

    try:
        oid = store.merge(theirs.id, plan)
    except _Conflicted as c:
        return PullResult(name, "conflict", conflicts=c.conflicts)
    result.commit = str(oid) if oid is not None else _hex(store.head)
    return result


def _count(result: PullResult, path: str, old: Oid | None, new: Oid | None) -> None:
    if rows.id_of_path(path) is None:
        return
    if old is None:
        result.added += 1
    elif new is None:
        result.removed += 1
    else:
        result.changed += 1


def counts_text(result: PullResult) -> str:
    """``+3 rows``, then ``, ~1 changed`` and ``, -1 removed`` if any."""
    text = f"+{hooks.count(result.added, 'row')}"
    if result.changed:
        text += f", ~{result.changed} changed"
    if result.removed:
        text += f", -{result.removed} removed"
    return text


def _trailers(name: str, prefer: str | None, resolved: list[str]) -> dict[str, str]:
    trailers = {"Action": "merge", "Remote": name}
    if resolved and prefer is not None:
        trailers["Prefer"] = prefer
        trailers["Resolved"] = " ".join(rows.id_of_path(p) or p for p in resolved)
    return trailers


def _resolution_body(prefer: str | None, resolved: list[str]) -> str:
    if not resolved or prefer is None:
        return ""
    lines = [
        f"Resolved with --prefer {prefer} (the other side's version stays in history):"
    ]
    lines += [f"{rows.id_of_path(p) or p}: {prefer}" for p in resolved]
    return "\n".join(lines)


# -- showing a conflict ----------------------------------------------------------------


def _conflict(
    repo: pygit2.Repository, path: str, ours: Oid | None, theirs: Oid | None
) -> Conflict:
    mine, other = _parsed(repo, ours), _parsed(repo, theirs)
    if mine is None or other is None:
        fields = [FieldDiff("$", _show(mine, "(deleted)"), _show(other, "(deleted)"))]
    else:
        # Values equal in Python but not in bytes (1 and true): show it all.
        fields = diff_fields(mine, other) or [
            FieldDiff("$", _show(mine, ""), _show(other, ""))
        ]
    return Conflict(path, rows.id_of_path(path), mine, other, fields)


def _parsed(repo: pygit2.Repository, oid: Oid | None) -> Any:
    if oid is None:
        return None
    data = repo[oid].peel(pygit2.Blob).data
    try:
        return jsonio.loads(data)
    except jsonio.JSONDecodeError:
        return data.decode("utf-8", "replace")


def diff_fields(ours: Any, theirs: Any, where: str = "$") -> list[FieldDiff]:
    """Every JSON path at which the two versions differ (as machine diff finds them)."""
    return [
        FieldDiff(
            change.path,
            _show(_ABSENT if change.old is diff.MISSING else change.old, "(absent)"),
            _show(_ABSENT if change.new is diff.MISSING else change.new, "(absent)"),
        )
        for change in diff.diff_values(ours, theirs, where)
    ]


def _show(value: Any, missing: str) -> str:
    if value is _ABSENT or (value is None and missing == "(deleted)"):
        return missing
    text = jsonio.compact(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


# -- clone -----------------------------------------------------------------------------


def clone(store: Store, dest: Path) -> Path:
    """A working clone of the store at ``dest``, with the pre-commit hook."""
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise HookError(f"{dest} exists and is not empty; clone into a new folder")
    hooks.install_store_hooks(store.path)
    target = dest.resolve()
    done = _run_git(
        None,
        "clone",
        "--quiet",
        "--template=",  # no sample hooks: ours are the only ones
        "--origin",
        DEFAULT_REMOTE,
        "--branch",
        "main",
        str(store.path),
        str(target),
    )
    if done.returncode != 0:
        raise HookError(f"cannot clone into {dest}: {_first_error(done.stderr)}")
    git_dir = target / ".git"
    config = pygit2.Repository(str(git_dir)).config
    config["core.sharedRepository"] = "0600"  # later git writes stay private
    hooks.install_clone_hooks(git_dir)
    hooks.fix_permissions(git_dir)
    return target


# -- running git -----------------------------------------------------------------------


def _run_git(store: Store | None, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in _GIT_LOCAL_ENV}
    env["LC_ALL"] = "C"  # git's messages are parsed: keep them in English
    command = ["git"] if store is None else ["git", "-C", str(store.path)]
    since = time.time() - 2.0  # margin for filesystems with coarse mtimes
    try:
        done = subprocess.run(
            [*command, *args],
            capture_output=True,
            text=True,
            errors="replace",
            env=env,
            umask=0o077,  # new folders 0700, files 0600 (or git's 0400)
            check=False,
        )
    except OSError as e:
        raise RemoteError(f"cannot run git: {e.strerror}") from None
    if store is not None:
        # git's writes (packs, loose objects, tracking refs) leave 0400 files.
        hooks.fix_permissions(store.path, since=since)
    return done


def _first_error(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in lines:
        for prefix in ("fatal: ", "error: "):
            if line.startswith(prefix):
                return line[len(prefix) :]
    return lines[0] if lines else "git failed"


def _hex(commit: Commit | None) -> str | None:
    return str(commit.id) if commit is not None else None
