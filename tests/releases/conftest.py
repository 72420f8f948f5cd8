"""Release tests: a trained run to release, the fake Tinker, and a working clone.

Only the remote Tinker service is faked (tests/train/conftest.py); the clone
is a real ``machine clone`` and pushes go through the real ``git`` CLI into
the store's real pre-receive hook.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git.store.store import Store
from machine_git.train import evals
from tests import helpers
from tests.conftest import Run
from tests.train import conftest as support
from tests.train.conftest import FakeTinker

# The training tests' fixtures: the fake service, its loopback port, and the
# autouse one that keeps a developer's key and proxies out of every test.
fake = support.fake
listener = support.listener
_tinker_env = support._tinker_env

CHECKPOINT = "tinker://fake-run:train:0/sampler_weights/final"


def answers(store: Path) -> dict[str, str]:
    """Turn -> the reference answer of each eval case (the multi-turn session)."""
    opened = Store.open(store)
    eval_set = evals.active(opened)
    assert eval_set is not None
    out: dict[str, str] = {}
    for row_id in eval_set["rows"]:
        row = helpers.loose(opened.read_row(row_id))
        assert row is not None
        turn = str(row["messages"][0]["content"]).split(":")[0]
        out[turn] = str(row["messages"][-1]["content"])
    return out


@pytest.fixture
def trained(project: Path, run: Run, fake: FakeTinker) -> dict[str, Any]:
    """Rows tagged, an eval set, a baseline (1 of 3 right), a trained run."""
    support.tag_multi_turn(run, project)
    support.tag(run, project, ("mixed", "basic", "file-repair"))
    assert run("train", "eval", "init", "--size", "1").exit_code == 0
    store = support.store_path(project)
    refs = answers(store)
    fake.answers = {"Turn one": refs["Turn one"]}
    assert run("train", "eval", "baseline", "--yes").exit_code == 0
    record = orjson.loads(run("train", "sft", "--batch-size", "1", "--json").stdout)
    assert run("train", "run", "--yes").exit_code == 0
    return {"store": store, "run": record["id"], "refs": refs}


def git_in(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real git CLI in a working clone (not checked: pushes may be refused)."""
    return subprocess.run(
        ["git", "-C", str(where), *args],
        capture_output=True,
        text=True,
        check=False,
        env=None,
    )


def head(store: Path) -> str:
    done = git_in(store, "rev-parse", "HEAD")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()
