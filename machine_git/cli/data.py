"""``machine data``, ``machine tagged`` and ``machine validate``."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from machine_git.cli import progress
from machine_git.cli.common import emit_json
from machine_git.cli.common import json_option
from machine_git.cli.common import limit_option
from machine_git.cli.common import open_store
from machine_git.cli.common import project_of
from machine_git.cli.common import project_option
from machine_git.core import inputs
from machine_git.core import jsonio
from machine_git.core import paths
from machine_git.core import table
from machine_git.core.errors import DAMAGED
from machine_git.core.errors import INVALID
from machine_git.history import history
from machine_git.recovery import validate as checks
from machine_git.rows import images
from machine_git.rows import rows
from machine_git.rows.schemas import KINDS
from machine_git.store import settings
from machine_git.store import stats
from machine_git.store.store import Store
from machine_git.store.store import exists as store_exists

VALIDATE_FORMATS = tuple(checks.FORMATS)


@click.command()
@click.option(
    "--image-max-bytes",
    "image_max_bytes",
    type=click.IntRange(min=1),
    metavar="N",
    help="Set the largest image a tag keeps, in bytes (a committed setting; "
    "default 5000000).",
)
@project_option
@json_option
def data(project: Path | None, image_max_bytes: int | None, as_json: bool) -> None:
    """Show this project's store: where it is, row counts, settings, head.

    \b
    Example usage:
        machine data
        machine data --json
        machine data --image-max-bytes 1000000
    """
    if image_max_bytes is not None:
        _set_image_limit(project, image_max_bytes, as_json)
        return
    root = project_of(project)
    location = paths.store_path(root)
    if not store_exists(location):
        info: dict[str, Any] = {
            "store": str(location),
            "project": str(root),
            "exists": False,
            "counts": dict.fromkeys(KINDS, 0),
            "auto": False,
            "image_max_bytes": images.DEFAULT_MAX_BYTES,
            "head": None,
        }
    else:
        store = Store.open(location)
        head = store.head
        info = {
            "store": str(location),
            "project": str(root),
            "exists": True,
            "counts": stats.counts(store),
            "auto": settings.auto(store),
            "image_max_bytes": settings.image_limit(store.snapshot()),
            "head": None
            if head is None
            else {
                "commit": str(head.id),
                "summary": head.message.splitlines()[0] if head.message else "",
                "time": jsonio.timestamp(head.commit_time),
            },
        }
    if as_json:
        emit_json(info)
        return
    counts = info["counts"]
    total = sum(counts.values())
    shown = ", ".join(f"{k} {counts.get(k, 0)}" for k in KINDS)
    click.echo(
        f"store    {info['store']}" + ("" if info["exists"] else " (not created yet)")
    )
    click.echo(f"project  {info['project']}")
    click.echo(f"rows     {total} ({shown})")
    click.echo(f"auto     {'on' if info['auto'] else 'off'}")
    click.echo(f"images   at most {info['image_max_bytes']:,} bytes each")
    if info["head"] is not None:
        head_info = info["head"]
        start = f"head     {head_info['commit'][:12]} "
        end = f" ({_shown(head_info['time'])})"
        room = table.width() - len(start) - len(end)
        click.echo(start + table.clip(head_info["summary"], room) + end)


def _set_image_limit(project: Path | None, limit: int, as_json: bool) -> None:
    commit = settings.write(open_store(project, create=True), images.SETTING, limit)
    if as_json:
        emit_json({images.SETTING: limit, "commit": commit})
    elif commit is None:
        click.echo(f"images were already at most {limit:,} bytes each; nothing changed")
    else:
        click.echo(f"images at most {limit:,} bytes each from now on ({commit[:12]})")


@click.command()
@limit_option
@click.option("--kind", type=click.Choice(KINDS), help="Only rows of this kind.")
@project_option
@json_option
def tagged(limit: int, kind: str | None, project: Path | None, as_json: bool) -> None:
    """List the rows tagged most recently, newest first.

    \b
    Example usage:
        machine tagged -n 5 --kind train
    """
    root = project_of(project)
    location = paths.store_path(root)
    found = (
        []
        if not store_exists(location)
        else history.recent(Store.open(location), limit, kind)
    )
    if as_json:
        emit_json(found)
        return
    if not found:
        click.echo("nothing tagged yet")
        return
    notes = [f"  ({row['note']})" if row.get("note") else "" for row in found]
    listing = [
        (
            row["id"],
            row["kind"],
            str(row.get("created_at", ""))[:16].replace("T", " "),
            rows.first_words(row, sys.maxsize) + note,
        )
        for row, note in zip(found, notes, strict=True)
    ]
    for line in table.rows(listing, free=3, columns=table.width(), ends=notes):
        click.echo(line)


@click.command()
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "--store", "whole_store", is_flag=True, help="Validate every row in the store."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(VALIDATE_FORMATS),
    help="Check every line as this format (default: by the file's content).",
)
@project_option
@json_option
def validate(
    files: tuple[str, ...],
    whole_store: bool,
    fmt: str | None,
    project: Path | None,
    as_json: bool,
) -> None:
    """Check rows against the schemas: JSONL files (- reads stdin), or the store.

    A file of any format machine exports (rows, tinker, openai, dpo,
    openai-dpo, traces) is checked as what it is, by its content, or as
    --format says (also sharegpt and hf, which machine import reads): exit 0
    means machine import takes it. Prints 'file:line: json-path:
    problem' for each problem and exits 4 if there is any. With --store, also
    checks the store itself (refs, every loose object and pack, the history):
    if it is damaged, names the newest intact commit and the rows going back
    to it loses, and exits 6.

    \b
    Example usage:
        machine validate rows.jsonl
        machine export --format dpo | machine validate -
        machine validate chats.parquet --format hf
        machine validate --store
    """
    if not files and not whole_store:
        raise click.UsageError("name JSONL files to validate, or pass --store")
    tally = checks.Tally()
    findings: list[checks.Finding] = []
    tampered: list[checks.Finding] = []
    touched = 0
    for name in files:
        source = sys.stdin.buffer if name == inputs.STDIN else Path(name)
        findings.extend(checks.check_file(source, tally, fmt=fmt))
    report = None
    if whole_store:
        with progress.bars(as_json) as shown:
            report = checks.check_whole_store(
                paths.store_path(project_of(project)), shown
            )
        tally.rows += report.rows
        findings += report.findings
    damaged = report is not None and report.diagnosis.damaged
    if report is not None and not damaged:
        # Only an undamaged store: walking a damaged history can hang libgit2.
        from machine_git import releases

        store = Store.open(paths.store_path(project_of(project)))
        tampered, touched = releases.findings(store)
        from machine_git.train import runs  # training records: runs, evals

        findings += [
            checks.Finding(file, 1, where, problem)
            for file, where, problem in runs.record_problems(store)
        ]
    if as_json:
        out: dict[str, Any] = {
            "rows": tally.rows,
            "invalid": checks.invalid_count(findings),
            "formats": tally.formats,
            "problems": [f.to_json() for f in findings],
            "tampered": [f.to_json() for f in tampered],
        }
        if report is not None:
            out["store"] = report.diagnosis.to_json()
        emit_json(out)
    else:
        for finding in [*findings, *tampered]:
            click.echo(str(finding))
        if report is not None and damaged:
            from machine_git.recovery import (
                recover as recovering,  # only for a damaged store
            )

            for line in recovering.describe(report.diagnosis):
                click.echo(line)
            click.echo(recovering.way_out(report.diagnosis))
        verdict = (
            "all valid" if not findings else f"{checks.invalid_count(findings)} invalid"
        )
        if damaged:
            verdict += "; the store is damaged"
        if touched:
            many = "" if touched == 1 else "s"
            verdict += f"; {touched} release{many} tampered with"
        failed = bool(findings or tampered) or damaged
        click.echo(f"checked {_checked(tally)}: {verdict}", err=failed)
    if damaged:
        raise click.exceptions.Exit(DAMAGED)
    if findings or tampered:
        raise click.exceptions.Exit(INVALID)


def _checked(tally: checks.Tally) -> str:
    """``2 rows``, ``3 dpo pairs``, ``2 rows and 3 tinker/openai chat lines``."""
    rows = tally.rows - sum(tally.lines.values())
    parts = [(rows, checks.ROWS)] if rows or not tally.lines else []
    parts += [(n, fmt) for fmt, n in tally.lines.items()]
    return " and ".join(
        f"{n} {checks.FORMATS[fmt]}{'' if n == 1 else 's'}" for n, fmt in parts
    )


def _shown(moment: str) -> str:
    """``2026-12-01 04:09 UTC`` for the terminal, from the JSON's ISO time."""
    return datetime.fromisoformat(moment).strftime("%Y-%m-%d %H:%M UTC")
