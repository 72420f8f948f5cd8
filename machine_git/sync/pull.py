"""Taking a remote's rows, versions and run refs: fetch, check, then merge.

Fetched commits are checked the way a store's pre-receive hook checks a
push, so no invalid row reaches the branch by a pull either. A store with
nothing of its own (only its first commit) takes the remote's history on its
first pull instead of merging with it: one root, no merge. Otherwise the
rows merge one by one (merge.py).
"""

from __future__ import annotations

import contextlib

import pygit2
from pygit2 import Commit
from pygit2 import Oid
from pygit2.enums import SortMode

from machine_git.core.errors import ConcurrentUpdateError
from machine_git.core.errors import RemoteError
from machine_git.core.errors import UsageError
from machine_git.core.progress import QUIET
from machine_git.core.progress import Progress
from machine_git.store import treediff
from machine_git.store.layout import BRANCH
from machine_git.store.store import Store
from machine_git.sync import hooks
from machine_git.sync import incoming
from machine_git.sync import quarantine
from machine_git.sync import transport
from machine_git.sync.merge import PullResult
from machine_git.sync.merge import commit_hex
from machine_git.sync.merge import count_change
from machine_git.sync.merge import merge_rows
from machine_git.sync.remotes import DEFAULT_REMOTE
from machine_git.sync.remotes import get_remote
from machine_git.sync.shared_refs import SHARED
from machine_git.sync.shared_refs import STAGED
from machine_git.sync.shared_refs import RefClash
from machine_git.sync.shared_refs import clash_error
from machine_git.sync.shared_refs import compare_refs
from machine_git.sync.shared_refs import local_refs
from machine_git.sync.shared_refs import names_under
from machine_git.sync.shared_refs import peeled
from machine_git.sync.shared_refs import staged_refs
from machine_git.sync.shared_refs import take_refs

PREFER = ("ours", "theirs")


def pull(
    store: Store,
    name: str = DEFAULT_REMOTE,
    prefer: str | None = None,
    progress: Progress = QUIET,
    audit: hooks.Audit | None = None,
) -> PullResult:
    """Fetch remote ``name``: merge its rows into the branch, row by row, and
    take its versions and run refs. ``progress`` counts the incoming files
    as they are checked. What the remote sends is checked in quarantine
    (quarantine.py, incoming.py) before any ref of the store moves;
    ``audit`` checks release records (machine_git/hooks.py has the releases
    layer's): without it, commits that touch them are refused."""
    if prefer is not None and prefer not in PREFER:
        raise UsageError(f"--prefer must be one of {', '.join(PREFER)}")
    remote = get_remote(store, name)
    hooks.install_store_hooks(store.path)
    with quarantine.fetch(store, name, remote.url) as fetched:
        if fetched is None:
            return PullResult(name, "empty")
        _check_incoming(store, name, fetched, progress, audit)
        quarantine.keep(store, fetched, name)
        theirs_id = fetched.main
    if theirs_id is None:
        return PullResult(name, "empty")
    repo = store.repo
    staged = staged_refs(repo, name)
    local = local_refs(repo)
    local_commits = {ref: peeled(repo, oid) for ref, oid in local.items()}
    new, clashes = compare_refs(repo, staged, local, local_commits)
    if clashes:
        # compare_refs saw them from their side: say it from ours.
        clashes = [RefClash(c.ref, c.theirs, c.ours) for c in clashes]
        raise clash_error(clashes, name, "pulled")
    theirs = repo[theirs_id].peel(Commit)
    result = _pull_branch(store, name, theirs, prefer)
    if result.status != "conflict":
        take_refs(store, {ref: staged[ref] for ref in new})
        result.versions = names_under(new, "refs/tags/")
        result.runs = names_under(new, "refs/runs/")
    return result


def _pull_branch(
    store: Store, name: str, theirs: Commit, prefer: str | None
) -> PullResult:
    repo = store.repo
    for _ in range(5):
        ours = store.head
        if ours is None or ours.id == theirs.id:
            return PullResult(name, "up-to-date", commit=commit_hex(ours))
        base = repo.merge_base(ours.id, theirs.id)
        if base == theirs.id:
            return PullResult(name, "up-to-date", commit=commit_hex(ours))
        if base == ours.id or _nothing_of_its_own(ours):
            how = "fast-forward" if base == ours.id else "took its history"
            if store.fast_forward(ours.id, theirs.id, f"pull {name}: {how}"):
                result = PullResult(name, "fast-forward", commit=str(theirs.id))
                for path, old, new in treediff.changed_blobs(
                    repo, ours.tree, theirs.tree
                ):
                    count_change(result, path, old, new)
                return result
            continue  # the branch moved: look again
        return merge_rows(store, name, theirs, prefer)
    raise ConcurrentUpdateError(f"{store.path}: the branch kept moving; try again")


def _nothing_of_its_own(commit: Commit) -> bool:
    # Only the first commit machine makes in a new store: nothing to keep,
    # so a first pull takes the remote's history instead of a second root.
    if commit.parent_ids:
        return False
    return commit.message_trailers.get("Machine-Action") == "init"


def fetch(store: Store, name: str) -> Oid | None:
    """Fetch ``name``'s main into ``refs/remotes/<name>/main`` and its versions
    and run refs beside it; None if it has no main.

    Straight into ``store``'s refs: for a repository of its own (``recover
    --from`` fetches into a fresh one), never a store's (a pull quarantines).
    """
    remote = get_remote(store, name)
    tracking = f"refs/remotes/{name}/main"
    staged = f"{STAGED}{name}/"
    done = transport.run(
        store.path,
        "-c",
        "fetch.fsckObjects=true",  # git's object checks, as a pull's quarantine has
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


def _check_incoming(
    store: Store,
    name: str,
    fetched: quarantine.Fetched,
    progress: Progress = QUIET,
    audit: hooks.Audit | None = None,
) -> None:
    """Refuse, in one line, what a remote sends that machine would not write.

    Sizes first (from the objects' headers, before any is read), then what
    each ref names, then every new commit's files and message.
    """
    sizes = incoming.size_problems(incoming.new_objects(fetched.objects))
    if sizes:
        raise _refusal(name, sizes)
    repo = fetched.repo
    ours = store.head
    tips = [t for t in (fetched.main, ours.id if ours else None) if t is not None]
    on_history = incoming.history_of(repo, tips)
    refused = [
        problem
        for ref, oid in sorted(fetched.refs.items())
        if (problem := incoming.target_problem(repo, ref, oid, on_history))
    ]
    if refused:
        raise _refusal(name, refused)
    oids = _new_commits(store, name, fetched)
    bad = hooks.check_commits(repo, oids, progress)
    if bad:
        raise RemoteError(
            f"{name} has {hooks.rejected(bad)} in "
            f"{hooks.count(len(bad), 'commit')}; nothing was merged",
            details=hooks.report(bad),
        )
    lines = hooks.releases_refused(repo, [], oids, audit)
    lines = lines or hooks.signed_refused(repo, oids, audit)
    if lines:
        summary = lines[-1].removeprefix("machine: push rejected: ")
        summary = summary.removeprefix("machine: ").replace("were pushed", "came")
        summary = summary.removesuffix("; nothing was stored")
        raise RemoteError(
            f"{name} is refused: {summary}; nothing was pulled", lines[:-1]
        )


def _new_commits(store: Store, name: str, fetched: quarantine.Fetched) -> list[Oid]:
    """The commits the fetched refs reach that no ref of the store does."""
    repo = fetched.repo
    walker = repo.walk(None, SortMode.TOPOLOGICAL | SortMode.REVERSE)
    for oid in fetched.refs.values():
        walker.push(repo[oid].peel(Commit).id)
    for ref in store.repo.references:
        with contextlib.suppress(KeyError, ValueError, pygit2.GitError):
            walker.hide(repo[store.repo.references[ref].target].peel(Commit).id)
    try:
        return [c.id for c in walker]
    except (KeyError, ValueError, pygit2.GitError):
        raise RemoteError(
            f"{name} sent a history with commits missing (a shallow or partial "
            "copy?); nothing was pulled"
        ) from None


def _refusal(name: str, problems: list[str]) -> RemoteError:
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return RemoteError(
        f"{name} is refused: {problems[0]}{more}; nothing was pulled",
        details=problems if len(problems) > 1 else None,
    )
