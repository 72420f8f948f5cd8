"""Observed runs: auto, observe, observed, label, fork and correction.

Auto-capture records finished agent runs as unlabeled observed rows; they are
judged later (``label``), or rerun in Pi with a correction (``fork``,
``correction``), which records the new run pointing back at the old one.
"""

from __future__ import annotations

from pathlib import Path

import click

from machine_git.cli.common import complete_row_id
from machine_git.cli.common import emit_json
from machine_git.cli.common import existing_store
from machine_git.cli.common import json_option
from machine_git.cli.common import limit_option
from machine_git.cli.common import open_store
from machine_git.cli.common import project_for
from machine_git.cli.common import project_of
from machine_git.cli.common import project_option
from machine_git.cli.common import warn
from machine_git.core import paths
from machine_git.rows import rows
from machine_git.sessions import detect

# The commands import machine_git.agents.* when they run, so these modules
# (history, edits, forks) stay off the start-up path of every other command
# (sessions.detect is on it already, for machine good).
VERDICTS = ("bad", "good")


@click.command()
@click.argument("state", type=click.Choice(["on", "off", "status"]), default="status")
@project_option
@json_option
def auto(state: str, project: Path | None, as_json: bool) -> None:
    """Turn auto-capture on or off for this project (a committed setting).

    When on, the Pi extension records every finished 'pi -p' / JSON-mode
    run and every compaction boundary as an unlabeled observed row. Observed
    rows are never trained on until labeled (machine label).

    \b
    Example usage:
        machine auto on
        machine auto status
    """
    from machine_git.agents import observe as observing
    from machine_git.store import settings

    root = project_of(project)
    commit = None
    if state == "status":
        value = observing.auto_on(paths.store_path(root))
    else:
        value = state == "on"
        commit = settings.write(open_store(project, create=True), "auto", value)
    if as_json:
        emit_json({"auto": value, "commit": commit, "project": str(root)})
    elif state == "status":
        click.echo(f"auto-capture {'on' if value else 'off'} for {root}")
    elif commit is None:
        click.echo(f"auto-capture was already {state}; nothing changed")
    elif value:
        click.echo(
            f"auto-capture on for {root}: finished pi -p runs and compactions "
            "are recorded as observed rows"
        )
    else:
        click.echo(f"auto-capture off for {root}")


@click.command()
@click.option(
    "--session",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Session file of any host (default: the project's newest session).",
)
@click.option("--entry", help="The run ending at this entry id (default: the last).")
@click.option(
    "--host",
    type=click.Choice([*detect.HOSTS, detect.AUTO]),
    default=detect.AUTO,
    show_default=True,
    help="Which agent's sessions to read (auto: the newest of any).",
)
@click.option(
    "--if-auto",
    is_flag=True,
    help="Do nothing unless auto-capture is on, and say nothing if the run is "
    "already recorded (what the Pi extension runs).",
)
@click.option("--reasoning", is_flag=True, help="Keep thinking blocks.")
@click.option(
    "--no-redact",
    "no_redact",
    is_flag=True,
    help="Keep secrets in the row (recorded in the commit).",
)
@click.option(
    "--no-context",
    "no_context",
    is_flag=True,
    help="Leave out the system prompt and tools the run had.",
)
@project_option
@json_option
def observe(
    session: Path | None,
    entry: str | None,
    host: str,
    if_auto: bool,
    reasoning: bool,
    no_redact: bool,
    no_context: bool,
    project: Path | None,
    as_json: bool,
) -> None:
    """Record a finished run as an unlabeled observed row.

    The same run is recorded once: its id comes from the session and the
    run's entries. In a fork (MACHINE_FORK_PARENT set) the row points back at
    the row it corrects.

    \b
    Example usage:
        machine observe
        machine observe --session ~/.pi/agent/sessions/--home-me-proj--/x.jsonl
    """
    from machine_git.tagging import tagging

    options = tagging.TagOptions(
        label="observed",
        reasoning=reasoning,
        host=host,
        session=session,
        entry=entry,
        redact=not no_redact,
        context=not no_context,
        if_auto=if_auto,
    )
    done = tagging.tag(project_for(project), options, notify=_say)
    row = done.row
    if row is None:  # --if-auto, and auto-capture is off
        if as_json:
            emit_json({"action": "off"})
        return
    parent = row["source"].get("parent_row")
    if as_json:
        emit_json(
            {
                "action": done.action,
                "id": row["id"],
                "kind": row["kind"],
                "parent": parent,
                "commit": done.commit,
            }
        )
    elif done.action == "observed":
        fork_of = f" (fork of {parent})" if parent else ""
        click.echo(f"observed {row['id']}: {rows.first_words(row)}{fork_of}")
    elif not if_auto:
        click.echo(f"already recorded {row['id']} as {row['kind']}; nothing changed")


def _say(notice: object) -> None:
    click.echo(str(notice), err=True)


@click.command()
@limit_option
@project_option
@json_option
def observed(limit: int, project: Path | None, as_json: bool) -> None:
    """List unlabeled observed runs, newest first.

    \b
    Example usage:
        machine observed -n 5
    """
    from machine_git.agents import observe as observing

    store = existing_store(project)
    found = [] if store is None else observing.recent(store, limit)
    if as_json:
        emit_json(found)
        return
    if not found:
        click.echo("no observed runs yet (machine auto on records pi -p runs)")
        return
    for row in found:
        stamp = row["created_at"][:16].replace("T", " ")
        parent = row["source"].get("parent_row")
        fork_of = f"  (fork of {parent})" if parent else ""
        click.echo(f"{row['id']}  {stamp}  {rows.first_words(row, 50)}{fork_of}")


@click.command()
@click.argument("row_id", shell_complete=complete_row_id)
@click.argument("verdict", type=click.Choice(VERDICTS))
@click.option("--as", "--rewrite", "rewrite", help="Replace the final answer.")
@click.option("--note", help="Why (kept in the row and the commit).")
@project_option
@json_option
def label(
    row_id: str,
    verdict: str,
    rewrite: str | None,
    note: str | None,
    project: Path | None,
    as_json: bool,
) -> None:
    """Judge an observed run: good -> traces, bad -> rejected (same id, one commit).

    \b
    Example usage:
        machine label 1a2b3c good
        machine label 1a2b3c bad --note "ignored the failing test"
        machine label 1a2b3c good --as "The answer it should have given."
    """
    from machine_git.agents import observe as observing

    done = observing.label(open_store(project), row_id, verdict, rewrite, note)
    after = done.after
    if as_json:
        emit_json(
            {
                "action": "label",
                "id": after["id"],
                "kind": after["kind"],
                "from": done.before["kind"],
                "commit": done.commit,
            }
        )
    elif done.commit is None:
        click.echo(
            f"{after['id']} is already {verdict} ({after['kind']}); nothing changed"
        )
    else:
        click.echo(
            f"labeled {after['id']} {verdict}: observed -> {after['kind']}: "
            f"{rows.first_words(after)}"
        )


# -- forks -----------------------------------------------------------------------


def _dry_run(f: click.decorators.FC) -> click.decorators.FC:
    return click.option(
        "--dry-run",
        is_flag=True,
        help="Print the prompt and the pi command instead of running it.",
    )(f)


def _fork(
    project: Path | None,
    row_id: str | None,
    words: tuple[str, ...],
    dry_run: bool,
    as_json: bool = False,
) -> None:
    from machine_git.agents import fork as forks

    done = forks.fork(
        project_for(project),
        " ".join(words),
        row_id=row_id,
        dry_run=dry_run,
        notify=lambda line: click.echo(line, err=True),
        # With --json, stdout is the JSON document: pi's own output goes to stderr.
        stdout=2 if as_json else None,
    )
    made = done.fork
    report = {
        "parent": made.parent_id,
        "prompt": made.prompt,
        "command": made.shell_command(),
    }
    if not done.ran:
        if done.pi_missing:
            warn("pi is not on PATH; run the command below yourself")
        if as_json:
            emit_json({**report, "ran": False, "status": None, "observed": None})
            return
        click.echo(f"prompt (fork of {made.parent_id}):")
        click.echo(made.prompt)
        click.echo("command:")
        click.echo(made.shell_command())
        return
    for why in done.warnings:
        warn(why)
    recorded = done.recorded
    row = None if recorded is None else recorded.row
    # A duplicate: auto-capture recorded the run already, and said so.
    if row and recorded is not None and recorded.action == "observed":
        click.echo(
            f"observed {row['id']}: {rows.first_words(row)} (fork of {made.parent_id})",
            err=True,
        )
    if as_json:
        observed = None if row is None else row["id"]
        emit_json({**report, "ran": True, "status": done.status, "observed": observed})
    if done.status != 0:
        raise click.exceptions.Exit(done.status)  # pi's own code: it said why


@click.command()
@click.argument("correction", nargs=-1)
@_dry_run
@project_option
@json_option
def fork(
    correction: tuple[str, ...], dry_run: bool, project: Path | None, as_json: bool
) -> None:
    """Rerun the latest observed run in pi -p, with a correction.

    The prompt restates the run's task (for a fork of a fork: the original
    task) and answer, then the correction. The run gets MACHINE_FORK=1 and
    MACHINE_FORK_PARENT=<row id>, and once pi is done machine records it as
    an observed row pointing back at the row it corrects, whether or not
    auto-capture is on. Without pi on PATH the prompt and the exact command
    are printed.

    \b
    Example usage:
        machine fork use Julia, not Python
        machine fork --dry-run use the existing helper
    """
    _fork(project, None, correction, dry_run, as_json)


@click.command()
@click.option(
    "--id",
    "row_id",
    required=True,
    shell_complete=complete_row_id,
    help="The row to correct (any kind).",
)
@click.argument("correction_words", nargs=-1)
@_dry_run
@project_option
@json_option
def correction(
    row_id: str,
    correction_words: tuple[str, ...],
    dry_run: bool,
    project: Path | None,
    as_json: bool,
) -> None:
    """Rerun any row's task (observed, traces, train, ...) in pi -p with a correction.

    \b
    Example usage:
        machine correction --id c0ffee123456 use Julia, not Python
    """
    _fork(project, row_id, correction_words, dry_run, as_json)
