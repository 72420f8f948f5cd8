from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pygit2
import pytest
from pygit2.enums import FileMode

from machine_git.core import jsonio
from machine_git.core.errors import ConflictError
from machine_git.core.errors import RemoteError
from machine_git.core.errors import UsageError
from machine_git.rows import rows
from machine_git.store.store import BRANCH
from machine_git.store.store import Change
from machine_git.store.store import Store
from machine_git.sync import sharing as sync
from tests import helpers
from tests.conftest import git


def put(store: Store, row: dict[str, Any], summary: str = "add") -> None:
    path = rows.row_path(row["id"])
    text = f"{summary} {row['id']}"
    store.write(lambda snap: Change(text, {path: jsonio.canonical(row)}))


def drop(store: Store, row_id: str) -> None:
    store.write(lambda snap: Change(f"rm {row_id}", {rows.row_path(row_id): None}))


def row_ids(store: Path) -> list[str]:
    listed = git(store, "ls-tree", "-r", "--name-only", "HEAD", "rows").split()
    return [str(rows.id_of_path(p)) for p in listed]


def head(store: Path) -> str:
    return git(store, "rev-parse", "HEAD").strip()


def bare_hub(tmp_path: Path) -> Path:
    hub = tmp_path / "hub.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(hub)], check=True)
    return hub


def assert_private(store: Path) -> None:
    for root, dirs, files in os.walk(store):
        for d in dirs:
            assert stat.S_IMODE(os.stat(Path(root, d)).st_mode) == 0o700, d
        for f in files:
            want = 0o700 if Path(root) == store / "hooks" else 0o600
            assert stat.S_IMODE(os.lstat(Path(root, f)).st_mode) == want, (root, f)


@pytest.fixture
def two(tmp_path: Path) -> tuple[Store, Store, Path]:
    """Two machines' stores sharing one rows (a1...) through a bare hub."""
    hub = bare_hub(tmp_path)
    a = Store.create(tmp_path / "a")
    b = Store.create(tmp_path / "b")
    sync.add_remote(a, "origin", str(hub))
    sync.add_remote(b, "origin", str(hub))
    put(a, helpers.train_row("a1a1a1a1a1a1"))
    sync.push(a)
    sync.pull(b)
    return a, b, hub


# -- remotes ----------------------------------------------------------------------


def test_a_local_remote_is_kept_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store.create(tmp_path / "s")
    monkeypatch.chdir(tmp_path)
    added = sync.add_remote(store, "hub", "hub.git")
    assert added == sync.Remote("hub", str(tmp_path / "hub.git"))
    assert git(store.path, "config", "remote.hub.url") == f"{tmp_path}/hub.git\n"
    sync.add_remote(store, "gh", "git@example.com:me/data.git")
    assert sync.remotes(store) == [
        sync.Remote("gh", "git@example.com:me/data.git"),
        sync.Remote("hub", str(tmp_path / "hub.git")),
    ]


def test_adding_a_remote_twice_is_refused(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    sync.add_remote(store, "origin", "/srv/a.git")
    with pytest.raises(
        ConflictError, match=r"^remote 'origin' already exists \(/srv/a.git\)$"
    ):
        sync.add_remote(store, "origin", "/srv/b.git")


@pytest.mark.parametrize("name", ["a/b", "..", ".hidden", "", "two words", "x\x00"])
def test_bad_remote_names_are_refused(tmp_path: Path, name: str) -> None:
    store = Store.create(tmp_path / "s")
    with pytest.raises(UsageError, match=r"^remote name"):
        sync.add_remote(store, name, "/srv/a.git")
    assert sync.remotes(store) == []


def test_an_unknown_remote_says_how_to_add_it(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    with pytest.raises(RemoteError) as e:
        sync.push(store, "origin")
    assert (
        str(e.value)
        == "no remote 'origin' (add one with 'machine remote add origin URL')"
    )


def test_an_unreachable_remote_is_one_line(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    sync.add_remote(store, "origin", str(tmp_path / "nowhere"))
    expected = (
        f"cannot fetch from origin ({tmp_path}/nowhere): '{tmp_path}/nowhere' "
        "does not appear to be a git repository"
    )
    with pytest.raises(RemoteError) as e:
        sync.pull(store)
    assert str(e.value) == expected
    with pytest.raises(RemoteError) as e:
        sync.push(store)
    assert str(e.value) == expected.replace("cannot fetch from", "cannot push to")


# -- push and pull ------------------------------------------------------------------


def test_push_then_pull_fast_forwards_the_other_store(
    two: tuple[Store, Store, Path],
) -> None:
    a, b, hub = two
    assert head(b.path) == head(a.path) == head(hub)
    put(a, helpers.train_row("a2a2a2a2a2a2"))
    pushed = sync.push(a)
    assert pushed == sync.PushResult("origin", "pushed", 1, head(a.path))
    assert sync.push(a) == sync.PushResult("origin", "up-to-date", 0, head(a.path))
    pulled = sync.pull(b)
    assert pulled == sync.PullResult("origin", "fast-forward", head(a.path), added=1)
    assert head(b.path) == head(a.path)
    assert sync.pull(b).status == "up-to-date"
    reflog = git(b.path, "reflog", "-1", "--format=%gs", "main")
    assert reflog == "pull origin: fast-forward\n"


def test_rows_tagged_on_both_sides_merge_into_one_commit(
    two: tuple[Store, Store, Path],
) -> None:
    a, b, _ = two
    put(a, helpers.train_row("a2a2a2a2a2a2"))
    for n in range(3):
        put(b, helpers.train_row(f"b{n}b{n}b{n}b{n}b{n}b{n}"))
    sync.push(b)
    ours_before = head(a.path)
    result = sync.pull(a)
    assert (result.status, result.added, result.conflicts) == ("merge", 3, [])
    assert row_ids(a.path) == [
        "a1a1a1a1a1a1",
        "a2a2a2a2a2a2",
        "b0b0b0b0b0b0",
        "b1b1b1b1b1b1",
        "b2b2b2b2b2b2",
    ]
    parents = git(a.path, "log", "-1", "--format=%P").split()
    assert parents == [ours_before, head(b.path)]
    assert git(a.path, "log", "-1", "--format=%B") == (
        "merge origin: +3 rows from origin\n\n"
        "Machine-Action: merge\n"
        "Machine-Remote: origin\n\n"
    )
    assert result.commit == head(a.path)
    # The merged store pushes as a fast-forward, and the other side follows.
    assert sync.push(a).status == "pushed"
    assert sync.pull(b).status == "fast-forward"
    assert row_ids(b.path) == row_ids(a.path)


def test_stores_with_unrelated_histories_merge(tmp_path: Path) -> None:
    hub = bare_hub(tmp_path)
    a = Store.create(tmp_path / "a")
    b = Store.create(tmp_path / "b")
    put(a, helpers.train_row("a1a1a1a1a1a1"))
    put(b, helpers.train_row("b1b1b1b1b1b1"))
    for store in (a, b):
        sync.add_remote(store, "origin", str(hub))
    sync.push(a)
    result = sync.pull(b)
    assert (result.status, result.added) == ("merge", 1)
    assert row_ids(b.path) == ["a1a1a1a1a1a1", "b1b1b1b1b1b1"]


def test_the_same_change_on_both_sides_is_no_conflict(
    two: tuple[Store, Store, Path],
) -> None:
    a, b, _ = two
    same = helpers.train_row("a1a1a1a1a1a1", note="agreed")
    # Different messages: the same commit on both sides would be no merge.
    put(a, same, "agree on")
    put(b, same, "also agree on")
    put(b, helpers.train_row("b1b1b1b1b1b1"))
    sync.push(b)
    result = sync.pull(a)
    assert (result.status, result.added, result.changed) == ("merge", 1, 0)
    assert a.read_row("a1a1a1a1a1a1") == same


def test_changes_and_removals_from_one_side_are_taken(
    two: tuple[Store, Store, Path],
) -> None:
    a, b, _ = two
    put(a, helpers.train_row("a2a2a2a2a2a2"))
    sync.push(a)
    sync.pull(b)
    put(a, helpers.train_row("a3a3a3a3a3a3"))
    drop(b, "a1a1a1a1a1a1")
    put(b, helpers.train_row("a2a2a2a2a2a2", note="better"))
    sync.push(b)
    result = sync.pull(a)
    assert (result.added, result.changed, result.removed) == (0, 1, 1)
    assert git(a.path, "log", "-1", "--format=%s") == (
        "merge origin: +0 rows, ~1 changed, -1 removed from origin\n"
    )
    assert row_ids(a.path) == ["a2a2a2a2a2a2", "a3a3a3a3a3a3"]
    assert a.read_row("a2a2a2a2a2a2") == helpers.train_row(
        "a2a2a2a2a2a2", note="better"
    )


def conflicting(two: tuple[Store, Store, Path]) -> tuple[Store, Store]:
    a, b, _ = two
    put(a, helpers.train_row("a1a1a1a1a1a1", note="ours"))
    put(b, helpers.train_row("a1a1a1a1a1a1", note="theirs", kind="rejected", tag="bad"))
    put(b, helpers.train_row("b1b1b1b1b1b1"))
    sync.push(b)
    return a, b


def test_a_row_changed_differently_on_both_sides_stops_the_pull(
    two: tuple[Store, Store, Path],
) -> None:
    a, _ = conflicting(two)
    before = head(a.path)
    result = sync.pull(a)
    assert result.status == "conflict"
    assert result.commit is None
    [conflict] = result.conflicts
    assert conflict.path == "rows/a1/a1/a1a1a1a1a1a1.json"
    assert conflict.row_id == "a1a1a1a1a1a1"
    assert conflict.ours == helpers.train_row("a1a1a1a1a1a1", note="ours")
    assert conflict.theirs["note"] == "theirs"
    assert conflict.fields == [
        sync.FieldDiff("$.kind", '"train"', '"rejected"'),
        sync.FieldDiff("$.note", '"ours"', '"theirs"'),
        sync.FieldDiff("$.tag", '"good"', '"bad"'),
    ]
    # Nothing committed: not the row without conflict, not a merge commit.
    assert head(a.path) == before
    assert row_ids(a.path) == ["a1a1a1a1a1a1"]


def test_prefer_theirs_resolves_and_records_which_side_won(
    two: tuple[Store, Store, Path],
) -> None:
    a, b = conflicting(two)
    result = sync.pull(a, prefer="theirs")
    assert (result.status, result.added, result.changed) == ("merge", 1, 1)
    assert result.resolved == ["rows/a1/a1/a1a1a1a1a1a1.json"]
    assert a.read_row("a1a1a1a1a1a1") == b.read_row("a1a1a1a1a1a1")
    assert git(a.path, "log", "-1", "--format=%B") == (
        "merge origin: +1 row, ~1 changed from origin\n\n"
        "Resolved with --prefer theirs (the other side's version stays in history):\n"
        "a1a1a1a1a1a1: theirs\n\n"
        "Machine-Action: merge\n"
        "Machine-Remote: origin\n"
        "Machine-Prefer: theirs\n"
        "Machine-Resolved: a1a1a1a1a1a1\n\n"
    )
    # Ours is not dropped: it is the merge's first parent.
    old = git(a.path, "show", "HEAD^1:rows/a1/a1/a1a1a1a1a1a1.json")
    assert jsonio.loads(old)["note"] == "ours"


def test_prefer_ours_keeps_our_row_and_takes_the_rest(
    two: tuple[Store, Store, Path],
) -> None:
    a, _ = conflicting(two)
    result = sync.pull(a, prefer="ours")
    assert (result.added, result.changed, result.resolved) == (
        1,
        0,
        ["rows/a1/a1/a1a1a1a1a1a1.json"],
    )
    assert a.read_row("a1a1a1a1a1a1") == helpers.train_row("a1a1a1a1a1a1", note="ours")
    assert row_ids(a.path) == ["a1a1a1a1a1a1", "b1b1b1b1b1b1"]
    assert "Machine-Prefer: ours\n" in git(a.path, "log", "-1", "--format=%B")


def test_a_removal_against_a_change_is_a_conflict(
    two: tuple[Store, Store, Path],
) -> None:
    a, b, _ = two
    drop(a, "a1a1a1a1a1a1")
    put(b, helpers.train_row("a1a1a1a1a1a1", note="kept"))
    sync.push(b)
    [conflict] = sync.pull(a).conflicts
    assert conflict.ours is None
    whole = jsonio.compact(b.read_row("a1a1a1a1a1a1"))
    assert conflict.fields == [sync.FieldDiff("$", "(deleted)", whole[:199] + "…")]


def test_diff_fields_follows_nested_paths() -> None:
    ours = {"a": [1, {"b": "x"}], "c": [1, 2], "d": 1, "e": "long" * 100}
    theirs = {"a": [1, {"b": "y"}], "c": [1], "f": None, "e": "long" * 101}
    assert sync.diff_fields(ours, theirs) == [
        sync.FieldDiff("$.a[1].b", '"x"', '"y"'),
        sync.FieldDiff("$.c[1]", "2", "(absent)"),
        sync.FieldDiff("$.d", "1", "(absent)"),
        sync.FieldDiff("$.e", '"' + "long" * 49 + "lo…", '"' + "long" * 49 + "lo…"),
        sync.FieldDiff("$.f", "(absent)", "null"),
    ]


def test_push_to_a_remote_that_moved_on_says_pull_first(
    two: tuple[Store, Store, Path],
) -> None:
    a, b, hub = two
    put(b, helpers.train_row("b1b1b1b1b1b1"))
    sync.push(b)
    put(a, helpers.train_row("a2a2a2a2a2a2"))
    with pytest.raises(RemoteError) as e:
        sync.push(a)
    assert str(e.value) == (
        "origin has commits this store does not; "
        "run 'machine pull origin' first, then push again"
    )
    assert head(hub) == head(b.path)


def test_pull_from_an_empty_remote_changes_nothing(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    sync.add_remote(store, "origin", str(bare_hub(tmp_path)))
    before = head(store.path)
    assert sync.pull(store) == sync.PullResult("origin", "empty")
    assert head(store.path) == before


def commit_bad_row(repo_path: Path, note: Any = 3) -> str:
    """A commit on main with an invalid row, made with pygit2 behind machine's back."""
    repo = pygit2.Repository(str(repo_path))
    row = helpers.train_row("dddddddddddd", note=note)
    parent = repo.references[BRANCH].peel(pygit2.Commit)
    index = pygit2.Index()
    index.read_tree(parent.tree)
    blob = repo.create_blob(jsonio.canonical(row))
    index.add(pygit2.IndexEntry(rows.row_path(row["id"]), blob, FileMode.BLOB))
    tree = index.write_tree(repo)
    sig = pygit2.Signature("x", "x@example.com")
    oid = repo.create_commit(BRANCH, sig, sig, "sneak a bad row\n", tree, [parent.id])
    return str(oid)


def test_pull_refuses_invalid_rows_from_a_plain_hub(
    two: tuple[Store, Store, Path],
) -> None:
    a, _, hub = two
    bad = commit_bad_row(hub)
    before = head(a.path)
    with pytest.raises(RemoteError) as e:
        sync.pull(a)
    assert str(e.value) == "origin has 1 invalid row in 1 commit; nothing was merged"
    assert e.value.details == [
        f"commit {bad[:12]}: sneak a bad row",
        'rows/dd/dd/dddddddddddd.json:1: $.note: 3 is not of types "null", "string"',
    ]
    assert head(a.path) == before


def test_push_into_another_store_runs_its_pre_receive_hook(tmp_path: Path) -> None:
    a = Store.create(tmp_path / "a")
    other = Store.create(tmp_path / "other")  # made as 'machine good' makes it
    put(a, helpers.train_row("a1a1a1a1a1a1"))
    sync.add_remote(a, "other", str(other.path))
    sync.pull(a, "other")  # unrelated histories: after this, a push fast-forwards
    assert not (other.path / "hooks" / "pre-receive").exists()
    assert sync.push(a, "other").status == "pushed"
    bad = commit_bad_row(a.path)
    with pytest.raises(RemoteError) as e:
        sync.push(a, "other")
    assert str(e.value) == "other refused the push: pre-receive hook declined"
    assert e.value.details == [
        f"commit {bad[:12]}: sneak a bad row",
        'rows/dd/dd/dddddddddddd.json:1: $.note: 3 is not of types "null", "string"',
        "machine: push rejected: 1 invalid row in 1 commit; nothing was stored",
    ]
    assert head(other.path) != bad
    # The quarantined objects were thrown away with the push.
    done = subprocess.run(
        ["git", "-C", str(other.path), "cat-file", "-e", bad], capture_output=True
    )
    assert done.returncode != 0


def test_the_store_stays_private_after_push_and_pull(
    two: tuple[Store, Store, Path], tmp_path: Path
) -> None:
    from machine_git.history import versions

    a, b, _ = two
    # Enough objects that git keeps a pack rather than loose objects.
    for n in range(60):
        put(a, helpers.train_row(f"{n:012x}"))
    assert a.head is not None
    versions.create(a, "v1", a.head)  # refs that travel are private too
    sync.push(a)
    sync.pull(b)
    put(b, helpers.train_row("b1b1b1b1b1b1"))
    sync.push(b)
    sync.pull(a)
    assert list((b.path / "objects" / "pack").glob("*.pack"))
    for store in (a.path, b.path):
        assert_private(store)
    # A store that receives a push directly is fixed by its post-receive hook.
    c = Store.create(tmp_path / "c")
    sync.add_remote(a, "c", str(c.path))
    sync.pull(a, "c")
    sync.push(a, "c")
    assert list((c.path / "objects" / "pack").glob("*.pack"))
    assert_private(c.path)
    assert (b.path / "refs" / "tags" / "v1").is_file()
    assert (c.path / "refs" / "tags" / "v1").is_file()


# -- a store with nothing of its own ------------------------------------------------


def test_an_empty_store_takes_the_remote_history_on_its_first_pull(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub = bare_hub(tmp_path)
    a = Store.create(tmp_path / "a")
    put(a, helpers.train_row("a1a1a1a1a1a1"))
    sync.add_remote(a, "origin", str(hub))
    sync.push(a)
    # Another author: b's first commit is not a's (same second, same author
    # would make them one commit).
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Someone Else")
    b = Store.create(tmp_path / "b")
    sync.add_remote(b, "origin", str(hub))
    assert head(b.path) != head(a.path)
    result = sync.pull(b)
    assert (result.status, result.added, result.commit) == (
        "fast-forward",
        1,
        head(a.path),
    )
    assert head(b.path) == head(a.path)
    assert git(b.path, "rev-list", "--max-parents=0", "HEAD").split() == [
        git(a.path, "rev-list", "--max-parents=0", "HEAD").strip()
    ]
    assert git(b.path, "rev-list", "--merges", "HEAD") == ""
    reflog = git(b.path, "reflog", "-1", "--format=%gs", "main")
    assert reflog == "pull origin: took its history\n"


def test_a_store_with_a_setting_of_its_own_merges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from machine_git.store import settings

    hub = bare_hub(tmp_path)
    a = Store.create(tmp_path / "a")
    put(a, helpers.train_row("a1a1a1a1a1a1"))
    sync.add_remote(a, "origin", str(hub))
    sync.push(a)
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Someone Else")
    b = Store.create(tmp_path / "b")
    settings.write(b, "auto", True)
    sync.add_remote(b, "origin", str(hub))
    assert sync.pull(b).status == "merge"
    assert git(b.path, "rev-list", "--merges", "HEAD").strip() == head(b.path)


# -- versions and run refs travel ---------------------------------------------------


def tags(store: Path) -> dict[str, str]:
    listed = git(store, "for-each-ref", "--format=%(refname) %(objectname)")
    return dict(
        line.split() for line in listed.splitlines() if not line.startswith("refs/h")
    )


def shared_refs(store: Path) -> dict[str, str]:
    return {
        ref: oid
        for ref, oid in tags(store).items()
        if ref.startswith(("refs/tags/", "refs/runs/"))
    }


def test_versions_and_run_refs_travel_both_ways(
    two: tuple[Store, Store, Path],
) -> None:
    from machine_git.history import versions

    a, b, hub = two
    assert a.head is not None
    versions.create(a, "v1", a.head)
    a.repo.references.create("refs/runs/sft-a1a1a1a1-abcdef", a.head.id)
    pushed = sync.push(a)
    assert (pushed.status, pushed.commits, pushed.versions, pushed.runs) == (
        "pushed",
        0,
        ["v1"],
        ["sft-a1a1a1a1-abcdef"],
    )
    assert shared_refs(hub) == shared_refs(a.path)
    assert sync.push(a).status == "up-to-date"

    pulled = sync.pull(b)
    assert (pulled.status, pulled.versions, pulled.runs) == (
        "up-to-date",
        ["v1"],
        ["sft-a1a1a1a1-abcdef"],
    )
    assert shared_refs(b.path) == shared_refs(a.path)
    assert [v.name for v in versions.listing(b)] == ["v1"]

    put(b, helpers.train_row("b1b1b1b1b1b1"))
    assert b.head is not None
    versions.create(b, "v2", b.head)
    assert sync.push(b).versions == ["v2"]
    pulled = sync.pull(a)
    assert (pulled.status, pulled.added, pulled.versions) == ("fast-forward", 1, ["v2"])
    assert shared_refs(a.path) == shared_refs(b.path) == shared_refs(hub)


def test_one_version_name_on_two_commits_is_a_conflict(
    two: tuple[Store, Store, Path],
) -> None:
    from machine_git.history import versions

    a, b, hub = two
    put(a, helpers.train_row("a2a2a2a2a2a2"))
    put(b, helpers.train_row("b1b1b1b1b1b1"))
    for store in (a, b):
        assert store.head is not None
        versions.create(store, "v1", store.head)
    sync.push(a)
    before = (head(b.path), shared_refs(b.path))
    with pytest.raises(ConflictError) as e:
        sync.pull(b)
    assert str(e.value) == (
        f"origin has version v1 (here {head(b.path)[:12]}, there "
        f"{head(a.path)[:12]}); nothing was pulled. A name never moves: keep one "
        "side's under a new name and delete the other (see docs/recovery.md, "
        "'Sharing conflicts')"
    )
    assert (head(b.path), shared_refs(b.path)) == before
    with pytest.raises(ConflictError, match="nothing was pushed"):
        sync.push(b)
    assert shared_refs(hub) == shared_refs(a.path)
    # The way out: b keeps its v1 as v1-b, drops its v1, and pulls again.
    assert b.head is not None
    versions.create(b, "v1-b", b.head)
    git(b.path, "tag", "-d", "v1")
    assert sync.pull(b).versions == ["v1"]
    assert sync.push(b).versions == ["v1-b"]
    assert sorted(v.name for v in versions.listing(b)) == ["v1", "v1-b"]


def test_one_version_named_on_both_sides_at_one_commit_is_no_conflict(
    two: tuple[Store, Store, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from machine_git.history import versions

    a, b, _ = two
    assert a.head is not None and b.head is not None
    versions.create(a, "v1", a.head, "from a")
    versions.create(b, "v1", b.head, "from b")
    assert tags(a.path)["refs/tags/v1"] != tags(b.path)["refs/tags/v1"]
    sync.push(a)
    pulled = sync.pull(b)
    assert (pulled.status, pulled.versions) == ("up-to-date", [])
    assert sync.push(b).status == "up-to-date"
    assert [v.message for v in versions.listing(b)] == ["from b"]


def test_a_push_moves_branch_and_refs_together_or_not_at_all(
    two: tuple[Store, Store, Path],
) -> None:
    from machine_git.history import versions

    a, b, hub = two
    put(b, helpers.train_row("b1b1b1b1b1b1"))
    sync.push(b)
    put(a, helpers.train_row("a2a2a2a2a2a2"))
    assert a.head is not None
    versions.create(a, "v2", a.head)
    with pytest.raises(RemoteError, match="run 'machine pull origin' first"):
        sync.push(a)
    assert "refs/tags/v2" not in tags(hub)


def test_undo_after_a_pull_takes_back_what_the_merge_brought(
    two: tuple[Store, Store, Path],
) -> None:
    from machine_git.tagging import edits

    a, b, _ = two
    put(a, helpers.train_row("a2a2a2a2a2a2"))
    for n in range(3):
        put(b, helpers.train_row(f"b{n}b{n}b{n}b{n}b{n}b{n}"))
    sync.push(b)
    merge = sync.pull(a).commit
    undone, commit = edits.undo(a)
    assert str(undone.id) == merge
    # One new commit on top of the merge; the rows are as before the pull.
    assert git(a.path, "rev-parse", "HEAD^") == f"{merge}\n"
    assert head(a.path) == commit
    assert row_ids(a.path) == ["a1a1a1a1a1a1", "a2a2a2a2a2a2"]
    assert git(a.path, "log", "-1", "--format=%B") == (
        "undo: merge origin: +3 rows from origin\n\n"
        f"Machine-Action: undo\nMachine-Reverts: {merge}\n\n"
    )
    # The other side's commits stay in the history: a pull brings nothing
    # back (as git revert of a merge), and b's rows are not lost there.
    assert sync.pull(a).status == "up-to-date"
    assert row_ids(a.path) == ["a1a1a1a1a1a1", "a2a2a2a2a2a2"]
    assert git(a.path, "show", f"{merge}:rows/b0/b0/b0b0b0b0b0b0.json")
