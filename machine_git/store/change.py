"""A change: the files one commit writes or deletes, its message, and its tree.

Nothing under ``rows/`` is written unless it is a valid row, canonical, and at
the path its id names; a change whose producer did not redact is scanned, and
refused if a secret is left. The new tree rewrites only the trees on the
changed paths (trees.py), so a tag writes O(1) objects.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import pygit2
from pygit2 import Oid
from pygit2 import Tree

from machine_git.core import jsonio
from machine_git.core.errors import RowValidationError
from machine_git.core.errors import SecretFoundError
from machine_git.core.errors import StoreError
from machine_git.core.plain import Plain
from machine_git.rows import context
from machine_git.rows import images
from machine_git.rows import rows
from machine_git.rows import schemas
from machine_git.store.trees import empty_tree
from machine_git.store.trees import write_tree


class Redaction(enum.Enum):
    """How the rows of a change were cleared of secrets before they reached it."""

    SCANNED = "on"
    """The producer ran the scanner on them (redaction.redact_row)."""
    OFF = "off"
    """The user asked to keep secrets (--no-redact): a Machine-Redaction trailer."""
    KEPT = "kept"
    """Content carried over unchanged from rows the store holds (a move, undo)."""
    CHECK = "check"
    """Nobody scanned: the store scans every row and refuses any secret."""


class Change(Plain):
    """One commit's worth of change: files to write (bytes) or delete (None)."""

    __slots__ = ("body", "files", "redaction", "summary", "trailers")

    def __init__(
        self,
        summary: str,
        files: dict[str, bytes | None],
        trailers: dict[str, str] | None = None,
        body: str = "",
        redaction: Redaction = Redaction.CHECK,
    ) -> None:
        self.summary = summary
        self.files = files
        self.trailers: dict[str, str] = trailers if trailers is not None else {}
        self.body = body
        self.redaction = redaction

    def message(self) -> str:
        """The commit message: summary, body, then the machine trailers."""
        summary, body = self.summary, self.body
        if self.redaction is not Redaction.OFF:  # notes, --why, first words: user text
            from machine_git.secrets.redaction import redact_message

            summary, body = redact_message(summary), redact_message(body)
        text = summary.strip().replace("\n", " ") + "\n"
        if body.strip():
            text += "\n" + body.strip() + "\n"
        trailers = dict(self.trailers)
        if self.redaction is Redaction.OFF:
            trailers["Redaction"] = "off"
        if trailers:
            text += "\n" + "".join(
                f"Machine-{k}: {_one_line(v)}\n" for k, v in trailers.items()
            )
        # git keeps a commit message as a C string: a NUL (from a prompt)
        # would end it there, trailers and all. It is written as \0 instead.
        return text.replace("\0", "\\0")


def _one_line(value: str) -> str:
    return " ".join(str(value).split())


def fit(summary: str, limit: int = 72) -> str:
    """A commit summary on one line of at most ``limit`` characters."""
    summary = " ".join(summary.split())
    return summary if len(summary) <= limit else summary[: limit - 1] + "…"


def check(change: Change, base: Tree | None) -> None:
    """Refuse a change that would write an invalid row, or a secret unasked.

    ``base`` is the tree the change applies to.
    """
    validate_rows(change.files)
    scan = change.redaction is Redaction.CHECK
    if scan:
        refuse_secrets(change.files)
    # Contexts (context/<sha>): valid, named by their hash, and every row's
    # reference resolvable in the tree this commit makes.
    context.check_change(change.files, base, scan=scan)
    # Images (images/<sha>): named by their hash, and resolvable like contexts.
    written = {p for p, d in change.files.items() if d is not None}
    images.check_change(
        change.files,
        lambda path: (
            path in written
            or (change.files.get(path, b"") is not None and context.in_tree(base, path))
        ),
    )


def new_tree(
    repo: pygit2.Repository, base: Tree | None, change: Change, created: list[Oid]
) -> Oid:
    """Write the change's blobs and the tree it makes of ``base``.

    Every object written is added to ``created`` (to be made private).
    """
    # A change of many files never comes here: store.py writes it as one
    # pack (bulk.py), not one loose object per file.
    blobs: dict[str, Oid | None] = {}
    for path, data in change.files.items():
        if data is None:
            blobs[path] = None
        else:
            blobs[path] = repo.create_blob(data)
            created.append(blobs[path])  # type: ignore[arg-type]
    return write_tree(repo, base, blobs, created) or empty_tree(repo, created)


def parse_row(data: bytes, where: str) -> dict[str, Any]:
    """A stored row's JSON, or a StoreError naming the file."""
    return jsonio.load_object(data, where, StoreError, "a JSON object (a row)")


def refuse_secrets(files: Mapping[str, bytes | None]) -> None:
    # The fail-closed default for writers that did not redact: any secret left
    # in a row's content stops the commit before an object is written.
    from machine_git.secrets import redaction

    for path, data in files.items():
        if data is None or rows.id_of_path(path) is None:
            continue
        kinds = redaction.leaks(parse_row(data, path))
        if kinds:
            raise SecretFoundError(
                f"{path}: holds an unredacted secret ({', '.join(kinds)}); "
                "nothing was written"
            )


def validate_rows(files: Mapping[str, bytes | None]) -> None:
    # The last gate before git: nothing under rows/ is written unless it is a
    # valid row, canonical, and stored at the path its id names.
    for path, data in files.items():
        if data is None or not path.startswith(f"{rows.ROWS_DIR}/"):
            continue
        row_id = rows.id_of_path(path)
        if row_id is None:
            raise RowValidationError(
                f"{path}: not a row path (rows/ab/cd/<12 hex>.json)"
            )
        row = parse_row(data, path)
        schemas.check_row(row, path)
        if row.get("id") != row_id:
            raise RowValidationError(
                f"{path}: row id {row.get('id')!r} does not match its path"
            )
        if jsonio.canonical(row) != data:
            raise RowValidationError(f"{path}: not canonical JSON")
