from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import tinker

from machine_git.errors import SERVICE
from machine_git.store import Store
from machine_git.train import runs
from tests.conftest import Run
from tests.conftest import git
from tests.train import conftest as support
from tests.train.conftest import FakeTinker


@pytest.fixture
def prepared(project: Path, run: Run) -> dict[str, Any]:
    support.tag(run, project, support.SESSIONS, "--trace")
    result = run("train", "sft", "--kind", "traces", "--batch-size", "2", "--json")
    assert result.exit_code == 0, result.stderr
    return dict(orjson.loads(result.stdout))


def _record(project: Path, run_id: str) -> dict[str, Any]:
    return dict(
        orjson.loads(
            git(support.store_path(project), "show", f"HEAD:runs/{run_id}.json")
        )
    )


def _error(message: str) -> tinker.APIConnectionError:
    return tinker.APIConnectionError(
        request=httpx.Request("POST", "http://tinker.test"), message=message
    )


def test_a_failure_creating_the_client_is_named(
    project: Path, run: Run, prepared: dict[str, Any], fake: FakeTinker
) -> None:
    fake.raise_on["create_lora_training_client"] = _error("no capacity")
    result = run("train", "run", "--yes")
    assert result.exit_code == SERVICE
    where = "start (creating the training client)"
    assert result.stderr.splitlines()[-1] == (
        f"Error: run of {prepared['id']} failed at {where}: "
        "APIConnectionError: no capacity"
    )
    record = _record(project, prepared["id"])
    assert (record["status"], record["error"], record["steps"]) == (
        "failed",
        f"{where}: APIConnectionError: no capacity",
        [],
    )


def test_a_failure_saving_the_final_checkpoint_is_named(
    project: Path, run: Run, prepared: dict[str, Any], fake: FakeTinker
) -> None:
    fake.raise_on["save_weights_for_sampler"] = _error("disk full")
    result = run("train", "run", "--yes")
    assert result.exit_code == SERVICE
    record = _record(project, prepared["id"])
    assert record["error"] == "the final checkpoint: APIConnectionError: disk full"
    assert len(record["steps"]) == 4


def test_an_interrupt_marks_the_run_failed(
    project: Path, run: Run, prepared: dict[str, Any], fake: FakeTinker
) -> None:
    fake.raise_on["optim_step"] = KeyboardInterrupt()
    result = run("train", "run", "--yes")
    assert result.exit_code == 130
    assert result.stderr.splitlines()[-1] == "Interrupted"
    record = _record(project, prepared["id"])
    assert (record["status"], record["error"]) == ("failed", "step 1: interrupted")


def test_a_failed_smoke_test_leaves_the_run_prepared(
    project: Path, run: Run, prepared: dict[str, Any], fake: FakeTinker
) -> None:
    fake.fail_at_step = 2
    result = run("train", "smoke", "--yes")
    assert result.exit_code == SERVICE
    assert result.stderr.splitlines()[-1] == (
        f"Error: smoke of {prepared['id']} failed at step 2: "
        "InternalServerError: worker lost"
    )
    record = _record(project, prepared["id"])
    assert record["status"] == "prepared"
    assert (record["smoke"]["status"], record["smoke"]["error"]) == (
        "failed",
        "InternalServerError: worker lost",
    )
    assert git(support.store_path(project), "log", "-1", "--format=%s") == (
        f"train smoke-failed {prepared['id']} at step 2: "
        "InternalServerError: worker lost\n"
    )


def test_a_run_in_use_is_refused(
    project: Path, run: Run, prepared: dict[str, Any], fake: FakeTinker
) -> None:
    store = Store.open(support.store_path(project))
    with runs.lock(runs.folder(store, prepared["id"])):
        result = run("train", "run", "--yes")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        f"Error: run {prepared['id']} is in use by another machine process"
    )
    assert "forward_backward" not in fake.names()


def test_a_tinker_yaml_pointed_at_other_data_is_refused(
    project: Path, run: Run, prepared: dict[str, Any], fake: FakeTinker
) -> None:
    store = Store.open(support.store_path(project))
    path = runs.folder(store, prepared["id"]) / "tinker.yaml"
    commit = prepared["dataset"]["commit"]
    path.write_text(path.read_text().replace(commit, "f" * 40))
    result = run("train", "smoke", "--yes")
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {path} no longer names the data run {prepared['id']} was prepared "
        "from; prepare a new run with 'machine train sft'\n"
    )
    assert fake.calls == []


def test_a_run_without_its_folder_says_how_to_recreate_it(
    project: Path, run: Run, prepared: dict[str, Any], fake: FakeTinker
) -> None:
    store = Store.open(support.store_path(project))
    where = runs.folder(store, prepared["id"])
    for item in where.iterdir():
        item.unlink()
    result = run("train", "run", "--yes")
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: run {prepared['id']} has no folder here ({where}): the store was "
        "cloned or the folder removed; prepare it again with 'machine train sft "
        "--force' and the same options\n"
    )


def test_head_after_a_run_names_the_same_data(
    project: Path, run: Run, prepared: dict[str, Any], fake: FakeTinker
) -> None:
    assert run("train", "run", "--yes").exit_code == 0
    # HEAD is now a run-record commit; its rows are those of the pinned commit.
    again = run("train", "sft", "--kind", "traces", "--batch-size", "2")
    assert again.exit_code == 1
    assert again.stderr.startswith(f"Error: run {prepared['id']} already exists")
