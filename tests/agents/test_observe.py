from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from machine_git import rows
from machine_git import settings
from machine_git.agents import observe
from machine_git.errors import TurnError
from machine_git.errors import UsageError
from machine_git.sessions import pi
from machine_git.store import Store
from tests.conftest import PI_SESSIONS
from tests.conftest import git
from tests.helpers import commit_row
from tests.helpers import train_row


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store.create(tmp_path / "store", tmp_path)


def basic_row(parent: str | None = None) -> dict[str, object]:
    turn, _ = pi.read_turn(PI_SESSIONS / "basic.jsonl")
    return observe.build(turn, parent=parent)


def test_an_observed_row_is_the_whole_run_without_thinking() -> None:
    turn, _ = pi.read_turn(PI_SESSIONS / "basic.jsonl")
    row = observe.build(turn)
    assert row["id"] == rows.make_id("pi", turn.session_id, turn.entry_ids, "observed")
    assert (row["kind"], row["tag"], row["note"]) == ("observed", "observed", None)
    assert row["source"] == turn.source()
    assert row["trajectory"] == [r for r in turn.records if r["role"] != "reasoning"]
    assert [r["role"] for r in row["trajectory"]] == [
        "meta",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    kept = observe.build(turn, reasoning=True)
    assert kept["trajectory"] == turn.records


def test_a_fork_points_at_its_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    assert observe.parent_from_env() is None
    monkeypatch.setenv("MACHINE_FORK_PARENT", "a1b2c3d4e5f6")
    assert observe.parent_from_env() == "a1b2c3d4e5f6"
    assert basic_row("a1b2c3d4e5f6")["source"]["parent_row"] == "a1b2c3d4e5f6"  # type: ignore[index]
    monkeypatch.setenv("MACHINE_FORK_PARENT", "nope")
    with pytest.raises(UsageError, match="MACHINE_FORK_PARENT='nope' is not a row"):
        observe.parent_from_env()


def test_a_failed_run_is_not_observed() -> None:
    turn, _ = pi.read_turn(PI_SESSIONS / "errored.jsonl")
    with pytest.raises(TurnError) as caught:
        observe.build(turn)
    assert str(caught.value) == (
        "the run ended with an error: fake provider: invalid_request_error: "
        "scripted failure for this fixture; nothing observed"
    )


def test_the_same_run_is_recorded_once(store: Store) -> None:
    row = basic_row()
    first = observe.observe(store, row)
    assert first.action == "observed" and first.commit is not None
    again = observe.observe(store, basic_row())
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


def _source_trailer(row: dict[str, object]) -> str:
    source = row["source"]
    assert isinstance(source, dict)
    ids = source["entry_ids"]
    return f"pi {source['session_id']} {ids[0]}..{ids[-1]}"


def test_a_fork_commit_names_its_parent(store: Store) -> None:
    row = basic_row("a1b2c3d4e5f6")
    observe.observe(store, row)
    body = git(store.path, "log", "-1", "--format=%b")
    assert body.startswith("fork of a1b2c3d4e5f6\n\n")
    assert "Machine-Parent: a1b2c3d4e5f6\n" in body


def test_label_good_keeps_the_id_path_and_history(store: Store) -> None:
    row = basic_row()
    observe.observe(store, row)
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
    assert observe.observe(store, basic_row()).action == "duplicate"
    assert store.read_row(str(row["id"])) == done.after


def test_label_bad_with_a_better_answer(store: Store) -> None:
    row = basic_row()
    observe.observe(store, row)
    done = observe.label(store, str(row["id"]), "bad", rewrite="Use ls -la.")
    assert done.after["kind"] == "rejected" and done.after["tag"] == "bad"
    assert done.after["trajectory"][-1]["content"] == "Use ls -la."
    assert done.after["original_answer"] == row["trajectory"][-1]["content"]  # type: ignore[index]


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
    observe.observe(store, row)
    turn, _ = pi.read_turn(PI_SESSIONS / "multi-turn.jsonl")
    other = observe.build(turn)
    observe.observe(store, other)
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


def test_secrets_in_a_run_are_redacted_before_git(store: Store) -> None:
    row = basic_row()
    row["trajectory"][3]["content"] = f"token {TOKEN}\n"  # type: ignore[index]
    done = observe.observe(store, row)
    assert done.redacted == {"github-token": 1}
    stored = store.read_row(str(row["id"]))
    assert stored is not None
    assert stored["trajectory"][3]["content"] == "token [REDACTED:github-token]\n"
    assert stored["redactions"] == {"github-token": 1}
    assert TOKEN not in git(store.path, "show", "HEAD")


def test_no_redact_keeps_secrets_and_says_so(store: Store) -> None:
    row = basic_row()
    row["trajectory"][3]["content"] = f"token {TOKEN}\n"  # type: ignore[index]
    done = observe.observe(store, row, redact=False)
    assert done.redacted == {}
    assert "Machine-Redaction: off\n" in git(store.path, "log", "-1", "--format=%b")


def test_a_label_answer_is_redacted(store: Store) -> None:
    row = basic_row()
    observe.observe(store, row)
    done = observe.label(store, str(row["id"]), "good", rewrite=f"use {TOKEN}")
    assert done.after["trajectory"][-1]["content"] == "use [REDACTED:github-token]"
    assert done.after["redactions"] == {"github-token": 1}
