"""Training on the project's own labels: --where selects rows by rating or
category (export, train sft, lineage), and rows of one prompt rated
differently are DPO pairs (the higher-rated answer chosen)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git.core import paths
from machine_git.core.errors import USAGE
from machine_git.releases import lineage
from machine_git.store.store import Store
from machine_git.tagging import edits
from machine_git.tagging import labels as labeling
from machine_git.train import runs
from tests.conftest import PI_SESSIONS
from tests.conftest import Run
from tests.conftest import install_session

SCHEMA = [
    {"name": "quality", "type": "rating"},
    {
        "name": "topic",
        "type": "category",
        "choices": ["notes", "code"],
        "keys": ["q", "w"],
    },
]
SESSIONS = ("basic", "mixed", "multi-turn", "image")


@pytest.fixture
def rated(project: Path, run: Run, tmp_path: Path) -> dict[str, str]:
    """Four good rows; quality 5, 4, 2 and none; topics notes, code, notes."""
    ids = {}
    for name in SESSIONS:
        install_session(project, name)
        # a text model trains these rows: the image stays its placeholder
        flags = ("--no-images",) if name == "image" else ()
        assert run("good", *flags).exit_code == 0
        ids[name] = json.loads(run("tagged", "--json", "-n", "1").stdout)[0]["id"]
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    run("labels", "set", str(schema))
    for name, values in (
        ("basic", ("quality=5", "topic=notes")),
        ("mixed", ("quality=4", "topic=code")),
        ("multi-turn", ("quality=2", "topic=notes")),
    ):
        assert run("labels", "apply", ids[name], *values).exit_code == 0
    return ids


def exported_ids(store: Store, data: bytes) -> list[str]:
    """The row of each tinker line (by its user text: the rows differ)."""
    texts = {}
    for _, blob in store.iter_row_blobs():
        row = orjson.loads(blob)
        texts[json.dumps(row["messages"][:1] if "messages" in row else [])] = row["id"]
    out = []
    for line in data.splitlines():
        messages = [m for m in orjson.loads(line)["messages"] if m["role"] != "system"]
        out.append(texts[json.dumps(messages[:1])])
    return out


def test_export_where_keeps_the_rows_whose_labels_meet_it(
    project: Path, run: Run, rated: dict[str, str], tmp_path: Path
) -> None:
    store = Store.open(paths.store_path(project))
    good = run("export", "--where", "quality>=4").stdout_bytes
    assert sorted(exported_ids(store, good)) == sorted([rated["basic"], rated["mixed"]])
    notes = run("export", "--where", "quality>=2", "--where", "topic=notes")
    assert sorted(exported_ids(store, notes.stdout_bytes)) == sorted(
        [rated["basic"], rated["multi-turn"]]
    )
    target = tmp_path / "rated.jsonl"
    result = run("export", "--where", "quality>=4", "-o", str(target), "--json")
    manifest = json.loads(result.stdout)
    assert manifest["where"] == ["quality>=4"] and manifest["rows"] == 2
    assert target.read_bytes() == good
    plain = json.loads(
        run("export", "-o", str(tmp_path / "all.jsonl"), "--json").stdout
    )
    assert "where" not in plain and plain["rows"] == 4  # the same bytes as before
    bad = run("export", "--where", "quality")
    assert bad.exit_code == USAGE
    assert "--where 'quality': expected FIELD OP VALUE" in bad.stderr


def test_a_run_trains_on_the_rows_its_where_selects_and_records_it(
    project: Path, run: Run, rated: dict[str, str]
) -> None:
    result = run("train", "sft", "--where", "quality>=4", "--batch-size", "1", "--json")
    assert result.exit_code == 0, result.stderr
    record = orjson.loads(result.stdout)
    assert record["dataset"]["where"] == ["quality>=4"]
    assert record["dataset"]["rows"] == 2
    store = Store.open(paths.store_path(project))
    folder = runs.folder(store, record["id"])
    assert (folder / "data.jsonl").read_bytes() == run(
        "export", "--where", "quality>=4"
    ).stdout_bytes
    given, held = lineage.training_rows(store, record)
    assert sorted(given) == sorted([rated["basic"], rated["mixed"]]) and held == []
    # Another --where is another run, not the same one prepared again.
    other = run("train", "sft", "--where", "topic=notes", "--batch-size", "1", "--json")
    assert orjson.loads(other.stdout)["id"] != record["id"]


def session_copy(project: Path, name: str, n: int) -> str:
    """Fixture session ``name`` as a session of its own (id ending in ``n``)."""
    source = PI_SESSIONS / f"{name}.jsonl"
    header, _, rest = source.read_bytes().partition(b"\n")
    value = orjson.loads(header)
    value["id"] = value["id"][:-4] + f"{n:04d}"
    target = project / "sessions" / f"{name}-{n}.jsonl"
    target.parent.mkdir(exist_ok=True)
    target.write_bytes(orjson.dumps(value) + b"\n" + rest)
    return str(target)


def answer_set(store: Store, row_id: str, answer: str) -> None:
    row: Any = copy.deepcopy(store.read_row(row_id))
    for message in reversed(row["messages"]):
        if message["role"] == "assistant":
            message["content"] = answer
            break
    edits.replace(store, row_id, row)


def test_rows_of_one_prompt_rated_differently_are_a_dpo_pair(
    project: Path, run: Run, tmp_path: Path
) -> None:
    for n in range(3):  # the same run in three sessions: one prompt, three rows
        run("good", "--session", session_copy(project, "basic", n))
    store = Store.open(paths.store_path(project))
    train_rows = [orjson.loads(data) for _, data in store.iter_row_blobs()]
    assert len(train_rows) == 3  # one prompt, three rows
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    run("labels", "set", str(schema))
    best, worst, unrated = sorted(r["id"] for r in train_rows)
    answer_set(store, best, "notes.md has a '# Notes' header; the folder is missing.")
    answer_set(store, worst, "Done.")
    answer_set(store, unrated, "Something else.")
    labeling.apply(store, best, {"quality": 5})
    labeling.apply(store, worst, {"quality": 2})
    lines = [
        orjson.loads(x)
        for x in run(
            "export", "--format", "dpo", "--kind", "train"
        ).stdout_bytes.splitlines()
    ]
    assert len(lines) == 1
    comparison = lines[0]["comparison"]
    assert comparison["completion_A"][0]["content"].startswith("notes.md has a")
    assert comparison["completion_B"][0]["content"] == "Done."
    assert lines[0]["label"] == "A"
    user = [m for m in comparison["prompt_conversation"] if m["role"] == "user"]
    assert user[0]["content"].startswith("Now two-tools")
    openai = [
        orjson.loads(x)
        for x in run(
            "export", "--format", "openai-dpo", "--kind", "train"
        ).stdout_bytes.splitlines()
    ]
    assert len(openai) == 1
    assert openai[0]["non_preferred_output"][0]["content"] == "Done."
    # A run's export makes the same pairs (the line's row: the preferred one).
    target = tmp_path / "pairs.jsonl"
    head = store.head
    assert head is not None
    runs.write_export(store, head, "HEAD", "train", target, "dpo")
    assert (
        target.read_bytes()
        == run("export", "--format", "dpo", "--kind", "train").stdout_bytes
    )
    assert runs.row_ids(target) == [best]
