"""``machine train run --resume RUN``: a failed or interrupted run continues
from its last saved state, on the same batches in the same order, as one run
with its attempts."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import orjson

from machine_git.core.errors import SERVICE
from machine_git.store.store import Store
from machine_git.train import datasets
from machine_git.train import runs
from tests.conftest import Run
from tests.conftest import git
from tests.train import conftest as support
from tests.train.conftest import FakeTinker


def _record(project: Path, run_id: str) -> dict[str, Any]:
    data = git(support.store_path(project), "show", f"HEAD:runs/{run_id}.json")
    return dict(orjson.loads(data))


def _prepare(run: Run, *flags: str) -> str:
    result = run("train", "sft", "--kind", "traces", "--json", *flags)
    assert result.exit_code == 0, result.stderr
    return str(orjson.loads(result.stdout)["id"])


def _planned_batches(project: Path, run_id: str, steps: range) -> list[list[list[int]]]:
    """The batches an uninterrupted run sends at ``steps`` (0-based)."""
    store = Store.open(support.store_path(project))
    cfg, where = runs.run_config(store, runs.find(store, run_id))
    dataset = datasets.build(cfg, where)
    out = []
    for step in steps:
        epoch, index = divmod(step, len(dataset))
        dataset.set_epoch(epoch)
        out.append([d.model_input.to_ints() for d in dataset.get_batch(index)])
    return out


def test_an_interrupted_run_resumes_from_its_checkpoint_with_the_same_batches(
    project: Path, run: Run, fake: FakeTinker
) -> None:
    support.tag(run, project, support.SESSIONS, "--trace")
    # 16 sequences in batches of 6: 3 steps an epoch, 9 in 3 epochs; a
    # checkpoint after step 4 (mid-epoch 2); interrupted in step 6, so step 5
    # was taken after the checkpoint and is lost with the attempt
    run_id = _prepare(run, "--batch-size", "6", "--epochs", "3", "--save-every", "4")
    fake.on_call["forward_backward"] = lambda n: (
        os.kill(os.getpid(), signal.SIGTERM) if n == 6 else None
    )
    first = run("train", "run", "--yes")
    assert first.exit_code == 130
    checkpoint = f"tinker://{fake.run_id}/weights/000004"
    stopped = _record(project, run_id)
    assert (stopped["status"], stopped["last_checkpoint"]) == (
        "interrupted",
        checkpoint,
    )
    assert len(stopped["steps"]) == 5
    fake.on_call.clear()
    before = len(fake.calls)
    resumed = run("train", "run", "--resume", run_id, "--yes")
    assert resumed.exit_code == 0, resumed.stderr
    assert resumed.stderr.splitlines()[0].startswith(
        f"run {run_id}: steps 5-9 of 9 (resumed from {checkpoint}) on "
    )
    calls = fake.calls[before:]
    names = [name for name, _ in calls]
    assert names.count("forward_backward") == 5  # not 9: no step is redone
    assert "create_lora_training_client" not in names
    loaded = [a for n, a in calls if n.startswith("create_training_client_from")]
    assert [a["path"] for a in loaded] == [checkpoint]
    # the same data order and seed: steps 5..9 get the batches a run that
    # was never interrupted would have sent
    sent = [[d.model_input.to_ints() for d in b] for b in fake.batches[-5:]]
    assert sent == _planned_batches(project, run_id, range(4, 9))
    record = _record(project, run_id)
    assert (record["status"], record["attempts"]) == ("done", 2)
    assert [s["step"] for s in record["steps"]] == list(range(9))
    assert [c["name"] for c in record["checkpoints"]] == ["000004", "000008", "final"]
    assert [
        (a["attempt"], a["from_step"], a["from_checkpoint"], a["status"], a["steps"])
        for a in record["attempt_log"]
    ] == [(1, 0, None, "interrupted", 5), (2, 4, checkpoint, "done", 9)]
    # what it learned is counted once: every epoch its 8 rows
    assert [
        (e["epoch"], e["seed"], e["steps"], e["rows"])
        for e in record["trained"]["epochs"]
    ] == [(1, 0, 3, 8), (2, 1, 3, 8), (3, 2, 3, 8)]
    assert len({e["tokens"] for e in record["trained"]["epochs"]}) == 1
    # the run folder's logs tell the same story: each step once
    store = Store.open(support.store_path(project))
    folder = runs.folder(store, run_id)
    metrics = [
        orjson.loads(x)
        for x in (folder / "metrics.jsonl").read_bytes().split(b"\n")
        if x
    ]
    assert [m["step"] for m in metrics] == list(range(9))
    shown = run("runs", run_id).stdout.splitlines()
    assert "attempt  1 from the start: interrupted, 5 steps" in shown
    assert f"attempt  2 resumed at step 5 from {checkpoint}: done, 9 steps" in shown
    # the run's story: one run, its attempts
    log = git(support.store_path(project), "log", "--format=%s").splitlines()
    assert f"train resume {run_id}: steps 5-9 from {checkpoint}" in log


def test_a_run_without_a_saved_state_or_not_failed_does_not_resume(
    project: Path, run: Run, fake: FakeTinker
) -> None:
    support.tag(run, project, support.SESSIONS, "--trace")
    run_id = _prepare(run, "--batch-size", "2")
    not_yet = run("train", "run", "--resume", run_id, "--yes")
    assert (not_yet.exit_code, not_yet.stderr) == (
        1,
        f"Error: run {run_id} is prepared: only a failed or interrupted run resumes\n",
    )
    fake.fail_at_step = 2
    assert run("train", "run", "--yes").exit_code == SERVICE
    calls = len(fake.calls)
    refused = run("train", "run", "--resume", run_id, "--yes")
    assert (refused.exit_code, refused.stderr) == (
        1,
        f"Error: run {run_id} saved no checkpoint to resume from (--save-every); "
        f"'machine train run {run_id} --yes' trains it again from the start\n",
    )
    assert len(fake.calls) == calls  # nothing was called
