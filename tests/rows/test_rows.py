"""Rows: ids and paths, building a row from a turn, judging and answers."""

from __future__ import annotations

import pytest

from machine_git.core.errors import StoreError
from machine_git.core.errors import TurnError
from machine_git.core.errors import UsageError
from machine_git.rows import rows
from machine_git.rows import schemas
from machine_git.sessions import Turn
from machine_git.sessions import pi
from tests.conftest import PI_SESSIONS
from tests.helpers import loose
from tests.helpers import traces_row
from tests.helpers import train_row

STAMP = "2026-11-29T10:00:00.000Z"


def turn(name: str = "basic") -> Turn:
    return pi.read_turn(PI_SESSIONS / f"{name}.jsonl")[0]


def test_an_id_is_the_turn_and_its_shape() -> None:
    a = rows.make_id("pi", "s1", ["e1", "e2", "e3"], "answer")
    assert a == rows.make_id("pi", "s1", ["e1", "x", "e3"], "answer")  # ends only
    assert a != rows.make_id("pi", "s1", ["e1", "e2", "e3"], "trace")
    assert a != rows.make_id("pi", "s2", ["e1", "e2", "e3"], "answer")
    assert len(a) == rows.ID_LENGTH and int(a, 16) >= 0


def test_a_row_lives_two_levels_down_and_is_found_again() -> None:
    assert rows.row_path("a1b2c3d4e5f6") == "rows/a1/b2/a1b2c3d4e5f6.json"
    assert rows.id_of_path("rows/a1/b2/a1b2c3d4e5f6.json") == "a1b2c3d4e5f6"
    for other in (
        "rows/a1/b3/a1b2c3d4e5f6.json",  # the wrong fan-out folder
        "rows/a1/b2/a1b2c3d4e5f6.txt",
        "rows/a1/b2/A1B2C3D4E5F6.json",
        "settings.json",
    ):
        assert rows.id_of_path(other) is None, other


def test_ids_and_prefixes_are_checked_in_one_line() -> None:
    with pytest.raises(UsageError) as caught:
        rows.row_path("../../etc")
    assert str(caught.value) == "bad row id '../../etc': expected 12 hex characters"
    assert rows.check_prefix("a1b") == "a1b"
    with pytest.raises(UsageError, match="expected 1 to 12 hex characters"):
        rows.check_prefix("a1b2c3d4e5f6a")


def test_a_stored_row_that_is_not_an_object_names_its_file() -> None:
    assert loose(rows.parse(b'{"id": "x"}', "rows/x.json")) == {"id": "x"}
    with pytest.raises(StoreError, match=r"^rows/x\.json: "):
        rows.parse(b"[1]", "rows/x.json")


def test_a_good_answer_row_is_the_question_and_the_answer() -> None:
    t = turn()
    row = rows.build(t, label="good", note="clear", created_at=STAMP)
    assert row == {
        "id": rows.make_id("pi", t.session_id, t.entry_ids, "answer"),
        "kind": "train",
        "tag": "good",
        "created_at": STAMP,
        "note": "clear",
        "source": t.source(),
        "context": None,  # this Pi session predates the context it records
        "messages": [
            {"role": "user", "content": t.user_text},
            {"role": "assistant", "content": t.answer},
        ],
    }
    assert schemas.row_problems(row) == []


def test_a_trace_keeps_the_turn_and_a_rewrite_keeps_the_first_answer() -> None:
    t = turn()
    row = loose(rows.build(t, label="bad", trace=True, rewrite="Say less."))
    assert (row["kind"], row["tag"]) == ("rejected", "bad")
    assert row["id"] == rows.make_id("pi", t.session_id, t.entry_ids, "trace")
    assert [r["role"] for r in row["trajectory"]] == [
        "meta",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]  # no thinking unless asked for
    assert row["trajectory"][-1]["content"] == "Say less."
    assert row["original_answer"] == t.answer
    kept = loose(rows.build(t, label="good", trace=True, reasoning=True))
    assert kept["trajectory"] == t.records
    assert schemas.row_problems(row) == [] and schemas.row_problems(kept) == []


def test_an_observed_row_is_the_whole_run_pointing_at_its_parent() -> None:
    t = turn()
    row = loose(rows.build(t, label="observed", parent="a1b2c3d4e5f6"))
    assert row["id"] == rows.make_id("pi", t.session_id, t.entry_ids, "observed")
    assert (row["kind"], row["tag"], row["note"]) == ("observed", "observed", None)
    assert row["source"] == {**t.source(), "parent_row": "a1b2c3d4e5f6"}
    assert row["trajectory"] == [r for r in t.records if r["role"] != "reasoning"]
    assert schemas.row_problems(row) == []


def test_a_row_carries_its_turn_s_context_inline_unless_left_out() -> None:
    t = turn("context")
    assert t.context is not None and t.context["system"]
    for label in ("good", "observed"):
        assert rows.build(t, label=label).get("context") == t.context
        assert rows.build(t, label=label, context=False).get("context") is None


def test_a_failed_turn_is_kept_by_bad_only() -> None:
    t = turn("errored")
    with pytest.raises(TurnError) as caught:
        rows.build(t, label="good")
    assert str(caught.value) == (
        "the last turn ended with an error: fake provider: invalid_request_error: "
        "scripted failure for this fixture; nothing tagged "
        "(machine bad keeps a failed turn)"
    )
    with pytest.raises(TurnError) as caught:
        rows.build(t, label="observed")
    assert str(caught.value) == (
        "the run ended with an error: fake provider: invalid_request_error: "
        "scripted failure for this fixture; nothing observed"
    )
    kept = rows.build(t, label="bad")
    assert kept.get("failure") == {"stop_reason": "error", "error": t.error}
    assert schemas.row_problems(kept) == []


def test_judging_moves_a_row_by_its_shape() -> None:
    answer, trace = train_row(), traces_row(kind="observed", tag="observed")
    assert rows.shape_kind(answer, "bad") == "rejected"
    assert rows.shape_kind(trace, "good") == "traces"
    moved = rows.with_kind(answer, "rejected")
    assert (moved["kind"], moved["tag"], answer["kind"]) == ("rejected", "bad", "train")
    judged = loose(rows.judged(trace, "good", "right tool", "Fixed, with ls."))
    assert (judged["kind"], judged["tag"], judged["note"]) == (
        "traces",
        "good",
        "right tool",
    )
    assert judged["trajectory"][-1]["content"] == "Fixed, with ls."
    assert judged["original_answer"] == "Fixed."
    assert trace["trajectory"][-1]["content"] == "Fixed."  # a copy was judged
    assert schemas.row_problems(judged) == []


def test_the_final_answer_is_the_last_words_said() -> None:
    row = traces_row()
    assert rows.final_answer(row) == "Fixed."
    rows.rewrite_answer(row, "Done.")
    rows.rewrite_answer(row, "Done, really.")
    assert rows.final_answer(row) == "Done, really."
    assert row["original_answer"] == "Fixed."  # the agent's, not the first rewrite
    silent = train_row(messages=[{"role": "user", "content": "hi"}])
    assert rows.final_answer(silent) is None
    rows.set_final_answer(silent, "hello")
    assert silent["messages"][-1] == {"role": "assistant", "content": "hello"}
    calls = traces_row()
    calls["trajectory"] = calls["trajectory"][:5]  # ends on a tool result
    rows.set_final_answer(calls, "Listed.")
    assert calls["trajectory"][-1] == {
        "role": "assistant",
        "content": "Listed.",
        "timestamp": calls["trajectory"][-2]["timestamp"],
    }
    with pytest.raises(UsageError, match="has no conversation to rewrite"):
        rows.set_final_answer({"id": "a1b2c3d4e5f6"}, "x")  # type: ignore[arg-type]


def test_first_words_are_the_question_on_one_line() -> None:
    row = train_row(messages=[{"role": "user", "content": "fix\n  the   build"}])
    assert rows.first_words(row) == "fix the build"
    assert (
        rows.first_words(
            train_row(messages=[{"role": "user", "content": "x" * 70}]), 10
        )
        == "x" * 9 + "…"
    )
    assert rows.first_words({"messages": "not a list"}) == ""
