"""``machine review``: the store in the browser (the optional ``ui`` extra)."""

from __future__ import annotations

from pathlib import Path

import click

from machine_git.cli.common import open_store
from machine_git.cli.common import project_option


@click.command()
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Port on 127.0.0.1 (0: any free port).",
)
@click.option("--no-browser", is_flag=True, help="Print the URL; do not open it.")
@project_option
def review(port: int, no_browser: bool, project: Path | None) -> None:
    """Review the store in the browser: label, browse, diff, runs, releases.

    Serves on 127.0.0.1 only, until Ctrl-C; the printed URL carries a random
    access token. Needs the web extra: pip install '.[ui]' in a machine
    checkout (or the wheel with [ui]).

    \b
    Example usage:
        machine review
        machine review --port 8765 --no-browser
    """
    from machine_git import review as reviewing  # the extra, only here

    reviewing.require()
    store = open_store(project)
    from machine_git.review import server

    server.serve(
        store.path,
        port=port,
        open_browser=not no_browser,
        echo=click.echo,
        project=store.path.name,
    )
