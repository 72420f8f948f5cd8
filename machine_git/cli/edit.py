"""``machine rewrite``, ``edit``, ``rm``, ``move`` and ``undo``: each one commit."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import TextIO

import click

from machine_git.cli.common import complete_row_id
from machine_git.cli.common import emit_json
from machine_git.cli.common import json_option
from machine_git.cli.common import open_store
from machine_git.cli.common import project_option
from machine_git.core import jsonio
from machine_git.core.errors import RowNotFoundError
from machine_git.core.errors import RowValidationError
from machine_git.history import lookup
from machine_git.store.store import Store
from machine_git.tagging import edits

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Row


def _report(action: str, result: edits.EditResult, as_json: bool) -> None:
    if as_json:
        emit_json(
            {
                "action": action,
                "id": result.row_id,
                "commit": result.commit,
                "kind": _kind(result.after or result.before),
            }
        )
    elif result.commit is None:
        click.echo(f"{result.row_id}: nothing changed")
    else:
        click.echo(f"{action} {result.row_id} ({result.commit[:12]})")


@click.command()
@click.argument("row_id", shell_complete=complete_row_id)
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
@click.argument("row_id", shell_complete=complete_row_id)
@click.option(
    "--from",
    "source",
    type=click.File("r"),
    help="Replace the row by this file's JSON ('-': stdin) instead of opening "
    "$EDITOR (what Pi's /machine edit runs).",
)
@project_option
@json_option
def edit(
    row_id: str, source: TextIO | None, project: Path | None, as_json: bool
) -> None:
    """Open a row in $EDITOR; it is validated on save and committed if valid.

    An invalid edit is shown with its problems and can be fixed or abandoned;
    it is never committed. With --from, no editor opens: the file's row is
    validated and committed, or refused in one line.

    \b
    Example usage:
        EDITOR=vim machine edit 1a2b3c
        machine edit 1a2b3c --from row.json --json
    """
    store = open_store(project)
    full_id = lookup.resolve_id(store, row_id)
    row = store.read_row(full_id)
    if row is None:  # resolve_id found it a moment ago
        raise RowNotFoundError(f"row {row_id} was removed meanwhile")
    text = jsonio.canonical(row).decode()
    if source is not None:
        _replace_from(store, full_id, row, source.read(), as_json)
        return
    while True:
        try:
            edited = click.edit(text, extension=".json", require_save=True)
        except FileNotFoundError:  # the editor removed (or moved) its file
            message = "edit abandoned: the editor removed the file; nothing changed"
            _abandoned(row, message, as_json)
            return
        if edited is None:
            message = "edit abandoned: the row was not saved; nothing changed"
            _abandoned(row, message, as_json)
            return
        text = edited
        value, problems = _parse_edit(edited)
        if not problems and isinstance(value, dict):
            result = edits.replace(store, full_id, value)
            _report("edited", result, as_json)
            return
        click.echo(f"the edited row is invalid ({len(problems)} problems):", err=True)
        for problem in problems:
            click.echo(f"  {problem}", err=True)
        choice = click.prompt(
            "edit again or abandon?",
            type=click.Choice(["edit", "abandon"]),
            default="edit",
            err=as_json,  # stdout holds the one JSON document
        )
        if choice == "abandon":
            _abandoned(row, "edit abandoned; nothing changed", as_json)
            return


def _kind(row: Row | None) -> str | None:
    return None if row is None else row["kind"]


def _abandoned(row: Row, message: str, as_json: bool) -> None:
    if as_json:
        emit_json(
            {
                "action": "abandoned",
                "id": row["id"],
                "commit": None,
                "kind": row["kind"],
            }
        )
    else:
        click.echo(message)


def _parse_edit(edited: str) -> tuple[Any, list[str]]:
    """The edited row and its problems (one line each)."""
    try:
        value = jsonio.loads(edited)
        return value, edits.problems_of(value)
    except jsonio.JSONDecodeError as e:
        return None, [f"$: not valid JSON ({e})"]


def _replace_from(
    store: Store, row_id: str, row: Row, edited: str, as_json: bool
) -> None:
    """``machine edit --from``: commit the given row, or refuse it in one line."""
    if edited.strip() == jsonio.canonical(row).decode().strip():
        _report("edited", edits.EditResult(row_id, row, row, None), as_json)
        return
    value, problems = _parse_edit(edited)
    if problems or not isinstance(value, dict):
        problems = problems or ["$: expected a JSON object"]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise RowValidationError(f"the edited row is invalid: {problems[0]}{more}")
    result = edits.replace(store, row_id, value)
    _report("edited", result, as_json)


@click.command()
@click.argument("row_id", shell_complete=complete_row_id)
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
@click.argument("row_id", shell_complete=complete_row_id)
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
        before, after = _kind(result.before), _kind(result.after)
        click.echo(f"moved {result.row_id} {before} -> {after} ({result.commit[:12]})")
        return
    _report("moved", result, as_json)


@click.command()
@project_option
@json_option
def undo(project: Path | None, as_json: bool) -> None:
    """Take back the last change, as a new commit; again: the one before it.

    Each undo takes back one more step (a tag, a rewrite, a move, a removal,
    an import, a pull's merge, a setting); 'machine redo' makes them again.

    \b
    Example usage:
        machine undo
        machine undo && machine undo      # the last two changes
    """
    store = open_store(project)
    done = edits.undo(store)
    _report_step("undid", "undone", done, as_json)


@click.command()
@project_option
@json_option
def redo(project: Path | None, as_json: bool) -> None:
    """Make the most recently undone change again, as a new commit.

    Redo works back through the undos in the order they were made, until any
    other change is made after them.

    \b
    Example usage:
        machine undo
        machine redo
    """
    store = open_store(project)
    done = edits.redo(store)
    _report_step("redid", "redone", done, as_json)


def _report_step(verb: str, key: str, done: edits.Undone, as_json: bool) -> None:
    summary = done.step.message.splitlines()[0] if done.step.message else ""
    if as_json:
        emit_json({key: str(done.step.id), "commit": done.commit, "summary": summary})
    else:
        click.echo(f"{verb} {str(done.step.id)[:12]} {summary}")
