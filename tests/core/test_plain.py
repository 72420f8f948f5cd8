from __future__ import annotations

import pytest

from machine_git.core.plain import Plain
from machine_git.sessions import ReadReport
from machine_git.store.store import Change
from machine_git.store.store import Redaction


def test_records_compare_by_fields_and_show_them() -> None:
    a = Change("s", {"rows/x": b"1"}, redaction=Redaction.SCANNED)
    assert a == Change("s", {"rows/x": b"1"}, {}, "", Redaction.SCANNED)
    assert a != Change("s", {"rows/x": b"2"}, redaction=Redaction.SCANNED)
    # Fields in __slots__ order (ruff keeps it sorted).
    assert repr(a) == (
        "Change(blobs={}, body='', files={'rows/x': b'1'}, "
        "redaction=<Redaction.SCANNED: 'on'>, stream=None, summary='s', trailers={})"
    )
    assert a != ReadReport("s")  # another class is never equal


def test_defaults_are_fresh_lists_per_instance() -> None:
    one, two = ReadReport("a"), ReadReport("b")
    one.corrupt_lines.append(3)
    assert two.corrupt_lines == []


def test_records_are_mutable_and_unhashable_as_dataclasses_were() -> None:
    change = Change("s", {})
    change.body = "why"
    assert change.body == "why"
    with pytest.raises(TypeError):
        hash(change)
    with pytest.raises(AttributeError):
        change.other = 1  # type: ignore[attr-defined]  # slots: no stray fields


class Pair(Plain):
    __slots__ = ("left", "right")

    def __init__(self, left: int, right: int) -> None:
        self.left = left
        self.right = right


def test_a_new_record_class_needs_only_slots_and_init() -> None:
    assert Pair(1, 2) == Pair(1, 2)
    assert Pair(1, 2) != Pair(2, 1)
    assert repr(Pair(1, 2)) == "Pair(left=1, right=2)"
