from __future__ import annotations

from pathlib import Path
from typing import Any

from machine_git.review import charts


def test_metrics_lines_skip_what_is_not_a_step(tmp_path: Path) -> None:
    (tmp_path / "metrics.jsonl").write_text(
        '{"step": 0, "train_mean_nll": 2.5, "run_id": "r"}\n'
        "not json\n"
        '{"no_step": 1}\n'
        '{"step": 1, "train_mean_nll": 1.5, "learning_rate": 0.0001}\n'
    )
    lines = charts.metrics_lines(tmp_path)
    assert [line["step"] for line in lines] == [0, 1]
    assert charts.metrics_lines(tmp_path / "missing") == []


def test_one_chart_per_numeric_metric_loss_first() -> None:
    lines: list[dict[str, Any]] = [
        {"step": 0, "zeta": 1, "train_mean_nll": 2.0, "epoch": 0, "note": "x"},
        {"step": 1, "zeta": 2, "train_mean_nll": 1.0, "learning_rate": 0.1},
        {"step": 2, "zeta": float("nan"), "train_mean_nll": True},
    ]
    made = charts.metric_charts(lines)
    assert [c["title"] for c in made] == ["train_mean_nll", "learning_rate", "zeta"]
    assert made[0]["x"] == [0.0, 1.0, 2.0]
    assert made[0]["series"][0]["values"] == [2.0, 1.0, None]  # a bool is no number
    assert made[1]["series"][0]["values"] == [None, 0.1, None]
    assert made[2]["series"][0]["values"] == [1.0, 2.0, None]  # nan is a gap


def test_a_records_steps_read_like_metrics_lines() -> None:
    record = {"steps": [{"step": 0, "loss": 2.0, "tokens": 9}, "junk"]}
    assert charts.steps_as_lines(record) == [
        {"step": 0, "train_mean_nll": 2.0, "tokens": 9}
    ]
