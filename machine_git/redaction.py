"""Redaction before write: the secret scanner applied to rows.

Agent trajectories carry tool output, and tool output carries credentials.
Once bytes are in a git object they travel with every push, so every row is
redacted before it is committed, exported or written with ``--out``. The
identifying fields (id, kind, source, timestamps) are structure, not content,
and are left alone; everything else (messages, trajectory, note, original
answer) is scanned, and the row records how many secrets of each kind were
replaced. Any failure of the scanner is an error: nothing is written.
"""

from __future__ import annotations

from typing import Any

from machine_git import secrets

STRUCTURE = frozenset({"id", "kind", "tag", "created_at", "source", "redactions"})


def redact_row(row: dict[str, Any]) -> tuple[dict[str, Any], dict[str, int]]:
    """A copy of ``row`` with secrets replaced, and what this pass replaced."""
    content = {k: v for k, v in row.items() if k not in STRUCTURE}
    cleaned, found = secrets.redact(content)
    assert isinstance(cleaned, dict)  # redact() keeps the shape it was given
    out = {**row, **cleaned}
    # The field is always written, empty when nothing was found: it records
    # that the row was scanned when it was written, so an export need not
    # scan it again (rows without it, --no-redact ones, are scanned there).
    total = dict(row.get("redactions") or {})
    for kind, count in found.items():
        total[kind] = total.get(kind, 0) + count
    out["redactions"] = dict(sorted(total.items()))
    return out, dict(sorted(found.items()))


def leaks(row: dict[str, Any]) -> list[str]:
    """Kinds of the secrets left in ``row``'s content (empty if none)."""
    kinds: set[str] = set()
    for key, value in row.items():
        if key not in STRUCTURE:
            _scan(value, kinds)
    return sorted(kinds)


def _scan(value: Any, kinds: set[str]) -> None:
    if isinstance(value, str):
        kinds.update(f.kind for f in secrets.scan_text(value))
    elif isinstance(value, dict):
        for item in value.values():
            _scan(item, kinds)
    elif isinstance(value, list):
        for item in value:
            _scan(item, kinds)


def describe(found: dict[str, int]) -> str:
    """``2 secrets (aws-access-key 1, github-token 1)``."""
    total = sum(found.values())
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(found.items()))
    return f"{total} secret{'s' if total != 1 else ''} ({kinds})"
