"""machine review's tests: a store made the way a user makes one, and the app.

Rows come from the bundled real Pi sessions through the CLI (``machine good``,
``bad``, ``observe``, ``version``). The demo store adds a training run, an eval
set with results and a checked release, made through the same library calls
``machine train`` and ``machine release`` use; only what the Tinker service
would compute (the steps' losses, the sampled answers) is made up here.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from machine_git import releases
from machine_git.cli import cli
from machine_git.core import jsonio
from machine_git.core import paths
from machine_git.review.app import create_app
from machine_git.review.security import cookie_name
from machine_git.store.store import Store
from machine_git.train import config
from machine_git.train import evals
from machine_git.train import runs
from tests.conftest import PI_SESSIONS

PORT = 8765
TOKEN = "test-token-0123456789"
CSRF = "test-csrf-0123456789"
BASE = f"http://127.0.0.1:{PORT}"
OBSERVED = (
    "bash-execution",
    "image",
    "mixed",
    "compaction-branch",
    "branch-summary",
    "basic",
)
SAMPLER = "tinker://fake-session/sampler_weights/final"
STEPS = 30  # of the tests' demo run


def machine(project: Path, *args: str) -> str:
    """Run one machine command for ``project``; its stdout."""
    result = CliRunner().invoke(
        cli, [*args, "--project", str(project)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    return result.stdout


def session(name: str) -> str:
    return str(PI_SESSIONS / f"{name}.jsonl")


def same_run_elsewhere(project: Path, name: str) -> str:
    """Fixture session ``name`` as another session (its own id): the same run
    made twice. A turn is in the dataset once (issue 20), so a store that both
    tags and observes a run needs two sessions of it."""
    source = PI_SESSIONS / f"{name}.jsonl"
    header, _, rest = source.read_bytes().partition(b"\n")
    value = orjson.loads(header)
    value["id"] = value["id"][:-4] + "beef"
    target = project / "sessions" / f"{name}-again.jsonl"
    target.parent.mkdir(exist_ok=True)
    target.write_bytes(orjson.dumps(value) + b"\n" + rest)
    return str(target)


def small_store(project: Path) -> Store:
    """Three tagged rows, version v1, then five observed runs."""
    machine(project, "good", "--session", session("multi-turn"), "short and right")
    machine(project, "good", "--trace", "--session", session("file-repair"))
    again = same_run_elsewhere(project, "basic")
    machine(project, "bad", "--session", again, "too terse")
    machine(project, "version", "v1")
    for name in OBSERVED:
        machine(project, "observe", "--session", session(name))
    return Store.open(paths.store_path(project))


def demo_store(project: Path, steps: int = 40) -> tuple[Store, str]:
    """A store with history, versions, a finished run, evals and a release."""

    def tagged(name: str) -> str:
        return same_run_elsewhere(project, name) if name in OBSERVED else session(name)

    for name in ("multi-turn", "mixed", "bash-execution", "image"):
        machine(project, "good", "--session", tagged(name))
    for name in ("file-repair", "compaction-branch"):
        machine(project, "good", "--trace", "--session", tagged(name))
    machine(project, "bad", "--session", tagged("basic"), "too terse")
    machine(project, "version", "v1", "--message", "first tags")
    for name in OBSERVED:
        machine(project, "observe", "--session", session(name))
    store = Store.open(paths.store_path(project))
    eval_set, _ = evals.init(store, size=1, force=False)
    bad = machine(project, "tagged", "--kind", "rejected").split()[0]
    machine(
        project,
        "rewrite",
        bad,
        "--as",
        "notes.md starts with a '# Notes' header; /nonexistent-dir does not exist.",
    )
    machine(project, "version", "v2")
    run_id = fake_run(store, "v2", steps)
    record_evals(store, eval_set, run_id)
    # Two of the observed runs judged since, as the Queue would.
    judged = machine(project, "tagged", "--kind", "observed").splitlines()
    machine(project, "label", judged[-1].split()[0], "good")
    machine(project, "label", judged[-2].split()[0], "bad", "--note", "guessed")
    machine(project, "version", "v3")
    return store, run_id


def fake_run(store: Store, revision: str, steps: int) -> str:
    """A run prepared and trained as ``machine train`` records one.

    ``runs.prepare`` exports the data and commits the record; each step and
    checkpoint is then one ``runs.update`` commit, and ``metrics.jsonl`` gets
    the lines the training loop appends (loss falling as a run's does).
    """
    head = store.head
    assert head is not None
    hyper = config.Hyper(batch_size=1, num_epochs=steps, save_every=steps // 2)
    record = runs.prepare(
        store,
        commit=head,
        revision=revision,
        kind="train",
        base_model=config.DEFAULT_BASE_MODEL,
        renderer="qwen3_instruct",
        train_on_what="last_assistant_message",
        hyper=hyper,
        force=False,
        count_sequences=lambda cfg, where: 1,
    )
    run_id = str(record["id"])
    runs.update(store, run_id, "start", f"train run {run_id}", _start)
    folder = runs.folder(store, run_id)
    lines = []
    for step in range(steps):
        loss = 0.35 + 1.6 * math.exp(-step / 9) + 0.04 * math.sin(step)
        rate = hyper.learning_rate * (1 - step / steps)
        line = {
            "step": step,
            "epoch": step,
            "batch": 0,
            "learning_rate": rate,
            "num_sequences": 1,
            "num_tokens": 900 + 7 * step % 50,
            "num_loss_tokens": 120,
            "train_mean_nll": round(loss, 6),
            "time/step": 1.2,
            "run_id": run_id,
            "dataset_commit": record["dataset"]["commit"],
        }
        lines.append(jsonio.line(line))
        entry = {
            "step": step,
            "loss": round(loss, 6),
            "learning_rate": rate,
            "sequences": 1,
            "tokens": line["num_tokens"],
        }
        runs.update(
            store,
            run_id,
            "step",
            f"train run {run_id}: step {step + 1}/{steps} loss {loss:.4f}",
            lambda r, e=entry: r["steps"].append(e),  # type: ignore[misc]
        )
    (folder / "metrics.jsonl").write_bytes(b"".join(lines))
    checkpoint = {
        "name": "final",
        "step": steps,
        "final": True,
        "state_path": "tinker://fake-session/weights/final",
        "sampler_path": SAMPLER,
        "at": "2026-11-30T12:00:00.000Z",
    }
    runs.update(
        store,
        run_id,
        "checkpoint",
        f"train run {run_id}: checkpoint final {SAMPLER}",
        lambda r: r["checkpoints"].append(checkpoint),
    )
    final = round(0.35 + 1.6 * math.exp(-(steps - 1) / 9), 6)
    runs.update(
        store,
        run_id,
        "done",
        f"train run {run_id}: done, {steps} steps",
        lambda r: r.update(status="done", final_loss=final),
    )
    return run_id


def _start(record: dict[str, Any]) -> None:
    record.update(status="running", attempts=1, steps=[], checkpoints=[])


def record_evals(store: Store, eval_set: dict[str, Any], run_id: str) -> None:
    """Baseline and run scores on the eval set, then release BR-001, checked."""
    cases, skipped = evals.cases(store, eval_set)

    def answers(correct: bool) -> list[dict[str, Any]]:
        return [
            {
                "row": c.row_id,
                "kind": c.kind,
                "reference": c.reference,
                "output": c.reference if correct else "I could not finish this.",
            }
            for c in cases
        ]

    details = {"base_model": config.DEFAULT_BASE_MODEL, "model_path": None}
    evals.record_results(
        store, eval_set, config.DEFAULT_BASE_MODEL, details, answers(False), skipped
    )
    evals.record_results(
        store, eval_set, SAMPLER, {**details, "model_path": SAMPLER}, answers(True), []
    )
    releases.new(
        store,
        "BR-001",
        run_id,
        title="terse, correct answers",
        gates_file=None,
        template=None,
    )
    releases.check(
        store, "BR-001", lambda cs, base, ckpt: answers(True)[: len(cs)], 1024
    )


# -- the app ---------------------------------------------------------------------


# Building a store runs a dozen commands; tests get a copy of one built once.
# A store is a bare git repository: copied (modes kept), it is the same store.
@pytest.fixture(scope="session")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("review-stores")
    made: dict[str, Path] = {}
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MACHINE_DATA_DIR", str(root / "data"))
        env.setenv("HOME", str(root / "home"))
        env.setenv("PI_CODING_AGENT_DIR", str(root / "pi-agent"))
        env.setenv("GIT_CONFIG_NOSYSTEM", "1")
        for name in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
            env.setenv(name, "Test User")
        for name in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
            env.setenv(name, "test@example.com")
        for name in ("small", "demo"):
            project = root / name
            (project / ".git").mkdir(parents=True)
            if name == "small":
                made[name] = small_store(project).path
            else:
                made[name] = demo_store(project, steps=STEPS)[0].path
    return made


def copy_of(template: Path, project: Path) -> Store:
    """The template store, as the store of ``project``."""
    target = paths.store_path(project)
    shutil.copytree(template, target, symlinks=True)
    return Store.open(target)


@pytest.fixture
def store(project: Path, templates: dict[str, Path]) -> Store:
    """Three tagged rows (v1), then six observed runs."""
    return copy_of(templates["small"], project)


@pytest.fixture
def demo(project: Path, templates: dict[str, Path]) -> tuple[Store, str]:
    """The demo store and its run id."""
    store = copy_of(templates["demo"], project)
    return store, str(runs.all_runs(store)[-1]["id"])


def client_for(store: Store, **options: Any) -> TestClient:
    app = create_app(store.path, token=TOKEN, port=PORT, csrf=CSRF, project="proj")
    client = TestClient(app, base_url=BASE, **options)
    client.cookies.set(cookie_name(PORT), TOKEN)
    return client


@pytest.fixture
def client(store: Store) -> TestClient:
    """A browser that has opened the printed link (it holds the cookie)."""
    return client_for(store)
