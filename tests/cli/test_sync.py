from __future__ import annotations

import json
import os
import subprocess
import time
from datetime import UTC
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pygit2
import pytest
from pygit2.enums import FileMode

from machine_git.core import jsonio
from machine_git.core import paths
from machine_git.core.errors import CONFLICT
from machine_git.core.errors import NOT_FOUND
from machine_git.core.errors import REMOTE
from machine_git.core.errors import USAGE
from machine_git.rows import rows
from machine_git.store.store import BRANCH
from machine_git.store.store import Change
from machine_git.store.store import Redaction
from machine_git.store.store import Store
from machine_git.tagging import turns
from tests import helpers
from tests.cli.test_tag import answer_id
from tests.conftest import Run
from tests.conftest import git
from tests.conftest import install_session
from tests.sync.test_sync import commit_bad_row
from tests.sync.test_transport import GitServer
from tests.sync.test_transport import git_daemon  # noqa: F401 (a fixture)

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
    assert result.exit_code == NOT_FOUND
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
        f"merged origin ({short(store_a)}): +0 rows, ~1 changed from origin; "
        "kept theirs for 1 conflicting row\n"
    )
    assert row_in(store_a, row_id) == theirs
    trailers = git(store_a, "log", "-1", "--format=%(trailers:only)")
    assert trailers == (
        "Machine-Action: merge\nMachine-Remote: origin\n"
        f"Machine-Prefer: theirs\nMachine-Resolved: {row_id}\n\n"
    )
    # The row's life: the resolution, both sides' moves to bad, the first tag;
    # and each side's version is still there to see.
    life = orjson.loads(run("log", "--id", row_id, "--json").stdout)
    assert [e["action"] for e in life] == ["merge", "move", "move", "tag"]
    assert [e["trailers"].get("Tag") for e in life] == [None, "bad", "bad", "good"]
    mine = orjson.loads(run("show", row_id, "--at", "HEAD^1", "--json").stdout)
    other = orjson.loads(run("show", row_id, "--at", "HEAD^2", "--json").stdout)
    assert (mine, other) == (ours, theirs)


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


# -- three machines, a real git server -----------------------------------------------


def tag_row(store: Store, row_id: str, when: int | None = None) -> str:
    """Tag a train row as ``machine good`` does; at time ``when`` if given."""
    row = helpers.train_row(row_id)
    if when is None:
        turns.commit(store, row, Redaction.SCANNED)
    else:
        # A tag made earlier, on a machine that was offline: a commit dated then.
        repo = store.repo
        parent = repo.references[BRANCH].peel(pygit2.Commit)
        index = pygit2.Index()
        index.read_tree(parent.tree)
        blob = repo.create_blob(jsonio.canonical(row))
        index.add(pygit2.IndexEntry(rows.row_path(row_id), blob, FileMode.BLOB))
        sig = pygit2.Signature("Offline", "off@example.com", when, 0)
        message = (
            f"good {row_id}: hi\n\nMachine-Action: tag\nMachine-Row: {row_id}\n"
            "Machine-Kind: train\nMachine-Tag: good\n"
        )
        repo.create_commit(
            BRANCH, sig, sig, message, index.write_tree(repo), [parent.id]
        )
    head = store.head
    assert head is not None
    return str(head.id)


def add_run(store: Store, run_id: str) -> None:
    """A training run's record and ref, as ``machine train sft`` leaves them."""
    head = store.head
    assert head is not None
    record = {"id": run_id, "dataset": {"commit": str(head.id)}}
    store.write(
        lambda snap: Change(
            f"train sft {run_id}",
            {f"runs/{run_id}.json": jsonio.canonical(record)},
            {"Action": "train-sft", "Run": run_id},
        )
    )
    store.repo.references.create(f"refs/runs/{run_id}", head.id)


def test_three_machines_share_rows_versions_runs_and_history(
    project: Path,
    run: Run,
    on: Any,
    git_daemon: GitServer,  # noqa: F811 (a fixture)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = git_daemon.bare("hub.git")
    made: dict[str, Store] = {}

    def machine(name: str) -> Store:
        on(name)
        if name not in made:
            # Each person's own first commit (same second, same author: one).
            monkeypatch.setenv("GIT_AUTHOR_NAME", f"Person {name}")
            made[name] = Store.create(paths.store_path(project), project)
            assert run("remote", "add", "origin", url).exit_code == 0
        return made[name]

    a = machine("a")
    tag_row(a, "a1a1a1a1a1a1")
    tag_row(a, "a2a2a2a2a2a2")
    assert run("version", "va").exit_code == 0
    add_run(a, "sft-a2a2a2a2-000001")
    assert run("push").stdout.startswith(
        "pushed 4 commits, version va and run ref sft-a2a2a2a2-000001 to origin"
    )

    # b tagged offline (a second after its store began: a commit dated before
    # its parent would be taken as no older than it); then names a version,
    # pulls and pushes, later than that.
    b = machine("b")
    assert b.head is not None
    old = b.head.commit_time + 1
    offline = tag_row(b, "b1b1b1b1b1b1", when=old)
    time.sleep(max(0.0, old + 2.2 - time.time()))
    assert run("version", "vb").exit_code == 0
    pulled = run("pull")
    assert pulled.stdout.splitlines() == [
        f"merged origin ({short(b.path)}): +2 rows, version va and run ref "
        "sft-a2a2a2a2-000001 from origin"
    ]
    assert run("push").exit_code == 0

    # a, offline meanwhile: one more tag and version; then pull and push.
    machine("a")
    tag_row(a, "a3a3a3a3a3a3")
    assert run("version", "va2").exit_code == 0
    lines = run("pull").stdout.splitlines()
    assert len(lines) == 1 and lines[0].endswith(" and version vb from origin")
    assert run("push").exit_code == 0

    # c has nothing of its own: it takes the history, then adds to it.
    c = machine("c")
    taken = run("pull")
    assert taken.stdout.splitlines() == [
        f"fast-forward to {short(c.path)}: +4 rows, versions va, va2, vb and run ref "
        "sft-a2a2a2a2-000001 from origin"
    ]
    # c's own first commit is gone: the roots are a's and b's.
    assert sorted(git(c.path, "rev-list", "--max-parents=0", "HEAD").split()) == sorted(
        git(a.path, "rev-list", "--max-parents=0", "HEAD").split()
    )
    tag_row(c, "c1c1c1c1c1c1")
    assert run("version", "vc").exit_code == 0
    assert run("push").exit_code == 0
    for name in ("a", "b"):
        machine(name)
        assert run("pull").exit_code == 0

    hub = git_daemon.base / "hub.git"
    everything = {
        "head": short(hub),
        "rows": [
            "a1a1a1a1a1a1",
            "a2a2a2a2a2a2",
            "a3a3a3a3a3a3",
            "b1b1b1b1b1b1",
            "c1c1c1c1c1c1",
        ],
        "refs": sorted(
            ["refs/runs/sft-a2a2a2a2-000001"]
            + [f"refs/tags/{v}" for v in ("va", "va2", "vb", "vc")]
        ),
        "history": sorted(git(hub, "rev-list", "HEAD").split()),
    }
    for name, store in made.items():
        machine(name)
        log = orjson.loads(run("log", "--json").stdout)
        found = {
            "head": short(store.path),
            "rows": sorted(
                r["id"] for r in orjson.loads(run("tagged", "--json").stdout)
            ),
            "refs": sorted(
                git(
                    store.path,
                    "for-each-ref",
                    "--format=%(refname)",
                    "refs/tags",
                    "refs/runs",
                ).split()
            ),
            "history": sorted(e["commit"] for e in log),
        }
        assert found == everything, name
        assert git(store.path, "show", "HEAD:runs/sft-a2a2a2a2-000001.json")
        assert [v["name"] for v in orjson.loads(run("versions", "--json").stdout)] == [
            "va",
            "vb",
            "va2",
            "vc",
        ]
        # The offline tag, reached through merges: its own history and dates.
        life = orjson.loads(run("log", "--id", "b1b1b1b1b1b1", "--json").stdout)
        assert [(e["commit"], e["action"]) for e in life] == [(offline, "tag")]
        then = f"@{{{datetime.fromtimestamp(old + 1, UTC).isoformat()}}}"
        assert (
            orjson.loads(run("log", then, "-n", "1", "--json").stdout)[0]["commit"]
            == offline
        )
        assert (
            orjson.loads(run("show", "b1b1b1b1b1b1", "--at", then, "--json").stdout)[
                "id"
            ]
            == "b1b1b1b1b1b1"
        )


def test_undo_steps_back_through_a_merge_and_redo_brings_it_again(
    project: Path, run: Run, hub: Path, on: Any
) -> None:
    on("a")
    install_session(project, "basic")
    theirs = orjson.loads(run("good", "--json").stdout)["id"]
    run("remote", "add", "origin", str(hub))
    run("push")
    on("b")
    install_session(project, "multi-turn")
    ours = orjson.loads(run("good", "--json").stdout)["id"]
    run("remote", "add", "origin", str(hub))
    store = paths.store_path(project)
    before_pull = git(store, "rev-parse", "HEAD").strip()
    run("pull")
    merge = git(store, "rev-parse", "HEAD").strip()
    assert len(git(store, "rev-list", "--parents", "-1", "HEAD").split()) == 3

    def ids() -> set[str]:
        listed = git(store, "ls-tree", "-r", "--name-only", "HEAD").split()
        return {i for p in listed if (i := rows.id_of_path(p)) is not None}

    first = run("undo")  # the rows the merge brought
    assert first.stdout.startswith(f"undid {merge[:12]} ")
    assert ids() == {ours}
    second = run("undo")  # then our own tag, before the pull
    assert second.stdout.startswith(f"undid {before_pull[:12]} good {ours}: ")
    assert ids() == set()
    run("redo")
    assert ids() == {ours}
    run("redo")
    assert ids() == {ours, theirs}
    assert f"Machine-Redoes: {merge}\n" in git(
        store, "log", "-1", "--format=%(trailers)"
    )
    assert run("pull").stdout == "already up to date with origin\n"


def no_identity(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """A machine with no git identity anywhere: git may not guess one either."""
    for name in ("AUTHOR", "COMMITTER"):
        monkeypatch.delenv(f"GIT_{name}_NAME", raising=False)
        monkeypatch.delenv(f"GIT_{name}_EMAIL", raising=False)
    monkeypatch.delenv("EMAIL", raising=False)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    # Without this git guesses user@host.domain where the host has a domain.
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "user.useConfigOnly")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "true")
    return dict(os.environ)


def edit_commit_push(target: Path, row_id: str, environment: dict[str, str]) -> None:
    path = target / rows.row_path(row_id)
    row = orjson.loads(path.read_bytes())
    row["note"] = "fixed by hand"
    path.write_bytes(jsonio.canonical(row))
    for args in (["commit", "-qam", "fix a note"], ["push", "-q"]):
        done = subprocess.run(
            ["git", "-C", str(target), *args],
            capture_output=True,
            text=True,
            env=environment,
            check=False,
        )
        assert done.returncode == 0, done.stderr


def test_clone_on_a_machine_with_no_git_identity_can_commit_and_push(
    project: Path, run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_session(project, "basic")
    run("good")
    environment = no_identity(monkeypatch, tmp_path)
    target = tmp_path / "edit"
    # Without machine's help, git refuses to commit here.
    subprocess.run(["git", "init", "-q", str(tmp_path / "plain")], check=True)
    refused = subprocess.run(
        ["git", "-C", str(tmp_path / "plain"), "commit", "--allow-empty", "-m", "x"],
        capture_output=True,
        text=True,
        env=environment,
        check=False,
    )
    assert refused.returncode != 0
    assert "Please tell me who you are" in refused.stderr
    result = run("clone", str(target))
    assert result.exit_code == 0
    assert result.stderr == (
        "note: your git config has no user.name/user.email, so commits in the clone "
        "are signed machine <machine@localhost> (its own .git/config; change with: "
        f"git -C {target} config user.name 'Your Name')\n"
    )
    assert git(target, "config", "--local", "user.name") == "machine\n"
    assert git(target, "config", "--local", "user.email") == "machine@localhost\n"
    edit_commit_push(target, answer_id(), environment)
    store = paths.store_path(project)
    assert row_in(store, answer_id())["note"] == "fixed by hand"
    assert git(store, "log", "-1", "--format=%an <%ae>%n%s") == (
        "machine <machine@localhost>\nfix a note\n"
    )


def test_clone_keeps_the_users_own_git_identity(
    project: Path, run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_session(project, "basic")
    run("good")
    environment = no_identity(monkeypatch, tmp_path)
    own = tmp_path / "gitconfig"
    own.write_text("[user]\n\tname = Ada Lovelace\n\temail = ada@example.com\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(own))
    environment["GIT_CONFIG_GLOBAL"] = str(own)
    target = tmp_path / "edit"
    result = run("clone", str(target), "--json")
    assert orjson.loads(result.stdout)["identity"] is None
    assert result.stderr == ""
    # Nothing written into the clone: a later change of the user's config counts.
    assert (
        subprocess.run(
            ["git", "-C", str(target), "config", "--local", "user.name"],
            check=False,
            capture_output=True,
        ).returncode
        == 1
    )
    edit_commit_push(target, answer_id(), environment)
    store = paths.store_path(project)
    assert git(store, "log", "-1", "--format=%an <%ae>") == (
        "Ada Lovelace <ada@example.com>\n"
    )
