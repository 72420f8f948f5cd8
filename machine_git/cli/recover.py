"""``machine recover``: back to the newest intact commit, or to a remote's."""

from __future__ import annotations

from pathlib import Path

import click

from machine_git.cli.common import emit_json
from machine_git.cli.common import json_option
from machine_git.cli.common import project_of
from machine_git.cli.common import project_option
from machine_git.core import paths
from machine_git.core.errors import NoStoreError
from machine_git.recovery import recover as recovering
from machine_git.sync import restore as restoring


@click.command("recover")
@click.option(
    "--from",
    "remote",
    metavar="REMOTE",
    help="Restore from this remote's branch instead (fetched and checked first).",
)
@click.option("--yes", "confirm", is_flag=True, help="Do it (without: only show it).")
@project_option
@json_option
def recover_command(
    remote: str | None, confirm: bool, project: Path | None, as_json: bool
) -> None:
    """Get a damaged store back to its newest intact commit.

    Without --yes, shows what is damaged, the newest intact commit (from the
    branch's reflog), the rows going back to it loses, and changes nothing.
    With --yes, takes that step as a new commit (Machine-Action: recover,
    naming the damaged commit), and keeps everything it replaced or set
    aside in <store>/machine/damaged/. --from REMOTE adopts the remote's
    branch instead, once it is fetched and reads cleanly.

    \b
    Example usage:
        machine recover
        machine recover --yes
        machine recover --from origin --yes
    """
    location = paths.store_path(project_of(project))
    if remote is not None:
        done = restoring.restore(location, remote, confirm)
    else:
        if not location.exists():  # a store in part is damage, for recover
            raise NoStoreError(f"no store at {location} (nothing to recover)")
        done = recovering.recover(location, confirm)
    if as_json:
        emit_json(done.to_json())
        return
    found = done.diagnosis
    if not found.damaged and done.record is not None:
        click.echo(
            f"the store {location} is intact again; the old files are in {done.record}"
        )
        return
    if not found.damaged:
        click.echo(f"the store {location} is intact; nothing to recover")
        return
    for line in recovering.describe(found):
        click.echo(line)
    if done.commit is None:
        for repair in found.repairs:
            click.echo(f"would {repair}")
        again = f"machine recover{f' --from {remote}' if remote else ''} --yes"
        click.echo(f"nothing changed: run '{again}' to do it")
        return
    click.echo(
        f"recovered: the branch is at {done.commit[:12]}, a recover step; "
        f"what was damaged or replaced is kept in {done.record}"
    )
