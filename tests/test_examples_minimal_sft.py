"""examples/minimal-sft: the corpus, the README's loop, and its script.

The loop runs offline up to Tinker's one client seam, which the training
tests' FakeTinker stands in for; the renderer, tokenizer, cookbook, store and
git are real. The fake answers the eval questions in sentences for the base
model and in the taught style for the checkpoint, so the scores show how the
delta is computed, not what a real model learns.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson
import pytest

from machine_git.store import signing
from machine_git.store.store import Store
from machine_git.train import evals
from machine_git.train import rendering
from machine_git.train import service
from tests.conftest import Run
from tests.conftest import git
from tests.train import conftest as support
from tests.train.conftest import FakeTinker
from tests.train.conftest import only

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "minimal-sft"
CHECKPOINT = "tinker://fake-run:train:0/sampler_weights/final"
pytestmark = pytest.mark.slow


def _make_corpus() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "make_corpus", EXAMPLE / "make_corpus.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _readme_commands() -> list[str]:
    """The ``machine ...`` lines of the README's loop, comments dropped."""
    text = (EXAMPLE / "README.md").read_text()
    block = text.split("## The loop", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    return [
        line.split("  #", 1)[0].strip()
        for line in block.splitlines()
        if line.startswith(("machine ", "RUN="))
    ]


def _script_commands() -> list[str]:
    text = (EXAMPLE / "run_example.sh").read_text()
    return [
        line.removeprefix("step ").strip()
        for line in text.splitlines()
        if line.startswith(("step machine ", "RUN="))
    ]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeTinker]:
    """A key, a reachable loopback port, and the fake service at the seam."""
    support.clean_env(monkeypatch)
    with support.listening() as url:
        support.set_key(monkeypatch, url)
        fake_service = FakeTinker(tokenizer=rendering.tokenizer(support.MODEL))
        monkeypatch.setattr(service, "service_client", fake_service.service_client)
        yield fake_service


# -- the corpus ----------------------------------------------------------------


def test_the_corpus_is_what_make_corpus_writes() -> None:
    module = _make_corpus()
    assert (EXAMPLE / "corpus.jsonl").read_bytes() == module.render()
    assert module.main(["--check"]) == 0


def test_every_row_is_valid_and_answers_in_the_one_style(run: Run) -> None:
    module = _make_corpus()
    result = run("validate", str(EXAMPLE / "corpus.jsonl"))
    assert result.exit_code == 0, result.stdout
    assert result.stderr == ""
    assert result.stdout == "checked 48 rows: all valid\n"
    lines = (EXAMPLE / "corpus.jsonl").read_bytes().splitlines()
    rows = [orjson.loads(line) for line in lines]
    sessions = {row["source"]["session_id"] for row in rows}
    assert len(sessions) == len(rows) == 48
    questions = [row["messages"][0]["content"] for row in rows]
    for row in rows:
        user, assistant = row["messages"]
        assert (user["role"], assistant["role"]) == ("user", "assistant")
        words = assistant["content"].split(" ")
        assert len(words) == 3 and words[0] == "ANSWER:", assistant
        assert module.decimal(Fraction(words[1])) == words[1]
        # The fake answers by prompt substring: no question may hide another.
        assert sum(user["content"] in q for q in questions) == 1


def test_the_answers_are_exact_decimals() -> None:
    module = _make_corpus()
    assert module.decimal(Fraction(-81, 4)) == "-20.25"
    assert module.decimal(Fraction(3000)) == "3000"
    with pytest.raises(ValueError, match="no short exact decimal form"):
        module.decimal(Fraction(1, 3))


# -- the README, the script and this test run the same commands ------------------

COMMANDS = [
    "machine validate corpus.jsonl",
    "machine import corpus.jsonl",
    "machine train validate",
    "machine train eval init --size 12",
    "machine train sft --batch-size 4 --epochs 3",
    "machine train smoke --yes",
    "machine train eval baseline --yes",
    "machine train run --yes",
    "RUN=$(machine runs --json | python3 -c 'import json, sys; "
    'print(json.load(sys.stdin)[-1]["id"])\')',
    'machine train eval baseline --model "$RUN" --yes',
]


def test_the_readme_and_the_script_list_the_same_commands() -> None:
    assert _readme_commands() == COMMANDS
    assert _script_commands() == COMMANDS


# -- the loop, offline ---------------------------------------------------------


def _cases(store: Store) -> tuple[str, list[tuple[str, str]]]:
    """The eval set in force and its (question, reference answer) cases."""
    eval_set = evals.active(store)
    assert eval_set is not None
    cases, skipped = evals.cases(store, eval_set)
    assert skipped == []
    return str(eval_set["id"]), [(c.prompt[-1]["content"], c.reference) for c in cases]


def _sentence(reference: str) -> str:
    """How a base model tends to answer: right number, wrong shape."""
    _, number, unit = reference.split(" ")
    return f"The answer is {number} {unit}."


def _run(run: Run, command: str, run_id: str = "") -> Any:
    words = shlex.split(command.replace('"$RUN"', run_id))
    assert words[0] == "machine"
    result = run(*words[1:])
    assert result.exit_code == 0, (command, result.stderr)
    return result


def test_the_loop_offline(project: Path, run: Run, fake: FakeTinker) -> None:
    (project / "corpus.jsonl").write_bytes((EXAMPLE / "corpus.jsonl").read_bytes())
    location = support.store_path(project)
    for command in COMMANDS[:4]:
        _run(run, command)
    store = Store.open(location)
    imported = git(location, "rev-list", "--max-count=1", "HEAD~1").strip()
    eval_id, cases = _cases(store)
    assert len(cases) == 12
    sft = _run(run, COMMANDS[4])
    assert sft.stdout.splitlines()[1] == (
        f"  data    36 train rows at {imported[:12]} (HEAD), 12 held out for eval "
        f"{eval_id}"
    )
    assert sft.stdout.splitlines()[4] == (
        "  steps   27 (36 sequences, batch size 4, 3 epochs)"
    )
    smoke = _run(run, COMMANDS[5])
    assert smoke.stdout.startswith("smoke passed: 2 steps, loss ")
    # The base model: one case in the style, one only after normalizing, the
    # rest in sentences.
    fake.answers = {q: _sentence(ref) for q, ref in cases}
    fake.answers[cases[0][0]] = cases[0][1]
    fake.answers[cases[1][0]] = cases[1][1].lower() + "."
    baseline = _run(run, COMMANDS[6])
    assert baseline.stdout.splitlines()[0] == (
        f"{support.MODEL} on {eval_id}: exact 8%, normalized 17% of 12 cases"
    )
    trained = _run(run, COMMANDS[7])
    assert trained.stdout.splitlines()[1:] == [
        f"sampler {CHECKPOINT}",
        "state   tinker://fake-run:train:0/weights/final",
    ]
    runs = orjson.loads(run("runs", "--json").stdout)
    assert len(runs) == 1
    run_id = runs[0]["id"]
    # The checkpoint: every case in the style but one with a trailing period
    # (normalized only) and one with a wrong number.
    fake.answers = {q: ref for q, ref in cases}
    fake.answers[cases[2][0]] = cases[2][1] + "."
    fake.answers[cases[3][0]] = "ANSWER: 0 kg"
    checked = _run(run, COMMANDS[9], run_id)
    assert checked.stdout.splitlines()[0] == (
        f"{CHECKPOINT} on {eval_id}: exact 83%, normalized 92% of 12 cases"
    )
    samplers = [c[1] for c in fake.calls if c[0] == "create_sampling_client"]
    assert samplers == [
        {"model_path": None, "base_model": support.MODEL},
        {"model_path": CHECKPOINT, "base_model": None},
    ]

    # Every step committed what it should, in order.
    actions = git(
        location,
        "log",
        "--reverse",
        "--format=%(trailers:key=Machine-Action,valueonly)",
    ).split()
    assert actions == [
        "init",
        "import",
        "eval-init",
        "train-sft",
        "train-smoke-start",
        "train-smoke-step",
        "train-smoke-step",
        "train-smoke-checkpoint",
        "train-smoke-done",
        "eval-baseline",
        "train-start",
        *["train-step"] * 20,
        "train-checkpoint",
        *["train-step"] * 7,
        "train-checkpoint",
        "train-done",
        "eval-baseline",
    ]
    pinned = git(location, "log", "--format=%(trailers:key=Machine-Dataset,valueonly)")
    assert set(pinned.split()) == {imported}
    # The run record names the dataset commit: the import, not a later commit.
    record = orjson.loads(git(location, "show", f"HEAD:runs/{run_id}.json"))
    assert record["dataset"]["commit"] == imported
    assert record["dataset"]["rows"] == 36
    assert record["dataset"]["held_out_eval"] == eval_id
    assert record["status"] == "done"
    assert len(record["steps"]) == 27
    # The delta, from the two committed results.
    results = {}
    for model in (support.MODEL, CHECKPOINT):
        path = evals.results_path(eval_id, model)
        results[model] = orjson.loads(git(location, "show", f"HEAD:{path}"))["scores"]
    delta = {
        k: results[CHECKPOINT][k] - results[support.MODEL][k]
        for k in ("exact", "normalized")
    }
    assert delta == pytest.approx({"exact": 9 / 12, "normalized": 9 / 12})


# -- the script ----------------------------------------------------------------


def test_the_script_stops_before_tinker_without_yes_spend(tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TINKER_") and k != "MACHINE_DATA_DIR"
    }
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["TMPDIR"] = str(tmp_path)
    env["HF_HUB_OFFLINE"] = "1"
    done = subprocess.run(
        ["bash", str(EXAMPLE / "run_example.sh")],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    work = only(list(tmp_path.glob("machine-minimal-sft.*")))
    assert done.stderr.splitlines() == [
        f"throwaway project: {work}/project (store under {work}/data)",
        *[f"+ {command}" for command in COMMANDS[:5]],
        "stopped before the first Tinker API call (billed): rerun with --yes-spend",
    ]
    assert done.stdout.splitlines()[:2] == [
        "checked 48 rows: all valid",
        f"imported 48 rows (train 48) from corpus.jsonl (commit {_head(work)[:12]})",
    ]
    store = only(_stores(work))
    actions = git(store, "log", "--format=%(trailers:key=Machine-Action,valueonly)")
    assert actions.split() == ["train-sft", "eval-init", "import", "init"]


def _stores(work: Path) -> list[Path]:
    """The script's stores under its data folder (beside machine's signing keys)."""
    return [p for p in (work / "data").iterdir() if p.name != signing.KEY_FOLDER]


def _head(work: Path) -> str:
    """The import commit of the script's store (below eval init and sft)."""
    store = only(_stores(work))
    return git(store, "rev-parse", "HEAD~2").strip()


def test_the_script_refuses_unknown_arguments(tmp_path: Path) -> None:
    done = subprocess.run(
        ["bash", str(EXAMPLE / "run_example.sh"), "--yes"],
        capture_output=True,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        check=False,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "usage: run_example.sh [--yes-spend]\n"
    assert list(tmp_path.iterdir()) == []
