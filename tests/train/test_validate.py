from __future__ import annotations

from typing import Any

import pytest

from machine_git.core.errors import TrainingError
from machine_git.train import validate
from tests import helpers
from tests.train import conftest as support


def _conversation(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"messages": list(messages)}


USER = {"role": "user", "content": "list the files"}
CALL: dict[str, Any] = {
    "role": "assistant",
    "content": "",
    "tool_calls": [
        {
            "type": "function",
            "id": "c1",
            "function": {"name": "bash", "arguments": '{"command":"ls"}'},
        }
    ],
}
RESULT = {"role": "tool", "tool_call_id": "c1", "content": "a.py"}
ANSWER = {"role": "assistant", "content": "One file: a.py."}


def _check(items: list[tuple[str, dict[str, Any]]], **kw: Any) -> validate.Report:
    options: dict[str, Any] = {
        "source": "test",
        "kind": "traces",
        "base_model": support.MODEL,
        "max_length": 32768,
        "batch_size": 1,
        "rows_are_conversations": True,
    }
    options.update(kw)
    return validate.check(items, **options)


def test_a_base_model_whose_renderer_drops_tool_calls_is_refused() -> None:
    # Base models get the role_colon renderer, which renders no tool calls.
    items = [("t:1", _conversation(USER, CALL, RESULT, ANSWER))]
    with pytest.raises(TrainingError) as e:
        _check(items, base_model="Qwen/Qwen3-8B-Base")
    assert str(e.value).startswith(
        "Qwen/Qwen3-8B-Base is not accepted: a base model's renderer (role_colon) "
        "follows no chat template and drops tool calls"
    )
    assert _check(items).problems == []  # qwen3 renders them


def test_rows_longer_than_max_length_warn_and_rows_cut_to_nothing_block() -> None:
    items = [("t:1", _conversation(USER, CALL, RESULT, ANSWER))]
    report = _check(items, max_length=8)  # the user turn alone is longer
    assert [p.line() for p in report.problems] == [
        "blocking  nothing to learn (no trained token within --max-length): t:1",
        "warning  longer than --max-length 8 (truncated): t:1",
    ]
    longer = _check(items, max_length=40)
    assert [p.line() for p in longer.problems] == [
        "warning  longer than --max-length 40 (truncated): t:1"
    ]
    assert longer.blocking == []


def test_arguments_that_are_not_json_do_not_render() -> None:
    bad = {
        **CALL,
        "tool_calls": [
            {
                **CALL["tool_calls"][0],
                "function": {"name": "bash", "arguments": "ls -la"},
            }
        ],
    }
    report = _check([("t:1", _conversation(USER, bad, RESULT, ANSWER))])
    assert [p.line() for p in report.problems] == [
        "blocking  does not render (JSONDecodeError: Expecting value: line 1 column 1 "
        "(char 0)): t:1",
        "blocking  0 rows to train: fewer than one batch of 1 (tag more rows or "
        "lower --batch-size)",
    ]


def test_rows_are_schema_checked_before_rendering() -> None:
    good = helpers.traces_row()
    broken = helpers.traces_row("c1b2c3d4e5f6")
    broken["trajectory"][5]["content"] = ""
    report = _check(
        [("a", good), ("b", broken)], rows_are_conversations=False, batch_size=1
    )
    assert [p.line() for p in report.problems] == [
        f"blocking  schema: {report.problems[0].what.removeprefix('schema: ')}: b"
    ]
    assert report.problems[0].what.startswith("schema: ")
    assert (report.rows, report.trainable, report.sequences) == (2, 1, 2)


def test_token_counts_are_per_row() -> None:
    items = [
        ("a", _conversation(USER, ANSWER)),
        ("b", _conversation(USER, CALL, RESULT, ANSWER)),
        (
            "c",
            _conversation(
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"},
            ),
        ),
    ]
    report = _check(items, batch_size=2)
    stats = report.token_stats()
    assert stats["min"] < stats["median"] < stats["max"]
    assert stats["total"] == sum(report.tokens) and len(report.tokens) == 3
    # qwen3 trains each assistant turn in its own sequence: b gives two; the
    # last batch of a partial size is trained too.
    assert (report.sequences, report.steps) == (4, 2)
    assert report.to_json()["ok"] is True
