"""Labels a project defines: ratings, categories, notes and spans of the answer.

The schema is a setting (``settings.json`` ``labels``, checked by
``core.models.LabelField``), so changing it is a commit like any other. With
none, a row has what it always had: good, bad, a rewrite and a note.

A row's values live in the row (``labels``: ``{"quality": 4, "topic":
"bugfix", "wrong": [{"start": 10, "end": 24, "text": "...", "label":
"made up"}]}``), and every change of them is one commit whose trailers name
each field set (``Machine-Label-quality: 4``), so ``machine log`` and
``git log`` read them. :class:`Where` selects rows by their values
(``quality>=4``, ``topic=bugfix``) for ``machine export`` and ``machine
train``; :func:`rating_field` names the rating DPO pairs compare.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import NamedTuple

from machine_git.core import jsonio
from machine_git.core.errors import UsageError
from machine_git.history import lookup
from machine_git.rows import rows
from machine_git.rows.labels import MAX_SPANS as MAX_SPANS
from machine_git.rows.labels import Where as Where
from machine_git.rows.labels import answer_text as answer_text
from machine_git.rows.labels import rating_field as rating_field
from machine_git.rows.labels import value_of as value_of
from machine_git.secrets import redaction
from machine_git.store import settings
from machine_git.store.store import Change
from machine_git.store.store import Redaction
from machine_git.store.store import Snapshot
from machine_git.store.store import Store
from machine_git.store.store import fit

if TYPE_CHECKING:
    from machine_git.core.models import LabelField
    from machine_git.rows.rowtypes import Labels
    from machine_git.rows.rowtypes import Row
    from machine_git.rows.rowtypes import Span


def schema_of(snap: Snapshot) -> list[LabelField]:
    """The label schema in force at ``snap`` (empty: only good, bad, rewrite)."""
    return settings.label_schema(snap)


def schema(store: Store) -> list[LabelField]:
    """The label schema in force now."""
    return schema_of(store.snapshot())


def set_schema(store: Store, fields: object) -> str | None:
    """Make ``fields`` (a parsed JSON list) the schema, in one commit (checked)."""
    from machine_git.core import models

    if not isinstance(fields, list):
        raise UsageError("a label schema is a JSON list of fields")
    checked = models.load(
        models.Settings, {"labels": fields}, "the label schema", UsageError
    ).labels
    described = ", ".join(f"{f.name} {f.type}" for f in checked)
    return settings.update(
        store,
        {"labels": [f.model_dump(exclude_defaults=True) for f in checked]},
        fit(f"set labels: {described or 'good, bad and rewrite only'}"),
    )


# -- values ----------------------------------------------------------------------


def parse_assignments(
    fields: Sequence[LabelField], assignments: Sequence[str], answer: str
) -> dict[str, int | str | list[Span]]:
    """``NAME=VALUE`` words (``machine label ID quality=4``) as values to set."""
    by_name = {f.name: f for f in fields}
    out: dict[str, int | str | list[Span]] = {}
    for word in assignments:
        name, sep, raw = word.partition("=")
        if not sep or name not in by_name:
            known = ", ".join(by_name) or "none: set a schema with machine labels set"
            raise UsageError(f"{word!r}: expected FIELD=VALUE with a field of {known}")
        value = value_of(by_name[name], raw, answer)
        previous = out.get(name)
        if isinstance(value, list) and isinstance(previous, list):
            value = previous + value  # spans add up
        out[name] = value
    return out


class Applied(NamedTuple):
    """The row after its labels changed, and the commit (None: nothing changed)."""

    row: Row
    commit: str | None


def apply(
    store: Store,
    prefix: str,
    values: Mapping[str, object],
    clear: Sequence[str] = (),
) -> Applied:
    """Set ``values`` (and clear the fields ``clear``) on one row, in one commit.

    Each value is checked against the schema in force (a span against the
    row's answer); spans add to those the field has. Text (notes, spans)
    is scanned for secrets like a new tag.
    """
    row_id = lookup.resolve_id(store, prefix)
    path = rows.row_path(row_id)
    seen: list[Row] = []

    def plan(snap: Snapshot) -> Change | None:
        data = snap.read(path)
        if data is None:
            raise UsageError(f"row {row_id} was removed meanwhile")
        before = rows.parse(data, path)
        by_name = {f.name: f for f in schema_of(snap)}
        unknown = [n for n in [*values, *clear] if n not in by_name]
        if unknown:
            known = ", ".join(by_name) or "none (machine labels set FILE)"
            raise UsageError(f"no label field {unknown[0]!r}; the schema has {known}")
        answer = answer_text(before)
        after = copy.deepcopy(before)
        labels: Labels = dict(after.get("labels") or {})
        changed: dict[str, str] = {}
        for name, raw in values.items():
            field = by_name[name]
            if isinstance(raw, list) and field.type == "spans":
                value: int | str | list[Span] = [
                    s for item in raw for s in _spans(value_of(field, item, answer))
                ]
            else:
                value = value_of(field, raw, answer)
            if isinstance(value, list):
                old = labels.get(name)
                value = [*(old if isinstance(old, list) else []), *value]
                if len(value) > MAX_SPANS:
                    raise UsageError(f"{name}: at most {MAX_SPANS} spans")
            labels[name] = value
            changed[name] = _trailer(value)
        for name in clear:
            if labels.pop(name, None) is not None:
                changed[name] = "(cleared)"
        if labels:
            after["labels"] = labels
        else:
            after.pop("labels", None)
        if after == before:
            seen[:] = [before]
            return None
        after, _ = redaction.redact_row(after)
        seen[:] = [after]
        said = " ".join(f"{k}={v}" for k, v in changed.items())
        return Change(
            summary=fit(f"labels {row_id}: {said}"),
            files={path: jsonio.canonical(after)},
            trailers={
                "Action": "labels",
                "Row": row_id,
                **{f"Label-{k.replace('_', '-')}": v for k, v in changed.items()},
            },
            redaction=Redaction.SCANNED,
        )

    oid = store.write(plan)
    return Applied(seen[0], None if oid is None else str(oid))


def _spans(value: int | str | list[Span]) -> list[Span]:
    return value if isinstance(value, list) else []


def _trailer(value: int | str | list[Span]) -> str:
    if isinstance(value, list):
        return f"{len(value)} span{'' if len(value) == 1 else 's'}"
    text = str(value)
    return text if len(text) <= 60 else text[:59] + "…"
