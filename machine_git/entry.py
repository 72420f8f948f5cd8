"""The ``machine`` console script: good and bad without click, the rest with it.

``machine good`` is the command people run most, from a shell or from ``/good``
inside their agent, and nearly all of its time is start-up: importing click
alone is about a tenth of it (bench/RESULTS.md). So the two tagging commands
are parsed here first, for the plain forms they take (words, and their long
options with values). Anything else, ``--help``, an unknown or malformed
option, a value click would refuse, goes to the click command unchanged,
which parses it again and answers as always. tests/test_entry.py checks that
this parser agrees with click's on every form it accepts.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any
from typing import Literal

from machine_git.core.errors import INTERRUPTED
from machine_git.core.errors import USAGE
from machine_git.core.errors import exit_code
from machine_git.core.errors import user_message

_VALUES = {  # option -> parameter, for the options that take a value
    "--note": "note",
    "--as": "rewrite",
    "--rewrite": "rewrite",
    "--out": "out",
    "--host": "host",
    "--session": "session",
    "--entry": "entry",
    "--project": "project",
}
_FLAGS = {
    "--trace": "trace",
    "--trajectory": "trace",
    "--reasoning": "reasoning",
    "--no-redact": "no_redact",
    "--no-context": "no_context",
    "--no-images": "no_images",
    "--json": "as_json",
}


def parse(args: list[str]) -> dict[str, Any] | None:
    """The parameters of ``good``/``bad`` ARGS as click would give them, or None.

    None means "let click do it": this parser only takes forms whose meaning
    is certain.
    """
    params: dict[str, Any] = {
        "note_words": [],
        "note": None,
        "rewrite": None,
        "trace": False,
        "reasoning": False,
        "out": None,
        "host": "auto",
        "session": None,
        "entry": None,
        "no_redact": False,
        "no_context": False,
        "no_images": False,
        "project": None,
        "as_json": False,
    }
    rest = iter(args)
    for arg in rest:
        if not arg.startswith("-"):
            params["note_words"].append(arg)
            continue
        name, eq, value = arg.partition("=")
        if name in _FLAGS and not eq:
            params[_FLAGS[name]] = True
        elif name in _VALUES:
            if not eq:
                following = next(rest, None)
                if following is None or following.startswith("-"):
                    return None
                value = following
            params[_VALUES[name]] = value
        else:
            return None  # -h, --help, --, an unknown option: click's to answer
    # detect loads anyway to tag: the choices are its, as in the click command.
    from machine_git.sessions.detect import AUTO
    from machine_git.sessions.detect import HOSTS

    if params["host"] not in (*HOSTS, AUTO):
        return None
    if params["project"] is not None:
        params["project"] = Path(params["project"])
        if not params["project"].is_dir():
            return None  # click's answer: not a folder
    if params["session"] is not None:
        params["session"] = Path(params["session"])
        if params["session"].is_dir() or (
            params["session"].exists() and not os.access(params["session"], os.R_OK)
        ):
            return None  # click's Path type refuses it, with its message
    params["note_words"] = tuple(params["note_words"])
    return params


def main() -> None:
    """Console-script entry point."""
    try:
        args = sys.argv[1:]
        refused = not_text(args)
        if refused is not None:
            sys.stderr.write(f"Error: {refused}\n")
            sys.exit(USAGE)
        if args[:1] in (["good"], ["bad"]):
            params = parse(args[1:])
            if params is not None:
                sys.exit(_tag("good" if args[0] == "good" else "bad", params))
        from machine_git.cli import main as click_main

        click_main()
    except KeyboardInterrupt:
        # Ctrl-C while modules load, before any command's own handler.
        sys.stderr.write("Interrupted\n")
        sys.exit(INTERRUPTED)


def not_text(args: list[str]) -> str | None:
    """Why ``args`` cannot be taken, or None: each must be valid UTF-8.

    Python keeps bytes that are not UTF-8 as lone surrogates
    (``surrogateescape``); nothing machine writes (a row, a commit message,
    a path in git) can hold one, so the argument is refused here, whole,
    before anything is read or written.
    """
    for number, arg in enumerate(args, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = repr(os.fsencode(arg))  # b'x\\xffy': no raw byte reaches the screen
            return (
                f"argument {number} ({shown}) is not valid UTF-8; "
                "machine takes text (and file names) in UTF-8 only"
            )
    return None


def _tag(label: Literal["good", "bad"], params: dict[str, Any]) -> int:
    from machine_git.core import paths
    from machine_git.tagging import tagcommand

    given: Path | None = params["project"]
    try:
        root = given.resolve() if given is not None else paths.project_root()
        tagcommand.run(label, paths.Project(root, given is not None), params)
    except KeyboardInterrupt:
        tagcommand.echo("Interrupted", err=True)
        return INTERRUPTED
    except Exception as e:
        why = user_message(e)  # as the click group says it
        if why is None:
            raise
        tagcommand.echo(f"Error: {why}", err=True)
        return exit_code(e)
    return 0
