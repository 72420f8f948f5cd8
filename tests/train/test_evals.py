from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git.store.store import Store
from machine_git.train import evals
from tests.conftest import Run
from tests.conftest import git
from tests.conftest import install_session
from tests.conftest import session_id
from tests.train import conftest as support
from tests.train.conftest import FakeTinker


def _hash(name: str) -> str:
    return evals.session_hash(
        {"source": {"host": "pi", "session_id": session_id(name)}}
    )


def _rows(store: Path) -> dict[str, dict[str, Any]]:
    opened = Store.open(store)
    return {orjson.loads(d)["id"]: orjson.loads(d) for _, d in opened.iter_row_blobs()}


@pytest.fixture
def answers(project: Path, run: Run) -> Path:
    """Train rows: the three turns of multi-turn (one session), mixed, basic."""
    # The draw order is by session hash: multi-turn, then mixed, then basic.
    assert _hash("multi-turn") < _hash("mixed") < _hash("basic")
    support.tag_multi_turn(run, project)
    support.tag(run, project, ("mixed", "basic"))
    return support.store_path(project)


def test_eval_init_draws_whole_sessions_and_commits_them(
    answers: Path, run: Run
) -> None:
    result = run("train", "eval", "init", "--size", "2")
    assert result.exit_code == 0, result.stderr
    record = evals.active(Store.open(answers))
    assert record is not None
    head = git(answers, "rev-parse", "HEAD~1").strip()
    assert result.stdout == (
        f"drew eval set {record['id']}: 3 rows (train 3, traces 0) from 1 sessions at "
        f"{head[:12]}\n"
        "training exports leave out every row of these sessions from now on\n"
    )
    rows = _rows(answers)
    multi = sorted(
        i
        for i, r in rows.items()
        if r["source"]["session_id"] == session_id("multi-turn")
    )
    assert record["rows"] == multi  # size 2, but the session's third turn comes too
    assert record["sessions"] == [_hash("multi-turn")]
    assert record["dataset_commit"] == head
    assert git(answers, "log", "-1", "--format=%(trailers)") == (
        "Machine-Action: eval-init\n"
        f"Machine-Eval: {record['id']}\n"
        f"Machine-Dataset: {head}\n\n"
    )
    again = run("train", "eval", "init", "--size", "2")
    assert again.exit_code == 1
    assert again.stderr == (
        f"Error: eval set {record['id']} exists (3 rows); --force replaces it "
        "(its results stay in history)\n"
    )
    forced = run("train", "eval", "init", "--size", "4", "--force")
    assert forced.exit_code == 0, forced.stderr
    bigger = evals.active(Store.open(answers))
    assert bigger is not None and len(bigger["rows"]) == 4
    assert (
        git(answers, "ls-tree", "--name-only", "HEAD", "evals/")
        == f"evals/{bigger['id']}.json\n"
    )


def test_eval_init_leaves_something_to_train_on(answers: Path, run: Run) -> None:
    result = run("train", "eval", "init", "--size", "5")
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: an eval set of 5 rows would take every session (3 sessions, 5 rows) "
        "and leave nothing to train on; lower --size or tag turns from more sessions\n"
    )


def test_training_exports_leave_out_the_eval_sessions(project: Path, run: Run) -> None:
    assert _hash("multi-turn") < _hash("mixed") < _hash("basic")
    session = install_session(project, "multi-turn")
    assert run("good").exit_code == 0  # only the last turn of multi-turn, for now
    support.tag(run, project, ("mixed", "basic"))
    assert run("train", "eval", "init", "--size", "1").exit_code == 0
    store = support.store_path(project)
    eval_set = evals.active(Store.open(store))
    assert eval_set is not None and len(eval_set["rows"]) == 1
    # A turn of the eval session tagged later is held out too: not in the list,
    # but its session is.
    entry = support.answer_entry("multi-turn", "Turn one")
    assert run("good", "--session", str(session), "--entry", entry).exit_code == 0
    result = run("train", "sft", "--batch-size", "1", "--json")
    assert result.exit_code == 0, result.stderr
    record = orjson.loads(result.stdout)
    assert (record["dataset"]["rows"], record["dataset"]["held_out_rows"]) == (2, 2)
    assert record["dataset"]["held_out_eval"] == eval_set["id"]
    folder = store / "machine" / "runs" / record["id"]
    exported = folder.joinpath("data.jsonl").read_text()
    assert "Turn one" not in exported and "Turn three" not in exported
    assert "mixed-answer" in exported
    manifest = orjson.loads(folder.joinpath("data.jsonl.manifest.json").read_bytes())
    assert manifest["held_out"] == {"eval": eval_set["id"], "rows": 2}
    assert (
        f'held_out_eval: "{eval_set["id"]}"'
        in folder.joinpath("tinker.yaml").read_text()
    )


def _references(store: Path, eval_set: dict[str, Any]) -> dict[str, str]:
    rows = _rows(store)
    return {i: rows[i]["messages"][-1]["content"] for i in eval_set["rows"]}


def test_baseline_samples_the_eval_set_and_commits_scores(
    answers: Path, run: Run, fake: FakeTinker
) -> None:
    assert run("train", "eval", "init", "--size", "2").exit_code == 0
    eval_set = evals.active(Store.open(answers))
    assert eval_set is not None
    eval_commit = git(answers, "rev-parse", "HEAD").strip()
    refs = _references(answers, eval_set)
    rows = _rows(answers)
    by_turn = {rows[i]["messages"][0]["content"].split(":")[0]: i for i in refs}
    one, two = refs[by_turn["Turn one"]], refs[by_turn["Turn two"]]
    fake.answers = {
        "Turn one": one,  # exact
        "Turn two": "  " + two.upper() + "!",  # normalized only
        "Turn three": "Something else.",
    }
    result = run("train", "eval", "baseline", "--yes")
    assert result.exit_code == 0, result.stderr
    head = git(answers, "rev-parse", "HEAD").strip()
    model = support.MODEL
    assert result.stdout == (
        f"{model} on {eval_set['id']}: exact 33%, normalized 67% of 3 cases\n"
        f"recorded evals/{eval_set['id']}/results/"
        f"Qwen--Qwen3-30B-A3B.json in {head[:12]}\n"
    )
    assert fake.names() == [
        "ServiceClient",
        "get_server_capabilities",
        "ServiceClient",
        "create_sampling_client",
        "sample",
        "sample",
        "sample",
    ]
    assert fake.calls[3][1] == {"model_path": None, "base_model": model}
    prompts = [c[1]["prompt"] for c in fake.calls if c[0] == "sample"]
    assert all(p.endswith("<|im_start|>assistant\n") for p in prompts)
    assert all(c[1]["temperature"] == 0.0 for c in fake.calls if c[0] == "sample")
    path = f"evals/{eval_set['id']}/results/Qwen--Qwen3-30B-A3B.json"
    results = orjson.loads(git(answers, "show", f"HEAD:{path}"))
    assert (results["eval_commit"], results["dataset_commit"], results["model"]) == (
        eval_commit,
        eval_set["dataset_commit"],
        model,
    )
    assert results["scores"] == {"cases": 3, "exact": 1 / 3, "normalized": 2 / 3}
    scored = {c["row"]: (c["exact"], c["normalized"]) for c in results["cases"]}
    assert scored == {
        by_turn["Turn one"]: (True, True),
        by_turn["Turn two"]: (False, True),
        by_turn["Turn three"]: (False, False),
    }
    assert git(answers, "log", "-1", "--format=%(trailers)") == (
        "Machine-Action: eval-baseline\n"
        f"Machine-Eval: {eval_set['id']}\n"
        f"Machine-Model: {model}\n"
        f"Machine-Dataset: {eval_set['dataset_commit']}\n\n"
    )


def test_baseline_json_is_the_committed_results_and_their_commit(
    answers: Path, run: Run, fake: FakeTinker
) -> None:
    assert run("train", "eval", "init", "--size", "2").exit_code == 0
    result = run("train", "eval", "baseline", "--yes", "--json")
    assert result.exit_code == 0, result.stderr
    found = orjson.loads(result.stdout)
    head = git(answers, "rev-parse", "HEAD").strip()
    path = f"evals/{found['eval_id']}/results/Qwen--Qwen3-30B-A3B.json"
    committed = orjson.loads(git(answers, "show", f"HEAD:{path}"))
    assert found == {**committed, "commit": head}


def test_baseline_of_a_run_samples_its_final_checkpoint(
    project: Path, run: Run, fake: FakeTinker
) -> None:
    support.tag_multi_turn(run, project)
    support.tag(run, project, ("mixed", "basic", "file-repair"))
    assert run("train", "eval", "init", "--size", "1").exit_code == 0
    record = orjson.loads(run("train", "sft", "--batch-size", "1", "--json").stdout)
    assert run("train", "run", "--yes").exit_code == 0
    fake.calls.clear()
    result = run("train", "eval", "baseline", "--model", record["id"], "--yes")
    assert result.exit_code == 0, result.stderr
    sampler = "tinker://fake-run:train:0/sampler_weights/final"
    assert fake.calls[3] == (
        "create_sampling_client",
        {"model_path": sampler, "base_model": None},
    )
    slug = evals.model_slug(sampler)
    assert slug == "fake-run-train-0--sampler_weights--final-" + slug[-8:]
    assert result.stdout.startswith(f"{sampler} on ")


def test_baseline_needs_an_eval_set(answers: Path, run: Run, fake: FakeTinker) -> None:
    result = run("train", "eval", "baseline", "--yes")
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: no eval set yet (draw one with 'machine train eval init')\n"
    )
    assert fake.calls == []


def test_scores_ignore_case_spacing_and_edge_punctuation() -> None:
    assert evals.score(" The answer is 4. ", "The answer is 4.") == {
        "exact": True,
        "normalized": True,
    }
    assert evals.score("the  ANSWER is 4", "The answer is 4.") == {
        "exact": False,
        "normalized": True,
    }
    assert evals.score("The answer is 5.", "The answer is 4.") == {
        "exact": False,
        "normalized": False,
    }


# -- disjoint by content -----------------------------------------------------------


def _again(project: Path, name: str, session: str) -> Path:
    """Fixture session ``name`` under another session id: the same prompt and
    answer tagged from a second session (a re-run, a fork)."""
    from machine_git.core import jsonio
    from machine_git.sessions import pi

    source = install_session(project, name)
    header, _, rest = source.read_bytes().partition(b"\n")
    value = jsonio.loads(header)
    value["id"] = session
    target = source.with_name(f"{name}-again.jsonl")
    target.write_bytes(jsonio.line(value) + rest)
    assert pi.read_turn(target)[0].session_id == session
    return target


def _mixed_twice(project: Path, run: Run) -> list[str]:
    # mixed from its own session and from another whose hash sorts last: the
    # same example twice; and basic, another example
    support.tag(run, project, ("mixed", "basic"))
    other = next(
        f"mixed-rerun-{n}"
        for n in range(1000)
        if evals.session_hash(
            {"source": {"host": "pi", "session_id": f"mixed-rerun-{n}"}}
        )
        > _hash("basic")
    )
    again = _again(project, "mixed", other)
    assert run("good", "--session", str(again)).exit_code == 0
    rows = _rows(support.store_path(project))
    return sorted(i for i, r in rows.items() if "mixed-answer" in str(r["messages"]))


def test_eval_init_keeps_identical_content_on_one_side(project: Path, run: Run) -> None:
    both = _mixed_twice(project, run)
    assert len(both) == 2
    assert _hash("mixed") < _hash("basic")
    result = run("train", "eval", "init", "--size", "1")
    assert result.exit_code == 0, result.stderr
    store = support.store_path(project)
    record = evals.active(Store.open(store))
    assert record is not None
    # the first session's row pulls in the other session with the same content
    assert record["rows"] == both
    assert len(record["sessions"]) == 2 and len(record["contents"]) == 1
    exported = run("train", "sft", "--batch-size", "1", "--json")
    assert exported.exit_code == 0, exported.stderr
    data = orjson.loads(exported.stdout)["dataset"]
    assert (data["rows"], data["held_out_rows"]) == (1, 2)


def test_validate_blocks_rows_that_share_content_with_an_older_eval_set(
    project: Path, run: Run
) -> None:
    from machine_git.core import jsonio
    from machine_git.store.store import Change

    both = _mixed_twice(project, run)
    assert run("train", "eval", "init", "--size", "1").exit_code == 0
    store = Store.open(support.store_path(project))
    record = evals.active(store)
    assert record is not None
    # an eval set drawn before content was held out: one session, no contents
    older = {**record, "rows": both[:1], "contents": None}
    older["sessions"] = [
        evals.session_hash(r) for i, r in _rows(store.path).items() if i == both[0]
    ]
    del older["contents"]
    path = evals.path_of(str(record["id"]))
    store.write(lambda snap: Change("older eval set", {path: jsonio.canonical(older)}))
    result = run("train", "validate", "--batch-size", "1")
    assert result.exit_code == 1
    assert (
        "blocking  shares a session or the same prompt and answer as a row of "
        f"eval set {record['id']}" in result.stdout
    )
    assert both[1] in result.stdout
    refused = run("train", "sft", "--batch-size", "1")
    assert refused.exit_code == 1
    assert refused.stderr.startswith("Error: refused, nothing was spent: shares ")
