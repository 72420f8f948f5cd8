from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from machine_git.cli import export as cli_export
from machine_git.core import jsonio
from machine_git.core.errors import FileWriteError
from machine_git.core.errors import UsageError
from machine_git.export import export
from machine_git.rows.rowtypes import Row
from machine_git.store.store import Redaction
from machine_git.store.store import Store
from machine_git.tagging import turns
from tests import helpers

STAMP = helpers.STAMP
CALL = {
    "type": "function",
    "id": "c1",
    "function": {"name": "bash", "arguments": '{"command":"ls"}'},
}


def test_trajectory_to_messages_keeps_the_conversation() -> None:
    expected: list[dict[str, Any]] = [
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {"role": "assistant", "content": "Fixed."},
    ]
    records = helpers.trajectory()
    assert export.trajectory_to_messages(records, null_content=True) == expected
    expected[1]["content"] = ""
    assert export.trajectory_to_messages(records, null_content=False) == expected


def test_text_then_calls_merge_and_other_records_are_dropped_or_kept() -> None:
    calls = {"role": "assistant", "content": None, "timestamp": STAMP}
    records: list[Any] = [  # partial records: only what the conversion reads
        {"role": "meta", "source": "pi"},
        {"role": "system", "content": "be brief", "timestamp": STAMP},
        {"role": "user", "content": "go", "timestamp": STAMP},
        {"role": "observation", "content": "file changed", "timestamp": STAMP},
        {"role": "assistant", "content": "First a look.", "timestamp": STAMP},
        {**calls, "tool_calls": [{"id": "c1", "name": "bash", "args": "{}"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok", "timestamp": STAMP},
        {"role": "assistant", "content": "Thinking aloud.", "timestamp": STAMP},
        {"role": "reasoning", "content": "hidden", "timestamp": STAMP},
        {**calls, "tool_calls": [{"id": "c2", "name": "bash", "args": "{}"}]},
        {"role": "tool", "tool_call_id": "c2", "content": "ok", "timestamp": STAMP},
        {"role": "assistant", "content": "One.", "timestamp": STAMP},
        {"role": "assistant", "content": "Two.", "timestamp": STAMP},
    ]

    def call(call_id: str) -> dict[str, Any]:
        return {
            "type": "function",
            "id": call_id,
            "function": {"name": "bash", "arguments": "{}"},
        }

    assert export.trajectory_to_messages(records, null_content=True) == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "First a look.", "tool_calls": [call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        # Reasoning is dropped, so it does not keep text and calls apart.
        {"role": "assistant", "content": "Thinking aloud.", "tool_calls": [call("c2")]},
        {"role": "tool", "tool_call_id": "c2", "content": "ok"},
        {"role": "assistant", "content": "One."},
        {"role": "assistant", "content": "Two."},
    ]


def test_tinker_gives_tool_call_messages_string_content() -> None:
    row = next(r for r in helpers.valid_rows() if r["id"] == "f1b2c3d4e5f6")
    tinker = export.render(row, "tinker")
    openai = export.render(row, "openai")
    assert tinker is not None and openai is not None
    assert tinker["messages"][2] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "type": "function",
                "id": "c1",
                "function": {"name": "bash", "arguments": "{}"},
            }
        ],
    }
    assert openai["messages"][2]["content"] is None
    assert openai["messages"][3] == {
        "role": "tool",
        "content": "a.py",
        "tool_call_id": "c1",
        "name": "bash",
    }
    assert row["messages"][2]["content"] is None  # the row itself is untouched


def test_dpo_needs_an_original_answer_and_a_rewrite() -> None:
    rejected = helpers.train_row(kind="rejected", tag="bad")
    assert export.to_dpo(rejected) is None
    assert export.to_openai_dpo(rejected) is None
    rewritten = helpers.train_row(
        kind="rejected", tag="bad", original_answer="hi there"
    )
    assert export.to_openai_dpo(rewritten) == {
        "input": {"messages": [{"role": "user", "content": "hi"}]},
        "preferred_output": [{"role": "assistant", "content": "hello"}],
        "non_preferred_output": [{"role": "assistant", "content": "hi there"}],
    }
    assert export.to_dpo(rewritten) == {
        "comparison": {
            "prompt_conversation": [{"role": "user", "content": "hi"}],
            "completion_A": [{"role": "assistant", "content": "hello"}],
            "completion_B": [{"role": "assistant", "content": "hi there"}],
        },
        "label": "A",
    }
    same = helpers.train_row(kind="rejected", tag="bad", original_answer="hello")
    assert export.to_dpo(same) is None
    ends_on_calls = helpers.traces_row(kind="rejected", tag="bad", original_answer="x")
    ends_on_calls["trajectory"] = ends_on_calls["trajectory"][:4]
    assert export.to_dpo(ends_on_calls) is None
    assert export.to_openai_dpo(ends_on_calls) is None


def test_the_context_leads_the_conversation_and_gives_the_tools() -> None:
    row = helpers.traces_row(context=helpers.CONTEXT)
    system = {"role": "system", "content": helpers.CONTEXT["system"]}
    tinker = export.render(row, "tinker")
    openai = export.render(row, "openai")
    assert tinker is not None and openai is not None
    assert tinker["messages"][0] == system
    assert tinker["tools"] == helpers.CONTEXT["tools"]
    assert openai["messages"][0] == system
    assert openai["tools"] == [
        {"type": "function", "function": helpers.CONTEXT["tools"][0]}
    ]
    plain = export.render(helpers.traces_row(), "tinker")
    assert export.render(row, "tinker", with_context=False) == plain
    assert plain is not None and "tools" not in plain
    assert tinker["messages"][1:] == plain["messages"]
    # a conversation with a system message of its own keeps it
    own = helpers.train_row(context=helpers.CONTEXT)
    own["messages"].insert(0, {"role": "system", "content": "be brief"})
    mine = export.render(own, "openai")
    assert mine is not None
    assert [m["content"] for m in mine["messages"][:2]] == ["be brief", "hi"]
    # the pair formats carry the tools as well
    pair = helpers.traces_row(
        context=helpers.CONTEXT, kind="rejected", tag="bad", original_answer="nope"
    )
    dpo = export.render(pair, "dpo")
    openai_dpo = export.render(pair, "openai-dpo")
    assert dpo is not None and openai_dpo is not None
    assert dpo["tools"] == helpers.CONTEXT["tools"]
    assert dpo["comparison"]["prompt_conversation"][0] == system
    assert openai_dpo["input"]["tools"] == openai["tools"]


def test_kinds_come_in_a_fixed_order() -> None:
    assert export.normalize_kinds(["traces", "train", "traces"], "tinker") == (
        "train",
        "traces",
    )
    assert export.normalize_kinds([], "openai") == ("train",)
    assert export.normalize_kinds([], "dpo") == ("rejected",)
    with pytest.raises(UsageError, match="unknown kind 'bogus'"):
        export.normalize_kinds(["bogus"], "tinker")
    with pytest.raises(UsageError, match="unknown format 'csv'"):
        export.render(helpers.train_row(), "csv")


def test_the_cli_offers_the_library_formats() -> None:
    assert cli_export.FORMATS == export.FORMATS


def _store(tmp_path: Path, *rows: Row) -> Store:
    store = Store.create(tmp_path / "store")
    for row in rows:
        turns.commit(store, row, Redaction.CHECK)
    return store


def test_every_row_passes_through_prepare(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path, helpers.train_row())

    def shout(row: dict[str, Any], redact: bool = True) -> dict[str, Any]:
        messages = [{**m, "content": m["content"].upper()} for m in row["messages"]]
        return {**row, "messages": messages}

    monkeypatch.setattr(export, "_prepare", shout)
    tally = export.Tally()
    head = store.head
    assert head is not None
    out = list(export.lines(store, head, "openai", ("train",), tally))
    assert out == [
        jsonio.line(
            {
                "messages": [
                    {"role": "user", "content": "HI"},
                    {"role": "assistant", "content": "HELLO"},
                ]
            }
        )
    ]
    assert (tally.rows, tally.skipped) == (1, 0)


def test_a_failed_export_leaves_the_old_file_and_no_temp_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path, helpers.train_row(), helpers.train_row("a2b2c3d4e5f6"))
    head = store.head
    assert head is not None
    folder = tmp_path / "out"
    folder.mkdir()
    target = folder / "data.jsonl"
    first = export.write_file(store, head, None, "tinker", ("train",), target)
    old = target.read_bytes()
    assert first.rows == 2 and old.count(b"\n") == 2

    def boom(row: dict[str, Any], redact: bool = True) -> dict[str, Any]:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export, "_prepare", boom)
    with pytest.raises(FileWriteError) as e:
        export.write_file(store, head, None, "tinker", ("train",), target)
    assert str(e.value) == (
        f"cannot write {target}: no space left on the device; nothing was written"
    )
    assert target.read_bytes() == old
    assert sorted(os.listdir(folder)) == ["data.jsonl", "data.jsonl.manifest.json"]


class Recorder:
    """A Progress that remembers what it heard."""

    def __init__(self) -> None:
        self.heard: list[tuple[str, object]] = []

    def begin(self, label: str, total: int | None) -> None:
        self.heard.append(("begin", (label, total)))

    def advance(self, count: int = 1) -> None:
        self.heard.append(("advance", count))

    def end(self) -> None:
        self.heard.append(("end", None))


def test_progress_counts_every_row_in_one_stage(tmp_path: Path) -> None:
    store = _store(tmp_path, helpers.train_row(), helpers.train_row("a2b2c3d4e5f6"))
    head = store.head
    assert head is not None
    heard = Recorder()
    export.write_file(
        store, head, "HEAD", "openai", ("train",), tmp_path / "x.jsonl", heard
    )
    # No count kept: the total is not known before the rows are read.
    assert heard.heard[0] == ("begin", ("exporting rows", None))
    assert heard.heard[-1] == ("end", None)
    steps = heard.heard[1:-1]
    assert {name for name, _ in steps} == {"advance"}
    assert sum(n for _, n in steps if isinstance(n, int)) == 2


def test_a_missing_folder_is_one_line(tmp_path: Path) -> None:
    store = _store(tmp_path, helpers.train_row())
    head = store.head
    assert head is not None
    target = tmp_path / "nowhere" / "x.jsonl"
    with pytest.raises(
        UsageError, match=re.escape(f"cannot write {target}: No such file")
    ):
        export.write_file(store, head, None, "tinker", ("train",), target)
