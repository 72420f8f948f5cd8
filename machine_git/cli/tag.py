"""``machine good`` and ``machine bad``: tag the last turn of the agent session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from machine_git import capture
from machine_git import paths
from machine_git import redaction
from machine_git import rows
from machine_git.agents import footer
from machine_git.cli.common import emit_json
from machine_git.cli.common import json_option
from machine_git.cli.common import open_store
from machine_git.cli.common import project_of
from machine_git.cli.common import project_option
from machine_git.cli.common import warn
from machine_git.sessions import detect


def _tag_options(f: Any) -> Any:
    options = [
        click.argument("note_words", nargs=-1),
        click.option("--note", help="Why this turn was tagged."),
        click.option(
            "--as", "--rewrite", "rewrite", help="Replace the answer with TEXT."
        ),
        click.option(
            "--trace",
            "--trajectory",
            "trace",
            is_flag=True,
            help="Keep the whole turn: user, tool calls, results, answer.",
        ),
        click.option(
            "--reasoning", is_flag=True, help="Keep thinking blocks (with --trace)."
        ),
        click.option(
            "--out", help="Append the row to this JSONL file instead of the store."
        ),
        click.option(
            "--host",
            type=click.Choice([*detect.HOSTS, detect.AUTO]),
            default=detect.AUTO,
            show_default=True,
            help="Which agent's sessions to read (auto: the newest of any).",
        ),
        click.option(
            "--session",
            type=click.Path(dir_okay=False, path_type=Path),
            help="Session file of any host (default: the project's newest session).",
        ),
        click.option(
            "--entry", help="Tag the turn ending at this entry id (after /tree)."
        ),
        click.option(
            "--no-redact",
            "no_redact",
            is_flag=True,
            help="Keep secrets in the row (recorded in the commit).",
        ),
        project_option,
        json_option,
    ]
    for option in reversed(options):
        f = option(f)
    return f


@click.command()
@_tag_options
def good(**options: Any) -> None:
    """Tag the last turn as a good example (train, or traces with --trace).

    \b
    Example usage:
        machine good
        machine good --as "The exact answer to learn."
        machine good --trace "used the right tool"
    """
    _tag("good", **options)


@click.command()
@_tag_options
def bad(**options: Any) -> None:
    """Tag the last turn as a bad example (rejected: kept out of training).

    \b
    Example usage:
        machine bad too terse
    """
    _tag("bad", **options)


def _tag(
    label: str,
    note_words: tuple[str, ...],
    note: str | None,
    rewrite: str | None,
    trace: bool,
    reasoning: bool,
    out: str | None,
    host: str,
    session: Path | None,
    entry: str | None,
    no_redact: bool,
    project: Path | None,
    as_json: bool,
) -> None:
    root = project_of(project)
    text = " ".join([*([note] if note else []), *note_words]).strip() or None
    found = detect.locate(root, host, session)
    if found.announce:
        click.echo(f"using {found.host} session {found.path}", err=True)
    turn, report = found.read(entry)
    if (line := report.warning()) is not None:
        warn(line)
    row = rows.build(
        turn, label=label, trace=trace, note=text, rewrite=rewrite, reasoning=reasoning
    )
    if not no_redact:
        row, found_secrets = redaction.redact_row(row)
        if found_secrets:
            click.echo(f"redacted {redaction.describe(found_secrets)}", err=True)
    if out is not None:
        target = paths.check_out_path(out)
        capture.write_out(target, row)
        if as_json:
            emit_json({"action": "out", "path": str(target), "row": row})
        else:
            click.echo(f"{label} {row['id']} -> {target} ({row['kind']})")
        return
    store = open_store(root, create=True)
    result = capture.tag(store, row, redaction="off" if no_redact else "on")
    if result.commit is not None:
        footer.refresh(store)  # Pi's footer reads the counts cache
    if as_json:
        emit_json(
            {
                "action": result.action,
                "id": row["id"],
                "kind": result.row["kind"],
                "from": result.previous_kind,
                "commit": result.commit,
                "store": str(store.path),
            }
        )
        return
    words = rows.first_words(row)
    if result.action == "tag":
        click.echo(f"{label} {row['id']} -> {row['kind']}: {words}")
    elif result.action == "move":
        click.echo(
            f"moved {row['id']} {result.previous_kind} -> {row['kind']}: {words}"
        )
    else:
        click.echo(
            f"already tagged {row['id']} as {result.row['kind']}; nothing changed"
        )
