from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git.core import jsonio
from machine_git.core.errors import ImportConflictError
from machine_git.core.errors import ImportProblemsError
from machine_git.core.errors import UsageError
from machine_git.export import importer
from machine_git.rows import rows
from machine_git.rows import schemas
from machine_git.store.store import Store
from tests import helpers

MESSAGES = [
    {"role": "user", "content": "a"},
    {"role": "assistant", "content": "b"},
]


def write(path: Path, *values: Any) -> Path:
    path.write_bytes(b"".join(orjson.dumps(v) + b"\n" for v in values))
    return path


def problems(path: Path, kind: str | None = None) -> list[str]:
    with pytest.raises(ImportProblemsError) as caught:
        importer.load(path, kind)
    return caught.value.problems


def test_content_id_is_a_hash_of_the_conversation_alone() -> None:
    body = jsonio.canonical({"messages": MESSAGES})
    assert (
        importer.content_id("messages", MESSAGES)
        == (hashlib.sha256(body).hexdigest()[:12])
    )
    assert importer.content_id("trajectory", MESSAGES) != importer.content_id(
        "messages", MESSAGES
    )


@pytest.mark.parametrize(
    ("line", "kind", "expected"),
    [
        ({"messages": MESSAGES}, None, "train"),
        ({"messages": MESSAGES, "tag": "good"}, None, "train"),
        ({"messages": MESSAGES, "tag": "bad"}, None, "rejected"),
        ({"messages": MESSAGES, "kind": "rejected"}, None, "rejected"),
        ({"messages": MESSAGES}, "rejected", "rejected"),
        ({"trajectory": helpers.trajectory()}, None, "traces"),
        ({"trajectory": helpers.trajectory(), "tag": "bad"}, None, "rejected"),
        ({"trajectory": helpers.trajectory(), "tag": "observed"}, None, "observed"),
        ({"trajectory": helpers.trajectory()}, "observed", "observed"),
    ],
)
def test_the_kind_of_a_line(
    tmp_path: Path, line: dict[str, Any], kind: str | None, expected: str
) -> None:
    loaded = importer.load(write(tmp_path / "f.jsonl", line), kind)
    [row] = loaded.rows
    assert (row["kind"], row["tag"]) == (expected, rows.TAG_OF_KIND[expected])
    assert row["id"] in loaded.generated


def test_kinds_that_disagree_are_problems(tmp_path: Path) -> None:
    path = write(
        tmp_path / "f.jsonl",
        {"messages": MESSAGES, "tag": "bad"},
        {"messages": MESSAGES[::-1], "kind": "train"},
        {"messages": MESSAGES + MESSAGES, "tag": "meh"},
        {"messages": MESSAGES, "kind": "best"},
        helpers.train_row(),
    )
    assert problems(path, "train") == [
        f"{path}:1: $.tag: 'bad' does not fit kind train",
        f"{path}:3: $.tag: unknown tag 'meh' (expected good, bad or observed)",
        f"{path}:4: $.kind: unknown kind 'best'",
    ]
    assert problems(path, "rejected") == [
        f"{path}:2: $.kind: 'train' but --kind rejected",
        f"{path}:3: $.tag: unknown tag 'meh' (expected good, bad or observed)",
        f"{path}:4: $.kind: unknown kind 'best'",
        f"{path}:5: $.kind: 'train' but --kind rejected",
    ]


def test_a_generated_row_takes_time_note_and_source_from_the_line(
    tmp_path: Path,
) -> None:
    path = write(
        tmp_path / "seed.jsonl",
        {
            "messages": MESSAGES,
            "note": "",
            "created_at": "last tuesday",
            "original_answer": "c",
            "tools": [],
            "weight": 1,
        },
    )
    loaded = importer.load(path)
    [row] = loaded.rows
    assert row["created_at"] != "last tuesday"  # not a timestamp: now instead
    assert not schemas.row_problems(row)
    assert row["note"] is None
    assert row["original_answer"] == "c"
    assert row["source"] == {
        "host": "import",
        "session_id": "seed.jsonl:1",
        "session_file": str(path.resolve()),
        "entry_ids": ["line 1"],
    }
    assert "context" not in row  # no system message, no tools
    assert loaded.ignored_keys == {"weight": 1}


def test_blank_lines_count_and_other_shapes_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(
        b"\n"
        + orjson.dumps({"messages": MESSAGES})
        + b"\n  \n[1]\n\xff\xfe\n"
        + orjson.dumps({"messages": MESSAGES, "trajectory": helpers.trajectory()})
        + b"\n"
    )
    found = problems(path)
    assert found[0] == f"{path}:4: $: a line must be a JSON object"
    assert found[1].startswith(f"{path}:5: $: not valid JSON (")
    assert found[2] == (
        f"{path}:6: $: unknown line shape: messages and trajectory (expected "
        "a machine row with kind and id, a messages line, a dpo pair, a trajectory "
        "line or a sharegpt conversation)"
    )
    assert len(found) == 3


def test_problems_name_the_file_as_given(tmp_path: Path) -> None:
    path = write(tmp_path / "f.jsonl", {"messages": "x"})
    with pytest.raises(ImportProblemsError) as caught:
        importer.load(path, name="f.jsonl")
    assert str(caught.value) == "f.jsonl: 1 bad line; nothing imported"
    assert caught.value.problems == [
        'f.jsonl:1: $.messages: "x" is not of type "array"'
    ]


def test_unreadable_file_and_unknown_kind(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"cannot read .*missing\.jsonl: No such file"):
        importer.load(tmp_path / "missing.jsonl")
    with pytest.raises(UsageError, match="unknown kind 'best'"):
        importer.load(tmp_path / "missing.jsonl", "best")


def test_commit_skips_rows_present_and_refuses_changed_ones(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "store")
    first = importer.load(write(tmp_path / "a.jsonl", {"messages": MESSAGES}))
    done = importer.commit(store, first)
    assert (done.added, done.present, done.count) == ({"train": 1}, 0, 1)
    assert done.commit is not None
    head = store.head
    # The same conversation imported again, later and from another file.
    other = tmp_path / "b.jsonl"
    other.write_bytes(b"\n" + orjson.dumps({"messages": MESSAGES}) + b"\n")
    again = importer.load(other)
    assert again.rows[0]["source"]["entry_ids"] == ["line 2"]
    assert importer.commit(store, again) == importer.Imported(
        file=str(other), added={}, present=1, commit=None
    )
    assert store.head == head
    # Another note is another row content: a conflict, and nothing written.
    noted = importer.load(
        write(
            tmp_path / "c.jsonl",
            {"messages": MESSAGES, "note": "new"},
            helpers.train_row(),
        )
    )
    with pytest.raises(ImportConflictError) as caught:
        importer.commit(store, noted)
    assert caught.value.ids == [first.rows[0]["id"]]
    assert store.head == head
