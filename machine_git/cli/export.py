"""``machine export`` and ``machine import``: the dataset out as JSONL, and in."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import NoReturn

import click

from machine_git.cli import progress
from machine_git.cli.common import complete_revision
from machine_git.cli.common import emit_json
from machine_git.cli.common import json_option
from machine_git.cli.common import open_store
from machine_git.cli.common import project_of
from machine_git.cli.common import project_option
from machine_git.cli.common import warn
from machine_git.core import inputs
from machine_git.core import paths
from machine_git.core.errors import ImportProblemsError
from machine_git.rows.schemas import KINDS

if TYPE_CHECKING:
    from machine_git.export.importer import Loaded

# Kept here rather than imported from machine_git.rows.formats: this module
# loads on every command, ``machine good`` included, and the format code need not.
FORMATS = ("tinker", "openai", "dpo", "openai-dpo", "traces", "rows")
# What import reads besides (tests/export/test_export.py holds both to the
# registry).
IMPORT_FORMATS = (*FORMATS, "sharegpt", "hf")
# What a row needs to have a line, by format (formats.Format.needs).
_NEEDS = {"dpo": "a rewrite", "openai-dpo": "a rewrite", "traces": "a trajectory"}


@click.command()
@click.argument("revision", required=False, shell_complete=complete_revision)
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    type=click.Choice(KINDS),
    help="Rows of this kind (repeatable; default: train; rejected for pairs; "
    "traces for traces; all but observed for rows).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="tinker",
    show_default=True,
    help="tinker or openai chat JSONL; dpo (tinker-cookbook) or openai-dpo "
    "preference pairs; traces (trajectory-v1 lines); rows (machine's rows, "
    "everything kept).",
)
@click.option(
    "-o",
    "--output",
    help="Write FILE and FILE.manifest.json instead of printing the rows "
    "('-': print them).",
)
@click.option(
    "--manifest",
    "manifest_to",
    help="Write the manifest (commit, rows, sha256) to this file: the only "
    "manifest of rows printed to stdout, or instead of FILE.manifest.json.",
)
@click.option(
    "--no-redact",
    "no_redact",
    is_flag=True,
    help="Do not scan rows for secrets (recorded in the manifest).",
)
@click.option(
    "--no-context",
    "no_context",
    is_flag=True,
    help="Leave out each turn's system prompt and tools (recorded in the manifest).",
)
@click.option(
    "--no-images",
    "no_images",
    is_flag=True,
    help="Keep [image] placeholders, not the turns' images (openai, rows).",
)
@click.option(
    "--images-dir",
    "images_dir",
    help="openai format: write each image to DIR/<sha256>.png and name it by "
    "its path, not a data URI.",
    metavar="DIR",
)
@click.option(
    "--where",
    "where",
    multiple=True,
    metavar="FIELD OP VALUE",
    help="Only rows whose labels meet this (quality>=4, topic=bugfix; repeatable; "
    "machine labels).",
)
@project_option
@json_option
def export(
    revision: str | None,
    kinds: tuple[str, ...],
    fmt: str,
    output: str | None,
    manifest_to: str | None,
    no_redact: bool,
    no_context: bool,
    no_images: bool,
    images_dir: str | None,
    where: tuple[str, ...],
    project: Path | None,
    as_json: bool,
) -> None:
    """Export the rows of a revision (default: the newest) as JSONL.

    The same revision and options always give the same bytes. Rows printed to
    stdout (no -o, or -o -) have no manifest file unless --manifest names one.

    \b
    Example usage:
        machine export > train.jsonl
        machine export v1 --kind train --kind traces -o data.jsonl
        machine export --format dpo -o prefs.jsonl
        machine export --where 'quality>=4' -o rated.jsonl
        machine export --format rows -o backup.jsonl
        machine export -o - --manifest train.manifest.json | gzip > train.jsonl.gz
    """
    from machine_git.export import export as exporting
    from machine_git.history import revs

    to_stdout = output is None or output == "-"
    if as_json and to_stdout:
        raise click.UsageError(
            "--json needs -o FILE (without it the rows go to stdout)"
        )
    target = None if to_stdout else paths.check_out_path(str(output))
    if manifest_to == "-":
        raise click.UsageError(
            "--manifest needs a file name ('-o FILE --json' prints the manifest)"
        )
    meta = paths.check_out_path(manifest_to) if manifest_to is not None else None
    linked = None
    if images_dir is not None:
        if fmt != "openai" or no_images:
            raise click.UsageError("--images-dir needs --format openai (and images)")
        folder = Path(images_dir)
        if folder.exists() and not folder.is_dir():
            raise click.UsageError(f"--images-dir {images_dir!r} is not a folder")
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        base = target.parent if target is not None else Path.cwd()
        linked = exporting.ImagesDir(str(folder.resolve()), str(base.resolve()))
    from machine_git.rows.labels import Where

    conditions = tuple(Where.parse(where).words())
    store = open_store(project)
    commit = revs.resolve(store, revision)
    chosen = exporting.normalize_kinds(kinds, fmt)
    label = "+".join(chosen)
    if "observed" in chosen:
        # observed rows are auto-captured runs no one has judged yet
        warn(
            "observed rows are unlabeled (neither good nor bad); "
            "machine label ID good|bad judges them"
        )
    if target is None:
        # Rows printed to a terminal and a bar on it would garble each other.
        shown_bars = progress.bars(as_json or sys.stdout.isatty())
        try:
            with shown_bars as shown:
                tally = exporting.write_stream(
                    store,
                    commit,
                    fmt,
                    chosen,
                    sys.stdout.buffer,
                    redact=not no_redact,
                    with_context=not no_context,
                    progress=shown,
                    with_images=not no_images,
                    images_dir=linked,
                    where=conditions,
                )
        except BrokenPipeError:
            _reader_went_away()
        _skipped(tally.skipped, label, fmt)
        if tally.rows == 0:
            warn(f"no {label} rows to export at {str(commit.id)[:12]}")
        if meta is not None:
            manifest = exporting.manifest_of(
                tally,
                commit,
                revision,
                fmt,
                chosen,
                exporting.STDOUT_NAME,
                not no_redact,
                not no_context,
                conditions,
            )
            exporting.write_manifest(manifest, meta)
            _done(manifest, label, "stdout", meta)
        return
    with progress.bars(as_json) as shown:
        manifest = exporting.write_file(
            store,
            commit,
            revision,
            fmt,
            chosen,
            target,
            progress=shown,
            redact=not no_redact,
            with_context=not no_context,
            manifest_target=meta,
            with_images=not no_images,
            images_dir=linked,
            where=conditions,
        )
    _skipped(manifest.skipped, label, fmt)
    if as_json:
        emit_json(manifest.as_dict())
        return
    _done(manifest, label, str(output), meta)


def _done(manifest: Any, label: str, where: str, meta: Path | None) -> None:
    """The one summary line of an export, on stderr."""
    kept = f"; manifest {meta}" if meta is not None else ""
    click.echo(
        f"exported {_rows(manifest.rows, label)} in {manifest.format} format from "
        f"{manifest.commit[:12]} to {where} (sha256 {manifest.sha256[:12]}…{kept})",
        err=True,
    )


def _reader_went_away() -> NoReturn:
    # `machine export | head`: the reader stopped early, which is not an
    # error; point stdout at /dev/null so the interpreter's final flush of it
    # does not raise again, and exit the way a killed-by-SIGPIPE writer does.
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    raise click.exceptions.Exit(141)


def _skipped(count: int, label: str, fmt: str) -> None:
    # dpo pairs need an --as rewrite; chat lines need an answer, which a turn
    # that failed before saying anything (kept by machine bad) does not have
    without = _NEEDS.get(fmt, "an answer")
    if count:
        click.echo(f"skipped {_rows(count, label)} without {without}", err=True)


def _rows(count: int, label: str) -> str:
    return f"{count} {label} {'row' if count == 1 else 'rows'}"


@click.command("import")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "--kind",
    type=click.Choice(KINDS),
    help="Kind of the rows (default: what a line says, else train; traces for "
    "trajectory lines; rejected for pairs).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(IMPORT_FORMATS),
    help="Read every line as this format (default: what each line's keys say); "
    "sharegpt and hf (Hugging Face datasets JSONL or Parquet) are other tools'.",
)
@click.option(
    "--no-redact",
    "no_redact",
    is_flag=True,
    help="Keep secrets in the rows (recorded in the commit).",
)
@project_option
@json_option
def import_(
    file: str,
    kind: str | None,
    fmt: str | None,
    no_redact: bool,
    project: Path | None,
    as_json: bool,
) -> None:
    """Import rows from a JSONL file (- reads stdin) in one commit, all or nothing.

    Lines may be anything 'machine export' writes (rows, tinker/OpenAI chat
    lines, dpo pairs, trajectory lines), or with --format a ShareGPT
    conversation or a Hugging Face datasets record (JSONL or Parquet). Any
    bad line is reported as 'file:line: json-path: problem' and nothing is
    imported; what a format cannot carry (ids, notes...) is said.

    \b
    Example usage:
        machine import ~/old-machine-data/train.jsonl
        machine import rejected.jsonl --kind rejected
        machine import chats.parquet --format hf
        machine export --project ../other --format rows | machine import -
    """
    from machine_git.export import importer

    project_of(project)  # a bad --project is refused before stdin is read
    stdin = file == inputs.STDIN
    name = inputs.STDIN_NAME if stdin else file
    source = sys.stdin.buffer if stdin else Path(file)
    with progress.bars(as_json) as shown:
        try:
            loaded = importer.load(
                source, kind, fmt=fmt, name=name, redact=not no_redact, progress=shown
            )
        except ImportProblemsError as e:
            shown.end()
            for line in e.problems:
                click.echo(line, err=True)
            raise
        _import_notes(loaded, name)
        store = open_store(project, create=True) if loaded.rows else None
        if store is not None:
            store.progress = shown  # the pack's objects as they are written
        result = (
            importer.commit(store, loaded)
            if store is not None
            else importer.Imported(file=name, added={}, present=0, commit=None)
        )
    if as_json:
        emit_json(
            {
                "file": name,
                "imported": result.count,
                "counts": {k: result.added.get(k, 0) for k in KINDS},
                "already_present": result.present,
                "commit": result.commit,
            }
        )
        return
    counts = f" ({importer.by_kind(result.added)})" if result.count else ""
    where = f" (commit {result.commit[:12]})" if result.commit else ""
    present = f"; {result.present} already present" if result.present else ""
    noun = "row" if result.count == 1 else "rows"
    click.echo(f"imported {result.count} {noun}{counts} from {name}{where}{present}")


def _import_notes(loaded: Loaded, name: str) -> None:
    """What an import left out of its rows, and the secrets it redacted."""
    from machine_git.rows import formats

    for fmt, lacks in loaded.missing.items():
        if lacks:
            # what the rows could not get back from these lines, said once
            n = loaded.formats[fmt]
            # tinker and OpenAI chat lines read alike: one name for both
            noun = "chat line" if fmt in formats.CHAT else formats.FORMATS[fmt].noun
            lines = f"{n} {noun}{'' if n == 1 else 's'}"
            verb = "carries" if n == 1 else "carry"
            ids = "; ids are made from the content" if "id" in lacks else ""
            lost = formats.describe_missing(lacks)
            click.echo(f"{name}: {lines} {verb} no {lost}{ids}", err=True)
    if loaded.repeated:
        n = loaded.repeated
        many = "line repeats" if n == 1 else "lines repeat"
        click.echo(f"{name}: {n} {many} an earlier line; imported once", err=True)
    if loaded.ignored_keys:
        keys = ", ".join(
            f"{k} ({n} {'line' if n == 1 else 'lines'})"
            for k, n in sorted(loaded.ignored_keys.items())
        )
        warn(f"{name}: ignored keys a row has no place for: {keys}")
    if loaded.redacted:
        from machine_git.secrets import redaction

        click.echo(f"redacted {redaction.describe(loaded.redacted)}", err=True)
