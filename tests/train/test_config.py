from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from machine_git.core.errors import TrainingError
from machine_git.train import config

CFG = config.RunConfig(
    run_id="traces-0123abcd-00ff00",
    dataset_commit="0123abcd" * 5,
    revision="v1",
    kind="traces",
    export_sha256="ab" * 32,
    rows=12,
    base_model="Qwen/Qwen3-30B-A3B-Instruct-2507",
    renderer="qwen3_instruct",
    train_on_what="all_assistant_messages",
    held_out_eval="eval-1234abcd",
    hyper=config.Hyper(learning_rate=1e-5, batch_size=4, num_epochs=2),
)


def test_tinker_yaml_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "tinker.yaml"
    path.write_text(config.render(CFG))
    assert config.load(path) == CFG
    text = path.read_text()
    assert "learning_rate: 1.0e-05\n" in text  # PyYAML reads "1e-05" as a string
    assert text.splitlines()[1] == f"# Data: dataset commit {CFG.dataset_commit},"
    assert yaml.safe_load(text)["dataset"]["sha256"] == CFG.export_sha256


def test_edited_hyperparameters_are_the_ones_that_train(tmp_path: Path) -> None:
    path = tmp_path / "tinker.yaml"
    path.write_text(
        config.render(CFG)
        .replace("batch_size: 4", "batch_size: 16")
        .replace("learning_rate: 1.0e-05", "learning_rate: 3e-4")
    )
    loaded = config.load(path)
    assert (loaded.hyper.batch_size, loaded.hyper.learning_rate) == (16, 3e-4)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "batch_size: 4",
            "batch_size: 0",
            "$.hyperparameters.batch_size: Input should be greater than or equal to 1",
        ),
        (
            "batch_size: 4",
            "batch_size: four",
            "$.hyperparameters.batch_size: Input should be a valid integer, "
            "unable to parse string as an integer",
        ),
        (
            "num_epochs: 2",
            "num_epochs: 1.5",
            "$.hyperparameters.num_epochs: Input should be a valid integer, "
            "got a number with a fractional part",
        ),
        (
            'kind: "traces"',
            'kind: "rejected"',
            "$.dataset.kind: must be one of train, traces for a sft run",
        ),
        (
            'file: "data.jsonl"',
            'file: "../x.jsonl"',
            "$.dataset.file: must be a file name in the run folder",
        ),
        (
            'base_model: "Qwen',
            "base_model: 3 #",
            "$.model.base_model: Input should be a valid string",
        ),
    ],
)
def test_bad_values_are_named(tmp_path: Path, old: str, new: str, message: str) -> None:
    path = tmp_path / "tinker.yaml"
    text = config.render(CFG)
    assert old in text
    path.write_text(text.replace(old, new))
    with pytest.raises(TrainingError) as e:
        config.load(path)
    assert str(e.value) == f"{path}: {message}"


def test_not_yaml_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "tinker.yaml"
    path.write_text("run_id: [unclosed\n")
    with pytest.raises(TrainingError) as e:
        config.load(path)
    assert str(e.value).startswith(f"{path}: not valid YAML (")
    assert "\n" not in str(e.value)
