from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git import paths
from machine_git import rows
from machine_git.errors import CONFLICT
from machine_git.errors import REMOTE
from machine_git.errors import USAGE
from machine_git.store import Store
from tests.cli.test_tag import answer_id
from tests.conftest import Run
from tests.conftest import git
from tests.conftest import install_session
from tests.test_sync import commit_bad_row

CONFLICT_HINT = (
    "Error: 1 row was changed differently here and on origin; nothing was merged. "
    "Keep one side with 'machine pull origin --prefer ours' or '--prefer theirs' "
    "(the other stays in history)\n"
)


@pytest.fixture
def hub(tmp_path: Path) -> Path:
    where = tmp_path / "hub.git"
    subprocess.run(
        ["git", "init", "-q", "--bare", "-b", "main", str(where)], check=True
    )
    return where


@pytest.fixture
def on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Switch machines: each has its own data dir, as two laptops would."""

    def switch(machine: str) -> Path:
        monkeypatch.setenv("MACHINE_DATA_DIR", str(tmp_path / f"data-{machine}"))
        return paths.data_dir()

    return switch


def short(where: Path) -> str:
    return git(where, "rev-parse", "HEAD").strip()[:12]


def row_in(where: Path, row_id: str) -> dict[str, Any]:
    value = orjson.loads(git(where, "show", f"HEAD:{rows.row_path(row_id)}"))
    assert isinstance(value, dict)
    return value


def test_remotes_are_added_and_listed(project: Path, run: Run, hub: Path) -> None:
    assert run("remote", "list").stdout == (
        "no remotes (add one with 'machine remote add NAME URL')\n"
    )
    assert run("remote", "add", "origin", str(hub)).stdout == (
        f"added remote origin: {hub}\n"
    )
    added = run("remote", "add", "gh", "git@example.com:me/data.git", "--json")
    assert orjson.loads(added.stdout) == {
        "name": "gh",
        "url": "git@example.com:me/data.git",
    }
    assert run("remote", "list").stdout == (
        f"gh\tgit@example.com:me/data.git\norigin\t{hub}\n"
    )
    assert orjson.loads(run("remote", "list", "--json").stdout) == [
        {"name": "gh", "url": "git@example.com:me/data.git"},
        {"name": "origin", "url": str(hub)},
    ]
    again = run("remote", "add", "origin", "/elsewhere.git")
    assert again.exit_code == CONFLICT
    assert again.stderr == f"Error: remote 'origin' already exists ({hub})\n"


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("a/b", "remote name 'a/b' may not contain '/' or start with '.'"),
        ("..", "remote name '..' may not contain '/' or start with '.'"),
        ("my hub", "remote name 'my hub' may only use letters, digits, '.', '_', '-'"),
    ],
)
def test_a_bad_remote_name_is_one_line(
    project: Path, run: Run, name: str, problem: str
) -> None:
    result = run("remote", "add", name, "/srv/hub.git")
    assert result.exit_code == USAGE
    assert result.stderr == f"Error: {problem}\n"
    push = run("push", name)
    assert push.stderr == f"Error: {problem}\n"


def test_an_unknown_or_unreachable_remote_is_one_line(
    project: Path, run: Run, tmp_path: Path
) -> None:
    install_session(project, "basic")
    run("good")
    unknown = run("push", "backup")
    assert unknown.exit_code == REMOTE
    assert unknown.stderr == (
        "Error: no remote 'backup' (add one with 'machine remote add backup URL')\n"
    )
    nowhere = tmp_path / "nowhere"
    run("remote", "add", "origin", str(nowhere))
    pulled = run("pull")
    assert pulled.exit_code == REMOTE
    assert pulled.stderr == (
        f"Error: cannot fetch from origin ({nowhere}): '{nowhere}' does not appear "
        "to be a git repository\n"
    )
    pushed = run("push")
    assert pushed.stderr == pulled.stderr.replace("fetch from", "push to")


def test_push_without_a_store_is_one_line(project: Path, run: Run) -> None:
    result = run("push")
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: no store at {paths.store_path(project)} yet "
        "(tag a turn with 'machine good')\n"
    )


def test_two_machines_share_their_rows_through_a_hub(
    project: Path, run: Run, hub: Path, on: Any
) -> None:
    on("a")
    install_session(project, "basic")
    run("good")
    run("remote", "add", "origin", str(hub))
    store_a = paths.store_path(project)
    assert run("push").stdout == f"pushed 2 commits to origin ({short(store_a)})\n"
    assert run("push").stdout == "origin is up to date\n"

    on("b")
    install_session(project, "multi-turn")
    run("good")
    run("remote", "add", "origin", str(hub))
    store_b = paths.store_path(project)
    refused = run("push")
    assert refused.exit_code == REMOTE
    assert refused.stderr == (
        "Error: origin has commits this store does not; "
        "run 'machine pull origin' first, then push again\n"
    )
    merged = run("pull")
    assert merged.stdout == f"merged origin ({short(store_b)}): +1 row from origin\n"
    assert run("pull").stdout == "already up to date with origin\n"
    before = short(hub)
    assert run("push").exit_code == 0
    assert short(hub) == short(store_b) != before

    on("a")
    pulled = run("pull", "--json")
    assert orjson.loads(pulled.stdout) == {
        "remote": "origin",
        "status": "fast-forward",
        "commit": git(store_b, "rev-parse", "HEAD").strip(),
        "added": 1,
        "changed": 0,
        "removed": 0,
        "conflicts": [],
        "resolved": [],
        "prefer": None,
        "versions": [],
        "runs": [],
    }
    counts = orjson.loads(run("data", "--json").stdout)["counts"]
    assert counts == {"train": 2, "traces": 0, "rejected": 0, "observed": 0}


def test_a_conflict_shows_both_versions_and_prefer_resolves_it(
    project: Path, run: Run, hub: Path, on: Any
) -> None:
    install_session(project, "basic")
    row_id = answer_id()
    on("a")
    run("good")
    run("remote", "add", "origin", str(hub))
    run("push")
    on("b")
    run("remote", "add", "origin", str(hub))
    run("pull")
    run("bad", "too", "terse")
    run("push")
    on("a")
    run("bad", "wrong", "file")
    store_a = paths.store_path(project)
    before = short(store_a)

    result = run("pull")
    assert result.exit_code == CONFLICT
    ours, theirs = row_in(store_a, row_id), row_in(hub, row_id)
    differ = [k for k in sorted(ours) if ours[k] != theirs[k]]
    assert "note" in differ and "kind" not in differ
    assert result.stdout == (
        f"conflict in row {row_id} ({rows.row_path(row_id)}):\n"
        + "".join(
            f"  $.{k}\n    ours:   {json.dumps(ours[k])}\n"
            f"    theirs: {json.dumps(theirs[k])}\n"
            for k in differ
        )
    )
    assert result.stderr == CONFLICT_HINT
    assert short(store_a) == before

    as_json = run("pull", "--json")
    assert as_json.exit_code == CONFLICT
    [conflict] = orjson.loads(as_json.stdout)["conflicts"]
    assert (conflict["row"], conflict["ours"], conflict["theirs"]) == (
        row_id,
        ours,
        theirs,
    )
    assert {"path": "$.note", "ours": '"wrong file"', "theirs": '"too terse"'} in (
        conflict["fields"]
    )

    resolved = run("pull", "--prefer", "theirs")
    assert resolved.exit_code == 0
    assert resolved.stdout == (
        f"merged origin ({short(store_a)}): +0 rows, ~1 changed from origin\n"
        "kept theirs for 1 conflicting row\n"
    )
    assert row_in(store_a, row_id) == theirs
    trailers = git(store_a, "log", "-1", "--format=%(trailers:only)")
    assert trailers == (
        "Machine-Action: merge\nMachine-Remote: origin\n"
        f"Machine-Prefer: theirs\nMachine-Resolved: {row_id}\n\n"
    )


def test_pull_from_an_empty_hub(project: Path, run: Run, hub: Path) -> None:
    run("remote", "add", "origin", str(hub))
    assert run("pull").stdout == "origin has no commits yet; nothing to pull\n"


def test_a_refused_push_shows_what_the_store_found(
    project: Path, run: Run, tmp_path: Path
) -> None:
    install_session(project, "basic")
    run("good")
    mine = paths.store_path(project)
    other = Store.create(tmp_path / "other")
    run("remote", "add", "other", str(other.path))
    run("pull", "other")
    assert run("push", "other").exit_code == 0
    bad = commit_bad_row(mine)
    result = run("push", "other")
    assert result.exit_code == REMOTE
    assert result.stderr == (
        f"commit {bad[:12]}: sneak a bad row\n"
        'rows/dd/dd/dddddddddddd.json:1: $.note: 3 is not of types "null", "string"\n'
        "machine: push rejected: 1 invalid row in 1 commit; nothing was stored\n"
        "Error: other refused the push: pre-receive hook declined\n"
    )


def test_clone_makes_a_working_copy_and_refuses_a_full_folder(
    project: Path, run: Run, tmp_path: Path
) -> None:
    install_session(project, "basic")
    run("good")
    store = paths.store_path(project)
    target = tmp_path / "edit"
    result = run("clone", str(target))
    assert result.stdout == (
        f"cloned {store} into {target}\n"
        "edit rows there, then: git commit -a && git push\n"
    )
    assert (target / rows.row_path(answer_id())).is_file()
    again = run("clone", str(target))
    assert again.exit_code == 1
    assert again.stderr == (
        f"Error: {target} exists and is not empty; clone into a new folder\n"
    )
