"""The ``machine`` command line: parse, call the library, print.

Library modules never import click; every MachineError becomes one line on
stderr here, at the edge, and anything else is a bug that should crash loudly.

May use: review, agents, releases, train, tagging, export, sync, recovery,
history, store, sessions, rows, secrets, core, bundled (pyproject.toml:
[tool.importlinter]).
"""

from __future__ import annotations

import importlib
from collections.abc import MutableMapping
from typing import Any

import click

from machine_git import __version__
from machine_git.core import table
from machine_git.core.errors import INTERRUPTED
from machine_git.core.errors import USAGE
from machine_git.core.errors import exit_code
from machine_git.core.errors import user_message

# Start-up is most of the time of `machine good` (bench/RESULTS.md), so the
# commands people run most load alone: their own module and what it imports,
# not every command's. Anything else that looks at the commands (another
# command, --help, a typo, a test reading cli.commands) loads them all through
# _register(). name -> (module, attribute): tests/cli/test_lazy.py checks that
# each one is the command _register() adds under that name.
FAST = {
    "good": ("machine_git.cli.tag", "good"),
    "bad": ("machine_git.cli.tag", "bad"),
    "tagged": ("machine_git.cli.data", "tagged"),
    "data": ("machine_git.cli.data", "data"),
    "validate": ("machine_git.cli.data", "validate"),
    "log": ("machine_git.cli.history", "log_command"),
    "show": ("machine_git.cli.history", "show"),
    "diff": ("machine_git.cli.history", "diff_command"),
    "export": ("machine_git.cli.export", "export"),
    "gc": ("machine_git.cli.gc", "gc_command"),
    "rewrite": ("machine_git.cli.edit", "rewrite"),
    "rm": ("machine_git.cli.edit", "rm"),
    "move": ("machine_git.cli.edit", "move"),
    "undo": ("machine_git.cli.edit", "undo"),
    "version": ("machine_git.cli.versions", "version"),
    "versions": ("machine_git.cli.versions", "versions"),
    "recover": ("machine_git.cli.recover", "recover_command"),
}
_loaded: list[bool] = []


class MachineGroup(click.Group):
    """A group that turns MachineError into ``Error: <one line>`` and exit 1."""

    @property
    def commands(self) -> MutableMapping[str, click.Command]:
        if not _loaded:
            _loaded.append(True)  # first: _register() adds through this property
            _register()
        return self._commands

    @commands.setter
    def commands(self, value: MutableMapping[str, click.Command]) -> None:
        self._commands = value

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if not _loaded and cmd_name in FAST:
            module, attribute = FAST[cmd_name]
            command = getattr(importlib.import_module(module), attribute, None)
            if isinstance(command, click.Command):
                return command
        return super().get_command(ctx, cmd_name)

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as e:  # `machine --bogus`
            raise Failure.usage(e) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as e:  # a subcommand's options or arguments
            raise Failure.usage(e) from None
        except click.ClickException:
            raise
        except Exception as e:
            # A MachineError, or a read of a damaged store failing inside
            # libgit2 (errors.store_read_error); anything else is a bug.
            why = user_message(e)
            if why is None:
                raise
            # Stored text (a row id, a summary) can be in it: no control
            # character of it reaches the terminal.
            raise Failure(table.printable(why), exit_code(e)) from None
        except KeyboardInterrupt:
            click.echo("Interrupted", err=True)
            ctx.exit(INTERRUPTED)


class Failure(click.ClickException):
    """``Error: <one line>`` and the exit code of its kind (errors.py)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        # click reads exit_code from the instance; its stub calls it a ClassVar.
        self.exit_code = code  # type: ignore[misc]

    @classmethod
    def usage(cls, e: click.UsageError) -> Failure:
        """Click's usage error as one line, with where to look for help.

        Click prints the usage and a "Try ..." line above the error; every
        other error here is one line, so this one is too.
        """
        where = e.ctx.command_path if e.ctx is not None else "machine"
        return cls(f"{e.format_message()} (see '{where} --help')", USAGE)


@click.group(cls=MachineGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="machine")
def cli() -> None:
    """Turn a coding agent's good and bad turns into versioned fine-tuning data.

    \b
    Example usage:
        machine good                 # the last turn was good: a train row
        machine good --trace         # keep the whole tool-using trajectory
        machine bad "too terse"      # a bad turn, kept out of training
        machine tagged               # what you tagged recently
    """


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="machine")


def _register() -> None:
    from machine_git.cli import data
    from machine_git.cli import edit
    from machine_git.cli import export
    from machine_git.cli import gc
    from machine_git.cli import history
    from machine_git.cli import hooks
    from machine_git.cli import install
    from machine_git.cli import labels
    from machine_git.cli import observe
    from machine_git.cli import recover
    from machine_git.cli import releases
    from machine_git.cli import review
    from machine_git.cli import student
    from machine_git.cli import sync
    from machine_git.cli import tag
    from machine_git.cli import train
    from machine_git.cli import versions

    for command in (
        tag.good,
        tag.bad,
        data.tagged,
        data.data,
        data.validate,
        history.log_command,
        history.show,
        history.diff_command,
        edit.rewrite,
        edit.edit,
        edit.rm,
        edit.move,
        edit.undo,
        edit.redo,
        versions.version,
        versions.versions,
        export.export,
        export.import_,
        sync.remote,
        sync.push,
        sync.pull,
        sync.clone,
        hooks.hooks,
        gc.gc_command,
        recover.recover_command,
        install.install,
        install.uninstall,
        observe.auto,
        observe.observe,
        observe.observed,
        observe.fork,
        observe.correction,
        observe.label,
        labels.labels,
        student.student,
        student.work,
        student.ask,
        student.models,
        train.train,
        train.runs_command,
        releases.release,
        releases.lineage,
        review.review,
    ):
        cli.add_command(command)
