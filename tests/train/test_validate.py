from __future__ import annotations

from typing import Any

import pytest

from machine_git.core.errors import TrainingError
from machine_git.train import datasets
from machine_git.train import rendering
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


def _trained_spans(item: dict[str, Any]) -> list[tuple[int, int]]:
    # (first, last) trained token index of each example, as the run renders it
    seen = rendering.rendering(support.MODEL)
    train_on = datasets.train_on_what("traces")
    spans = []
    for one in datasets.render_line(item, seen.renderer, train_on, None):
        trained = [i for i, w in enumerate(one.example[1].tolist()) if w > 0]
        spans.append((trained[0], trained[-1]))
    return spans


def test_examples_cut_by_max_length_block_with_the_row_example_and_the_fix() -> None:
    item = _conversation(USER, CALL, RESULT, ANSWER)
    (first, end1), (start2, end2) = _trained_spans(item)
    assert end1 < start2  # the call's turn, then the answer's
    items = [("t:1", item)]

    def lines(max_length: int) -> list[str]:
        return [p.line() for p in _check(items, max_length=max_length).problems]

    nothing = (
        "blocking  nothing to learn: --max-length {} cuts away every trained token"
    )
    cut = "blocking  cut before its end-of-message token by --max-length {}"
    # shorter than the user turn: neither example keeps a trained token
    assert lines(first) == [
        f"{nothing.format(first)} (raise --max-length to at least {end2 + 1}, or "
        "drop the row): t:1 example 1, t:1 example 2"
    ]
    # the first example is cut inside its trained span, the second has none left
    assert lines(first + 2) == [
        f"{nothing.format(first + 2)} (raise --max-length to at least {end2 + 1}, "
        "or drop the row): t:1 example 2",
        f"{cut.format(first + 2)} (raise --max-length to at least {end1 + 1}, or "
        "drop the row): t:1 example 1",
    ]
    # the answer's end-of-message token is the one token cut away
    assert lines(end2) == [
        f"{cut.format(end2)} (raise --max-length to at least {end2 + 1}, or drop "
        "the row): t:1 example 2"
    ]
    assert lines(end2 + 1) == []
    with pytest.raises(TrainingError) as e:
        validate.refuse_blocking(_check(items, max_length=end2))
    assert str(e.value) == (
        f"refused, nothing was spent: {cut.format(end2).removeprefix('blocking  ')} "
        f"(raise --max-length to at least {end2 + 1}, or drop the row): t:1 example "
        "2; see 'machine train validate'"
    )


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
