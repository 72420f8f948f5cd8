"""``machine log``, ``machine show`` and ``machine diff``."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import click

from machine_git.cli.common import complete_revision
from machine_git.cli.common import complete_row_id
from machine_git.cli.common import complete_row_or_revision
from machine_git.cli.common import emit_json
from machine_git.cli.common import json_option
from machine_git.cli.common import open_store
from machine_git.cli.common import project_option
from machine_git.cli.common import warn
from machine_git.core import jsonio
from machine_git.core import table
from machine_git.core.errors import BadRevisionError
from machine_git.history import diff as diffs
from machine_git.history import history
from machine_git.history import lookup
from machine_git.history import revs
from machine_git.rows import context
from machine_git.rows import images
from machine_git.rows import rows
from machine_git.rows.schemas import KINDS
from machine_git.store.store import Store

_HEX = re.compile(r"^[0-9a-f]{1,12}$")
_GROUP = 3  # more files than this in one folder, with one verb: one line


@click.command(name="log")
@click.argument("rev", required=False, shell_complete=complete_revision)
@click.option("-n", "limit", type=click.IntRange(min=1), help="At most N entries.")
@click.option("--kind", type=click.Choice(KINDS), help="Only changes to this kind.")
@click.option(
    "--id",
    "row_id",
    shell_complete=complete_row_id,
    help="Follow one row through its whole life.",
)
@project_option
@json_option
def log_command(
    rev: str | None,
    limit: int | None,
    kind: str | None,
    row_id: str | None,
    project: Path | None,
    as_json: bool,
) -> None:
    """Show the history of the dataset: tags, rewrites, moves, deletions, settings.

    \b
    Example usage:
        machine log -n 5
        machine log --id 1a2b3c
    """
    store = open_store(project)
    start = revs.resolve(store, rev)
    full_id = _row_id_anywhere(store, row_id) if row_id else None
    entries = history.log(store, start, limit, kind, full_id)
    if as_json:
        emit_json([e.to_json() for e in entries])
        return
    listing = [(e.short, e.when, e.action, e.summary) for e in entries]
    for line in table.rows(listing, free=3, columns=table.width()):
        click.echo(line)


def _row_id_anywhere(store: Store, prefix: str) -> str:
    # A removed row is no longer in the newest tree, but its full id still
    # names its history.
    rows.check_prefix(prefix)
    if len(prefix) == rows.ID_LENGTH:
        return prefix
    return lookup.resolve_id(store, prefix)


@click.command()
@click.argument("what", shell_complete=complete_row_or_revision)
@click.option(
    "--at",
    "at",
    shell_complete=complete_revision,
    help="Show the row as of this revision.",
)
@project_option
@json_option
def show(what: str, at: str | None, project: Path | None, as_json: bool) -> None:
    """Show one row (as of a revision) or one commit with the rows it touched.

    \b
    Example usage:
        machine show 1a2b3c
        machine show 1a2b3c --at @{2026-11-01}
        machine show HEAD~2
    """
    store = open_store(project)
    commit = revs.resolve(store, at)
    if _HEX.match(what):
        found = lookup.matching_ids(store, what, commit)
        if len(found) == 1 or (found and len(what) == rows.ID_LENGTH):
            stored = store.read_row(found[0], commit)
            row = None
            if stored is not None:  # the context it names, not only its hash
                row = context.shown(dict(stored), store.snapshot(commit).read)
            if as_json:
                emit_json(row)
            else:
                click.echo(jsonio.canonical(row).decode(), nl=False)
                # The JSON names each image by hash: say what it is.
                for line in images.lines(row or {}, store.snapshot(commit).read):
                    click.echo(line)
            return
        if len(found) > 1:
            lookup.resolve_id(store, what, commit)  # raises: ambiguous, with candidates
    try:
        target = revs.resolve(store, what)
    except BadRevisionError:
        if revs.is_date(what):
            raise  # a date is no row id: its own error, as every command says it
        raise BadRevisionError(f"{what!r} is neither a row id nor a revision") from None
    entry = history.entry(target)
    touched = diffs.touched(store, target)
    if as_json:
        emit_json({**entry.to_json(), "message": target.message, **_diff_json(touched)})
        return
    click.echo(f"commit {target.id}")
    click.echo(f"date   {entry.when} UTC")
    click.echo(f"author {target.author.name} <{target.author.email}>")
    click.echo("")
    for line in target.message.rstrip("\n").splitlines():
        click.echo(f"    {line}".rstrip())
    if touched.rows or touched.other_files:
        click.echo("")
        _print_changes(touched, detail=False)


@click.command(name="diff")
@click.argument("old", required=False, shell_complete=complete_revision)
@click.argument("new", required=False, shell_complete=complete_revision)
@click.option("--kind", type=click.Choice(KINDS), help="Only rows of this kind.")
@click.option("--stat", is_flag=True, help="Only the summary per kind.")
@click.option("--ids", is_flag=True, help="Only the changed row ids.")
@project_option
@json_option
def diff_command(
    old: str | None,
    new: str | None,
    kind: str | None,
    stat: bool,
    ids: bool,
    project: Path | None,
    as_json: bool,
) -> None:
    """Compare two versions row by row and field by field (default: the last commit).

    \b
    Example usage:
        machine diff                  # what the last commit changed
        machine diff v1               # v1 -> now
        machine diff v1 v2 --stat
    """
    store = open_store(project)
    from machine_git.releases import lineage

    result = diffs.compare(
        store,
        old,
        new,
        [kind] if kind else None,
        run_rows=lineage.run_rows,
        warn=warn,
    )
    if as_json:
        emit_json(_diff_json(result))
        return
    if ids:
        marks = {"added": "+", "removed": "-", "modified": "~", "moved": ">"}
        for change in result.rows:
            click.echo(f"{marks[change.status]} {change.id}")
        return
    span = (
        f"{result.old_run or _short(result.old)}.."
        f"{result.new_run or _short(result.new)}"
    )
    if result.old_run or result.new_run:
        span += " (the rows each run trained on; eval rows held out)"
    click.echo(f"diff {span}: {_count(len(result.rows), 'row')} changed")
    _print_summary(result)
    if not stat:
        reads = (
            (lambda path: None)
            if result.old is None
            else store.snapshot(result.old).read,
            store.snapshot(result.new).read,
        )
        _print_changes(result, detail=True, reads=reads)


def _short(commit: Any) -> str:
    return "(empty)" if commit is None else str(commit.id)[:12]


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _print_summary(result: diffs.Diff) -> None:
    for kind, c in sorted(
        result.summary().items(),
        key=lambda kv: KINDS.index(kv[0]) if kv[0] in KINDS else 99,
    ):
        parts = [f"+{c['added']}", f"-{c['removed']}", f"~{c['modified']}"]
        if c["moved_in"] or c["moved_out"]:
            parts.append(f"moved in {c['moved_in']}, out {c['moved_out']}")
        click.echo(f"  {kind:<9} " + "  ".join(parts))


def _image_lines(change: Any, old_read: Any, new_read: Any) -> list[str]:
    """``+ image ...`` for each image the row gained, ``- image ...`` lost."""
    before = {i.get("sha256") for i in images.references(change.old or {})}
    after = {i.get("sha256") for i in images.references(change.new or {})}
    out = [
        f"+ {images.describe(i, new_read)} ({where})"
        for where, i in images.located(change.new or {})
        if i.get("sha256") not in before
    ]
    out += [
        f"- {images.describe(i, old_read)} ({where})"
        for where, i in images.located(change.old or {})
        if i.get("sha256") not in after
    ]
    return out


def _nothing(path: str) -> bytes | None:
    return None


def _print_changes(
    result: diffs.Diff, detail: bool, reads: tuple[Any, Any] | None = None
) -> None:
    columns = table.width()
    old_read, new_read = reads if reads is not None else (_nothing, _nothing)
    listing = []
    for change in result.rows:
        row = change.new or change.old or {}
        kinds = (
            f"{change.old_kind} -> {change.new_kind}"
            if change.status == "moved"
            else str(change.new_kind or change.old_kind)
        )
        listing.append(
            (change.status, change.id, kinds, rows.first_words(row, sys.maxsize))
        )
    # One layout for every row, then each row's field changes under it.
    lines = table.rows(listing, free=3, columns=columns)
    for change, line in zip(result.rows, lines, strict=True):
        click.echo(line)
        if detail:
            for field in change.fields:
                shown_lines = diffs.shown_field(field, old_read, new_read, columns - 4)
                for shown in shown_lines:
                    click.echo(f"    {shown}")
            # An added or removed row has no fields: say which images it holds.
            if reads is not None and change.status in ("added", "removed"):
                for line in _image_lines(change, *reads):
                    click.echo(f"    {line}")
    if result.other_files:
        click.echo("other files:")
    for verb, path, n in _grouped(result.other_files):
        click.echo(f"  {verb:<8} {path}" + (f" ({n} files)" if n > 1 else ""))


def _grouped(files: list[diffs.FileChange]) -> list[tuple[str, str, int]]:
    """One line per file, or per folder when one verb covers many of its files."""
    by_folder: dict[tuple[str, str], list[str]] = {}
    for item in files:
        folder = item.path.rsplit("/", 1)[0] + "/" if "/" in item.path else ""
        by_folder.setdefault((item.status, folder), []).append(item.path)
    out: list[tuple[str, str, int]] = []
    for (verb, folder), paths in by_folder.items():
        if folder and len(paths) > _GROUP:
            out.append((verb, folder, len(paths)))
        else:
            out.extend((verb, path, 1) for path in paths)
    return sorted(out, key=lambda line: (line[1], line[0]))


def _diff_json(result: diffs.Diff) -> dict[str, Any]:
    return {
        "old": None if result.old is None else str(result.old.id),
        "new": str(result.new.id),
        "summary": result.summary(),
        "rows": [
            {
                "id": c.id,
                "status": c.status,
                "old_kind": c.old_kind,
                "new_kind": c.new_kind,
                "fields": [f.to_json() for f in c.fields],
            }
            for c in result.rows
        ],
        "old_run": result.old_run,
        "new_run": result.new_run,
        "other_files": [f.to_json() for f in result.other_files],
    }
