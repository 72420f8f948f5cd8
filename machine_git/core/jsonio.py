"""Canonical JSON: the one byte form rows take in git, so git's diffs are stable."""

from __future__ import annotations

from datetime import UTC
from datetime import datetime
from typing import Any

import orjson

# Sorted keys and a fixed two-space indent: the same row always gives the same
# bytes, and a change to one field changes only that field's lines.
_CANONICAL = orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE

JSONDecodeError = orjson.JSONDecodeError


def canonical(value: Any) -> bytes:
    """Serialize ``value`` as canonical JSON (sorted keys, indent 2, newline)."""
    return orjson.dumps(value, option=_CANONICAL)


def ordered(value: Any) -> bytes:
    """``value`` as canonical JSON keeps it (indent 2, newline), in its own
    key order: for data whose order means something (an agent's tools)."""
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)


def line(value: Any) -> bytes:
    """Serialize ``value`` as one JSONL line with sorted keys."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE)


def fragment(value: Any) -> orjson.Fragment:
    """``value`` serialized now, compactly, in its own key order: inside a
    :func:`line` it is written as is (not sorted)."""
    return orjson.Fragment(orjson.dumps(value))


def timestamp(seconds: float) -> str:
    """A moment as every ``--json`` report shows it: ISO 8601 with its offset.

    ``2026-12-01T04:09:00+00:00``: UTC, to the second (git's commit times
    have no finer grain), parsed back by ``datetime.fromisoformat`` anywhere.
    """
    return datetime.fromtimestamp(int(seconds), tz=UTC).isoformat()


def loads(data: bytes | str) -> Any:
    """Parse JSON; raises :class:`JSONDecodeError` (a ``ValueError``)."""
    return orjson.loads(data)


def load_object(
    data: bytes, where: str, error: type[Exception], what: str = "a JSON object"
) -> dict[str, Any]:
    """Parse ``data`` as a JSON object, or raise ``error`` naming ``where``."""
    try:
        value = loads(data)
    except JSONDecodeError as e:
        raise error(f"{where}: not valid JSON ({e})") from None
    if not isinstance(value, dict):
        raise error(f"{where}: not {what}")
    return value


def compact(value: Any) -> str:
    """Serialize ``value`` compactly (tool-call arguments, messages)."""
    return orjson.dumps(value).decode()
