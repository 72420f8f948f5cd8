"""machine labels: a schema of the project's own, and labels as commits."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from machine_git.core import paths
from machine_git.core.errors import USAGE
from machine_git.core.errors import UsageError
from machine_git.rows import rows
from machine_git.tagging import labels as labeling
from tests.conftest import PI_SESSIONS
from tests.conftest import Run
from tests.conftest import git

SCHEMA = [
    {"name": "quality", "type": "rating", "description": "how good, 1-5"},
    {
        "name": "topic",
        "type": "category",
        "choices": ["bugfix", "docs", "refactor"],
        "keys": ["q", "w", "e"],
    },
    {"name": "why", "type": "note", "keys": ["y"]},
    {"name": "wrong", "type": "spans", "choices": ["made-up", "unsafe"], "keys": ["h"]},
]


def schema_file(tmp_path: Path, fields: object = SCHEMA) -> str:
    target = tmp_path / "schema.json"
    target.write_text(json.dumps(fields))
    return str(target)


def tagged(project: Path, run: Run) -> str:
    """A good row of the real Pi session ``basic`` (it ran ls /nonexistent-dir)."""
    run("good", "--session", str(PI_SESSIONS / "basic.jsonl"))
    return str(json.loads(run("tagged", "--json").stdout)[0]["id"])


def row_at_head(project: Path, row_id: str) -> dict[str, object]:
    value = orjson.loads(
        git(paths.store_path(project), "show", f"HEAD:{rows.row_path(row_id)}")
    )
    assert isinstance(value, dict)
    return value


def test_a_schema_is_a_setting_committed_and_shown(
    project: Path, run: Run, tmp_path: Path
) -> None:
    tagged(project, run)
    assert run("labels", "show").stdout == (
        "good, bad and rewrite only (machine labels set FILE adds fields)\n"
    )
    done = run("labels", "set", schema_file(tmp_path))
    assert done.stdout.startswith("label schema set (")
    assert run("labels", "show").stdout == (
        "quality          rating 1-5  (keys 12345)\n"
        "topic            category: bugfix, docs, refactor  (keys qwe)\n"
        "why              note  (keys y)\n"
        "wrong            spans: made-up, unsafe  (keys h)\n"
    )
    subject = git(paths.store_path(project), "log", "-1", "--format=%s%n%b")
    assert subject.startswith(
        "set labels: quality rating, topic category, why note, wrong spans\n"
    )
    assert "Machine-Action: setting\nMachine-Setting: labels" in subject
    settings = orjson.loads(
        git(paths.store_path(project), "show", "HEAD:settings.json")
    )
    assert settings["labels"][0] == {
        "name": "quality",
        "type": "rating",
        "description": "how good, 1-5",
    }
    again = run("labels", "set", schema_file(tmp_path))
    assert again.stdout == "the label schema is already that; nothing changed\n"


def test_a_bad_schema_is_one_line_and_nothing_is_written(
    project: Path, run: Run, tmp_path: Path
) -> None:
    tagged(project, run)
    before = git(paths.store_path(project), "rev-parse", "HEAD")
    for fields, problem in (
        ([{"name": "Quality", "type": "rating"}], "name 'Quality'"),
        ([{"name": "t", "type": "category"}], "t: a category needs its choices"),
        (
            [{"name": "t", "type": "category", "choices": ["a"], "keys": ["g"]}],
            "t: key 'g' must be one character the page does not use itself",
        ),
        (
            [
                {"name": "a", "type": "note", "keys": ["1"]},
                {"name": "b", "type": "rating"},
            ],
            "key '1' is bound twice (a, b)",
        ),
        ({"name": "a"}, "a label schema is a JSON list of fields"),
    ):
        result = run("labels", "set", schema_file(tmp_path, fields))
        assert result.exit_code == USAGE, fields
        assert problem in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    assert git(paths.store_path(project), "rev-parse", "HEAD") == before


def test_labels_are_one_commit_each_with_their_fields_as_trailers(
    project: Path, run: Run, tmp_path: Path
) -> None:
    row_id = tagged(project, run)
    run("labels", "set", schema_file(tmp_path))
    answer = labeling.answer_text(row_at_head(project, row_id))
    start = answer.index("/nonexistent-dir")
    end = start + len("/nonexistent-dir")
    result = run(
        "labels",
        "apply",
        row_id[:6],
        "quality=4",
        "topic=bugfix",
        f"wrong={start}-{end}:made-up",
    )
    assert result.stdout == f"labeled {row_id}: quality=4 topic=bugfix wrong=1 span\n"
    message = git(paths.store_path(project), "log", "-1", "--format=%B")
    assert message == (
        f"labels {row_id}: quality=4 topic=bugfix wrong=1 span\n\n"
        f"Machine-Action: labels\nMachine-Row: {row_id}\nMachine-Label-quality: 4\n"
        "Machine-Label-topic: bugfix\nMachine-Label-wrong: 1 span\n\n"
    )
    assert row_at_head(project, row_id)["labels"] == {
        "quality": 4,
        "topic": "bugfix",
        "wrong": [
            {"start": start, "end": end, "text": "/nonexistent-dir", "label": "made-up"}
        ],
    }
    log = json.loads(run("log", "-n", "1", "--json").stdout)
    assert log[0]["trailers"]["Label-quality"] == "4"
    assert f"labels  labels {row_id}: quality=4" in run("log", "-n", "1").stdout
    # A changed value replaces, spans add up, --clear takes one away.
    run("labels", "apply", row_id, "quality=2", f"wrong=0-{len('notes.md')}")
    labels = row_at_head(project, row_id)["labels"]
    assert isinstance(labels, dict)
    assert labels["quality"] == 2 and len(labels["wrong"]) == 2
    run("labels", "apply", row_id, "--clear", "wrong", "--clear", "topic")
    assert row_at_head(project, row_id)["labels"] == {"quality": 2}
    # undo takes back one labeling
    run("undo")
    assert len(row_at_head(project, row_id)["labels"]["wrong"]) == 2  # type: ignore[index]


def test_a_value_the_schema_does_not_allow_is_refused(
    project: Path, run: Run, tmp_path: Path
) -> None:
    row_id = tagged(project, run)
    before = git(paths.store_path(project), "rev-parse", "HEAD")
    nothing = run("labels", "apply", row_id, "quality=4")
    assert nothing.exit_code == USAGE
    assert "a field of none: set a schema with machine labels set" in nothing.stderr
    run("labels", "set", schema_file(tmp_path))
    before = git(paths.store_path(project), "rev-parse", "HEAD")
    for word, problem in (
        ("quality=6", "quality is a rating from 1 to 5, not '6'"),
        ("quality=good", "quality is a rating from 1 to 5, not 'good'"),
        ("topic=cooking", "topic is one of bugfix, docs, refactor, not 'cooking'"),
        ("wrong=5-999999", "wrong: the span 5-999999 is not inside the answer"),
        ("wrong=0-4:boring", "wrong: a span's label is one of made-up, unsafe"),
        ("mood=3", "'mood=3': expected FIELD=VALUE with a field of quality, topic"),
    ):
        result = run("labels", "apply", row_id, word)
        assert result.exit_code == USAGE, word
        assert problem in result.stderr, (word, result.stderr)
    assert git(paths.store_path(project), "rev-parse", "HEAD") == before


def test_where_selects_rows_by_their_labels() -> None:
    where = labeling.Where.parse(["quality>=4", "topic=bugfix"])
    assert where.words() == ["quality>=4", "topic=bugfix"]
    assert where.holds({"labels": {"quality": 4, "topic": "bugfix"}})
    assert not where.holds({"labels": {"quality": 3, "topic": "bugfix"}})
    assert not where.holds({"labels": {"quality": 5}})
    assert not where.holds({})
    assert labeling.Where.parse(["topic!=docs"]).holds({})
    assert labeling.Where().holds({})
    for bad in ("quality", "=4", "Quality=4"):
        with pytest.raises(UsageError, match="expected FIELD OP VALUE"):
            labeling.Where.parse([bad])
