"""Lineage says what the training loop consumed, not what it was handed.

The run record's ``trained`` field (rows whose tokens were in a completed
optimizer step, and per epoch: seed, steps, rows, trained tokens) is written
by the training loop; the tests check it against what the fake Tinker service
actually received, then that lineage shows exactly that.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import tinker

from machine_git.store.store import Change
from machine_git.store.store import Store
from machine_git.train import evals
from machine_git.train import runs
from tests.conftest import Run
from tests.conftest import git
from tests.releases.conftest import CHECKPOINT
from tests.releases.conftest import answers
from tests.train import conftest as support
from tests.train.conftest import FakeTinker


def rows_of_datums(
    store: Path, fake: FakeTinker, datums: list[tinker.Datum]
) -> set[str]:
    """Which stored rows these datums were rendered from (by their answer text)."""
    opened = Store.open(store)
    found = set()
    for datum in datums:
        text = fake.tokenizer.decode(datum.model_input.to_ints())
        hits = []
        for _path, data in opened.iter_row_blobs():
            row = orjson.loads(data)
            if row["kind"] == "train" and row["messages"][-1]["content"] in text:
                hits.append(row["id"])
        assert len(hits) == 1, (text, hits)
        found.add(hits[0])
    return found


def received(store: Path, fake: FakeTinker, steps: int) -> dict[str, Any]:
    """``trained`` as the service saw it: the batches of the completed steps."""
    done = fake.batches[:steps]
    ids = sorted(set().union(*(rows_of_datums(store, fake, b) for b in done)))
    tokens = sum(
        sum(1 for w in d.loss_fn_inputs["weights"].data if w > 0)
        for b in done
        for d in b
    )
    epoch = {"epoch": 1, "seed": 0, "steps": steps, "rows": len(ids), "tokens": tokens}
    return {"rows": ids, "epochs": [epoch]}


def trained_of(store: Path, run_id: str) -> Any:
    record = runs.read(Store.open(store), run_id)
    assert record is not None
    return record.get("trained")


def eval_rows(store: Path) -> list[str]:
    found = evals.active(Store.open(store))
    assert found is not None
    return sorted(found["rows"])


def train_rows(store: Path) -> list[str]:
    names = git(store, "ls-tree", "-r", "--name-only", "HEAD", "rows").split()
    return sorted(Path(n).stem for n in names)


def roles(found: dict[str, Any]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for row in found["dataset"]["rows"]:
        out.setdefault(row["role"], []).append(row["id"])
    return {k: sorted(v) for k, v in sorted(out.items())}


def test_a_run_that_drops_nothing_shows_every_exported_row_trained(
    trained: dict[str, Any], run: Run, fake: FakeTinker
) -> None:
    store = trained["store"]
    assert len(fake.batches) == 3  # batch size 1: one row per step
    expected = received(store, fake, steps=3)
    assert trained_of(store, trained["run"]) == expected
    ids, tokens = expected["rows"], expected["epochs"][0]["tokens"]
    held = eval_rows(store)
    assert ids == sorted(set(train_rows(store)) - set(held))
    found = orjson.loads(run("lineage", trained["run"], "--rows", "--json").stdout)
    assert roles(found) == {"eval": held, "trained": ids}
    assert found["dataset"]["trained"] == {
        "rows": 3,
        "tokens": tokens,
        "epochs": expected["epochs"],
    }
    text = run("lineage", trained["run"]).stdout.splitlines()
    eval_id = found["dataset"]["held_out_eval"]
    assert text[3] == (
        f"rows       3 train rows trained of 3 exported (3 held out for {eval_id}); "
        "store: train 6, traces 0, rejected 0, observed 0"
    )
    assert text[4] == f"epoch 1    3 rows, {tokens} tokens, 3 steps (seed 0)"


def test_a_run_that_failed_mid_way_shows_only_the_rows_it_trained(
    project: Path, run: Run, fake: FakeTinker
) -> None:
    support.tag_multi_turn(run, project)
    support.tag(run, project, ("mixed", "basic", "file-repair"))
    assert run("train", "eval", "init", "--size", "1").exit_code == 0
    store = support.store_path(project)
    made = orjson.loads(run("train", "sft", "--batch-size", "1", "--json").stdout)
    fake.fail_at_step = 2
    assert run("train", "run", "--yes").exit_code != 0
    assert len(fake.batches) == 2  # the second step was sent, never completed
    expected = received(store, fake, steps=1)
    assert trained_of(store, made["id"]) == expected
    ids = expected["rows"]
    assert len(ids) == 1
    held = eval_rows(store)
    found = orjson.loads(run("lineage", made["id"], "--rows", "--json").stdout)
    assert found["run"]["status"] == "failed"
    untrained = sorted(set(train_rows(store)) - set(held) - set(ids))
    assert roles(found) == {"eval": held, "not trained": untrained, "trained": ids}
    text = run("lineage", made["id"]).stdout.splitlines()
    assert text[3].startswith("rows       1 train row trained of 3 exported (")
    tokens = expected["epochs"][0]["tokens"]
    assert text[4] == f"epoch 1    1 row, {tokens} tokens, 1 step (seed 0)"


def test_a_run_just_prepared_has_trained_no_rows_yet(
    project: Path, run: Run, fake: FakeTinker
) -> None:
    support.tag(run, project, ("mixed", "basic", "file-repair"))
    store = support.store_path(project)
    made = orjson.loads(run("train", "sft", "--batch-size", "1", "--json").stdout)
    found = orjson.loads(run("lineage", made["id"], "--rows", "--json").stdout)
    assert found["run"]["status"] == "prepared"
    assert found["dataset"]["trained"] == {"rows": 0, "tokens": 0, "epochs": []}
    assert roles(found) == {"not trained": train_rows(store)}
    text = run("lineage", made["id"]).stdout.splitlines()
    assert text[3] == (
        "rows       0 train rows trained of 3 exported; "
        "store: train 3, traces 0, rejected 0, observed 0"
    )


@pytest.mark.parametrize("method", ["sft", "dpo"])
def test_an_honest_run_over_rows_with_context_is_not_tampering(
    project: Path, run: Run, fake: FakeTinker, method: str
) -> None:
    # Rows whose turns carry their tools (in the agent's key order): the run's
    # export keeps that order, and reading the run's claims must rebuild the
    # very same bytes, or every honest run would be reported as tampered.
    if method == "sft":
        support.tag(run, project, ("context", "mixed", "basic"), "--trace")
        args: tuple[str, ...] = ("train", "sft", "--kind", "traces", "--batch-size")
        args += ("1", "--json")
    else:
        for name in ("context", "mixed", "basic"):
            support.tag(run, project, (name,))
            assert run("bad", "--as", f"A better answer for {name}.").exit_code == 0
        args = ("train", "dpo", "--batch-size", "1", "--json")
    made = run(*args)
    assert made.exit_code == 0, made.stderr
    record = orjson.loads(made.stdout)
    assert record["dataset"]["rows"] == 3
    shown = run("lineage", record["id"])
    assert shown.exit_code == 0, shown.stderr
    assert shown.stderr == ""
    assert "of 3 exported" in shown.stdout


def test_a_run_without_per_step_records_is_never_shown_as_all_rows(
    trained: dict[str, Any], run: Run
) -> None:
    # A run recorded before the loop kept per-step records.
    runs.update(
        Store.open(trained["store"]),
        trained["run"],
        "older",
        "as an older machine recorded it",
        lambda record: record.pop("trained"),
    )
    found = orjson.loads(run("lineage", trained["run"], "--rows", "--json").stdout)
    assert found["dataset"]["trained"] is None
    assert {r["role"] for r in found["dataset"]["rows"]} == {"eval", "unknown"}
    text = run("lineage", trained["run"]).stdout.splitlines()
    assert text[3] == (
        "rows       trained rows unknown (run predates per-step records); 3 train "
        f"rows exported (3 held out for {found['dataset']['held_out_eval']}); "
        "store: train 6, traces 0, rejected 0, observed 0"
    )


def test_a_release_shows_the_baseline_its_gates_were_frozen_against(
    trained: dict[str, Any], run: Run, fake: FakeTinker
) -> None:
    store = trained["store"]
    assert run("release", "new", "BR-005", "--run", trained["run"]).exit_code == 0
    frozen = orjson.loads(git(store, "show", "HEAD:releases/BR-005/prereg.json"))
    blob = frozen["gates"]["eval"]["baseline"]["blob"]
    # A later baseline of the same model is better: lineage must not show it.
    fake.answers = dict(answers(store))
    assert run("train", "eval", "baseline", "--yes").exit_code == 0
    found = orjson.loads(run("lineage", "BR-005", "--json").stdout)
    assert found["eval"]["baseline"] == {
        "model": support.MODEL,
        "blob": blob,
        "scores": pytest.approx(frozen["gates"]["eval"]["baseline"]["scores"]),
        "frozen_in": "BR-005",
    }
    assert found["eval"]["baseline"]["scores"]["exact"] == pytest.approx(1 / 3)
    text = run("lineage", "BR-005").stdout.splitlines()
    assert text[-1] == (
        f"eval       {frozen['gates']['eval']['id']} at "
        f"{frozen['gates']['eval']['commit'][:12]}: baseline {support.MODEL} exact "
        f"33.3%, normalized 33.3% (frozen in BR-005, blob {blob[:12]})"
    )
    assert text[0].startswith("release    BR-005 ")
    assert text[2] == f"checkpoint {CHECKPOINT}"


def test_made_by_counts_only_commits_that_changed_rows(
    project: Path, run: Run, fake: FakeTinker
) -> None:
    support.tag_multi_turn(run, project)
    store = support.store_path(project)
    Store.open(store).write(lambda snap: Change("a note", {"notes.txt": b"why\n"}))
    support.tag(run, project, ("mixed", "basic", "file-repair"))
    assert run("train", "eval", "init", "--size", "1").exit_code == 0
    made = orjson.loads(run("train", "sft", "--batch-size", "1", "--json").stdout)
    found = orjson.loads(run("lineage", made["id"], "--json").stdout)
    assert found["dataset"]["history"] == {"tag": 6}


def test_a_later_eval_draw_does_not_change_what_an_older_run_held_out(
    trained: dict[str, Any], run: Run
) -> None:
    store = trained["store"]
    held = eval_rows(store)
    ids = trained_of(store, trained["run"])["rows"]
    redrawn = run("train", "eval", "init", "--size", "4", "--force")
    assert redrawn.exit_code == 0, redrawn.stderr
    now = eval_rows(store)
    assert set(held) < set(now)  # today's set holds out a trained row too
    assert set(now) & set(ids)
    found = orjson.loads(run("lineage", trained["run"], "--rows", "--json").stdout)
    assert roles(found) == {"eval": held, "trained": ids}


def test_a_diff_of_runs_counts_only_the_rows_a_failed_run_trained(
    project: Path, run: Run, fake: FakeTinker
) -> None:
    support.tag_multi_turn(run, project)
    support.tag(run, project, ("mixed", "basic", "file-repair"))
    assert run("train", "eval", "init", "--size", "1").exit_code == 0
    store = support.store_path(project)
    failed = orjson.loads(run("train", "sft", "--batch-size", "1", "--json").stdout)
    fake.fail_at_step = 2
    assert run("train", "run", "--yes").exit_code != 0
    fake.fail_at_step = None
    again = run("train", "sft", "--batch-size", "2", "--json")  # a new config
    assert again.exit_code == 0, again.stderr
    done = orjson.loads(again.stdout)
    assert run("train", "run", done["id"], "--yes").exit_code == 0
    learned = trained_of(store, failed["id"])["rows"]
    assert len(learned) == 1
    rest = sorted(set(trained_of(store, done["id"])["rows"]) - set(learned))
    assert len(rest) == 2
    found = orjson.loads(run("diff", failed["id"], done["id"], "--json").stdout)
    assert [(r["id"], r["status"]) for r in found["rows"]] == [
        (row_id, "added") for row_id in rest
    ]
    text = run("diff", failed["id"], done["id"], "--stat").stdout.splitlines()
    assert text == [
        f"diff {failed['id']}..{done['id']} (the rows each run trained on; eval "
        "rows held out): 2 rows changed",
        "  train     +2  -0  ~0",
    ]
