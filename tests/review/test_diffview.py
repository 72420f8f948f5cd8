from __future__ import annotations

import copy
from typing import Any

from machine_git.history import diff as diffs
from machine_git.review import diffview
from tests.helpers import STAMP
from tests.helpers import traces_row
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
    assert field["old"] == {"absent": True, "segments": [], "record": None}
    # A whole trajectory record is shown as a record, not as JSON.
    assert field["new"]["record"] == {
        "role": "user",
        "text": "",
        "calls": [],
        "result": None,
        "call_id": "",
    }
    other = diffview.field_view(diffs.FieldChange("$.note", diffs.MISSING, {"a": 1}))
    assert other["new"]["segments"] == [{"op": "ins", "text": '{\n  "a": 1\n}'}]


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


def with_a_second_call() -> tuple[Any, Any]:
    """A trajectory, and the same with one more call (and its result) and the
    first call's argument changed."""
    before = traces_row()
    after = copy.deepcopy(before)
    records = after["trajectory"]
    records[3]["tool_calls"][0]["args"] = '{"command":"ls -la"}'
    records[5:5] = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c2", "name": "read", "args": '{"path":"a.py","limit":20}'}
            ],
            "timestamp": STAMP,
        },
        {
            "role": "tool",
            "tool_call_id": "c2",
            "content": "print('hi')\n",
            "ok": True,
            "timestamp": STAMP,
        },
    ]
    return before, after


def test_an_inserted_call_reads_as_a_call_with_its_result() -> None:
    before, after = with_a_second_call()
    change = diffview.row_view(diffs.row_change("b1b2c3d4e5f6", before, after))
    labels = [f["label"] for f in change["fields"]]
    assert labels == ["record 3 · tool call bash · argument command", "record 5"]
    changed, inserted = change["fields"]
    assert changed["path"] == "$.trajectory[3].tool_calls[0].args.command"
    assert [s["text"] for s in changed["new"]["segments"] if s["op"] == "ins"] == [
        " -la"
    ]
    assert inserted["old"]["absent"] and inserted["new"]["record"] == {
        "role": "assistant",
        "text": "",
        "calls": [
            {
                "id": "c2",
                "name": "read",
                "args": '{\n  "limit": 20,\n  "path": "a.py"\n}',
                "result": {
                    "text": "print('hi')\n",
                    "error": False,
                    "lines": 1,
                    "images": [],
                },
            }
        ],
        "result": None,
        "call_id": "",
    }


def test_a_result_without_its_call_in_the_change_stays_a_record() -> None:
    before = traces_row()
    after = copy.deepcopy(before)
    after["trajectory"].insert(
        5,
        {"role": "tool", "tool_call_id": "c1", "content": "Error: again", "ok": False},
    )
    change = diffview.row_view(diffs.row_change("b1b2c3d4e5f6", before, after))
    (only,) = change["fields"]
    record = only["new"]["record"]
    assert record is not None and record["role"] == "tool"
    assert record["call_id"] == "c1"
    assert record["result"] == {
        "text": "Error: again",
        "error": True,
        "lines": 1,
        "images": [],
    }
