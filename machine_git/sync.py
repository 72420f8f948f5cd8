"""Sharing a store: remotes, push, pull, and a working clone for hand edits.

Transport is the git CLI (``git -C <store> fetch|push``), so ssh keys,
credential helpers and proxies work as for any git repository, under the
rules of machine_git/transport.py (allowed transports only, no prompts, a
time limit); the rest (merge base, merging rows, moving the branch) is pygit2.

What travels: the branch (rows, settings, run records, releases and their
whole history), versions (``refs/tags/*``) and run refs (``refs/runs/*``).
A name means one commit everywhere: a version or run ref that names another
commit on the remote than here is a conflict, and nothing moves.

A store with nothing of its own (only its first commit) takes the remote's
history on its first pull instead of merging with it: one root, no merge.

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
from collections.abc import Iterable
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
from machine_git import transport
from machine_git import treediff
from machine_git.errors import ConcurrentUpdateError
from machine_git.errors import ConflictError
from machine_git.errors import HookError
from machine_git.errors import RemoteError
from machine_git.errors import UsageError
from machine_git.store import BRANCH
from machine_git.store import WORK
from machine_git.store import Change
from machine_git.store import Redaction
from machine_git.store import Snapshot
from machine_git.store import Store
from machine_git.store import private_objects

DEFAULT_REMOTE = "origin"
PREFER = ("ours", "theirs")
# Refs that travel with the branch: versions and run refs. Fetched ones wait
# under _STAGED/<remote>/ until compared with ours.
SHARED = {"refs/tags/": "version", "refs/runs/": "run ref"}
_STAGED = "refs/machine/remotes/"
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
    refused = transport.refusal(url)
    if refused is not None:
        raise UsageError(f"remote URL {url!r} is refused: {refused}")
    if transport.is_local(url):
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
    """Remote ``name``, or a one-line error saying how to add it.

    Its URLs are checked again here: a remote added with git by hand gets
    the same refusal as ``machine remote add``.
    """
    paths.check_name(name, "remote name")
    for remote in store.repo.remotes:
        if remote.name != name:
            continue
        for url in (remote.url, remote.push_url):
            refused = transport.refusal(url) if url is not None else None
            if refused is not None:
                raise RemoteError(f"remote {name} ({url}) is refused: {refused}")
        return Remote(name, remote.url or "")
    raise RemoteError(
        f"no remote {name!r} (add one with 'machine remote add {name} URL')"
    )


# -- refs that travel with the branch ------------------------------------------------


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


def _shared(ref: str) -> bool:
    return ref.startswith(tuple(SHARED))


def _peeled(repo: pygit2.Repository, oid: Oid) -> Oid:
    """The commit a ref's target names (a tag object names one)."""
    try:
        return repo[oid].peel(Commit).id
    except (KeyError, ValueError, pygit2.GitError):
        return oid


def _compare(
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
        mine, other = _peeled(repo, target), their_commits[ref]
        if mine != other:  # two tag objects of one commit are one version
            clashes.append(RefClash(ref, mine, other))
    return missing, clashes


def _local_refs(repo: pygit2.Repository) -> dict[str, Oid]:
    out: dict[str, Oid] = {}
    for ref in repo.references:
        if _shared(ref):
            target = repo.references[ref].target
            if isinstance(target, Oid):
                out[ref] = target
    return out


def _clash_error(clashes: list[RefClash], remote: str, verb: str) -> ConflictError:
    shown = "; ".join(str(c) for c in clashes[:3])
    more = f"; and {len(clashes) - 3} more" if len(clashes) > 3 else ""
    return ConflictError(
        f"{remote} has {shown}{more}; nothing was {verb}. A name never moves: "
        "keep one side's under a new name and delete the other (see the "
        "README, 'When something goes wrong')"
    )


# -- push ------------------------------------------------------------------------------


@dataclass
class PushResult:
    """``pushed`` (``commits`` new on the remote) or ``up-to-date``."""

    remote: str
    status: str
    commits: int = 0
    head: str | None = None
    versions: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)


def push(store: Store, name: str = DEFAULT_REMOTE) -> PushResult:
    """Send the branch, versions and run refs to ``name``; a diverged remote
    means pull first, a name on another commit there is a conflict."""
    remote = get_remote(store, name)
    hooks.install_store_hooks(store.path)
    _ensure_remote_store_hooks(remote.url)
    head = store.head
    theirs, their_commits = _remote_refs(store, remote)
    missing, clashes = _compare(
        store.repo, _local_refs(store.repo), theirs, their_commits
    )
    if clashes:
        raise _clash_error(clashes, name, "pushed")
    sent = [f"{BRANCH}:{BRANCH}", *(f"{ref}:{ref}" for ref in missing)]
    # --atomic: the branch and every ref move together, or none does.
    done = transport.run(
        store.path,
        "push",
        "--porcelain",
        "--atomic",
        name,
        *sent,
        what=f"push to {name}",
    )
    flags = _porcelain(done.stdout)
    if BRANCH not in flags:
        raise RemoteError(
            f"cannot push to {name} ({remote.url}): "
            f"{transport.first_error(done.stderr)}"
        )
    if any(flag == "!" for flag, _ in flags.values()):
        raise _refused(name, flags, done.stderr)
    result = PushResult(name, "up-to-date", head=_hex(head))
    result.versions = _names(missing, "refs/tags/")
    result.runs = _names(missing, "refs/runs/")
    flag, summary = flags[BRANCH]
    if flag != "=":
        result.commits = _pushed_count(store, summary)
    if flag != "=" or missing:
        result.status = "pushed"
    return result


def _names(refs: Iterable[str], prefix: str) -> list[str]:
    return [r.removeprefix(prefix) for r in refs if r.startswith(prefix)]


def _remote_refs(store: Store, remote: Remote) -> tuple[dict[str, Oid], dict[str, Oid]]:
    """The remote's shared refs: their targets, and the commits they name."""
    done = transport.run(
        store.path,
        "ls-remote",
        remote.name,
        *(f"{prefix}*" for prefix in SHARED),
        what=f"push to {remote.name}",
    )
    if done.returncode != 0:
        raise RemoteError(
            f"cannot push to {remote.name} ({remote.url}): "
            f"{transport.first_error(done.stderr)}"
        )
    targets: dict[str, Oid] = {}
    peeled: dict[str, Oid] = {}
    for line in done.stdout.splitlines():
        oid, _, ref = line.partition("\t")
        try:
            value = Oid(hex=oid)
        except ValueError:
            continue
        if ref.endswith("^{}"):
            peeled[ref[:-3]] = value
        elif _shared(ref):
            targets[ref] = value
    return targets, {ref: peeled.get(ref, oid) for ref, oid in targets.items()}


def _porcelain(stdout: str) -> dict[str, tuple[str, str]]:
    # git push --porcelain: "<flag>\t<from>:<to>\t<summary> (<reason>)".
    found: dict[str, tuple[str, str]] = {}
    for line in stdout.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and ":" in parts[1]:
            found[parts[1].rpartition(":")[2]] = (parts[0][:1], parts[2])
    return found


def _refused(name: str, flags: dict[str, tuple[str, str]], stderr: str) -> RemoteError:
    # With --atomic every ref shows "!"; the one with its own reason is why.
    why = {
        ref: summary
        for ref, (flag, summary) in flags.items()
        if flag == "!" and "atomic push failed" not in summary
    }
    if any("remote rejected" in summary for summary in why.values()):
        said = [
            line[len("remote: ") :].rstrip()
            for line in stderr.splitlines()
            if line.startswith("remote: ") and line[len("remote: ") :].strip()
        ]
        summary = next(s for s in why.values() if "remote rejected" in s)
        reason = summary.partition("(")[2].rstrip(")") or summary
        return RemoteError(f"{name} refused the push: {reason}", details=said)
    if BRANCH in why or not why:
        return RemoteError(
            f"{name} has commits this store does not; "
            f"run 'machine pull {name}' first, then push again"
        )
    # A name given there since we looked: the pull that follows shows both.
    names = ", ".join(describe(ref) for ref in sorted(why))
    return RemoteError(
        f"{name} has {names} on another commit; nothing was pushed. "
        f"Run 'machine pull {name}' to see both"
    )


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
    if not transport.is_local(local):
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
    ``fast-forward`` (also: a store with nothing of its own took the remote's
    history), ``merge`` or ``conflict`` (nothing committed). ``versions`` and
    ``runs`` name the versions and run refs that arrived.
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
    versions: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)


class _Conflicted(Exception):
    def __init__(self, conflicts: list[Conflict]) -> None:
        super().__init__(f"{len(conflicts)} conflicts")
        self.conflicts = conflicts


def pull(
    store: Store, name: str = DEFAULT_REMOTE, prefer: str | None = None
) -> PullResult:
    """Fetch remote ``name``: merge its rows into the branch, row by row, and
    take its versions and run refs."""
    if prefer is not None and prefer not in PREFER:
        raise UsageError(f"--prefer must be one of {', '.join(PREFER)}")
    get_remote(store, name)
    hooks.install_store_hooks(store.path)
    theirs_id = fetch(store, name)
    if theirs_id is None:
        return PullResult(name, "empty")
    repo = store.repo
    staged = _staged_refs(repo, name)
    their_commits = {ref: _peeled(repo, oid) for ref, oid in staged.items()}
    local = _local_refs(repo)
    local_commits = {ref: _peeled(repo, oid) for ref, oid in local.items()}
    new, clashes = _compare(repo, staged, local, local_commits)
    if clashes:
        # _compare saw them from their side: say it from ours.
        clashes = [RefClash(c.ref, c.theirs, c.ours) for c in clashes]
        raise _clash_error(clashes, name, "pulled")
    theirs = repo[theirs_id].peel(Commit)
    ours = store.head
    _check_incoming(store, name, [theirs.id, *(their_commits[r] for r in new)], ours)
    result = _pull_branch(store, name, theirs, prefer)
    if result.status != "conflict":
        _take_refs(store, {ref: staged[ref] for ref in new})
        result.versions = _names(new, "refs/tags/")
        result.runs = _names(new, "refs/runs/")
    return result


def _pull_branch(
    store: Store, name: str, theirs: Commit, prefer: str | None
) -> PullResult:
    repo = store.repo
    for _ in range(5):
        ours = store.head
        if ours is None or ours.id == theirs.id:
            return PullResult(name, "up-to-date", commit=_hex(ours))
        base = repo.merge_base(ours.id, theirs.id)
        if base == theirs.id:
            return PullResult(name, "up-to-date", commit=_hex(ours))
        if base == ours.id or _nothing_of_its_own(ours):
            how = "fast-forward" if base == ours.id else "took its history"
            if store.fast_forward(ours.id, theirs.id, f"pull {name}: {how}"):
                result = PullResult(name, "fast-forward", commit=str(theirs.id))
                for path, old, new in treediff.changed_blobs(
                    repo, ours.tree, theirs.tree
                ):
                    _count(result, path, old, new)
                return result
            continue  # the branch moved: look again
        return _merge(store, name, theirs, prefer)
    raise ConcurrentUpdateError(f"{store.path}: the branch kept moving; try again")


def _nothing_of_its_own(commit: Commit) -> bool:
    # Only the first commit machine makes in a new store: nothing to keep,
    # so a first pull takes the remote's history instead of a second root.
    if commit.parent_ids:
        return False
    return commit.message_trailers.get("Machine-Action") == "init"


def fetch(store: Store, name: str) -> Oid | None:
    """Fetch ``name``'s main into ``refs/remotes/<name>/main`` and its versions
    and run refs beside it; None if it has no main."""
    remote = get_remote(store, name)
    tracking = f"refs/remotes/{name}/main"
    staged = f"{_STAGED}{name}/"
    done = transport.run(
        store.path,
        "fetch",
        "--quiet",
        "--no-tags",
        "--no-write-fetch-head",
        "--prune",
        name,
        f"+{BRANCH}:{tracking}",
        *(f"+{prefix}*:{staged}{prefix[len('refs/') :]}*" for prefix in SHARED),
        what=f"pull from {name}",
    )
    if done.returncode != 0:
        if "couldn't find remote ref" in done.stderr:
            return None
        raise RemoteError(
            f"cannot fetch from {name} ({remote.url}): "
            f"{transport.first_error(done.stderr)}"
        )
    return store.repo.references[tracking].peel(Commit).id


def _staged_refs(repo: pygit2.Repository, name: str) -> dict[str, Oid]:
    """The fetched versions and run refs of ``name``, under their own names."""
    prefix = f"{_STAGED}{name}/"
    out: dict[str, Oid] = {}
    for ref in repo.references:
        if ref.startswith(prefix):
            local = f"refs/{ref[len(prefix) :]}"
            target = repo.references[ref].target
            if _shared(local) and isinstance(target, Oid):
                out[local] = target
    return out


def _take_refs(store: Store, refs: dict[str, Oid]) -> None:
    if not refs:
        return
    with store.locked(), private_objects(store):
        for ref, target in refs.items():
            if ref not in store.repo.references:
                store.repo.references.create(ref, target)


def _check_incoming(
    store: Store, name: str, tips: list[Oid], ours: Commit | None
) -> None:
    walker = store.repo.walk(None, SortMode.TOPOLOGICAL | SortMode.REVERSE)
    for tip in tips:
        with contextlib.suppress(KeyError, ValueError, pygit2.GitError):
            walker.push(tip)
    if ours is not None:
        walker.hide(ours.id)
    bad = hooks.check_commits(store.repo, (c.id for c in walker))
    if bad:
        raise RemoteError(
            f"{name} has {hooks.rejected(bad)} in "
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
            redaction=Redaction.KEPT,
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
    done = transport.run(
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
        what=f"clone into {dest}",
    )
    if done.returncode != 0:
        raise HookError(
            f"cannot clone into {dest}: {transport.first_error(done.stderr)}"
        )
    git_dir = target / ".git"
    config = pygit2.Repository(str(git_dir)).config
    config["core.sharedRepository"] = "0600"  # later git writes stay private
    hooks.install_clone_hooks(git_dir)
    hooks.fix_permissions(git_dir)
    return target


@dataclass
class Cloned:
    """A working clone for editing rows, and the identity set in it, if any."""

    path: Path
    identity: str | None  # "Name <email>" set in the clone's own config


def clone_for_editing(store: Store, dest: Path) -> Cloned:
    """:func:`clone`, made ready for ``git commit -a && git push``.

    git refuses to commit without an identity (user.name and user.email). If
    the user's git config has none, the clone gets one in its own config: the
    parts the user's config does have, then GIT_AUTHOR_NAME/EMAIL, then
    machine's (as the store signs tags made without one).
    """
    target = clone(store, dest)
    found = {key: _git_config(target, f"user.{key}") for key in ("name", "email")}
    if found["name"] and found["email"]:
        return Cloned(target, None)
    name = found["name"] or _environment_or("GIT_AUTHOR_NAME", "machine")
    email = found["email"] or _environment_or("GIT_AUTHOR_EMAIL", "machine@localhost")
    config = pygit2.Repository(str(target / ".git")).config
    config["user.name"] = name
    config["user.email"] = email
    return Cloned(target, f"{name} <{email}>")


def _git_config(target: Path, key: str) -> str | None:
    # Asked of git itself: it reads every file git commit will (global, XDG,
    # system, includes, GIT_CONFIG_GLOBAL), which libgit2 does not all honor.
    done = transport.run(
        None, "-C", str(target), "config", "--get", key, what=f"read {key}"
    )
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def _environment_or(variable: str, default: str) -> str:
    return os.environ.get(variable) or default


def _hex(commit: Commit | None) -> str | None:
    return str(commit.id) if commit is not None else None
