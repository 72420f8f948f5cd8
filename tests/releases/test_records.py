"""Release records are pydantic models: a bad one is one line naming the field."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git.core.errors import INVALID
from machine_git.core.errors import ReleaseRecordError
from machine_git.releases import records
from machine_git.releases.records import Check
from machine_git.releases.records import Prereg
from tests.conftest import Run
from tests.conftest import git
from tests.releases.conftest import git_in
from tests.train.conftest import FakeTinker


@pytest.mark.parametrize(
    ("gates", "problem"),
    [
        (
            {"metrics": [{"metric": "bleu"}]},
            "$.metrics[0].metric: Input should be 'exact' or 'normalized'",
        ),
        (
            {"metrics": [], "no_regres": {}},
            "$.no_regres: Extra inputs are not permitted",
        ),
        (
            {"gates": {"metrics": [{"metric": "exact", "min_delta": "a lot"}]}},
            "$.gates.metrics[0].min_delta: Input should be a valid number",
        ),
    ],
)
def test_a_bad_gates_file_is_one_line_naming_the_field(
    trained: dict[str, Any], run: Run, tmp_path: Path, gates: Any, problem: str
) -> None:
    path = tmp_path / "gates.json"
    path.write_text(json.dumps(gates))
    before = git(trained["store"], "rev-parse", "HEAD")
    made = run("release", "new", "BR-020", "--run", trained["run"], "--gates", path)
    assert made.exit_code == INVALID
    assert made.stderr == f"Error: {path}: {problem}\n"
    assert git(trained["store"], "rev-parse", "HEAD") == before


def test_a_record_that_is_not_json_names_the_file() -> None:
    with pytest.raises(ReleaseRecordError) as e:
        records.load(Check, b"{", "releases/BR-001/checks/001.json")
    assert str(e.value).startswith("releases/BR-001/checks/001.json: not valid JSON (")


def test_records_round_trip_to_the_same_bytes_and_chain_by_digest(
    trained: dict[str, Any], run: Run, fake: FakeTinker
) -> None:
    store, refs = trained["store"], trained["refs"]
    assert run("release", "new", "BR-002", "--run", trained["run"]).exit_code == 0
    fake.answers = {"Turn three": refs["Turn three"]}
    assert run("release", "check", "BR-002", "--yes").exit_code == 1
    fake.answers = {"Turn one": refs["Turn one"], "Turn two": refs["Turn two"]}
    assert run("release", "check", "BR-002", "--yes").exit_code == 0
    assert run("release", "trial", "BR-002").exit_code == 0
    assert run("release", "activate", "BR-002").exit_code == 0

    def read(name: str) -> bytes:
        return git(store, "show", f"HEAD:releases/BR-002/{name}").encode()

    def sha(name: str) -> str:
        return hashlib.sha256(read(name)).hexdigest()

    prereg = read("prereg.json")
    assert records.load(Prereg, prereg, "prereg.json").dump() == prereg
    first, second = (
        records.load(Check, read(f"checks/00{n}.json"), "c") for n in (1, 2)
    )
    assert second.dump() == read("checks/002.json")
    assert (first.passed, second.passed) == (False, True)
    assert first.prereg_sha256 == second.prereg_sha256 == sha("prereg.json")
    assert (first.previous_sha256, second.previous_sha256) == (
        None,
        sha("checks/001.json"),
    )
    trial = orjson.loads(read("trial.json"))
    assert trial["last_check"] == {"number": 2, "sha256": sha("checks/002.json")}
    activation = orjson.loads(read("activation.json"))
    assert activation["check"] == {"number": 2, "sha256": sha("checks/002.json")}
    assert activation["trial_sha256"] == sha("trial.json")
    # The answers are the check's only input; the rest follows from them.
    assert [c.output for c in second.cases] == [s.output for s in second.samples()]
    shown = run("release", "show", "BR-002")
    assert shown.stdout.splitlines()[-3:] == [
        "check 1: fail",
        "check 2: pass",
        "state: active",
    ]


def test_a_pushed_record_of_the_wrong_shape_is_one_line_naming_the_field(
    trained: dict[str, Any], run: Run, tmp_path: Path
) -> None:
    from tests.releases.conftest import head
    from tests.releases.test_attacks import commit_all
    from tests.releases.test_attacks import make_clone
    from tests.releases.test_attacks import push
    from tests.releases.test_attacks import without_hook

    store = trained["store"]
    before = head(store)
    clone = make_clone(run, tmp_path / "clone")
    folder = clone / "releases" / "BR-030"
    folder.mkdir(parents=True)
    (folder / "prereg.json").write_text(json.dumps({"id": "BR-030", "title": 3}))
    assert git_in(clone, "add", "releases").returncode == 0
    made = commit_all(clone, "a release by hand")[:12]
    line = (
        f"releases/BR-030/prereg.json: added in commit {made}, but $.title: "
        "Input should be a valid string"
    )
    code, said = push(clone)
    assert code != 0
    assert said[:2] == [f"commit {made}: a release by hand", line]
    assert head(store) == before
    without_hook(store)
    assert push(clone)[0] == 0
    shown = run("release", "show", "BR-030")
    assert shown.exit_code == INVALID
    assert shown.stdout == (
        f"state: tampered\ntampered: {line}\ntampered: releases/BR-030/prereg.json: "
        f"added in commit {made}, which is not signed by an allowed signer"
        " (written before signing? see: machine release signers adopt)\n"
    )
    listed = run("release", "list")
    assert listed.stdout == "BR-030  tampered      -  (preregistration unreadable)\n"
    traced = run("lineage", "BR-030")
    assert traced.exit_code == INVALID
    assert traced.stderr == (
        f"Error: BR-030 was tampered with: {line}; preregister a new release id\n"
    )
    checked = run("validate", "--store")
    assert checked.exit_code == INVALID
    assert checked.stdout == (
        f"releases/BR-030/prereg.json:1: $: added in commit {made}, but $.title: "
        "Input should be a valid string\n"
        f"releases/BR-030/prereg.json:1: $: added in commit {made}, "
        "which is not signed by an allowed signer"
        " (written before signing? see: machine release signers adopt)\n"
    )
