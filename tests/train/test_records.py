"""Records machine writes and reads back: a damaged one is one line naming the field."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from machine_git.core import jsonio
from machine_git.core.errors import TrainingError
from machine_git.store.store import Change
from machine_git.store.store import Store
from machine_git.train import records
from machine_git.train import runs
from tests.conftest import Run
from tests.train import conftest as support


@pytest.fixture
def prepared(project: Path, run: Run) -> tuple[Store, dict[str, object]]:
    support.tag(run, project, support.SESSIONS[:2], "--trace")
    result = run("train", "sft", "--kind", "traces", "--batch-size", "1", "--json")
    assert result.exit_code == 0, result.stderr
    return Store.open(support.store_path(project)), orjson.loads(result.stdout)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("steps_planned", "many", "$.steps_planned: Input should be a valid integer"),
        ("status", "paused", "$.status: Input should be 'prepared', 'running', 'done'"),
        ("dataset", {"commit": "x"}, "$.dataset.revision: Field required"),
        (
            "steps",
            [{"step": 0, "loss": "low"}],
            "$.steps[0].loss: Input should be a valid",
        ),
    ],
)
def test_a_damaged_run_record_is_one_line_naming_the_field(
    prepared: tuple[Store, dict[str, object]],
    run: Run,
    field: str,
    value: object,
    message: str,
) -> None:
    store, record = prepared
    path = runs.record_path(str(record["id"]))
    damaged = {**record, field: value}
    store.write(lambda snap: Change("hand edit", {path: jsonio.canonical(damaged)}))
    # the listing names it in one line and goes on; asked for, it is the error
    listed = run("runs")
    assert listed.exit_code == 0
    assert listed.stderr.startswith(f"warning: {path}: {message}")
    assert listed.stderr.endswith(" (record skipped)\n")
    assert len(listed.stderr.splitlines()) == 1
    result = run("runs", str(record["id"]))
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {path}: {message}")
    assert len(result.stderr.splitlines()) == 1


def test_a_damaged_manifest_is_one_line_and_a_missing_one_is_no_ids(
    prepared: tuple[Store, dict[str, object]],
) -> None:
    store, record = prepared
    data = runs.folder(store, str(record["id"])) / "data.jsonl"
    manifest = data.with_name("data.jsonl.manifest.json")
    ids = runs.row_ids(data)
    assert ids is not None and len(ids) == 2
    value = orjson.loads(manifest.read_bytes())
    manifest.write_bytes(orjson.dumps({**value, "row_ids": [1, 2]}))
    with pytest.raises(TrainingError) as e:
        runs.row_ids(data)
    assert str(e.value) == f"{manifest}: $.row_ids[0]: Input should be a valid string"
    manifest.unlink()
    assert runs.row_ids(data) is None


def test_a_dpo_tinker_yaml_must_name_rejected_rows() -> None:
    with pytest.raises(TrainingError) as e:
        records.parse(
            records.TinkerFile,
            {
                "run_id": "r",
                "method": "dpo",
                "dataset": {
                    "commit": "c",
                    "revision": "HEAD",
                    "kind": "traces",
                    "file": "data.jsonl",
                    "sha256": "s",
                    "rows": 1,
                },
                "model": {"base_model": "m", "renderer": "r", "train_on_what": "t"},
            },
            "tinker.yaml",
        )
    assert str(e.value) == (
        "tinker.yaml: $.dataset.kind: must be one of rejected for a dpo run"
    )
