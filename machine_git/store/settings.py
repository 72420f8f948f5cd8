"""Per-project settings, committed to the store as ``settings.json``.

A setting is part of the dataset's history (``machine log`` shows when
auto-capture was turned on), so it is a commit like any other change. What a
setting may hold is the pydantic model in machine_git/core/models.py,
checked when settings are read or written whole. :func:`auto` answers the
question every finished agent turn asks (``machine observe --if-auto``, the
footer's ``machine data``) from the one value it needs, without loading
pydantic (about 0.25 s of start-up).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING
from typing import Any

from machine_git.core import jsonio
from machine_git.store.store import Change
from machine_git.store.store import Snapshot
from machine_git.store.store import Store

if TYPE_CHECKING:
    from machine_git.core.models import LabelField
    from machine_git.core.models import Settings

SETTINGS = "settings.json"


def read(store: Store) -> Settings:
    """The settings as of the newest commit, defaults filled in (checked)."""
    return _model(stored(store.snapshot()))


def auto(store: Store) -> bool:
    """The ``auto`` setting alone, cheaply; a bad value is the model's error."""
    value = _parsed(store.snapshot())
    flag = value.get("auto", False) if isinstance(value, dict) else None
    return flag if isinstance(flag, bool) else read(store).auto


def image_limit(snap: Snapshot) -> int:
    """The ``image_max_bytes`` setting alone, cheaply (a tag with images asks)."""
    from machine_git.rows import images

    value = _parsed(snap)
    limit = value.get(images.SETTING) if isinstance(value, dict) else None
    if limit is None:
        return images.DEFAULT_MAX_BYTES  # (the model's default; no pydantic)
    if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
        return limit
    return _model(stored(snap)).image_max_bytes  # a bad value: the model says so


def label_schema(snap: Snapshot) -> list[LabelField]:
    """The label schema in force at ``snap`` (empty: only good, bad, rewrite)."""
    from machine_git.core import models

    return list(models.load_settings(stored(snap), SETTINGS).labels)


def stored(snap: Snapshot) -> dict[str, Any]:
    """The settings as written in ``snap`` (only the keys ever set), checked."""
    value = _parsed(snap)
    _model(value)
    assert isinstance(value, dict)  # the model takes only an object
    return value


def _parsed(snap: Snapshot) -> object:
    data = snap.read(SETTINGS)
    if data is None:
        return {}
    try:
        return jsonio.loads(data)
    except ValueError as e:
        from machine_git.core.errors import RecordError

        raise RecordError(f"{SETTINGS}: not valid JSON ({e})") from None


def _model(value: object) -> Settings:
    from machine_git.core import models  # pydantic: only when read whole

    return models.load_settings(value, SETTINGS)


def changed(snap: Snapshot, values: Mapping[str, Any]) -> bytes | None:
    """``settings.json`` with ``values`` set, or None if nothing changes (checked)."""
    before = stored(snap)
    after = {**before, **values}
    if after == before:
        return None
    _model(after)  # nothing invalid is written
    return jsonio.canonical(after)


def update(
    store: Store, values: Mapping[str, Any], summary: str, *, defaults: bool = False
) -> str | None:
    """Set ``values`` in one commit; its id, or None if nothing changed.

    ``defaults``: a value equal to the default of a setting never set is no
    change either (``machine auto off`` on a new store commits nothing).
    """

    def plan(snap: Snapshot) -> Change | None:
        if defaults:
            before, default = stored(snap), _model({})
            if all(
                k not in before and getattr(default, k, object()) == v
                for k, v in values.items()
            ):
                return None
        data = changed(snap, values)
        if data is None:
            return None
        return Change(
            summary=summary,
            files={SETTINGS: data},
            trailers={"Action": "setting", "Setting": ", ".join(values)},
        )

    oid = store.write(plan)
    return None if oid is None else str(oid)


def write(store: Store, key: str, value: Any) -> str | None:
    """Set one setting (``set auto = true``); None if it already had ``value``."""
    return update(
        store, {key: value}, f"set {key} = {jsonio.compact(value)}", defaults=True
    )
