"""``machine good`` and ``machine bad`` as commands: parsed options in, lines out.

Shared by the click command (machine_git/cli/tag.py) and the console script's
fast path (machine_git/entry.py), which parse the same options into the same
parameters; this turns them into one tagging.TagOptions, calls
:func:`tagging.tag` and prints what it returns. It must not import click:
start-up is most of the time of a tag (bench/RESULTS.md). Output goes to
``sys.stdout`` and ``sys.stderr`` as click.echo would write it.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from machine_git.core import jsonio
from machine_git.core.paths import Project
from machine_git.rows import rows
from machine_git.tagging import tagging
from machine_git.tagging.tagging import Label
from machine_git.tagging.tagging import Notice
from machine_git.tagging.tagging import Tagged
from machine_git.tagging.tagging import TagOptions


def run(label: Label, project: Project, params: Mapping[str, Any]) -> None:
    """Tag as the command's parameters say (click's names), and print the result."""
    tagged = tagging.tag(project, options(label, params), notify=say)
    if params["as_json"]:
        sys.stdout.write(jsonio.line(as_json(tagged)).decode())
        sys.stdout.flush()
    else:
        for line in lines(label, tagged):
            echo(line)


def options(label: Label, params: Mapping[str, Any]) -> TagOptions:
    """The TagOptions of the parsed parameters (the words and ``--note`` joined)."""
    note = params["note"]
    text = " ".join([*([note] if note else []), *params["note_words"]]).strip()
    return TagOptions(
        label=label,
        note=text or None,
        rewrite=params["rewrite"],
        trace=params["trace"],
        reasoning=params["reasoning"],
        out=params["out"],
        host=params["host"],
        session=params["session"],
        entry=params["entry"],
        redact=not params["no_redact"],
        context=not params["no_context"],
        images=not params["no_images"],
    )


def say(notice: Notice) -> None:
    """A notice, as it happens: one line on stderr."""
    echo(str(notice), err=True)


def echo(text: str, err: bool = False) -> None:
    """One line on stdout (or stderr), flushed."""
    stream = sys.stderr if err else sys.stdout
    stream.write(f"{text}\n")
    stream.flush()


def lines(label: str, tagged: Tagged) -> list[str]:
    """What a tag prints: what happened to the turn's row, then to its others."""
    row = tagged.row
    assert row is not None  # a tag always has its row (only observe can be "off")
    words = rows.first_words(row)
    out: list[str] = []
    if tagged.action == "out":
        out.append(f"{label} {row['id']} -> {tagged.out} ({row['kind']})")
    elif tagged.action == "tag":
        out.append(f"{label} {row['id']} -> {row['kind']}: {words}")
    elif tagged.action == "label":
        out.append(f"labeled {row['id']} {label}: observed -> {row['kind']}: {words}")
    elif tagged.action == "move" and tagged.previous_kind != row["kind"]:
        out.append(
            f"moved {row['id']} {tagged.previous_kind} -> {row['kind']}: {words}"
        )
    elif tagged.action == "duplicate":
        out.append(f"already tagged {row['id']} as {row['kind']}; nothing changed")
    out.extend(
        f"moved {m.id} {m.old_kind} -> {m.new_kind} (the same turn)"
        for m in tagged.also
    )
    return out


def as_json(tagged: Tagged) -> dict[str, Any]:
    """What ``--json`` prints for a tag."""
    row = tagged.row
    assert row is not None
    if tagged.action == "out":
        return {"action": "out", "path": str(tagged.out), "row": row}
    return {
        "action": tagged.action,
        "id": row["id"],
        "kind": row["kind"],
        "from": tagged.previous_kind,
        "commit": tagged.commit,
        "store": str(tagged.store),
        "also": [
            {"id": m.id, "from": m.old_kind, "kind": m.new_kind} for m in tagged.also
        ],
    }
