"""Label values and selections: pure data, below the store.

A row's labels (``labels``: ratings, categories, notes, spans of the answer)
are checked against their field by :func:`value_of`; :class:`Where` selects
rows by them (``quality>=4``) for ``machine export`` and ``machine train``;
:func:`rating_field` names the rating DPO pairs compare. The schema itself is
a setting (store/settings.py), and applying labels is a commit
(tagging/labels.py).

"""

from __future__ import annotations

import re
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from typing import Any

from machine_git.core.errors import UsageError
from machine_git.rows import rows

if TYPE_CHECKING:
    from machine_git.core.models import LabelField
    from machine_git.rows.rowtypes import Span

MAX_SPANS = 200
_CRLF = re.compile(r"\r\n?")
_WHERE = re.compile(r"^\s*([a-z][a-z0-9_]*)\s*(>=|<=|!=|=|>|<)\s*(.+?)\s*$")
_SPAN = re.compile(r"^(\d+)-(\d+)(?::(.+))?$")


def rating_field(fields: Sequence[LabelField]) -> str | None:
    """The rating DPO pairs compare: the schema's first."""
    return next((f.name for f in fields if f.type == "rating"), None)


def answer_text(row: Mapping[str, Any]) -> str:
    """The answer spans point into, with line breaks as a page shows them."""
    return _CRLF.sub("\n", rows.final_answer(row) or "")  # type: ignore[arg-type]


def value_of(field: LabelField, raw: object, answer: str) -> int | str | list[Span]:
    """``raw`` as a value of ``field`` (a rating's number, a category's choice,
    a note's text, one span), or one line saying why not."""
    name = field.name
    if field.type == "rating":
        number = raw if isinstance(raw, int) else _int(raw)
        if number is None or not 1 <= number <= field.max:
            raise UsageError(f"{name} is a rating from 1 to {field.max}, not {raw!r}")
        return number
    if field.type == "category":
        if raw not in field.choices:
            raise UsageError(
                f"{name} is one of {', '.join(field.choices)}, not {raw!r}"
            )
        return str(raw)
    if field.type == "note":
        text = str(raw).strip()
        if not text or len(text) > 4000:
            raise UsageError(f"{name} is a note of 1 to 4,000 characters")
        return text
    return [_span(field, raw, answer)]


def _int(raw: object) -> int | None:
    try:
        return int(str(raw))
    except ValueError:
        return None


def _span(field: LabelField, raw: object, answer: str) -> Span:
    if isinstance(raw, str):
        found = _SPAN.match(raw.strip())
        if not found:
            raise UsageError(
                f"{field.name} is a span START-END[:LABEL] of the answer, not {raw!r}"
            )
        raw = {"start": int(found[1]), "end": int(found[2]), "label": found[3]}
    if not isinstance(raw, Mapping):
        raise UsageError(f"{field.name}: a span is START-END[:LABEL]")
    start, end, label = raw.get("start"), raw.get("end"), raw.get("label")
    if not (
        isinstance(start, int)
        and isinstance(end, int)
        and 0 <= start < end <= len(answer)
    ):
        raise UsageError(
            f"{field.name}: the span {start}-{end} is not inside the answer "
            f"({len(answer)} characters)"
        )
    span: Span = {"start": start, "end": end, "text": answer[start:end]}
    if label:
        if field.choices and label not in field.choices:
            raise UsageError(
                f"{field.name}: a span's label is one of {', '.join(field.choices)}, "
                f"not {label!r}"
            )
        span["label"] = str(label)
    return span


@dataclass(frozen=True)
class Where:
    """Conditions on a row's labels, all of which must hold (``quality>=4``,
    ``topic=bugfix``, ``topic!=docs``); an empty Where holds for every row."""

    conditions: tuple[tuple[str, str, str], ...] = ()

    @classmethod
    def parse(cls, words: Sequence[str]) -> Where:
        found = []
        for word in words:
            match = _WHERE.match(word)
            if not match:
                raise UsageError(
                    f"--where {word!r}: expected FIELD OP VALUE, such as quality>=4 "
                    "or topic=bugfix (OP: = != > >= < <=)"
                )
            found.append((match[1], match[2], match[3]))
        return cls(tuple(found))

    def words(self) -> list[str]:
        """The conditions as written (for a run's record)."""
        return [f"{n}{op}{v}" for n, op, v in self.conditions]

    def holds(self, row: Mapping[str, Any]) -> bool:
        labels = row.get("labels")
        values = labels if isinstance(labels, dict) else {}
        return all(_holds(values.get(n), op, v) for n, op, v in self.conditions)


def _holds(value: object, op: str, wanted: str) -> bool:
    if value is None or isinstance(value, list):
        return op == "!=" and value is None
    if isinstance(value, int):
        number = _int(wanted)
        if number is None:
            return False
        return {
            "=": value == number,
            "!=": value != number,
            ">": value > number,
            ">=": value >= number,
            "<": value < number,
            "<=": value <= number,
        }[op]
    if op == "=":
        return value == wanted
    if op == "!=":
        return value != wanted
    return False
