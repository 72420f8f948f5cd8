"""Sending the branch, versions and run refs to a remote, all or nothing.

Transport is the git CLI (``git push --atomic``) under the rules of
transport.py. A remote with commits this store lacks means pull first; a
version or run ref there on another commit is a conflict (shared_refs.py).
A local remote that is itself a machine store gets its pre-receive hook
first, so it checks what is sent.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

import pygit2
from pygit2 import Oid
from pygit2.enums import SortMode

from machine_git.core.errors import HookError
from machine_git.core.errors import RemoteError
from machine_git.store.layout import BRANCH
from machine_git.store.layout import WORK
from machine_git.store.store import Store
from machine_git.sync import hooks
from machine_git.sync import transport
from machine_git.sync.merge import commit_hex
from machine_git.sync.remotes import DEFAULT_REMOTE
from machine_git.sync.remotes import Remote
from machine_git.sync.remotes import get_remote
from machine_git.sync.shared_refs import SHARED
from machine_git.sync.shared_refs import clash_error
from machine_git.sync.shared_refs import compare_refs
from machine_git.sync.shared_refs import describe
from machine_git.sync.shared_refs import is_shared
from machine_git.sync.shared_refs import local_refs
from machine_git.sync.shared_refs import names_under


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
    missing, clashes = compare_refs(
        store.repo, local_refs(store.repo), theirs, their_commits
    )
    if clashes:
        raise clash_error(clashes, name, "pushed")
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
    result = PushResult(name, "up-to-date", head=commit_hex(head))
    result.versions = names_under(missing, "refs/tags/")
    result.runs = names_under(missing, "refs/runs/")
    flag, summary = flags[BRANCH]
    if flag != "=":
        result.commits = _pushed_count(store, summary)
    if flag != "=" or missing:
        result.status = "pushed"
    return result


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
        elif is_shared(ref):
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
