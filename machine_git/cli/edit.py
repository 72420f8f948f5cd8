"""``machine rewrite``, ``edit``, ``rm``, ``move`` and ``undo``: each one commit."""

from __future__ import annotations

from pathlib import Path

import click

from machine_git import edits
from machine_git import jsonio
from machine_git import lookup
from machine_git.cli.common import emit_json
from machine_git.cli.common import json_option
from machine_git.cli.common import open_store
from machine_git.cli.common import project_option


def _report(action: str, result: edits.EditResult, as_json: bool) -> None:
    if as_json:
        emit_json(
            {
                "action": action,
                "id": result.row_id,
                "commit": result.commit,
                "kind": (result.after or result.before or {}).get("kind"),
            }
        )
    elif result.commit is None:
        click.echo(f"{result.row_id}: nothing changed")
    else:
        click.echo(f"{action} {result.row_id} ({result.commit[:12]})")


@click.command()
@click.argument("row_id")
@click.option("--as", "--rewrite", "text", required=True, help="The new final answer.")
@project_option
@json_option
def rewrite(row_id: str, text: str, project: Path | None, as_json: bool) -> None:
    """Replace a row's final answer; the agent's original is kept in the row.

    \b
    Example usage:
        machine rewrite 1a2b3c --as "Use the existing helper."
    """
    store = open_store(project)
    result = edits.rewrite(store, row_id, text)
    _report("rewrote", result, as_json)


@click.command()
@click.argument("row_id")
@project_option
def edit(row_id: str, project: Path | None) -> None:
    """Open a row in $EDITOR; it is validated on save and committed if valid.

    An invalid edit is shown with its problems and can be fixed or abandoned;
    it is never committed.

    \b
    Example usage:
        EDITOR=vim machine edit 1a2b3c
    """
    store = open_store(project)
    full_id = lookup.resolve_id(store, row_id)
    text = jsonio.canonical(store.read_row(full_id)).decode()
    while True:
        edited = click.edit(text, extension=".json", require_save=True)
        if edited is None:
            click.echo("edit abandoned: the row was not saved; nothing changed")
            return
        text = edited
        try:
            value = jsonio.loads(edited)
            problems = edits.problems_of(value)
        except jsonio.JSONDecodeError as e:
            value, problems = None, [f"$: not valid JSON ({e})"]
        if not problems and isinstance(value, dict):
            result = edits.replace(store, full_id, value)
            _report("edited", result, False)
            return
        click.echo(f"the edited row is invalid ({len(problems)} problems):", err=True)
        for problem in problems:
            click.echo(f"  {problem}", err=True)
        choice = click.prompt(
            "edit again or abandon?",
            type=click.Choice(["edit", "abandon"]),
            default="edit",
        )
        if choice == "abandon":
            click.echo("edit abandoned; nothing changed")
            return


@click.command()
@click.argument("row_id")
@click.option("--why", help="Why the row is removed (kept in the commit).")
@project_option
@json_option
def rm(row_id: str, why: str | None, project: Path | None, as_json: bool) -> None:
    """Remove a row (its history stays in the store).

    \b
    Example usage:
        machine rm 1a2b3c --why "duplicate of 4d5e6f"
    """
    store = open_store(project)
    result = edits.remove(store, row_id, why)
    _report("removed", result, as_json)


@click.command()
@click.argument("row_id")
@click.option("--to", "label", type=click.Choice(["good", "bad"]), required=True)
@project_option
@json_option
def move(row_id: str, label: str, project: Path | None, as_json: bool) -> None:
    """Move a row between good (train or traces) and bad (rejected).

    \b
    Example usage:
        machine move 1a2b3c --to bad
    """
    store = open_store(project)
    result = edits.move(store, row_id, label)
    if result.commit is not None and not as_json:
        before = (result.before or {}).get("kind")
        after = (result.after or {}).get("kind")
        click.echo(f"moved {result.row_id} {before} -> {after} ({result.commit[:12]})")
        return
    _report("moved", result, as_json)


@click.command()
@project_option
@json_option
def undo(project: Path | None, as_json: bool) -> None:
    """Revert the last commit, as a new commit.

    \b
    Example usage:
        machine undo
    """
    store = open_store(project)
    undone, commit = edits.undo(store)
    summary = undone.message.splitlines()[0] if undone.message else ""
    if as_json:
        emit_json({"undone": str(undone.id), "commit": commit, "summary": summary})
    else:
        click.echo(f"undid {str(undone.id)[:12]} {summary}")
