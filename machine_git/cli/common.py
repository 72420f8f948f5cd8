"""Options and output helpers shared by the commands."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import TypeVar

import click

from machine_git.core import jsonio
from machine_git.core import paths
from machine_git.core.errors import MachineError
from machine_git.store.store import Store
from machine_git.store.store import exists as store_exists

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

F = TypeVar("F", bound=Callable[..., Any])


def project_option(f: F) -> F:
    """``--project DIR``: the project whose store to use (default: this one)."""
    return click.option(
        "--project",
        "project",
        type=click.Path(file_okay=False, path_type=Path),
        help="Project folder (default: the git top level of the current folder).",
    )(f)


def limit_option(f: F) -> F:
    """``-n N``: how many rows a listing shows (default 10)."""
    return click.option(
        "-n",
        "limit",
        type=click.IntRange(min=1),
        default=10,
        show_default=True,
        help="How many rows.",
    )(f)


def json_option(f: F) -> F:
    """``--json``: print machine-readable JSON instead of text."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(f)


def project_of(project: Path | None) -> Path:
    """The project root: ``--project`` as given, else found from the cwd."""
    if project is not None:
        if not project.is_dir():
            raise click.BadParameter(
                f"{project} is not a folder", param_hint="--project"
            )
        return project.resolve()
    return paths.project_root()


def project_for(project: Path | None) -> paths.Project:
    """The project ``--project`` names (None: found from the cwd), for the library."""
    return paths.Project(project_of(project), chosen=project is not None)


def existing_store(project: Path | None) -> Store | None:
    """The project's store, or None if it has none yet (nothing is created)."""
    location = paths.store_path(project_of(project))
    return Store.open(location) if store_exists(location) else None


def open_store(project: Path | None, create: bool = False) -> Store:
    """The project's store; created only by commands that write.

    ``project`` is the ``--project`` option as given (None: found from the
    cwd), so that a store created outside git can say which folder it took.
    """
    root = project_of(project)
    location = paths.store_path(root)
    if not create:
        return Store.open(location)
    store = Store.create(location, root)
    notice = paths.new_store_notice(root, project is not None, store.created)
    if notice is not None:
        click.echo(notice, err=True)
    return store


# -- shell completion (click's shell_complete callbacks) -------------------------


def complete_row_id(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Row ids of the project's store (recent rows for an empty word)."""
    return _complete(ctx, incomplete, rows=True)


def complete_revision(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Version names and run ids of the project's store."""
    return _complete(ctx, incomplete, revisions=True)


def complete_row_or_revision(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Row ids, then version names and run ids (``machine show``)."""
    return _complete(ctx, incomplete, rows=True, revisions=True)


def _complete(
    ctx: click.Context, incomplete: str, rows: bool = False, revisions: bool = False
) -> list[CompletionItem]:
    # Loaded only when the shell asks: no command's start-up pays for them.
    from click.shell_completion import CompletionItem

    from machine_git.cli import completion

    project = ctx.params.get("project")  # --project given earlier on the line
    try:
        where = paths.store_path(
            project_of(project if isinstance(project, Path) else None)
        )
    except (click.BadParameter, MachineError):
        return []
    found = completion.row_ids(where, incomplete) if rows else []
    found += completion.revisions(where, incomplete) if revisions else []
    return [CompletionItem(c.value, help=c.help or None) for c in found]


# JSON escapes C0 controls; DEL and C1 (U+0080-U+009F, CSI among them) it
# may leave raw, and a terminal would act on them. They only occur inside
# strings (JSON's own syntax is ASCII), where \uXXXX means the same value.
_RAW_CONTROL = {code: f"\\u{code:04x}" for code in (0x7F, *range(0x80, 0xA0))}


def emit_json(value: Any) -> None:
    """Print ``value`` as one JSON document (sorted keys), with no raw control."""
    text = jsonio.line(value).decode()
    click.echo(text.translate(_RAW_CONTROL), nl=False)


def warn(message: str) -> None:
    """One warning line on stderr."""
    click.echo(f"warning: {message}", err=True)
