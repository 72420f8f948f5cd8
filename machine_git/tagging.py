"""``machine good`` and ``machine bad``: the command's work and its output.

Shared by the click command (machine_git/cli/tag.py) and the console script's
fast path (machine_git/entry.py), so it must not import click: start-up is
most of the time of a tag (bench/RESULTS.md). Output goes to ``sys.stdout``
and ``sys.stderr`` as click.echo would write it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from machine_git import capture
from machine_git import jsonio
from machine_git import paths
from machine_git import redaction
from machine_git import rows
from machine_git.sessions import detect
from machine_git.store import Redaction
from machine_git.store import Store


def echo(text: str, err: bool = False) -> None:
    """One line on stdout (or stderr), flushed."""
    stream = sys.stderr if err else sys.stdout
    stream.write(f"{text}\n")
    stream.flush()


def tag(
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
    root: Path,
    as_json: bool,
    chosen: bool = False,
) -> None:
    """Tag the turn the options name, in the store of the project at ``root``.

    ``chosen``: ``root`` was given with ``--project`` (not found from the cwd).
    """
    text = " ".join([*([note] if note else []), *note_words]).strip() or None
    found = detect.locate(root, host, session)
    if found.announce:
        echo(f"using {found.host} session {found.path}", err=True)
    turn, report = found.read(entry)
    if (line := report.warning()) is not None:
        echo(f"warning: {line}", err=True)
    row = rows.build(
        turn, label=label, trace=trace, note=text, rewrite=rewrite, reasoning=reasoning
    )
    if not no_redact:
        row, found_secrets = redaction.redact_row(row)
        if found_secrets:
            echo(f"redacted {redaction.describe(found_secrets)}", err=True)
    if out is not None:
        target = paths.check_out_path(out, devices=True)
        capture.write_out(target, row)
        if as_json:
            _emit_json({"action": "out", "path": str(target), "row": row})
        else:
            echo(f"{label} {row['id']} -> {target} ({row['kind']})")
        return
    store = Store.create(paths.store_path(root), root)
    if (notice := paths.new_store_notice(root, chosen, store.created)) is not None:
        echo(notice, err=True)
    result = capture.tag(
        store, row, redaction=Redaction.OFF if no_redact else Redaction.SCANNED
    )
    if as_json:
        _emit_json(
            {
                "action": result.action,
                "id": result.row["id"],
                "kind": result.row["kind"],
                "from": result.previous_kind,
                "commit": result.commit,
                "store": str(store.path),
                "also": [
                    {"id": i, "from": old, "kind": new} for i, old, new in result.also
                ],
            }
        )
        return
    _report(label, result)


def _report(label: str, result: capture.TagResult) -> None:
    """The lines a tag prints: what happened to the turn's row, then its others."""
    row = result.row
    words = rows.first_words(row)
    if result.action == "tag":
        echo(f"{label} {row['id']} -> {row['kind']}: {words}")
    elif result.action == "label":
        echo(f"labeled {row['id']} {label}: observed -> {row['kind']}: {words}")
    elif result.action == "move" and result.previous_kind != row["kind"]:
        echo(f"moved {row['id']} {result.previous_kind} -> {row['kind']}: {words}")
    elif result.action == "duplicate":
        echo(f"already tagged {row['id']} as {row['kind']}; nothing changed")
    for other, old, new in result.also:
        echo(f"moved {other} {old} -> {new} (the same turn)")


def _emit_json(value: Any) -> None:
    sys.stdout.write(jsonio.line(value).decode())
    sys.stdout.flush()
