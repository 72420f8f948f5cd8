from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from machine_git.agents import observe
from machine_git.core.errors import UsageError
from machine_git.rows import rows
from machine_git.rows.rowtypes import Row
from machine_git.secrets import redaction
from machine_git.sessions import pi
from machine_git.store import settings
from machine_git.store.store import Redaction
from machine_git.store.store import Store
from machine_git.tagging import turns
from tests.conftest import PI_SESSIONS
from tests.conftest import git
from tests.helpers import commit_row
from tests.helpers import train_row


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store.create(tmp_path / "store", tmp_path)


def basic_row(parent: str | None = None) -> Row:
    turn, _ = pi.read_turn(PI_SESSIONS / "basic.jsonl")
    return rows.build(turn, label="observed", parent=parent)


def record(store: Store, row: Row) -> turns.Committed:
    """Commit an observed row as machine observe does (scanned for secrets)."""
    return turns.commit(store, redaction.redact_row(row)[0], Redaction.SCANNED)


def test_a_fork_points_at_its_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    assert observe.parent_from_env() is None
    monkeypatch.setenv("MACHINE_FORK_PARENT", "a1b2c3d4e5f6")
    assert observe.parent_from_env() == "a1b2c3d4e5f6"
    monkeypatch.setenv("MACHINE_FORK_PARENT", "nope")
    with pytest.raises(UsageError, match="MACHINE_FORK_PARENT='nope' is not a row"):
        observe.parent_from_env()


def test_the_same_run_is_recorded_once(store: Store) -> None:
    row = basic_row()
    first = record(store, row)
    assert first.action == "observed" and first.commit is not None
    again = record(store, basic_row())
    assert again.action == "duplicate" and again.commit is None
    assert again.row == {**row, "redactions": {}}  # scanned on the way in
    log = git(store.path, "log", "--format=%s%n%b---")
    assert log.split("---\n")[0] == (
        f"observed {row['id']}: Now two-tools: read notes.md and list /nonexiste…\n"
        "Machine-Action: observe\n"
        f"Machine-Row: {row['id']}\n"
        "Machine-Kind: observed\n"
        "Machine-Tag: observed\n"
        f"Machine-Source: {_source_trailer(row)}\n"
    )
    assert git(store.path, "rev-list", "--count", "HEAD") == "2\n"


def _source_trailer(row: Row) -> str:
    source = row["source"]
    ids = source["entry_ids"]
    return f"pi {source['session_id']} {ids[0]}..{ids[-1]}"


def test_a_fork_commit_names_its_parent(store: Store) -> None:
    row = basic_row("a1b2c3d4e5f6")
    record(store, row)
    body = git(store.path, "log", "-1", "--format=%b")
    assert body.startswith("fork of a1b2c3d4e5f6\n\n")
    assert "Machine-Parent: a1b2c3d4e5f6\n" in body


def test_label_good_keeps_the_id_path_and_history(store: Store) -> None:
    row = basic_row()
    record(store, row)
    done = observe.label(store, str(row["id"])[:6], "good", note="right tools")
    assert done.after == {
        **row,
        "kind": "traces",
        "tag": "good",
        "note": "right tools",
        "redactions": {},  # scanned when it was observed
    }
    path = rows.row_path(str(row["id"]))
    stored = orjson.loads(git(store.path, "show", f"HEAD:{path}"))
    assert stored == done.after
    assert git(store.path, "log", "--format=%s", "--", path) == (
        f"label {row['id']} observed -> traces: Now two-tools: read notes.md and…\n"
        f"observed {row['id']}: Now two-tools: read notes.md and list /nonexiste…\n"
    )
    trailers = git(store.path, "log", "-1", "--format=%(trailers)")
    assert trailers == (
        "Machine-Action: label\n"
        f"Machine-Row: {row['id']}\n"
        "Machine-Kind: traces\n"
        "Machine-Tag: good\n"
        "Machine-From: observed\n\n"
    )
    # observing the run again never undoes the label
    assert record(store, basic_row()).action == "duplicate"
    assert store.read_row(str(row["id"])) == done.after


def test_label_bad_with_a_better_answer(store: Store) -> None:
    row = basic_row()
    record(store, row)
    done = observe.label(store, str(row["id"]), "bad", rewrite="Use ls -la.")
    assert done.after["kind"] == "rejected" and done.after["tag"] == "bad"
    assert rows.final_answer(done.after) == "Use ls -la."
    assert done.after["original_answer"] == rows.final_answer(row)


def test_only_observed_rows_are_labeled(store: Store) -> None:
    commit_row(store, train_row())
    with pytest.raises(UsageError) as caught:
        observe.label(store, "a1b2c3d4e5f6", "bad")
    assert str(caught.value) == (
        "row a1b2c3d4e5f6 is a train row, not observed; "
        "use machine move a1b2c3d4e5f6 --to bad"
    )
    with pytest.raises(UsageError, match="label must be good or bad, not 'meh'"):
        observe.label(store, "a1b2c3d4e5f6", "meh")


def test_recent_lists_only_unlabeled_runs(store: Store) -> None:
    row = basic_row()
    record(store, row)
    turn, _ = pi.read_turn(PI_SESSIONS / "multi-turn.jsonl")
    other = rows.build(turn, label="observed")
    record(store, other)
    assert [r["id"] for r in observe.recent(store, 10)] == [other["id"], row["id"]]
    observe.label(store, str(other["id"]), "good")
    assert [r["id"] for r in observe.recent(store, 10)] == [row["id"]]


def test_auto_is_off_without_a_store(tmp_path: Path, store: Store) -> None:
    assert observe.auto_on(tmp_path / "none") is False
    assert not (tmp_path / "none").exists()
    assert observe.auto_on(store.path) is False
    settings.write(store, "auto", True)
    assert observe.auto_on(store.path) is True


TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def test_a_label_answer_is_redacted(store: Store) -> None:
    row = basic_row()
    record(store, row)
    done = observe.label(store, str(row["id"]), "good", rewrite=f"use {TOKEN}")
    assert rows.final_answer(done.after) == "use [REDACTED:github-pat]"
    assert done.after["redactions"] == {"github-pat": 1}
