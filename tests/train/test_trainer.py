from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import tinker

from machine_git.core.errors import SERVICE
from machine_git.store.store import Store
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
    assert len(record["steps"]) == 8


def test_an_interrupt_marks_the_run_interrupted(
    project: Path, run: Run, prepared: dict[str, Any], fake: FakeTinker
) -> None:
    fake.raise_on["optim_step"] = KeyboardInterrupt()
    result = run("train", "run", "--yes")
    assert result.exit_code == 130
    assert result.stderr.splitlines()[-1] == "Interrupted"
    record = _record(project, prepared["id"])
    assert (record["status"], record["error"], record["last_checkpoint"]) == (
        "interrupted",
        "step 1: interrupted",
        None,
    )


def test_sigterm_records_the_run_interrupted_with_its_last_checkpoint(
    project: Path, run: Run, fake: FakeTinker
) -> None:
    support.tag(run, project, support.SESSIONS, "--trace")
    prepared = run(
        "train",
        "sft",
        "--kind",
        "traces",
        "--batch-size",
        "2",
        "--save-every",
        "2",
        "--json",
    )
    run_id = orjson.loads(prepared.stdout)["id"]
    # `kill PID` while the third step runs (after checkpoint 000002).
    fake.on_call["forward_backward"] = lambda n: (
        os.kill(os.getpid(), signal.SIGTERM) if n == 3 else None
    )
    result = run("train", "run", "--yes")
    assert result.exit_code == 130
    record = _record(project, run_id)
    checkpoint = f"tinker://{fake.run_id}/weights/000002"
    assert (record["status"], record["error"], record["last_checkpoint"]) == (
        "interrupted",
        "step 3: interrupted",
        checkpoint,
    )
    assert record["trained"]["epochs"][0]["steps"] == 2
    shown = run("runs", run_id).stdout.splitlines()
    assert shown[0] == f"run      {run_id}  (interrupted)"
    assert f"last     {checkpoint}" in shown


def test_a_stalled_service_ends_the_smoke_run_within_its_time_limit(
    project: Path, run: Run, prepared: dict[str, Any], fake: FakeTinker
) -> None:
    fake.stall.add("create_lora_training_client")
    started = time.monotonic()
    result = run("train", "smoke", "--yes")
    elapsed = time.monotonic() - started
    assert result.exit_code == SERVICE
    where = "start (creating the training client)"
    # MACHINE_TINKER_TIMEOUT=2 (conftest): three tries of 2 s, each reported.
    assert result.stderr.splitlines()[-3:] == [
        "retry: Tinker did not answer creating the training client within 2 s; "
        "trying again (2 of 3)",
        "retry: Tinker did not answer creating the training client within 2 s; "
        "trying again (3 of 3)",
        f"Error: smoke of {prepared['id']} failed at {where}: Tinker did not answer "
        "creating the training client within 2 s (3 tries) (set "
        "MACHINE_TINKER_TIMEOUT to wait longer)",
    ]
    assert 6 <= elapsed < 12
    smoke = _record(project, prepared["id"])["smoke"]
    assert (smoke["status"], smoke["retries"]) == ("failed", 2)
    assert smoke["error"].startswith(
        "Tinker did not answer creating the training client within 2 s"
    )


def test_a_service_that_stalls_mid_run_ends_it_within_one_time_limit(
    project: Path, run: Run, prepared: dict[str, Any], fake: FakeTinker
) -> None:
    # The service answers the start and the first step, then stops answering.
    # A training step may have been applied, so it is not repeated: the run
    # ends after one MACHINE_TINKER_TIMEOUT (2 s here) and the record says why.
    fake.on_call["forward_backward"] = lambda n: (
        fake.stall.add("forward_backward") if n == 2 else None
    )
    started = time.monotonic()
    result = run("train", "run", "--yes")
    elapsed = time.monotonic() - started
    assert result.exit_code == SERVICE
    why = (
        "Tinker did not answer step 2 within 2 s (set MACHINE_TINKER_TIMEOUT to "
        "wait longer)"
    )
    assert result.stderr.splitlines()[-1] == (
        f"Error: run of {prepared['id']} failed at step 2: {why}"
    )
    assert 2 <= elapsed < 8
    record = _record(project, prepared["id"])
    assert (record["status"], record["error"], record["retries"]) == (
        "failed",
        f"step 2: {why}",
        0,
    )
    assert [s["step"] for s in record["steps"]] == [0]
    assert record["trained"]["epochs"][0]["steps"] == 1
    assert fake.names().count("forward_backward") == 2


def test_a_refused_key_is_named_as_http_401(
    project: Path, run: Run, prepared: dict[str, Any], fake: FakeTinker
) -> None:
    request = httpx.Request("POST", "http://tinker.test/api/v1/create_model")
    fake.raise_on["create_lora_training_client"] = tinker.AuthenticationError(
        "invalid API key", response=httpx.Response(401, request=request), body=None
    )
    result = run("train", "run", "--yes")
    assert result.exit_code == SERVICE
    assert result.stderr.splitlines()[-1] == (
        f"Error: run of {prepared['id']} failed at start (creating the training "
        "client): HTTP 401 (the API key was refused): invalid API key"
    )


def test_a_record_whose_process_is_gone_shows_stale(
    project: Path, run: Run, prepared: dict[str, Any]
) -> None:
    store = Store.open(support.store_path(project))

    def running(record: dict[str, Any]) -> None:
        record.update(runs.process_stamp(), status="running", pid=_dead_pid())

    runs.update(store, prepared["id"], "start", "train start (test)", running)
    assert run("runs", "--json").stdout.count('"status":"stale"') == 1
    assert run("runs", prepared["id"]).stdout.splitlines()[0] == (
        f"run      {prepared['id']}  (stale)"
    )


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_a_failed_smoke_test_leaves_the_run_prepared(
    project: Path, run: Run, prepared: dict[str, Any], fake: FakeTinker
) -> None:
    fake.fail_at_step = 2
    result = run("train", "smoke", "--yes")
    assert result.exit_code == SERVICE
    assert result.stderr.splitlines()[-1] == (
        f"Error: smoke of {prepared['id']} failed at step 2: "
        "HTTP 500 (the service failed): worker lost"
    )
    record = _record(project, prepared["id"])
    assert record["status"] == "prepared"
    assert (record["smoke"]["status"], record["smoke"]["error"]) == (
        "failed",
        "HTTP 500 (the service failed): worker lost",
    )
    assert git(support.store_path(project), "log", "-1", "--format=%s") == (
        f"train smoke-failed {prepared['id']} at step 2: "
        "HTTP 500 (the service failed): worker lost\n"
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


# -- every row trains ------------------------------------------------------------


def _row_ids(project: Path) -> list[str]:
    store = Store.open(support.store_path(project))
    return sorted(
        str(orjson.loads(data)["id"])
        for _, data in store.iter_row_blobs()
        if orjson.loads(data)["kind"] == "traces"
    )


def _dataset_tokens(project: Path, run_id: str) -> tuple[int, int]:
    from machine_git.train import datasets

    store = Store.open(support.store_path(project))
    cfg, where = runs.run_config(store, runs.find(store, run_id))
    dataset = datasets.build(cfg, where)
    return len(dataset.datums), sum(datasets.trained_tokens(d) for d in dataset.datums)


def test_every_row_trains_every_epoch_in_a_new_order(
    project: Path, run: Run, fake: FakeTinker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # TRAINED in full (80: core/test_table.py)
    support.tag(run, project, support.SESSIONS, "--trace")
    prepared = run(
        "train",
        "sft",
        "--kind",
        "traces",
        "--batch-size",
        "3",
        "--epochs",
        "2",
        "--json",
    )
    assert prepared.exit_code == 0, prepared.stderr
    run_id = orjson.loads(prepared.stdout)["id"]
    sequences, tokens = _dataset_tokens(project, run_id)
    assert sequences == 16  # 8 rows, one sequence per assistant turn
    result = run("train", "run", "--yes")
    assert result.exit_code == 0, result.stderr
    # 16 sequences in batches of 3: five full batches and a last one of 1.
    assert [len(b) for b in fake.batches] == [3, 3, 3, 3, 3, 1] * 2
    first = [d.model_input.to_ints() for b in fake.batches[:6] for d in b]
    second = [d.model_input.to_ints() for b in fake.batches[6:] for d in b]
    assert sorted(first) == sorted(second) and first != second  # reshuffled
    # each sequence exactly once per epoch
    from machine_git.train import datasets

    store = Store.open(support.store_path(project))
    cfg, where = runs.run_config(store, runs.find(store, run_id))
    every = [d.model_input.to_ints() for d in datasets.build(cfg, where).datums]
    assert sorted(first) == sorted(every)
    record = _record(project, run_id)
    ids = _row_ids(project)
    assert record["trained"] == {
        "rows": ids,
        "epochs": [
            {"epoch": 1, "seed": 0, "steps": 6, "rows": 8, "tokens": tokens},
            {"epoch": 2, "seed": 1, "steps": 6, "rows": 8, "tokens": tokens},
        ],
    }
    listing = run("runs").stdout.splitlines()
    assert listing[0].split() == [
        "RUN",
        "STATUS",
        "DATA",
        "STEPS",
        "LOSS",
        "CKPT",
        "SMOKE",
        "TRAINED",
    ]
    assert listing[1].endswith(f"e1 8 rows {tokens} tok, e2 8 rows {tokens} tok")
    detail = run("runs", run_id).stdout.splitlines()
    assert f"epoch 1  seed 0: 6 steps, 8 rows, {tokens} trained tokens" in detail
    assert f"epoch 2  seed 1: 6 steps, 8 rows, {tokens} trained tokens" in detail


def test_a_failed_run_names_exactly_the_rows_of_its_completed_steps(
    project: Path, run: Run, prepared: dict[str, Any], fake: FakeTinker
) -> None:
    fake.fail_at_step = 2
    result = run("train", "run", "--yes")
    assert result.exit_code == SERVICE
    record = _record(project, prepared["id"])
    (step,) = record["steps"]
    assert step["epoch"] == 1
    # The rows of the one completed batch: read back from what the fake got.
    from machine_git.train import datasets

    store = Store.open(support.store_path(project))
    cfg, where = runs.run_config(store, record)
    dataset = datasets.build(cfg, where)
    dataset.set_epoch(0)
    expected = sorted(set(dataset.batch_rows(0)))
    assert [d.model_input.to_ints() for d in fake.batches[0]] == [
        d.model_input.to_ints() for d in dataset.get_batch(0)
    ]
    assert record["trained"]["rows"] == expected
    assert record["trained"]["epochs"] == [
        {
            "epoch": 1,
            "seed": 0,
            "steps": 1,
            "rows": len(expected),
            "tokens": sum(datasets.trained_tokens(d) for d in dataset.get_batch(0)),
        }
    ]


def test_a_smoke_run_killed_mid_run_shows_stale_not_running(
    project: Path, run: Run, prepared: dict[str, Any], listener: str
) -> None:
    # A real `machine train smoke --yes` process, its Tinker faked through the
    # test seam (MACHINE_TEST_TINKER), stalled at its second step, SIGKILLed:
    # nothing runs in it to mark the record, so the record says running and
    # machine must show it stale.
    store = support.store_path(project)
    env = {
        **os.environ,
        "MACHINE_TEST_TINKER": "tests.train.conftest:process_service_client",
        "FAKE_TINKER_STALL_AT": "2",
        "TINKER_API_KEY": "tml-test-key",
        "TINKER_BASE_URL": listener,
        "MACHINE_TINKER_TIMEOUT": "600",
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
    child = subprocess.Popen(
        [sys.executable, "-m", "machine_git", "train", "smoke", "--yes"],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while "step 1/2" not in git(store, "log", "-1", "--format=%s"):
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "the smoke run never took a step"
            time.sleep(0.1)
        time.sleep(0.5)  # it is now waiting on step 2, which never answers
        assert child.poll() is None
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    record = _record(project, prepared["id"])
    assert (record["smoke"]["status"], record["smoke"]["pid"]) == ("running", child.pid)
    assert [s["step"] for s in record["smoke"]["steps"]] == [0]
    listed = orjson.loads(run("runs", "--json").stdout)
    assert [(r["id"], r["smoke"]) for r in listed] == [(prepared["id"], "stale")]
    shown = run("runs", prepared["id"]).stdout.splitlines()
    assert "smoke    stale" in shown
