"""Redaction before write: the secret scanner applied to rows and messages.

Agent trajectories carry tool output, and tool output carries credentials.
Once bytes are in a git object they travel with every push, so every row is
redacted before it is committed, exported or written with ``--out``, and so
is every commit message and version note that carries words a user or an
agent wrote (notes, ``--why``, first words of a turn). The identifying
fields (id, kind, source, timestamps) are structure, not content, and are
left alone; everything else (messages, trajectory, note, original answer,
and whatever a row gains later, such as a captured system prompt or tool
definitions) is scanned, JSON inside strings included, and the row records
how many secrets of each kind were replaced. Any failure of the scanner is
an error: nothing is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from typing import TypeVar
from typing import cast

from machine_git import secrets

R = TypeVar("R", bound=Mapping[str, Any])

STRUCTURE = frozenset({"id", "kind", "tag", "created_at", "source", "redactions"})
# Keys inside the content whose values the schemas pin to a pattern or a few
# words (trajectory-v1 timestamps, roles, "function"): nothing to scan, and
# a 48 KB trace has about a hundred of them. An image's bytes (``base64``)
# are pixels, not text: the scanner does not read pixels (rows/images.py).
PINNED = frozenset({"timestamp", "role", "type", "sha256", "media_type", "base64"})


def redact_row(row: R) -> tuple[R, dict[str, int]]:
    """A copy of ``row`` with secrets replaced, and what this pass replaced."""
    cleaned, found = secrets.redact(_content(row), PINNED)
    assert isinstance(cleaned, dict)  # redact() keeps the shape it was given
    out: dict[str, Any] = {**row, **cleaned}
    # The field is always written, empty when nothing was found: it records
    # that the row was scanned when it was written, so an export need not
    # scan it again (rows without it, --no-redact ones, are scanned there).
    total = dict(row.get("redactions") or {})
    for kind, count in found.items():
        total[kind] = total.get(kind, 0) + count
    out["redactions"] = dict(sorted(total.items()))
    # The same keys, the same kinds of value: a row stays the row it was.
    return cast(R, out), dict(sorted(found.items()))


def leaks(row: Mapping[str, Any], before: Mapping[str, Any] | None = None) -> list[str]:
    """Kinds of the secrets in ``row``'s content (empty if none).

    With ``before`` (the row as it was), only the secrets ``before`` did not
    already hold: a row tagged with ``--no-redact`` keeps its secrets through
    later moves and edits, and only new ones are refused.
    """
    found = secrets.found_texts(_content(row), PINNED)
    if before is not None and found:
        found -= secrets.found_texts(_content(before), PINNED)
    return sorted({kind for kind, _ in found})


def message_leaks(message: str) -> list[str]:
    """Kinds of the secrets in a commit message's summary and body."""
    head, _, _ = message.partition("\nMachine-")  # the trailers are machine's own
    return sorted({f.kind for f in secrets.scan_text(head)})


def _content(row: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in STRUCTURE}


def redact_message(text: str) -> str:
    """``text`` (a commit message's summary or body) with its secrets replaced."""
    return secrets.redact_text(text)[0] if text else text


def describe(found: dict[str, int]) -> str:
    """``2 secrets (aws-access-key 1, github-token 1)``."""
    total = sum(found.values())
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(found.items()))
    return f"{total} secret{'s' if total != 1 else ''} ({kinds})"
