"""``machine version`` and ``machine versions``: named versions of the dataset."""

from __future__ import annotations

from pathlib import Path

import click

from machine_git.cli.common import complete_revision
from machine_git.cli.common import emit_json
from machine_git.cli.common import json_option
from machine_git.cli.common import open_store
from machine_git.cli.common import project_option
from machine_git.core import table
from machine_git.history import revs
from machine_git.history import versions as named
from machine_git.rows.schemas import KINDS


@click.command()
@click.argument("name")
@click.argument("rev", required=False, shell_complete=complete_revision)
@click.option("-m", "--message", help="What this version is for.")
@project_option
@json_option
def version(
    name: str, rev: str | None, message: str | None, project: Path | None, as_json: bool
) -> None:
    """Name a version of the dataset (default: now); names never move.

    \b
    Example usage:
        machine version v1
        machine version before-cleanup HEAD~3
    """
    store = open_store(project)
    made = named.create(store, name, revs.resolve(store, rev), message)
    if as_json:
        emit_json({"name": made.name, "commit": str(made.commit.id)})
    else:
        click.echo(f"version {made.name} -> {str(made.commit.id)[:12]}")


@click.command()
@project_option
@json_option
def versions(project: Path | None, as_json: bool) -> None:
    """List named versions with their row counts.

    \b
    Example usage:
        machine versions
    """
    store = open_store(project)
    found = named.listing(store)
    kept = named.counts(store, found)
    listed = [(v, kept[str(v.commit.id)]) for v in found]
    if as_json:
        emit_json(
            [
                {
                    "name": v.name,
                    "commit": str(v.commit.id),
                    "message": v.message,
                    "counts": counts,
                }
                for v, counts in listed
            ]
        )
        return
    if not listed:
        click.echo("no versions yet (machine version NAME)")
    lines = [
        (
            v.name,
            str(v.commit.id)[:12],
            f"{sum(counts.get(k, 0) for k in KINDS)} rows ("
            + ", ".join(f"{k} {counts.get(k, 0)}" for k in KINDS)
            + ")",
        )
        for v, counts in listed
    ]
    for line in table.rows(lines, free=2, columns=table.width()):
        click.echo(line)
