"""The ``machine`` command line: parse, call the library, print.

Library modules never import click; every MachineError becomes one line on
stderr here, at the edge, and anything else is a bug that should crash loudly.
"""

from __future__ import annotations

from typing import Any

import click

from machine_git import __version__
from machine_git.errors import MachineError


class MachineGroup(click.Group):
    """A group that turns MachineError into ``Error: <one line>`` and exit 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except MachineError as e:
            raise click.ClickException(str(e)) from None
        except KeyboardInterrupt:
            click.echo("Interrupted", err=True)
            ctx.exit(130)


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
    from machine_git.cli import agent
    from machine_git.cli import data
    from machine_git.cli import edit
    from machine_git.cli import export
    from machine_git.cli import history
    from machine_git.cli import hooks
    from machine_git.cli import releases
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
        versions.version,
        versions.versions,
        export.export,
        export.import_,
        sync.remote,
        sync.push,
        sync.pull,
        sync.clone,
        hooks.hooks,
        agent.install,
        agent.uninstall,
        agent.auto,
        agent.observe,
        agent.observed,
        agent.fork,
        agent.correction,
        agent.label,
        agent.student,
        agent.work,
        agent.ask,
        agent.models,
        train.train,
        train.runs_command,
        releases.release,
        releases.lineage,
    ):
        cli.add_command(command)


_register()
