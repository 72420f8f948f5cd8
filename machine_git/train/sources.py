"""What ``machine train validate`` checks: a revision's rows, or a JSONL file.

A revision gives the rows a run of that kind would train on (the one
selection, :mod:`machine_git.train.selection`), with their context inline,
and names the rows that still share a session or a prompt and answer with
the eval set in force. A file gives its lines: machine rows (``kind`` and
``id``) or exported conversations (``messages``, any chat format).
Light: no training stack.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import NamedTuple

from pygit2 import Commit

from machine_git.core import inputs
from machine_git.core import jsonio
from machine_git.core.errors import UsageError
from machine_git.store.store import Store
from machine_git.train import config

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Row

Item = tuple[str, "Row | dict[str, Any]"]  # (label, row or {"messages": [...]})


class Source(NamedTuple):
    """Rows (or conversations) to check, and where they came from."""

    items: Sequence[Item]
    kind: str
    conversations: bool  # items are exported lines, not rows
    label: str
    held_out: int = 0
    eval_id: str | None = None
    overlap: tuple[str, ...] = ()  # labels sharing a session or content with evals
    read: Callable[[str], bytes | None] | None = None  # the store's files (images)


def of_target(
    target: str | None, kind: str | None, open_store: Callable[[], Store]
) -> Source:
    """What ``train validate TARGET`` checks: the JSONL file ``target`` names,
    else the rows at the revision it names (default: the newest)."""
    if target is not None and Path(target).is_file():
        return of_file(Path(target), kind)
    from machine_git.history import revs

    store = open_store()
    return of_store(store, revs.resolve(store, target), target, kind or "train")


def of_store(store: Store, commit: Commit, revision: str | None, kind: str) -> Source:
    """The rows a run of ``kind`` would train on at ``commit``."""
    from machine_git.train import evals
    from machine_git.train import pins
    from machine_git.train import selection

    pinned = pins.data_commit(commit)
    picked = selection.select(store, pinned, kind)
    eval_set = evals.active(store)
    overlap = evals.overlap(store, eval_set, picked.items) if eval_set else []
    return Source(
        read=functools.lru_cache(maxsize=16)(store.snapshot(pinned).read),
        items=picked.items,
        kind=kind,
        conversations=False,
        label=f"{revision or 'HEAD'} ({str(commit.id)[:12]})",
        held_out=picked.held_out,
        eval_id=picked.eval_id,
        overlap=tuple(overlap),
    )


def of_file(path: Path, kind: str | None) -> Source:
    """The lines of a JSONL file: rows of one kind, or exported conversations."""
    try:
        data = inputs.read(path, inputs.JSONL_LIMIT)
    except inputs.Unreadable as e:
        raise UsageError(f"cannot read {path}: {e}") from None
    items: list[Item] = []
    conversations = False
    for number, text in inputs.numbered_lines(data):
        try:
            value = jsonio.loads(text)
        except jsonio.JSONDecodeError as e:
            raise UsageError(f"{path}:{number}: not valid JSON ({e})") from None
        if not isinstance(value, dict):
            raise UsageError(f"{path}:{number}: not a JSON object")
        if "kind" not in value and "messages" in value:
            conversations = True
        items.append((f"{path.name}:{number}", value))
    if conversations:
        return Source(items, kind or "train", True, str(path))
    kinds = [str(v.get("kind")) for _, v in items if v.get("kind") in config.KINDS]
    chosen = kind or (kinds[0] if kinds else "train")
    wanted = [(label, v) for label, v in items if v.get("kind") == chosen]
    return Source(wanted, chosen, False, str(path))
