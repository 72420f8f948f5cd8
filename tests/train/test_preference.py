"""``machine train dpo``: bad rows rewritten with --as become a DPO run.

Rows are tagged ``bad --as`` from the real Pi sessions through the CLI; the
run trains against the fake Tinker service with the cookbook's real DPO loss
(``compute_dpo_loss``) computed on the fake's log-probabilities.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git.train import preference
from machine_git.train import rendering
from tests.conftest import Run
from tests.conftest import git
from tests.conftest import install_session
from tests.train import conftest as support
from tests.train.conftest import MODEL
from tests.train.conftest import FakeTinker

# (session, tag options): four pairs (two traces with tool calls), one bad
# row without a rewrite (not a pair)
BAD = (
    ("basic", ("--as", "notes.md has a header; the directory is missing.")),
    ("context", ("--trace", "--as", "It printed context-three.")),
    ("file-repair", ("--trace", "--as", "Fixed calc.py: it prints 5.")),
    ("mixed", ("--as", "The notes have a title.")),
    ("image", ("a tiny picture",)),
)


@pytest.fixture
def pairs(project: Path, run: Run) -> Path:
    for name, flags in BAD:
        install_session(project, name)
        result = run("bad", *flags)
        assert result.exit_code == 0, result.stderr
    return support.store_path(project)


def _dpo(run: Run, *extra: str) -> dict[str, Any]:
    result = run("train", "dpo", "--batch-size", "2", "--json", *extra)
    assert result.exit_code == 0, result.stderr
    return dict(orjson.loads(result.stdout))


def test_dpo_prepares_a_run_of_the_pairs_pinned_to_the_data(
    pairs: Path, run: Run
) -> None:
    record = _dpo(run)
    run_id, data = record["id"], record["dataset"]
    assert run_id.startswith("dpo-")
    assert (record["method"], data["kind"], data["rows"], data["sequences"]) == (
        "dpo",
        "rejected",
        4,
        4,
    )
    assert record["train_on_what"] == "last_assistant_message"
    assert record["hyperparameters"]["dpo_beta"] == 0.1
    assert record["hyperparameters"]["learning_rate"] == 1e-5
    assert record["steps_planned"] == 2  # 4 pairs, 2 a step, 1 epoch
    folder = pairs / "machine" / "runs" / run_id
    # the run's data is the cookbook's comparison file
    exported = run("export", "--format", "dpo").stdout_bytes
    assert (folder / "data.jsonl").read_bytes() == exported
    yaml_text = (folder / "tinker.yaml").read_text()
    assert 'method: "dpo"' in yaml_text and "dpo_beta: 0.1" in yaml_text
    assert git(pairs, "log", "-1", "--format=%s") == (
        f"train dpo {run_id}: 4 rejected pairs at {data['commit'][:12]}\n"
    )
    listed = run("runs", "--json")
    [summary] = orjson.loads(listed.stdout)
    assert (summary["id"], summary["method"], summary["status"]) == (
        run_id,
        "dpo",
        "prepared",
    )


def test_each_pair_is_two_sequences_that_train_only_the_answers(
    pairs: Path, run: Run
) -> None:
    record = _dpo(run)
    folder = pairs / "machine" / "runs" / record["id"]
    seen = rendering.rendering(MODEL)
    lines = [orjson.loads(x) for x in (folder / "data.jsonl").read_bytes().splitlines()]
    texts = []
    for line in lines:
        chosen, rejected = preference.pair_examples(line, seen.renderer)
        for (model_input, weights), answer in (
            (chosen, line["comparison"]["completion_A"][0]["content"]),
            (rejected, line["comparison"]["completion_B"][0]["content"]),
        ):
            ids = model_input.to_ints()
            trained = [t for t, w in zip(ids, weights.tolist(), strict=True) if w > 0]
            text = seen.tokenizer.decode(trained)
            assert text.endswith(f"{answer}<|im_end|>"), text
            texts.append(text)
    assert len(texts) == 8
    # the trace from the context session declares its tools in both
    context_line = next(x for x in lines if x.get("tools"))
    chosen, _ = preference.pair_examples(context_line, seen.renderer)
    assert '"name": "bash"' in seen.tokenizer.decode(chosen[0].to_ints())


def test_smoke_and_run_train_the_pairs_with_the_cookbook_s_dpo_loss(
    pairs: Path, run: Run, fake: FakeTinker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # TRAINED in full (80: core/test_table.py)
    record = _dpo(run)
    run_id = record["id"]
    smoke = run("train", "smoke", "--yes")
    assert smoke.exit_code == 0, smoke.stderr
    result = run("train", "run", "--yes")
    assert result.exit_code == 0, result.stderr
    names = fake.names()
    start = names.index(
        "create_lora_training_client", names.index("save_weights_for_sampler")
    )
    assert names[start : start + 2] == [
        "create_lora_training_client",
        "save_weights_and_get_sampling_client",
    ]
    assert names.count("forward_backward_custom") == 4  # 2 smoke + 2 run steps
    assert "forward_backward" not in names
    # every batch is two pairs: chosen, rejected, chosen, rejected
    assert [len(b) for b in fake.batches] == [4, 4, 4, 4]
    # 2 reference log-prob requests per pair per step
    assert names.count("compute_logprobs") == 4 * 4
    final = orjson.loads(git(pairs, "show", f"HEAD:runs/{run_id}.json"))
    assert final["status"] == "done"
    steps = final["steps"]
    assert [s["step"] for s in steps] == [0, 1]
    for step, metrics in zip(steps, fake.dpo_metrics[2:], strict=True):
        assert step["loss"] == round(metrics["dpo_loss"], 6)
        assert metrics["accuracy"] == 1.0  # chosen above rejected, as faked
        assert 0 < metrics["dpo_loss"] < math.log(2)
    # the run record keeps the trained contract: every pair, every epoch
    trained = final["trained"]
    ids = sorted(
        orjson.loads(
            (
                pairs / "machine" / "runs" / run_id / "data.jsonl.manifest.json"
            ).read_bytes()
        )["row_ids"]
    )
    assert trained["rows"] == ids
    [epoch] = trained["epochs"]
    assert (epoch["steps"], epoch["rows"]) == (2, 4)
    assert epoch["tokens"] == sum(s["trained_tokens"] for s in steps)
    listed = run("runs")
    assert f"e1 4 rows {epoch['tokens']} tok" in listed.stdout


def test_dpo_refuses_without_pairs_or_with_fewer_than_a_batch(
    project: Path, run: Run
) -> None:
    install_session(project, "image")
    assert run("bad", "no rewrite").exit_code == 0
    none = run("train", "dpo")
    assert none.exit_code == 1
    assert none.stderr == (
        "Error: no rejected pairs (rows rewritten with --as) to train on at HEAD\n"
    )
    install_session(project, "basic")
    assert run("bad", "--as", "Shorter.").exit_code == 0
    few = run("train", "dpo", "--batch-size", "2")
    assert few.exit_code == 1
    assert few.stderr == (
        "Error: refused, nothing was spent: 1 pair to train: fewer than one batch "
        "of 2 (tag more pairs or lower --batch-size); see 'machine train validate'\n"
    )
    assert run("runs").stdout.startswith("no training runs yet")


def test_dpo_refuses_pairs_whose_answers_max_length_cuts(pairs: Path, run: Run) -> None:
    # A pair whose answer --max-length cuts trains nothing (or half an
    # answer): refused before any call, naming the pair's line and side.
    head = git(pairs, "rev-parse", "HEAD").strip()
    result = run("train", "dpo", "--batch-size", "2", "--max-length", "16")
    assert result.exit_code == 1
    assert result.stderr.startswith(
        "Error: refused, nothing was spent: nothing to learn: --max-length 16 cuts "
        "away every trained token (raise --max-length to at least "
    )
    assert "or drop the row): data.jsonl:1:chosen example 1, " in result.stderr
    assert git(pairs, "rev-parse", "HEAD").strip() == head
    assert run("runs").stdout.startswith("no training runs yet")
