"""The student: ``student``, ``work``, ``ask`` and ``models``.

The student is the model trained from the rows (a Tinker model id, a
checkpoint or a release), to chat with in Pi and Letta Code or ask from a
shell; ``work`` goes back to the working model (agents.student).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from machine_git.cli.common import emit_json
from machine_git.cli.common import existing_store
from machine_git.cli.common import json_option
from machine_git.cli.common import project_for
from machine_git.cli.common import project_option
from machine_git.cli.common import warn

# The commands import machine_git.agents.student when they run: urllib and
# Pi's settings stay off the start-up path of every other command.


def _session_option(f: click.decorators.FC) -> click.decorators.FC:
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

    asked_in = str(session) if session else None
    if handle is None:
        found = students.where(existing_store(project), asked_in)
        _say(as_json, "\n".join(found.lines()), {**found.to_json(), "switch_to": None})
        return
    chosen = students.set_student(project_for(project), handle, work_model, asked_in)
    if chosen.new_store is not None:
        click.echo(chosen.new_store, err=True)
    if chosen.missing_key and not as_json:
        warn(chosen.missing_key)
    _say(as_json, chosen.message, chosen.to_json())


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

    done = students.work(project_for(project), work_model)
    model = done.settings["work_model"]
    lines = ["chatting with the working model" + (f" {model}" if model else "")]
    was = done.pi_default_was
    if was is not None:
        lines.append(f"new Pi sessions start on {model} again (Pi's default was {was})")
    _say(
        as_json,
        "\n".join(lines),
        {**done.settings, "switch_to": model, "pi_default_was": was},
    )


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
@json_option
def ask(
    prompt_words: tuple[str, ...],
    handle: str | None,
    timeout: float,
    max_tokens: int,
    project: Path | None,
    as_json: bool,
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
    answer = students.ask_student(
        project_for(project), text, handle, timeout=timeout, max_tokens=max_tokens
    )
    if as_json:
        emit_json({"prompt": text, "answer": answer})
        return
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
