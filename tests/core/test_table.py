"""Listings fit the terminal: padded columns, only the free text cut."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git.core import paths
from machine_git.core import table
from tests.conftest import Run
from tests.conftest import git
from tests.conftest import install_session

WIDE = 200


def test_clip_keeps_what_fits_and_marks_a_cut() -> None:
    assert table.clip("abcdef", 6) == "abcdef"
    assert table.clip("abcdef", 5) == "abcd…"
    assert table.clip("abcdef", 1) == "…"
    assert table.clip("abcdef", 0) == ""


def test_rows_pad_every_column_and_cut_only_the_free_one() -> None:
    listing = [("a1", "train", "a long free text here"), ("b22", "rejected", "short")]
    assert table.rows(listing, free=2, columns=24) == [
        "a1   train     a long f…",
        "b22  rejected  short",
    ]
    # Too narrow even for the fixed columns: they stay whole, the free text
    # keeps one character.
    assert table.rows(listing, free=2, columns=10) == [
        "a1   train     …",
        "b22  rejected  …",
    ]
    # A free column in the middle is padded to what it got.
    assert table.rows([("id1", "some words", "x")], free=1, columns=14) == [
        "id1  some …  x"
    ]


def test_an_end_such_as_a_note_stays_whole_while_it_fits_half() -> None:
    listing = [
        ("a1", "a long prompt here  (note)"),
        ("b2", "prompt  (a much longer note)"),
    ]
    ends = ["  (note)", "  (a much longer note)"]
    assert table.rows(listing, free=1, columns=22, ends=ends) == [
        "a1  a long pr…  (note)",
        "b2  prompt  (a much l…",
    ]


def test_pair_shares_the_width_between_old_and_new() -> None:
    assert table.pair("  p: ", "old", "new", 80) == "  p: old -> new"
    assert table.pair("  p: ", "o" * 30, "new", 20) == "  p: ooooooo… -> new"
    assert table.pair("  p: ", "old", "n" * 30, 20) == "  p: old -> nnnnnnn…"
    assert table.pair("  p: ", "o" * 30, "n" * 30, 21) == "  p: ooooo… -> nnnnn…"


def test_width_is_columns_else_80_when_not_a_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert table.width() == 80  # pytest's stdout is no terminal
    monkeypatch.setenv("COLUMNS", "132")
    assert table.width() == 132
    monkeypatch.setenv("COLUMNS", "wide")
    assert table.width() == 80


# -- through the CLI -------------------------------------------------------------


def _tag_three(project: Path, run: Run) -> list[dict[str, Any]]:
    install_session(project, "basic")
    run("good", "a note long enough to be cut at eighty columns")
    run("good", "--trace")
    install_session(project, "multi-turn")
    run("bad", "too", "terse")
    listed: list[dict[str, Any]] = orjson.loads(run("tagged", "--json").stdout)
    return listed


def _prompt(row: dict[str, Any]) -> str:
    messages = row.get("messages") or row.get("trajectory") or []
    first = next(m for m in messages if m["role"] == "user")
    return " ".join(str(first["content"]).split())


def _cut(text: str, room: int) -> str:
    return text if len(text) <= room else text[: room - 1] + "…"


@pytest.mark.parametrize("columns", [80, WIDE])
def test_tagged_fits(
    project: Path, run: Run, monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    found = _tag_three(project, run)
    monkeypatch.setenv("COLUMNS", str(columns))
    lines = run("tagged").stdout.splitlines()
    if columns == 80:
        assert lines[0].endswith("…  (too terse)")  # the prompt is cut, not the note
    room = columns - (12 + 2 + 8 + 2 + 16 + 2)  # id, kind, time: never cut
    expected = []
    for row in found:
        note = f"  ({row['note']})" if row["note"] else ""
        text = _prompt(row) + note
        if len(text) > room and note and len(note) <= room // 2:
            text = _cut(_prompt(row), room - len(note)) + note  # the note stays
        stamp = row["created_at"][:16].replace("T", " ")
        expected.append(f"{row['id']}  {row['kind']:<8}  {stamp}  {_cut(text, room)}")
    assert lines == expected
    assert max(map(len, lines)) <= columns
    assert (max(map(len, lines)) == columns) == (columns == 80)  # cut only at 80


@pytest.mark.parametrize("columns", [80, WIDE])
def test_log_fits(
    project: Path, run: Run, monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    _tag_three(project, run)
    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.setenv("TZ", "UTC")  # git's format-local below: UTC, as machine's
    lines = run("log").stdout.splitlines()
    store = paths.store_path(project)
    commits = git(
        store,
        "log",
        "--date=format-local:%Y-%m-%d %H:%M",
        "--format=%H%x09%cd%x09%(trailers:key=Machine-Action,valueonly,separator=)%x09%s",
    ).splitlines()
    assert lines == [
        f"{sha[:12]}  {when}  {action:<4}  {_cut(subject, columns - 38)}"
        for sha, when, action, subject in (c.split("\t") for c in commits)
    ]
    assert max(map(len, lines)) <= columns


@pytest.mark.parametrize("columns", [80, WIDE])
def test_diff_fits(
    project: Path, run: Run, monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    found = _tag_three(project, run)
    row = found[-1]  # the train row, tagged first
    run("rewrite", row["id"], "--as", "Short.")
    monkeypatch.setenv("COLUMNS", str(columns))
    lines = run("diff").stdout.splitlines()
    old = orjson.dumps(row["messages"][-1]["content"]).decode()
    head = "    $.messages[1].content: "
    room = columns - len(head) - len(" -> ") - len('"Short."')
    assert lines[2:] == [
        f"modified  {row['id']}  train  {_cut(_prompt(row), columns - 31)}",
        f'{head}{_cut(old, room)} -> "Short."',
        f"    $.original_answer: (absent) -> {_cut(old, columns - 35)}",
    ]
    assert max(map(len, lines)) <= columns


@pytest.mark.parametrize("columns", [80, WIDE])
def test_data_fits_and_never_cuts_a_path(
    project: Path, run: Run, monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    _tag_three(project, run)
    monkeypatch.setenv("COLUMNS", str(columns))
    lines = run("data").stdout.splitlines()
    store = paths.store_path(project)
    sha, subject = git(store, "log", "-1", "--format=%H%x09%s").strip().split("\t")
    when = orjson.loads(run("data", "--json").stdout)["head"]["time"]
    end = f" ({when[:10]} {when[11:16]} UTC)"
    room = columns - len("head     ") - 13 - len(end)
    assert lines == [
        f"store    {store}",
        f"project  {project}",
        "rows     3 (train 1, traces 1, rejected 1, observed 0)",
        "auto     off",
        "images   at most 5,000,000 bytes each",
        f"head     {sha[:12]} {_cut(subject, room)}{end}",
    ]
    assert max(map(len, lines[2:])) <= columns  # paths are ids: whole, always


@pytest.mark.parametrize("columns", [80, WIDE])
def test_versions_fit(
    project: Path, run: Run, monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    _tag_three(project, run)
    long_name = "with-traces-the-release-candidate-of-december"  # after v1
    run("version", "v1", "HEAD~1")
    run("version", long_name)
    monkeypatch.setenv("COLUMNS", str(columns))
    lines = run("versions").stdout.splitlines()
    store = paths.store_path(project)
    v1 = git(store, "rev-parse", "v1^{commit}")[:12]
    v2 = git(store, "rev-parse", f"{long_name}^{{commit}}")[:12]
    room = columns - len(long_name) - 2 - 12 - 2
    assert lines == [
        f"{'v1':<{len(long_name)}}  {v1}  "
        + _cut("2 rows (train 1, traces 1, rejected 0, observed 0)", room),
        f"{long_name}  {v2}  "
        + _cut("3 rows (train 1, traces 1, rejected 1, observed 0)", room),
    ]
    assert max(map(len, lines)) <= columns
