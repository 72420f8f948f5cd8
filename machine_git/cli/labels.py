"""``machine labels``: the project's own label schema, and labeling rows with it."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from machine_git.cli.common import complete_row_id
from machine_git.cli.common import emit_json
from machine_git.cli.common import json_option
from machine_git.cli.common import open_store
from machine_git.cli.common import project_option
from machine_git.core.errors import UsageError


@click.group()
def labels() -> None:
    """The project's label schema (ratings, categories, notes, spans) and its labels.

    \b
    Example usage:
        machine labels set schema.json
        machine labels show
        machine labels apply 1a2b3c quality=4 topic=bugfix
    """


@labels.command("show")
@project_option
@json_option
def show(project: Path | None, as_json: bool) -> None:
    """Print the label schema in force (beyond good, bad and rewrite).

    \b
    Example usage:
        machine labels show
        machine labels show --json
    """
    from machine_git.core import models
    from machine_git.tagging import labels as labeling

    fields = labeling.schema(open_store(project))
    if as_json:
        emit_json([f.model_dump(exclude_defaults=True) for f in fields])
        return
    if not fields:
        click.echo("good, bad and rewrite only (machine labels set FILE adds fields)")
        return
    keys: dict[str, list[str]] = {}
    for key, (name, _) in models.label_keys(fields).items():
        keys.setdefault(name, []).append(key)
    for f in fields:
        if f.type == "rating":
            what = f"rating 1-{f.max}"
        elif f.type == "category":
            what = "category: " + ", ".join(f.choices)
        else:
            what = f.type + (f": {', '.join(f.choices)}" if f.choices else "")
        bound = "".join(keys.get(f.name, [])) or "-"
        click.echo(f"{f.name:<16} {what}  (keys {bound})")


@labels.command("set")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@project_option
@json_option
def set_schema(file: str, project: Path | None, as_json: bool) -> None:
    """Make the fields in FILE (a JSON list; - reads stdin) the label schema.

    \b
    Example usage:
        machine labels set schema.json
        echo '[]' | machine labels set -    # back to good, bad and rewrite
    """
    from machine_git.core import jsonio
    from machine_git.tagging import labels as labeling

    try:
        data = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read {file}: {e.strerror or e}") from None
    try:
        fields = jsonio.loads(data)
    except ValueError as e:
        raise UsageError(f"{file}: not valid JSON ({e})") from None
    commit = labeling.set_schema(open_store(project), fields)
    if as_json:
        emit_json({"action": "labels", "commit": commit})
    elif commit is None:
        click.echo("the label schema is already that; nothing changed")
    else:
        click.echo(f"label schema set ({commit[:12]})")


@labels.command("apply")
@click.argument("row_id", shell_complete=complete_row_id)
@click.argument("values", nargs=-1, required=False)
@click.option("--clear", "clear", multiple=True, help="A field to clear (repeat).")
@project_option
@json_option
def apply(
    row_id: str,
    values: tuple[str, ...],
    clear: tuple[str, ...],
    project: Path | None,
    as_json: bool,
) -> None:
    """Set FIELD=VALUE labels on a row, in one commit.

    A rating takes a number, a category one of its choices, a note its text,
    a spans field START-END[:LABEL] (characters of the final answer).

    \b
    Example usage:
        machine labels apply 1a2b3c quality=4 topic=bugfix
        machine labels apply 1a2b3c wrong=120-164:made-up
        machine labels apply 1a2b3c --clear topic
    """
    from machine_git.history import lookup
    from machine_git.tagging import labels as labeling

    if not values and not clear:
        raise UsageError("give FIELD=VALUE labels to set or --clear FIELD")
    store = open_store(project)
    full = lookup.resolve_id(store, row_id)
    row = store.read_row(full)
    answer = labeling.answer_text(row) if row is not None else ""
    parsed = labeling.parse_assignments(labeling.schema(store), values, answer)
    done = labeling.apply(store, full, parsed, clear)
    if as_json:
        emit_json(
            {
                "action": "labels",
                "id": full,
                "labels": done.row.get("labels") or {},
                "commit": done.commit,
            }
        )
    elif done.commit is None:
        click.echo(f"{full} has those labels already; nothing changed")
    else:
        shown = " ".join(
            f"{k}={_shown(v)}" for k, v in (done.row.get("labels") or {}).items()
        )
        click.echo(f"labeled {full}: {shown or '(no labels)'}")


def _shown(value: object) -> str:
    if isinstance(value, list):
        return f"{len(value)} span{'' if len(value) == 1 else 's'}"
    return str(value)
