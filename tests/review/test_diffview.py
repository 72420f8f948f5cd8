from __future__ import annotations

from machine_git.history import diff as diffs
from machine_git.review import diffview
from tests.helpers import train_row


def test_changed_words_are_marked_on_each_side() -> None:
    old, new = diffview.words("It works fine today.", "It works well today!")
    assert old["segments"] == [
        {"op": "same", "text": "It works "},
        {"op": "del", "text": "fine"},
        {"op": "same", "text": " today"},
        {"op": "del", "text": "."},
    ]
    assert new["segments"] == [
        {"op": "same", "text": "It works "},
        {"op": "ins", "text": "well"},
        {"op": "same", "text": " today"},
        {"op": "ins", "text": "!"},
    ]


def test_a_space_between_two_changes_is_part_of_the_change() -> None:
    old, new = diffview.words("a b c d", "a x y d")
    assert old["segments"][1] == {"op": "del", "text": "b c"}
    assert new["segments"][1] == {"op": "ins", "text": "x y"}


def test_values_that_are_not_text_are_shown_whole() -> None:
    field = diffview.field_view(
        diffs.FieldChange("$.trajectory[3]", diffs.MISSING, {"role": "user"})
    )
    assert field["old"] == {"absent": True, "segments": []}
    assert field["new"]["segments"] == [{"op": "ins", "text": '{\n  "role": "user"\n}'}]


def test_added_removed_and_moved_rows() -> None:
    before = train_row()
    after = train_row(kind="rejected", tag="bad")
    added = diffview.row_view(diffs.row_change("a1b2c3d4e5f6", None, before))
    assert added["status"] == "added" and added["old"] is None
    assert added["new"] == {"user": "hi", "answer": "hello", "note": ""}
    removed = diffview.row_view(diffs.row_change("a1b2c3d4e5f6", before, None))
    assert removed["new"] is None and removed["old"] is not None
    moved = diffview.row_view(diffs.row_change("a1b2c3d4e5f6", before, after))
    assert moved["kinds"] == "train → rejected"
    assert [f["path"] for f in moved["fields"]] == ["$.kind", "$.tag"]
