"""A full release cycle, offline: Tinker is faked at its one client seam only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git import releases
from machine_git.core import jsonio
from machine_git.core.errors import INVALID
from machine_git.core.errors import NOT_FOUND
from machine_git.core.errors import USAGE
from machine_git.store.store import Change
from machine_git.store.store import Store
from tests.conftest import Run
from tests.conftest import git
from tests.releases.conftest import CHECKPOINT
from tests.train import conftest as support
from tests.train.conftest import FakeTinker


def test_the_full_cycle_preregister_check_trial_activate(
    trained: dict[str, Any], run: Run, fake: FakeTinker
) -> None:
    store, refs = trained["store"], trained["refs"]
    made = run("release", "new", "BR-002", "--run", trained["run"], "--title", "terse")
    assert made.exit_code == 0, made.stderr
    head = git(store, "rev-parse", "HEAD").strip()
    assert made.stdout.splitlines()[0] == f"preregistered BR-002: terse ({head[:12]})"
    record = releases.frozen(Store.open(store), "BR-002")
    assert record.candidate.checkpoint == CHECKPOINT
    assert record.gates.eval.baseline.scores["exact"] == pytest.approx(1 / 3)
    # The preregistration is committed before any result exists, and the
    # status is never stored: it is read from which records exist.
    assert git(store, "ls-tree", "-r", "--name-only", "HEAD", "releases/") == (
        "releases/BR-002/prereg.json\n"
    )
    fake.answers = {"Turn one": refs["Turn one"], "Turn two": refs["Turn two"]}
    checked = run("release", "check", "BR-002", "--yes")
    assert checked.exit_code == 0, checked.stderr
    lines = checked.stdout.splitlines()
    assert lines[0].startswith("BR-002 check 1: PASS (")
    assert lines[1:] == [
        "  pass  eval normalized: baseline 33.3% -> candidate 66.7% "
        "(delta >= +0.0 pts)",
        "  pass  no regressions (normalized): no case regressed",
    ]
    samples = [c for c in fake.calls if c[0] == "create_sampling_client"]
    assert samples[-1][1] == {"model_path": CHECKPOINT, "base_model": None}
    refused = run("release", "activate", "BR-002")
    assert refused.exit_code == 1
    assert refused.stderr == (
        "Error: BR-002 has no trial: run 'machine release trial BR-002' first\n"
    )
    trial = run("release", "trial", "BR-002", "--json")
    head = git(store, "rev-parse", "HEAD").strip()
    assert (trial.exit_code, trial.stdout) == (
        0,
        f'{{"already":null,"commit":"{head}","release":"BR-002","status":"trial"}}\n',
    )
    settings = orjson.loads(git(store, "show", "HEAD:settings.json"))
    assert (settings["student"], settings["student_status"]) == (CHECKPOINT, "trial")
    activated = run("release", "activate", "BR-002", "--json")
    assert activated.exit_code == 0, activated.stderr
    head = git(store, "rev-parse", "HEAD").strip()
    assert activated.stdout == (
        f'{{"already":null,"commit":"{head}","release":"BR-002","status":"active"}}\n'
    )
    settings = orjson.loads(git(store, "show", "HEAD:settings.json"))
    assert settings["student_status"] == "default"
    assert settings["student_release"] == "BR-002"
    listed = run("release", "list").stdout
    assert listed.startswith("BR-002  active")
    trailers = git(store, "log", "-1", "--format=%(trailers)")
    assert "Machine-Action: release-activate\n" in trailers


def test_a_failing_candidate_lists_its_regressed_cases_and_cannot_activate(
    trained: dict[str, Any], run: Run, fake: FakeTinker
) -> None:
    refs = trained["refs"]
    assert run("release", "new", "BR-003", "--run", trained["run"]).exit_code == 0
    fake.answers = {"Turn two": refs["Turn two"], "Turn three": refs["Turn three"]}
    checked = run("release", "check", "BR-003", "--yes")
    assert checked.exit_code == 1
    lines = checked.stdout.splitlines()
    assert lines[0].startswith("BR-003 check 1: FAIL (")
    assert lines[1].startswith(
        "  pass  eval normalized: baseline 33.3% -> candidate 66.7%"
    )
    assert lines[2] == "  FAIL  no regressions (normalized): 1 cases regressed"
    assert "baseline " in lines[3] and "-> candidate 'I do not know.'" in lines[3]
    head = git(trained["store"], "rev-parse", "HEAD").strip()
    for verb, done in (("trial", "tried"), ("activate", "activated")):
        refused = run("release", verb, "BR-003")
        assert refused.exit_code == 1
        assert refused.stderr == (
            "Error: BR-003 failed its gates in check 1 (no regressions (normalized)); "
            f"it cannot be {done}\n"
        )
    assert git(trained["store"], "rev-parse", "HEAD").strip() == head
    listed = run("release", "list")
    assert listed.stdout.startswith("BR-003  failed ")


def test_a_gate_edited_after_preregistration_refuses_everything(
    trained: dict[str, Any], run: Run, fake: FakeTinker
) -> None:
    store = Store.open(trained["store"])
    assert run("release", "new", "BR-004", "--run", trained["run"]).exit_code == 0
    path = "releases/BR-004/prereg.json"
    record = orjson.loads(git(trained["store"], "show", f"HEAD:{path}"))
    record["gates"]["metrics"][0]["min_delta"] = -1.0  # loosen a gate afterwards

    def plan(snap: Any) -> Change:
        return Change("edit gates", {path: jsonio.canonical(record)})

    edit = str(store.write(plan))
    fake.answers = {}
    fake.calls.clear()
    for command in (
        ("check", "BR-004", "--yes"),
        ("trial", "BR-004"),
        ("activate", "BR-004"),
        ("new", "BR-004", "--run", trained["run"]),
    ):
        result = run("release", *command)
        assert result.exit_code == INVALID
        assert result.stderr == (
            f"Error: BR-004 was tampered with: {path}: $.gates.metrics[0].min_delta "
            f"changed in commit {edit[:12]} (release records are append-only); "
            "preregister a new release id\n"
        )
    assert git(trained["store"], "rev-parse", "HEAD").strip() == edit
    assert "sample" not in fake.names()


def test_preregistering_an_id_twice_is_refused(
    trained: dict[str, Any], run: Run
) -> None:
    assert run("release", "new", "BR-010", "--run", trained["run"]).exit_code == 0
    again = run("release", "new", "BR-010", "--run", trained["run"])
    assert again.exit_code == 1
    assert again.stderr == (
        "Error: BR-010 is already preregistered; its gates are frozen: preregister "
        "a new release id\n"
    )


def test_the_shipped_br_001_template(
    trained: dict[str, Any], run: Run, fake: FakeTinker
) -> None:
    # The run trained train rows, and BR-001 bounds require traces.
    refused = run(
        "release",
        "new",
        "BR-001",
        "--template",
        "pi-file-repair",
        "--run",
        trained["run"],
    )
    assert refused.exit_code == 1
    assert refused.stderr.startswith(
        f"Error: run {trained['run']} is outside BR-001's training bounds: kind train "
        "is not one of traces"
    )


def test_lineage_goes_from_release_to_rows(
    trained: dict[str, Any], run: Run, fake: FakeTinker
) -> None:
    assert run("release", "new", "BR-005", "--run", trained["run"]).exit_code == 0
    found = orjson.loads(run("lineage", "BR-005", "--json", "--rows").stdout)
    assert found["release"]["id"] == "BR-005"
    assert found["run"]["id"] == trained["run"]
    assert found["checkpoint"] == CHECKPOINT
    assert found["dataset"]["history"] == {"tag": 6}
    roles = sorted(r["role"] for r in found["dataset"]["rows"])
    assert roles == ["eval"] * 3 + ["trained"] * 3
    by_checkpoint = orjson.loads(run("lineage", CHECKPOINT, "--json").stdout)
    assert by_checkpoint["run"]["id"] == trained["run"]
    text = run("lineage", trained["run"]).stdout.splitlines()
    assert text[0].startswith(f"run        {trained['run']} (done, ")
    assert text[1] == f"checkpoint {CHECKPOINT}"
    assert text[-1].startswith("eval       ")


@pytest.mark.parametrize("bad", ["BR-1", "br-001", "BR-../x", "X", "BR-0005"])
def test_bad_release_ids(trained: dict[str, Any], run: Run, bad: str) -> None:
    result = run("release", "show", bad)
    assert result.exit_code == USAGE
    assert result.stderr == (
        f"Error: bad release id {bad!r}: expected BR-NNN (e.g. BR-001)\n"
    )


def test_br_001_preregisters_a_traces_run_with_its_holdouts(
    project: Path, run: Run, fake: FakeTinker
) -> None:
    support.tag_multi_turn(run, project, "--trace")
    support.tag(run, project, support.SESSIONS, "--trace")
    assert run("train", "eval", "init", "--size", "1").exit_code == 0
    assert run("train", "eval", "baseline", "--yes").exit_code == 0
    sft = run("train", "sft", "--kind", "traces", "--batch-size", "1", "--json")
    assert sft.exit_code == 0, sft.stderr
    assert run("train", "run", "--yes").exit_code == 0
    made = run("release", "new", "BR-001", "--template", "pi-file-repair")
    assert made.exit_code == 0, made.stderr
    assert made.stdout.splitlines()[0].startswith(
        "preregistered BR-001: reliable Pi file repair ("
    )
    store = support.store_path(project)
    holdouts = git(store, "show", "HEAD:releases/BR-001/holdouts.jsonl")
    assert len(holdouts.splitlines()) == 8
    # The candidate answers every holdout right and nothing else.
    fake.answers = {
        orjson.loads(line)["messages"][0]["content"]: orjson.loads(line)["reference"]
        for line in holdouts.splitlines()
    }
    checked = run("release", "check", "BR-001", "--yes")
    assert "  pass  holdouts normalized: 100.0% of 8 (min 50.0%)" in checked.stdout


def test_a_release_is_gated_only_on_the_eval_set_its_run_held_out(
    project: Path, run: Run, fake: FakeTinker
) -> None:
    # Trained before any eval set existed, the run may have learned the very
    # rows a later eval set holds: gating on them would prove nothing.
    support.tag_multi_turn(run, project)
    support.tag(run, project, ("mixed", "basic", "file-repair"))
    made = orjson.loads(run("train", "sft", "--batch-size", "1", "--json").stdout)
    assert run("train", "run", "--yes").exit_code == 0
    assert run("train", "eval", "init", "--size", "1").exit_code == 0
    assert run("train", "eval", "baseline", "--yes").exit_code == 0
    eval_id = orjson.loads(
        git(support.store_path(project), "show", "HEAD~1:" + _eval_file(project))
    )["id"]
    refused = run("release", "new", "BR-016", "--run", made["id"])
    assert refused.exit_code == 1
    assert refused.stderr == (
        f"Error: run {made['id']} held out no eval set, but eval set {eval_id} is "
        "in force: train a run against it first\n"
    )


def _eval_file(project: Path) -> str:
    names = git(support.store_path(project), "ls-tree", "--name-only", "HEAD", "evals/")
    return next(n for n in names.split() if n.endswith(".json"))


def test_a_release_that_never_existed_is_not_found(
    trained: dict[str, Any], run: Run
) -> None:
    for command in ("show", "trial", "activate"):
        result = run("release", command, "BR-999")
        assert result.exit_code == NOT_FOUND, command
        assert (
            result.stderr == "Error: no release BR-999 (see 'machine release list')\n"
        )
