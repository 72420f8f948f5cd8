"""``machine remote``, ``machine push``, ``machine pull`` and ``machine clone``."""

from __future__ import annotations

from collections.abc import Iterator
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
import pygit2

from machine_git.cli import progress
from machine_git.cli.common import emit_json
from machine_git.cli.common import json_option
from machine_git.cli.common import open_store
from machine_git.cli.common import project_of
from machine_git.cli.common import project_option
from machine_git.core import paths
from machine_git.core import table
from machine_git.core.errors import CONFLICT
from machine_git.core.errors import RemoteError
from machine_git.store.store import Store
from machine_git.sync import sharing as sync


@contextmanager
def _details_first() -> Iterator[None]:
    # The lines a remote hook printed (file:line: problem) are the useful part
    # of a refused push; show them above the one-line error.
    try:
        yield
    except RemoteError as e:
        for line in e.details:
            click.echo(table.printable(line), err=True)
        raise


@click.group()
def remote() -> None:
    """Name the places this store is pushed to and pulled from.

    \b
    Example usage:
        machine remote add origin git@example.com:me/data.git
        machine remote list
    """


@remote.command(name="add")
@click.argument("name")
@click.argument("url")
@project_option
@json_option
def remote_add(name: str, url: str, project: Path | None, as_json: bool) -> None:
    """Add remote NAME at URL: a path (a bare repository), git://, http(s):// or ssh.

    \b
    Example usage:
        machine remote add origin /srv/git/data.git
    """
    added = sync.add_remote(open_store(project, create=True), name, url)
    if as_json:
        emit_json({"name": added.name, "url": added.url})
    else:
        click.echo(f"added remote {added.name}: {added.url}")


@remote.command(name="list")
@project_option
@json_option
def remote_list(project: Path | None, as_json: bool) -> None:
    """List the remotes of this project's store.

    \b
    Example usage:
        machine remote list --json
    """
    location = paths.store_path(project_of(project))
    found = sync.remotes(Store.open(location)) if (location / "HEAD").exists() else []
    if as_json:
        emit_json([{"name": r.name, "url": r.url} for r in found])
        return
    if not found:
        click.echo("no remotes (add one with 'machine remote add NAME URL')")
    for r in found:
        click.echo(f"{r.name}\t{r.url}")


@click.command()
@click.argument("name", default=sync.DEFAULT_REMOTE)
@project_option
@json_option
def push(name: str, project: Path | None, as_json: bool) -> None:
    """Send this store's commits, versions and run refs to remote NAME (default:
    origin), all or nothing.

    \b
    Example usage:
        machine push
        machine push backup
    """
    with _details_first():
        result = sync.push(open_store(project), name)
    if as_json:
        emit_json(result.__dict__)
    elif result.status == "up-to-date":
        click.echo(f"{name} is up to date")
    else:
        head = (result.head or "")[:12]
        click.echo(f"pushed {_sent(result)} to {name} ({head})")


def _sent(result: sync.PushResult) -> str:
    parts = []
    if result.commits or not (result.versions or result.runs):
        parts.append(f"{result.commits} commit{'' if result.commits == 1 else 's'}")
    parts += _named(result.versions, "version", "versions")
    parts += _named(result.runs, "run ref", "run refs")
    return " and ".join([", ".join(parts[:-1]), parts[-1]] if len(parts) > 1 else parts)


def _named(names: list[str], one: str, many: str) -> list[str]:
    if not names:
        return []
    return [f"{one if len(names) == 1 else many} {', '.join(names)}"]


@click.command()
@click.argument("name", default=sync.DEFAULT_REMOTE)
@click.option(
    "--prefer",
    type=click.Choice(sync.PREFER),
    help="Keep this side of rows changed differently on both sides.",
)
@project_option
@json_option
def pull(name: str, prefer: str | None, project: Path | None, as_json: bool) -> None:
    """Fetch remote NAME (default: origin), merge its rows into this store and
    take its versions and run refs.

    Rows changed on one side are taken; a row changed differently on both
    sides stops the pull with nothing committed, until --prefer picks a side.
    A store with nothing of its own takes the remote's history as it is.

    \b
    Example usage:
        machine pull
        machine pull origin --prefer theirs
    """
    with _details_first(), progress.bars(as_json) as shown:
        store = open_store(project, create=True)
        store.progress = shown  # a merge of many rows: its pack's objects
        result = sync.pull(store, name, prefer, progress=shown, audit=_release_audit)
    if as_json:
        emit_json(_pull_json(result))
    else:
        _echo_pull(result)
    if result.status == "conflict":
        raise click.exceptions.Exit(CONFLICT)


def _echo_pull(result: sync.PullResult) -> None:
    """One line, as push says it: what came, and what was decided."""
    name = result.remote
    commit = (result.commit or "")[:12]
    if result.status == "conflict":
        _echo_conflicts(result)
        return
    parts = [sync.counts_text(result)]
    parts += _named(result.versions, "version", "versions")
    parts += _named(result.runs, "run ref", "run refs")
    came = " and ".join([", ".join(parts[:-1]), parts[-1]] if len(parts) > 1 else parts)
    if result.status == "empty":
        line = f"{name} has no commits yet; nothing to pull"
    elif result.status == "up-to-date":
        line = f"already up to date with {name}"
        if len(parts) > 1:  # no new commits, but new versions or run refs
            line = f"{', '.join(parts[1:])} from {name}; rows already up to date"
    elif result.status == "fast-forward":
        line = f"fast-forward to {commit}: {came} from {name}"
    else:
        line = f"merged {name} ({commit}): {came} from {name}"
    if result.resolved:
        kept = "row" if len(result.resolved) == 1 else "rows"
        line += f"; kept {result.prefer} for {len(result.resolved)} conflicting {kept}"
    click.echo(table.printable(line))  # version and run names come from a remote


def _echo_conflicts(result: sync.PullResult) -> None:
    for conflict in result.conflicts:
        what = f"row {conflict.row_id}" if conflict.row_id else "file"
        # Both sides are stored text: shown escaped, never as control.
        click.echo(table.printable(f"conflict in {what} ({conflict.path}):"))
        for diff in conflict.fields:
            click.echo(table.printable(f"  {diff.path}"))
            click.echo(table.printable(f"    ours:   {diff.ours}"))
            click.echo(table.printable(f"    theirs: {diff.theirs}"))
    count = len(result.conflicts)
    noun = "row was" if count == 1 else "rows were"
    click.echo(
        f"Error: {count} {noun} changed differently here and on {result.remote}; "
        f"nothing was merged. Keep one side with 'machine pull {result.remote} "
        "--prefer ours' or '--prefer theirs' (the other stays in history)",
        err=True,
    )


def _pull_json(result: sync.PullResult) -> dict[str, Any]:
    out = dict(result.__dict__)
    out["conflicts"] = [
        {
            "path": c.path,
            "row": c.row_id,
            "ours": c.ours,
            "theirs": c.theirs,
            "fields": [d.__dict__ for d in c.fields],
        }
        for c in result.conflicts
    ]
    return out


@click.command()
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@project_option
@json_option
def clone(folder: Path, project: Path | None, as_json: bool) -> None:
    """Make a working git clone of this project's store, for editing rows by hand.

    The clone's pre-commit hook checks the rows you stage, and the store
    checks them again when you git push.

    \b
    Example usage:
        machine clone ~/data-edit
        cd ~/data-edit && $EDITOR rows/a1/b2/a1b2c3d4e5f6.json
        git commit -am "fix an answer" && git push
    """
    store = open_store(project)
    cloned = sync.clone_for_editing(store, folder)
    target = cloned.path
    if as_json:
        emit_json(
            {
                "clone": str(target),
                "store": str(store.path),
                "identity": cloned.identity,
            }
        )
        return
    click.echo(f"cloned {store.path} into {target}")
    click.echo("edit rows there, then: git commit -a && git push")
    if cloned.identity is not None:
        click.echo(
            f"note: your git config has no user.name/user.email, so commits in "
            f"the clone are signed {cloned.identity} (its own .git/config; "
            f"change with: git -C {target} config user.name 'Your Name')",
            err=True,
        )


def _release_audit(
    repo: pygit2.Repository, commits: list[pygit2.Commit], git_dir: Path
) -> Sequence[tuple[pygit2.Commit, Sequence[object]]]:
    """The releases layer's check of pulled release records (sync cannot import it)."""
    # pydantic and the release modules load only when pulled commits touch releases/.
    from machine_git.releases import audit

    return audit.pushed(repo, commits, git_dir)
