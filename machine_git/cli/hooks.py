"""``machine hooks install``: the git hooks that guard a store."""

from __future__ import annotations

from pathlib import Path

import click

from machine_git.cli.common import emit_json
from machine_git.cli.common import json_option
from machine_git.cli.common import open_store
from machine_git.cli.common import project_option
from machine_git.sync import hooks as store_hooks


@click.group()
def hooks() -> None:
    """Manage the git hooks that check rows pushed into this project's store.

    \b
    Example usage:
        machine hooks install
    """


@hooks.command(name="install")
@project_option
@json_option
def hooks_install(project: Path | None, as_json: bool) -> None:
    """Install the store's pre-receive and post-receive hooks (safe to repeat).

    pre-receive refuses a push that brings an invalid row; post-receive keeps
    the files a push writes private.

    \b
    Example usage:
        machine hooks install --project ~/src/app
    """
    store = open_store(project, create=True)
    changed = store_hooks.install_store_hooks(store.path)
    folder = store.path / "hooks"
    if as_json:
        emit_json({"hooks": str(folder), "installed": changed})
    elif changed:
        click.echo(f"installed {', '.join(changed)} in {folder}")
    else:
        click.echo(f"hooks already installed in {folder}")
