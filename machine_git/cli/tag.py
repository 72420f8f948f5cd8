"""``machine good`` and ``machine bad``: tag the last turn of the agent session."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from typing import Literal

import click

from machine_git.cli.common import json_option
from machine_git.cli.common import project_of
from machine_git.cli.common import project_option
from machine_git.core.paths import Project
from machine_git.sessions import detect
from machine_git.tagging import tagcommand


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
        click.option(
            "--no-context",
            "no_context",
            is_flag=True,
            help="Leave out the system prompt and tools the turn ran with.",
        ),
        click.option(
            "--no-images",
            "no_images",
            is_flag=True,
            help="Keep [image] placeholders, not the turn's images.",
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
    _tag("good", options)


@click.command()
@_tag_options
def bad(**options: Any) -> None:
    """Tag the last turn as a bad example (rejected: kept out of training).

    \b
    Example usage:
        machine bad too terse
    """
    _tag("bad", options)


def _tag(label: Literal["good", "bad"], options: dict[str, Any]) -> None:
    given: Path | None = options["project"]
    tagcommand.run(label, Project(project_of(given), given is not None), options)
