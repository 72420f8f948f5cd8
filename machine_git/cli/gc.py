"""``machine gc``: pack what is new in the store (git repack --geometric)."""

from __future__ import annotations

from pathlib import Path

import click

from machine_git.cli import progress
from machine_git.cli.common import emit_json
from machine_git.cli.common import json_option
from machine_git.cli.common import open_store
from machine_git.cli.common import project_option


@click.command("gc")
@project_option
@click.option(
    "--full",
    is_flag=True,
    help="Every object into one pack (git gc); tags wait until it is done.",
)
@json_option
def gc_command(project: Path | None, full: bool, as_json: bool) -> None:
    """Pack the store: loose objects, and the small packs, into a pack.

    Incremental (git repack --geometric=2): the cost follows what is new,
    and tags go on while it runs. --full runs git gc instead.

    First removes what killed writers left: temp objects and packs, and
    stale lock files (those an hour old; libgit2's own after a minute).

    machine also packs by itself, in the background, after a commit once
    loose objects pile up (git's gc.auto, 6700 by default; set it in the
    store's git config).

    \b
    Example usage:
        machine gc
        machine gc --full
    """
    from machine_git.core.errors import StoreError
    from machine_git.recovery import diagnosis
    from machine_git.store import gc

    store = open_store(project)
    with progress.bars(as_json) as shown:
        try:
            done = gc.pack(store, shown, full=full)
        except StoreError as e:
            raise diagnosis.damage_or(store.path, e, "pack it") from None
    before, after = done.before, done.after
    if as_json:
        emit_json(
            {
                "store": str(store.path),
                "seconds": round(done.seconds, 3),
                "before": before.as_dict(),
                "after": after.as_dict(),
                "removed": done.removed,
                "contexts_dropped": done.pruned,
                "images_dropped": done.images,
            }
        )
        return
    if done.pruned:
        click.echo(f"dropped {_count(done.pruned, 'context')} no row names any more")
    if done.images:
        click.echo(f"dropped {_count(done.images, 'image')} no row names any more")
    if done.removed:
        click.echo(
            f"removed {_count(len(done.removed), 'leftover')} of killed writers "
            f"({', '.join(done.removed[:5])}{', ...' if len(done.removed) > 5 else ''})"
        )
    click.echo(
        f"packed {store.path}: {_count(before.loose, 'loose object')}, "
        f"{_count(before.packs, 'pack')} -> {_count(after.loose, 'loose object')}, "
        f"{_count(after.packs, 'pack')}; {_size(before.total_bytes)} -> "
        f"{_size(after.total_bytes)} ({done.seconds:.1f} s)"
    )


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n / 1024 / 1024:.1f} MB"
