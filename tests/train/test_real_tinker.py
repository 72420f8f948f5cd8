"""Against the real Tinker service: opt-in, runs only when TINKER_API_KEY is set.

Costs a little: two LoRA steps on the default base model and one sampler
checkpoint that expires after a day.
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from tests.conftest import Run
from tests.conftest import git
from tests.train import conftest as support

REAL_BASE_URL = os.environ.get("TINKER_BASE_URL")


@pytest.mark.slow
@pytest.mark.skipif(not support.REAL_KEY, reason="needs TINKER_API_KEY (real service)")
def test_smoke_against_the_real_service(
    project: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TINKER_API_KEY", str(support.REAL_KEY))
    if REAL_BASE_URL:
        monkeypatch.setenv("TINKER_BASE_URL", REAL_BASE_URL)
    support.tag(run, project, support.SESSIONS[:4], "--trace")
    prepared = run("train", "sft", "--kind", "traces", "--batch-size", "2", "--json")
    assert prepared.exit_code == 0, prepared.stderr
    run_id = orjson.loads(prepared.stdout)["id"]
    result = run("train", "smoke", "--yes")
    assert result.exit_code == 0, result.stderr
    store = support.store_path(project)
    record = orjson.loads(git(store, "show", f"HEAD:runs/{run_id}.json"))
    smoke = record["smoke"]
    assert smoke["status"] == "passed" and len(smoke["steps"]) == 2
    assert smoke["checkpoint"].startswith("tinker://")
    assert all(s["loss"] > 0 for s in smoke["steps"])
