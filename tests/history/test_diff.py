from __future__ import annotations

from machine_git.history import diff
from machine_git.history.diff import MISSING
from machine_git.history.diff import FieldChange
from tests import helpers


def test_scalar_and_nested_fields_by_json_path() -> None:
    old = {"a": 1, "b": {"c": "x", "d": [1, 2]}, "gone": True}
    new = {"a": 2, "b": {"c": "x", "d": [1, 3, 4]}, "added": None}
    assert diff.diff_values(old, new) == [
        FieldChange("$.a", 1, 2),
        FieldChange("$.added", MISSING, None),
        FieldChange("$.b.d[1]", 2, 3),
        FieldChange("$.b.d[2]", MISSING, 4),
        FieldChange("$.gone", True, MISSING),
    ]


def test_equal_values_of_different_types_differ() -> None:
    assert diff.diff_values({"a": 1}, {"a": True}) == [FieldChange("$.a", 1, True)]


def test_an_inserted_record_is_one_change_not_a_shift() -> None:
    old = helpers.traces_row()
    new = helpers.traces_row()
    extra = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c2", "name": "read", "args": '{"path":"a.py"}'}],
        "timestamp": helpers.STAMP,
    }
    new["trajectory"].insert(3, extra)
    assert diff.diff_values(old, new) == [
        FieldChange("$.trajectory[3]", MISSING, extra)
    ]


def test_tool_call_arguments_are_compared_as_json() -> None:
    old = helpers.traces_row()
    new = helpers.mutate(
        old, ["trajectory", 3, "tool_calls", 0, "args"], '{"command":"ls -la"}'
    )
    assert diff.diff_values(old, new) == [
        FieldChange("$.trajectory[3].tool_calls[0].args.command", "ls", "ls -la")
    ]


def test_tool_result_and_answer_changes_name_their_record() -> None:
    old = helpers.traces_row()
    new = helpers.mutate(old, ["trajectory", 4, "content"], "b.py")
    new = helpers.mutate(new, ["trajectory", 5, "content"], "Done.")
    new = helpers.mutate(new, ["trajectory", 1, "content"], "fix it now")
    assert [c.path for c in diff.diff_values(old, new)] == [
        "$.trajectory[1].content",
        "$.trajectory[4].content",
        "$.trajectory[5].content",
    ]


def test_removed_records_are_reported_at_their_old_index() -> None:
    old = helpers.traces_row()
    new = helpers.mutate(
        old, ["trajectory"], old["trajectory"][:2] + old["trajectory"][5:]
    )
    changes = diff.diff_values(old, new)
    assert [(c.path, c.new) for c in changes] == [
        ("$.trajectory[2]", MISSING),
        ("$.trajectory[3]", MISSING),
        ("$.trajectory[4]", MISSING),
    ]


def test_row_change_classifies_moves() -> None:
    old = helpers.train_row()
    new = helpers.mutate(helpers.mutate(old, ["kind"], "rejected"), ["tag"], "bad")
    change = diff.row_change(old["id"], old, new)
    assert change.status == "moved"
    assert [c.path for c in change.fields] == ["$.kind", "$.tag"]
    assert diff.row_change("x", None, new).status == "added"
    assert diff.row_change("x", old, None).status == "removed"


def test_show_value_truncates() -> None:
    assert diff.show_value("x" * 100, 10) == '"xxxxxxxx…'
    assert diff.show_value(MISSING) == "(absent)"
