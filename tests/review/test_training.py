from __future__ import annotations

import json
import re

from starlette.testclient import TestClient

from machine_git.store.store import Store
from machine_git.train import runs
from tests.review.conftest import SAMPLER
from tests.review.conftest import STEPS
from tests.review.conftest import client_for


def chart(page: str, chart_id: str) -> dict[str, object]:
    found = re.search(
        rf'<script type="application/json" id="{chart_id}-data">(.*?)</script>', page
    )
    assert found is not None, chart_id
    value = json.loads(found.group(1))
    assert isinstance(value, dict)
    return value


def test_the_runs_page_lists_each_run_with_its_data_commit(
    demo: tuple[Store, str],
) -> None:
    store, run_id = demo
    record = runs.read(store, run_id)
    assert record is not None
    commit = record["dataset"]["commit"]
    page = client_for(store).get("/runs").text
    assert f'<a href="/runs/{run_id}"><code>{run_id}</code></a>' in page
    assert f'<a href="/browse?at={commit}"><code>{commit[:12]}</code></a>' in page
    assert f"<td>{STEPS}/{STEPS}</td>" in page


def test_a_run_page_plots_metrics_jsonl_against_step(
    demo: tuple[Store, str],
) -> None:
    store, run_id = demo
    page = client_for(store).get(f"/runs/{run_id}").text
    loss = chart(page, "metric-0")
    lines = [
        json.loads(line)
        for line in (runs.folder(store, run_id) / "metrics.jsonl")
        .read_text()
        .splitlines()
    ]
    assert loss["title"] == "train_mean_nll"
    assert loss["x"] == [float(line["step"]) for line in lines]
    assert loss["series"] == [
        {
            "label": "train_mean_nll",
            "values": [line["train_mean_nll"] for line in lines],
            "color": "",
        }
    ]
    titles = [chart(page, f"metric-{i}")["title"] for i in range(6)]
    assert titles == [
        "train_mean_nll",
        "learning_rate",
        "num_loss_tokens",
        "num_sequences",
        "num_tokens",
        "time/step",
    ]
    assert f"({STEPS} steps, from metrics.jsonl)" in page


def test_a_run_page_shows_config_checkpoints_and_evals_against_baseline(
    demo: tuple[Store, str],
) -> None:
    store, run_id = demo
    record = runs.read(store, run_id)
    assert record is not None
    page = client_for(store).get(f"/runs/{run_id}").text
    commit = record["dataset"]["commit"]
    assert f'<a id="dataset-link" href="/browse?at={commit}">' in page
    assert "<div><dt>lora_rank</dt><dd><code>32</code></dd></div>" in page
    assert f"<code>{SAMPLER}</code>" in page  # the final checkpoint
    scores = page[page.index('<table class="scores"') :]
    scores = scores[: scores.index("</table>")]
    assert "<td>baseline</td>" in scores and "<td>checkpoint final</td>" in scores
    assert (
        "0.0%" in scores and '100.0% <span class="delta">(+100.0 pts)</span>' in scores
    )
    assert '<a href="/releases/BR-001">BR-001</a>' in page


def test_without_its_folder_a_run_is_plotted_from_its_record(
    demo: tuple[Store, str],
) -> None:
    store, run_id = demo
    (runs.folder(store, run_id) / "metrics.jsonl").unlink()
    page = client_for(store).get(f"/runs/{run_id}").text
    assert f"({STEPS} steps, from the run&#39;s record)" in page
    loss = chart(page, "metric-0")
    record = runs.read(store, run_id)
    assert record is not None
    assert loss["series"] == [
        {
            "label": "train_mean_nll",
            "values": [s["loss"] for s in record["steps"]],
            "color": "",
        }
    ]


def test_unknown_or_unsafe_run_ids_are_refused(demo: tuple[Store, str]) -> None:
    store, _ = demo
    client = client_for(store)
    assert client.get("/runs/train-00000000-000000").status_code == 404
    assert client.get("/runs/..%2F..%2Fetc").status_code == 404  # no such route
    assert client.get("/runs/.hidden").status_code == 400


def test_the_release_page_shows_gates_and_per_case_results(
    demo: tuple[Store, str],
) -> None:
    store, run_id = demo
    client = client_for(store)
    listing = client.get("/releases").text
    assert '<a href="/releases/BR-001"><b>BR-001</b></a>' in listing
    assert '<span class="status status-passed">passed</span>' in listing
    page = client.get("/releases/BR-001").text
    assert f'<a href="/runs/{run_id}"><code>{run_id}</code></a>' in page
    assert "eval normalized: candidate ≥ baseline +0.0 pts" in page
    assert '<tr class="pass"><td>eval normalized</td><td>pass</td>' in page
    assert "baseline 0.0% -&gt; candidate 100.0%" in page
    cases = re.findall(r'<tr><td><a href="/rows/([0-9a-f]{12})"><code>', page)
    assert len(cases) == 1
    assert '<td class="pass">✓</td><td class="pass">✓</td>' in page
    assert client.get("/releases/BR-999").status_code == 404
    assert client.get("/releases/nope").status_code == 400


def test_no_runs_or_releases_yet(client: TestClient) -> None:
    assert "No training runs yet" in client.get("/runs").text
    assert "No releases yet" in client.get("/releases").text
