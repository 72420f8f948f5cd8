"""No run poisons the store: a NaN loss fails the run at its step, and a
damaged record (one of them) never stops the commands that read the others."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git.core import jsonio
from machine_git.core.errors import INVALID
from machine_git.store.store import Change
from machine_git.store.store import Store
from machine_git.train import runs
from tests.conftest import Run
from tests.conftest import git
from tests.train import conftest as support
from tests.train.conftest import FakeTinker


def _sft(run: Run, *flags: str) -> str:
    result = run("train", "sft", "--kind", "traces", "--json", *flags)
    assert result.exit_code == 0, result.stderr
    return str(orjson.loads(result.stdout)["id"])


def _record(project: Path, run_id: str) -> dict[str, Any]:
    data = git(support.store_path(project), "show", f"HEAD:runs/{run_id}.json")
    return dict(orjson.loads(data))


def test_a_nan_loss_fails_the_run_at_its_step_and_the_store_stays_readable(
    project: Path, run: Run, fake: FakeTinker
) -> None:
    support.tag(run, project, support.SESSIONS, "--trace")
    run_id = _sft(run, "--batch-size", "2")
    fake.nan_at_step = 2
    result = run("train", "run", "--yes")
    assert result.exit_code == 1
    why = (
        "the loss is nan (not a finite number); the run stops (check the data "
        "with 'machine train validate')"
    )
    assert result.stderr.splitlines()[-1] == f"Error: {why}"
    record = _record(project, run_id)
    assert (record["status"], record["error"]) == ("failed", f"step 2: {why}")
    assert [s["step"] for s in record["steps"]] == [0]  # the NaN step is not one
    assert fake.names().count("forward_backward") == 2
    assert "save_state" not in fake.names()
    listing = run("runs")
    assert listing.exit_code == 0 and listing.stderr == ""
    assert listing.stdout.splitlines()[1].split()[:2] == [run_id, "failed"]
    assert run("diff", run_id).exit_code == 0
    checked = run("validate", "--store")
    assert checked.exit_code == 0, checked.stdout + checked.stderr


def _damage(store: Store, run_id: str, **fields: Any) -> str:
    """A record as an older machine left it after a NaN loss (or a bad edit)."""
    path = runs.record_path(run_id)
    record = orjson.loads(store.snapshot().read(path) or b"{}")
    damaged = {**record, **fields}
    store.write(lambda snap: Change("hand edit", {path: jsonio.canonical(damaged)}))
    return path


@pytest.fixture
def two_runs(project: Path, run: Run) -> tuple[str, str]:
    support.tag(run, project, support.SESSIONS, "--trace")
    return _sft(run, "--batch-size", "2"), _sft(run, "--batch-size", "3")


def test_one_damaged_run_record_is_named_and_the_others_go_on(
    project: Path, run: Run, fake: FakeTinker, two_runs: tuple[str, str]
) -> None:
    bad, good = two_runs
    store = Store.open(support.store_path(project))
    # what machine wrote before: a NaN loss as null, the record left running
    path = _damage(
        store,
        bad,
        status="running",
        steps=[{"step": 0, "loss": None, "epoch": 1}],
    )
    problem = f"{path}: $.steps[0].loss: Input should be a valid number"
    listing = run("runs")
    assert listing.exit_code == 0
    assert listing.stderr == f"warning: {problem} (record skipped)\n"
    assert [line.split()[0] for line in listing.stdout.splitlines()] == ["RUN", good]
    listed = orjson.loads(run("runs", "--json").stdout)
    assert [r["id"] for r in listed] == [good]
    # the bad one, asked for by name, is the one-line error
    named = run("runs", bad)
    assert (named.exit_code, named.stderr) == (1, f"Error: {problem}\n")
    # diff of the bad run compares its data commit, and says why
    diffed = run("diff", bad, good)
    assert diffed.exit_code == 0
    assert diffed.stderr.startswith(f"warning: {problem} (comparing all rows at ")
    # training another run is not stopped by it
    trained = run("train", "run", good, "--yes")
    assert trained.exit_code == 0, trained.stderr
    assert _record(project, good)["status"] == "done"
    # validate --store names it, as file:line: json-path: problem
    checked = run("validate", "--store")
    assert checked.exit_code == INVALID
    assert f"{path}:1: $.steps[0].loss: Input should be a valid number" in (
        checked.stdout.splitlines()
    )


def test_validate_store_checks_eval_records(
    project: Path, run: Run, two_runs: tuple[str, str]
) -> None:
    store = Store.open(support.store_path(project))
    store.write(
        lambda snap: Change(
            "hand edit",
            {
                "evals/e1.json": b'{"size": 2}\n',
                "evals/e1/results/base.json": b"[1, 2]\n",
            },
        )
    )
    checked = run("validate", "--store")
    assert checked.exit_code == INVALID
    lines = checked.stdout.splitlines()
    assert "evals/e1.json:1: $: not an eval set" in lines
    assert "evals/e1/results/base.json:1: $: not an eval result" in lines
