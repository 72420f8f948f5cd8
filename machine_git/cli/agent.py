"""Commands for working inside the agents: install, auto, observe, fork, student.

``install``/``uninstall`` put the Pi extension and the Letta Code mod (and
machine's skills) in place; ``auto``, ``observe``, ``observed`` and ``label``
record unlabeled runs and judge them later; ``fork`` and ``correction`` rerun
a recorded run in Pi with a correction; ``student``, ``work`` and ``ask``
choose and sample the model trained from the rows, and ``models`` lists what
Tinker offers. The row counts cache Pi's footer reads follows every commit
by itself (the store keeps it: agents.footer).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

import click

from machine_git import paths
from machine_git import rows
from machine_git.cli.common import complete_row_id
from machine_git.cli.common import emit_json
from machine_git.cli.common import json_option
from machine_git.cli.common import limit_option
from machine_git.cli.common import open_store
from machine_git.cli.common import project_of
from machine_git.cli.common import project_option
from machine_git.cli.common import warn
from machine_git.errors import NotFoundError
from machine_git.errors import RowNotFoundError
from machine_git.errors import StudentError
from machine_git.errors import UsageError
from machine_git.sessions import detect
from machine_git.store import Store
from machine_git.store import exists as store_exists

if TYPE_CHECKING:
    from machine_git.agents.install import Outcome

# The commands import machine_git.agents.* when they run, so these modules
# (urllib, edits, templates) stay off the start-up path of every other command
# (sessions.detect is on it already, for machine good).
HOSTS = ("pi", "letta")  # agents machine installs into
VERDICTS = ("bad", "good")


# -- install ---------------------------------------------------------------------


def _install_project(value: str | None, host: str) -> Path | None:
    """``--project`` alone: this project; ``--project DIR``: that one."""
    if value is None:
        return None
    if host == "letta":
        raise UsageError(
            "Letta Code loads mods from ~/.letta/mods only; drop --project"
        )
    return project_of(Path(value) if value else None)


def _project_flag(f: Any) -> Any:
    return click.option(
        "--project",
        "project",
        is_flag=False,
        flag_value="",
        default=None,
        metavar="[DIR]",
        help="Only for this project (<project>/.pi/extensions), not globally.",
    )(f)


def _show(outcomes: list[Outcome]) -> None:
    for o in outcomes:
        what = "the Tinker provider in " if o.path.name == "models.json" else ""
        if o.action == "skipped":
            warn(f"left {o.path} as it is: {o.detail}")
        elif o.action == "unchanged":
            click.echo(f"up to date: {what}{o.path}")
        elif o.action == "absent":
            if not what:
                click.echo(f"not installed: {o.path}")
        elif o.action == "removed":
            click.echo(f"removed {what.replace(' in ', ' from ')}{o.path}")
        else:
            click.echo(f"{o.action} {what}{o.path}")


@click.command()
@click.argument("host", type=click.Choice(HOSTS))
@_project_flag
def install(host: str, project: str | None) -> None:
    """Install the /good, /bad, /tagged, /machine and /train commands in an agent.

    Pi: ~/.pi/agent/extensions/machine.ts (or $PI_CODING_AGENT_DIR), or with
    --project <project>/.pi/extensions/machine.ts; also /tinker, a footer with
    the row counts, machine's skills (loaded by the extension from this
    machine's package), and a Tinker provider in Pi's models.json so the
    student can be chosen with /model. Letta Code: ~/.letta/mods/machine.ts,
    and the skills copied to ~/.letta/skills/<name>/SKILL.md. The file runs
    this machine ('python -m machine_git'), so it works without machine on
    PATH. Installing again rewrites the same files.

    \b
    Example usage:
        machine install pi
        machine install pi --project
        machine install letta
    """
    from machine_git.agents import install as installer

    where = _install_project(project, host)
    if host == "pi":
        _show(installer.install_pi(where))
        names = ", ".join(installer.skills())
        click.echo(
            f"skills {names}: loaded by the extension from {installer.skills_dir()}"
        )
        click.echo("run /reload in pi (or start it again) to load the commands")
    else:
        _show(installer.install_letta())
        click.echo("run /reload in Letta Code (mods need Letta Code 0.30 or newer)")


@click.command()
@click.argument("host", type=click.Choice(HOSTS))
@_project_flag
def uninstall(host: str, project: str | None) -> None:
    """Remove what machine install wrote (only files machine wrote).

    \b
    Example usage:
        machine uninstall pi
        machine uninstall letta
    """
    from machine_git.agents import install as installer

    where = _install_project(project, host)
    if host == "pi":
        _show(installer.uninstall_pi(where))
    else:
        _show(installer.uninstall_letta())


# -- auto-capture ------------------------------------------------------------------


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
    from machine_git import settings
    from machine_git.agents import observe as observing

    root = project_of(project)
    commit = None
    if state == "status":
        value = observing.auto_on(paths.store_path(root))
    else:
        value = state == "on"
        store = open_store(project, create=True)
        commit = settings.write(store, "auto", value)
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
    from machine_git import redaction
    from machine_git.agents import observe as observing

    root = project_of(project)
    if if_auto and not observing.auto_on(paths.store_path(root)):
        if as_json:
            emit_json({"action": "off"})
        return
    parent = observing.parent_from_env()
    found = detect.locate(root, host, session)
    if found.announce:
        click.echo(f"using {found.host} session {found.path}", err=True)
    turn, report = found.read(entry)
    if (line := report.warning()) is not None:
        warn(line)
    row = observing.build(
        turn, parent=parent, reasoning=reasoning, context=not no_context
    )
    store = open_store(project, create=True)
    result = observing.observe(store, row, redact=not no_redact)
    if result.redacted:
        click.echo(f"redacted {redaction.describe(result.redacted)}", err=True)
    if as_json:
        emit_json(
            {
                "action": result.action,
                "id": result.row["id"],
                "kind": result.row["kind"],
                "parent": parent,
                "commit": result.commit,
            }
        )
    elif result.action == "observed":
        fork_of = f" (fork of {parent})" if parent else ""
        click.echo(f"observed {row['id']}: {rows.first_words(row)}{fork_of}")
    elif not if_auto:
        click.echo(
            f"already recorded {result.row['id']} as {result.row['kind']}; "
            "nothing changed"
        )


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

    store = _existing_store(project)
    found = [] if store is None else observing.recent(store, limit)
    if as_json:
        emit_json(found)
        return
    if not found:
        click.echo("no observed runs yet (machine auto on records pi -p runs)")
        return
    for row in found:
        stamp = str(row.get("created_at", ""))[:16].replace("T", " ")
        parent = row.get("source", {}).get("parent_row")
        fork_of = f"  (fork of {parent})" if parent else ""
        click.echo(f"{row['id']}  {stamp}  {rows.first_words(row, 50)}{fork_of}")


def _existing_store(project: Path | None) -> Store | None:
    location = paths.store_path(project_of(project))
    return Store.open(location) if store_exists(location) else None


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

    store = open_store(project)
    done = observing.label(store, row_id, verdict, rewrite, note)
    after = done.after
    if done.commit is None and not as_json:
        click.echo(
            f"{after['id']} is already {verdict} ({after['kind']}); nothing changed"
        )
        return
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
        return
    click.echo(
        f"labeled {after['id']} {verdict}: observed -> {after['kind']}: "
        f"{rows.first_words(after)}"
    )


# -- forks -----------------------------------------------------------------------


def _dry_run(f: Any) -> Any:
    return click.option(
        "--dry-run",
        is_flag=True,
        help="Print the prompt and the pi command instead of running it.",
    )(f)


def _fork(
    store: Store,
    root: Path,
    row: dict[str, Any],
    words: tuple[str, ...],
    dry_run: bool,
) -> None:
    from machine_git.agents import fork as forks

    made = forks.make(row, " ".join(words), store)
    pi_bin = None if dry_run else forks.pi_path()
    if pi_bin is None:
        if not dry_run:
            warn("pi is not on PATH; run the command below yourself")
        click.echo(f"prompt (fork of {made.parent_id}):")
        click.echo(made.prompt)
        click.echo("command:")
        click.echo(made.shell_command())
        return
    click.echo(f"fork of {made.parent_id}: running pi -p", err=True)
    ran = forks.run(made, pi_bin, root)
    _record_fork(store, made.parent_id, ran.session)
    if ran.status != 0:
        raise click.exceptions.Exit(ran.status)  # pi's own code: it said why


def _record_fork(store: Store, parent: str, session: Path | None) -> None:
    """Observe the run a fork made, linked to its parent, whatever auto says."""
    from machine_git.agents import observe as observing
    from machine_git.errors import MachineError

    if session is None:
        warn(f"the fork of {parent} left no Pi session; nothing recorded")
        return
    try:
        turn, _ = detect.PI.read(session)
        row = observing.build(turn, parent=parent)
        result = observing.observe(store, row)
    except MachineError as e:
        warn(f"the fork of {parent} was not recorded: {e}")
        return
    if result.action == "observed":  # else auto-capture recorded it and said so
        click.echo(
            f"observed {row['id']}: {rows.first_words(row)} (fork of {parent})",
            err=True,
        )


@click.command()
@click.argument("correction", nargs=-1)
@_dry_run
@project_option
def fork(correction: tuple[str, ...], dry_run: bool, project: Path | None) -> None:
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
    from machine_git.agents import observe as observing

    root = project_of(project)
    store = _existing_store(root)
    latest = [] if store is None else observing.recent(store, 1)
    if store is None or not latest:
        raise NotFoundError(
            "no observed run to fork (machine auto on, then run pi -p; "
            "or machine correction --id ID)"
        )
    _fork(store, root, latest[0], correction, dry_run)


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
def correction(
    row_id: str, correction_words: tuple[str, ...], dry_run: bool, project: Path | None
) -> None:
    """Rerun any row's task (observed, traces, train, ...) in pi -p with a correction.

    \b
    Example usage:
        machine correction --id c0ffee123456 use Julia, not Python
    """
    from machine_git import lookup

    root = project_of(project)
    store = open_store(root)
    found = store.read_row(lookup.resolve_id(store, row_id))
    if found is None:  # resolve_id found it a moment ago
        raise RowNotFoundError(f"row {row_id} was removed meanwhile")
    _fork(store, root, found, correction_words, dry_run)


# -- the student -----------------------------------------------------------------


def _missing_key() -> str | None:
    from machine_git.agents import student as students

    if students.has_key():
        return None
    return f"{students.API_KEY_ENV} is not set; pi and machine ask cannot reach Tinker"


def _session_option(f: Any) -> Any:
    return click.option(
        "--session",
        "session",
        type=click.Path(dir_okay=False, path_type=Path),
        help="The Pi session this is asked in (the Pi extension passes it).",
    )(f)


@click.command()
@click.argument("handle", required=False)
@click.option(
    "--work-model",
    metavar="PROVIDER/MODEL",
    help="The model to switch back to with machine work (the Pi extension sets it).",
)
@_session_option
@project_option
@json_option
def student(
    handle: str | None,
    work_model: str | None,
    session: Path | None,
    project: Path | None,
    as_json: bool,
) -> None:
    """Show or set the student: the model to chat with, trained from the rows.

    HANDLE is a Tinker model id, a tinker://…/sampler_weights/… checkpoint,
    BASE;CHECKPOINT, or a release id (BR-001: its candidate checkpoint).
    Setting it also lists it in Pi's /model (provider tinker) when machine
    install pi added the provider. In Pi, /machine student HANDLE switches the
    session it is asked in, and only that one. Without HANDLE: the student,
    the model of the Pi session it was chosen in, and the model new Pi
    sessions start on.

    \b
    Example usage:
        machine student thinkingmachines/Inkling-Small:peft:262144
        machine student tinker://RUN/sampler_weights/000080
        machine student
    """
    from machine_git.agents import student as students

    if handle is None:
        found = students.where(
            _existing_store(project), str(session) if session else None
        )
        _say(as_json, "\n".join(found.lines()), {**found.to_json(), "switch_to": None})
        return
    # a release id must name a release before anything is written
    parsed = students.resolve(_existing_store(project), students.parse(handle))
    store = open_store(project, create=True)
    students.choose(store, parsed, work_model, str(session) if session else None)
    offered = students.offer_in_pi(parsed)
    in_letta = students.offer_in_letta(parsed)  # Letta Code's catalog, if installed
    message = f"student {parsed.describe()}"
    if session is None:  # from a shell: how to chat with it
        message += (
            "; machine install pi offers it in Pi"
            if offered is None or offered.action == "skipped"
            else f"; in Pi: /machine student {handle} switches one session to it"
        )
        if in_letta is not None and in_letta.action != "skipped":
            message += (
                f"; in Letta Code: /machine student {handle} switches one "
                "conversation to it"
            )
    missing = _missing_key()
    if missing and not as_json:
        warn(missing)
    _say(
        as_json,
        message,
        {
            **students.current(store),
            "kind": parsed.kind,
            "release": parsed.release,
            "warning": missing,
            "switch_to": students.pi_model(parsed),
        },
    )


@click.command()
@click.option(
    "--work-model",
    metavar="PROVIDER/MODEL",
    help="The working model to go back to (the Pi extension passes the session's).",
)
@project_option
@json_option
def work(work_model: str | None, project: Path | None, as_json: bool) -> None:
    """Chat with the working model again instead of the student.

    The same from a shell and as /machine work in Pi: the project goes back
    to the working model, and a Pi session machine switched to the student
    goes back when it next starts or takes a prompt (at once with /machine
    work). If Pi's default model is on Tinker, it is set back to the working
    model, so new sessions start there.

    \b
    Example usage:
        machine work
    """
    from machine_git.agents import student as students

    store = _existing_store(project)
    info = {**students.current(None), "work_model": work_model}
    if store is not None:
        students.back_to_work(store, work_model)
        info = students.current(store)
    model = info["work_model"]
    lines = ["chatting with the working model" + (f" {model}" if model else "")]
    was = students.reset_pi_default(info)
    if was is not None:
        lines.append(f"new Pi sessions start on {model} again (Pi's default was {was})")
    _say(as_json, "\n".join(lines), {**info, "switch_to": model, "pi_default_was": was})


def _say(as_json: bool, message: str, info: dict[str, Any]) -> None:
    if as_json:
        emit_json({**info, "message": message})
    else:
        click.echo(message)


@click.command()
@click.argument("prompt_words", nargs=-1, required=True)
@click.option("--student", "handle", help="Ask this handle instead of the student.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=30.0,
    show_default=True,
    help="Seconds to wait for Tinker.",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    default=1024,
    show_default=True,
    help="Longest answer.",
)
@project_option
def ask(
    prompt_words: tuple[str, ...],
    handle: str | None,
    timeout: float,
    max_tokens: int,
    project: Path | None,
) -> None:
    """Ask the student from a shell (Tinker's OpenAI-compatible endpoint).

    PROMPT '-' reads the prompt from stdin. Needs TINKER_API_KEY.

    \b
    Example usage:
        machine ask "What does calc.py print?"
    """
    from machine_git.agents import student as students

    text = " ".join(prompt_words)
    if text == "-":
        text = sys.stdin.read()
    students.require_key()
    if handle is None:
        store = _existing_store(project)
        handle = None if store is None else students.current(store)["student"]
        if handle is None:
            raise StudentError("no student set; choose one with machine student HANDLE")
    chosen = students.resolve(_existing_store(project), students.parse(handle))
    answer = students.ask(chosen, text, timeout=timeout, max_tokens=max_tokens)
    click.echo(answer)


@click.command()
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="Seconds to wait for Tinker.",
)
@json_option
def models(timeout: float, as_json: bool) -> None:
    """List the models Tinker's OpenAI-compatible endpoint offers.

    Any of them works as a student handle (machine student MODEL, or
    /tinker use MODEL in Pi). Needs TINKER_API_KEY;
    MACHINE_TINKER_OAI_URL overrides the endpoint.

    \b
    Example usage:
        machine models
        machine models --json
    """
    from machine_git.agents import student as students

    found = students.list_models(timeout=timeout)
    if as_json:
        emit_json(found)
        return
    if not found:
        click.echo("Tinker lists no models")
    for model in found:
        click.echo(model)
