"""machine recover: the newest intact commit, the rows going back loses, the step."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime
from pathlib import Path

import pygit2
import pytest

from machine_git.core import paths
from machine_git.core.errors import DAMAGED
from machine_git.core.errors import DamagedStoreError
from machine_git.history import versions
from machine_git.recovery import recover
from machine_git.store import stats
from machine_git.store.store import Redaction
from machine_git.store.store import Store
from machine_git.sync import sharing as sync
from machine_git.tagging import turns
from tests import helpers
from tests.conftest import Run
from tests.conftest import git

ROW_A, ROW_B, ROW_C = "a00000000001", "b00000000002", "c00000000003"


def tagged_store(location: Path) -> Store:
    """Init, then one tag commit each for A, B and C; version v1 at C."""
    store = Store.create(location)
    for row_id in (ROW_A, ROW_B, ROW_C):
        turns.commit(store, helpers.train_row(row_id), Redaction.SCANNED)
    head = store.head
    assert head is not None
    versions.create(store, "v1", head)
    return store


def rev(store: Path, what: str) -> str:
    return git(store, "rev-parse", what).strip()


def truncate(store: Path, what: str) -> str:
    oid = rev(store, what)
    loose = store / "objects" / oid[:2] / oid[2:]
    loose.write_bytes(loose.read_bytes()[:12])
    return oid


def files(store: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(store)): p.read_bytes()
        for p in sorted(store.rglob("*"))
        if p.is_file() and p.name != "lock"
    }


def trailers(store: Path) -> dict[str, str]:
    commit = pygit2.Repository(str(store))[rev(store, "main")]
    message = commit.peel(pygit2.Commit).message
    return {
        k.removeprefix("Machine-"): v
        for k, v in (
            line.split(": ", 1) for line in message.splitlines() if ": " in line
        )
        if k.startswith("Machine-")
    }


@pytest.fixture
def store(project: Path) -> Path:
    return tagged_store(paths.store_path(project)).path


def test_an_intact_store_has_nothing_to_recover(store: Path, run: Run) -> None:
    found = recover.diagnose(store)
    assert not found.damaged
    assert found.intact is not None and found.intact.commit == rev(store, "main")
    assert recover.recover(store, confirm=True).commit is None
    result = run("recover", "--yes")
    assert (result.exit_code, result.stdout) == (
        0,
        f"the store {store} is intact; nothing to recover\n",
    )


def test_the_dry_run_names_the_way_back_and_changes_nothing(
    store: Path, run: Run
) -> None:
    damaged = rev(store, "main")
    blob = truncate(store, f"main:rows/c0/00/{ROW_C}.json")
    before = files(store)

    result = run("recover")

    assert result.exit_code == 0
    intact = rev(store, "main~1")
    when = recover.diagnose(store).intact
    assert when is not None and when.time is not None
    stamp = datetime.fromisoformat(when.time).strftime("%Y-%m-%d %H:%M UTC")
    assert result.stdout.splitlines() == [
        f"damaged: object {blob} is damaged (truncated loose object)",
        f"damaged: commit {damaged[:12]}: rows/c0/00/{ROW_C}.json ({blob[:12]}) "
        "is damaged (truncated loose object)",
        f"damaged: the ref refs/tags/v1 names {rev(store, 'refs/tags/v1')[:12]}, "
        "a damaged commit or one whose history is",
        f"newest intact commit: {intact[:12]} good {ROW_B}: hi ({stamp})",
        f"going back to it loses 1 row: {ROW_C}",
        "it undoes 1 step of the branch:",
        f"  {stamp}  good {ROW_C}: hi",
        "would set aside the damaged refs (refs/tags/v1)",
        f"would commit the tree of {intact[:12]} as a recover step on {intact[:12]}",
        "nothing changed: run 'machine recover --yes' to do it",
    ]
    assert files(store) == before


def test_recover_yes_takes_the_step_and_keeps_the_damage(store: Path, run: Run) -> None:
    damaged = rev(store, "main")
    intact = rev(store, "main~1")
    version = rev(store, "refs/tags/v1")
    blob = truncate(store, f"main:rows/c0/00/{ROW_C}.json")
    run("data")  # a counts cache to keep up to date

    result = run("recover", "--yes", "--json")

    assert result.exit_code == 0, result.stderr
    done = json.loads(result.stdout)
    head = rev(store, "main")
    assert done["done"] is True and done["commit"] == head
    assert done["lost"] == [ROW_C]
    assert rev(store, "main~1") == intact  # on top of the intact commit
    assert rev(store, "main^{tree}") == rev(store, f"{intact}^{{tree}}")
    record = Path(done["record"])
    assert trailers(store) == {
        "Action": "recover",
        "Damaged": damaged,
        "Restored": intact,
        "Record": str(record.relative_to(store)),
        "Lost": "1",
    }
    # Nothing deleted: the damaged object and commit, and the version's tag
    # object (it names the damaged commit) are in the record.
    assert {p.name for p in (record / "objects").iterdir()} == {
        blob,
        damaged,
        version,
    }
    assert json.loads((record / "record.json").read_text())["commit"] == head
    assert not (store / "objects" / blob[:2] / blob[2:]).exists()
    # machine log shows the step; the store reads, packs and tags again.
    assert run("log", "-n", "1").stdout.split()[3] == "recover"
    assert run("validate", "--store").exit_code == 0
    assert run("gc").stderr == ""
    assert stats.counts(Store.open(store))["train"] == 2
    # The version at the damaged commit went with it, into the record.
    assert run("versions").stdout.startswith("no versions yet")
    assert (record / "refs" / "refs%tags%v1").is_file()
    # git's own check is clean (no reflog entry names what was set aside;
    # the reflogs as they were are in the record), and a second run is a no-op.
    fsck = subprocess.run(
        ["git", "-C", str(store), "fsck", "--full", "--strict"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (fsck.returncode, fsck.stderr) == (0, "")
    assert damaged in (record / "logs" / "logs%HEAD").read_text()
    again = run("recover", "--yes")
    assert (again.exit_code, again.stdout) == (
        0,
        f"the store {store} is intact; nothing to recover\n",
    )
    assert rev(store, "main") == head


def test_only_history_damage_loses_no_row(store: Path, run: Run) -> None:
    head = rev(store, "main")
    tree = rev(store, "main^{tree}")
    grandparent = rev(store, "main~2")
    parent = rev(store, "main~1")
    (store / "objects" / parent[:2] / parent[2:]).unlink()

    found = recover.diagnose(store)
    assert found.problems == [
        f"commit {parent[:12]} in the history is missing",
        f"the ref refs/tags/v1 names {rev(store, 'refs/tags/v1')[:12]}, "
        "a damaged commit or one whose history is",
    ]
    assert found.intact is not None and found.intact.commit == head
    assert (found.parent, found.lost) == (grandparent, [])

    assert run("recover", "--yes").exit_code == 0
    assert rev(store, "main~1") == grandparent
    assert rev(store, "main^{tree}") == tree
    assert run("validate", "--store").exit_code == 0
    assert run("gc").stderr == ""


def test_nothing_intact_is_refused_in_one_line(store: Path, run: Run) -> None:
    truncate(store, "main:machine.json")  # the one blob every commit has
    before = files(store)
    for args in (("recover",), ("recover", "--yes")):
        result = run(*args)
        assert result.exit_code == DAMAGED
        assert result.stderr == (
            f"Error: damaged store {store}: object "
            f"{rev(store, 'main:machine.json')} is damaged (truncated loose "
            "object), and no commit it has been at is intact; nothing to go "
            "back to (restore it from a remote: machine recover --from REMOTE)\n"
        )
    assert files(store) == before
    with pytest.raises(DamagedStoreError):
        recover.recover(store, confirm=True)


def test_a_branch_holding_garbage_goes_back_to_where_it_was(
    store: Path, run: Run
) -> None:
    head = rev(store, "main")
    (store / "refs" / "heads" / "main").write_bytes(b"\x00garbage")
    assert run("tagged").exit_code == DAMAGED

    result = run("recover", "--yes", "--json")

    done = json.loads(result.stdout)
    assert (done["branch"], done["lost"]) == (None, [])
    assert trailers(store)["Damaged"] == "unreadable"
    assert rev(store, "main~1") == head
    assert run("tagged").stdout.count("\n") == 3
    record = Path(done["record"])
    assert (record / "main").read_bytes() == b"\x00garbage"


def test_a_config_git_cannot_parse_is_written_again_with_its_remotes(
    store: Path, tmp_path: Path, run: Run
) -> None:
    hub = tmp_path / "hub.git"
    sync.add_remote(Store.open(store), "origin", str(hub))
    damaged = (store / "config").read_bytes() + b"[core\n\x01 broken"
    (store / "config").write_bytes(damaged)
    assert run("data").exit_code == DAMAGED

    result = run("recover", "--yes", "--json")

    assert result.exit_code == 0, result.stderr
    record = Path(json.loads(result.stdout)["record"])
    assert (record / "config").read_bytes() == damaged
    assert git(store, "config", "remote.origin.url") == f"{hub}\n"
    assert git(store, "config", "core.logAllRefUpdates") == "always\n"
    assert run("data").exit_code == 0


def bare_hub(tmp_path: Path) -> Path:
    hub = tmp_path / "hub.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(hub)], check=True)
    return hub


def test_a_store_with_nothing_intact_is_restored_from_its_remote(
    store: Path, tmp_path: Path, run: Run
) -> None:
    hub = bare_hub(tmp_path)
    sync.add_remote(Store.open(store), "origin", str(hub))
    sync.push(Store.open(store))
    pushed = rev(store, "main")
    turns.commit(
        Store.open(store), helpers.train_row("d00000000004"), Redaction.SCANNED
    )
    truncate(store, "main:machine.json")  # nothing local is intact now
    assert run("recover").exit_code == DAMAGED

    dry = run("recover", "--from", "origin")

    assert dry.exit_code == 0, dry.stderr
    lines = dry.stdout.splitlines()
    assert any(
        line.startswith(f"origin's newest commit: {pushed[:12]} good {ROW_C}: hi")
        for line in lines
    ), lines
    assert "going back to it loses 1 row: d00000000004" in lines
    assert (
        lines[-1]
        == "nothing changed: run 'machine recover --from origin --yes' to do it"
    )

    done = run("recover", "--from", "origin", "--yes", "--json")

    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["remote"] == "origin"
    assert rev(store, "main~1") == pushed
    assert trailers(store)["Remote"] == "origin"
    assert rev(store, "refs/remotes/origin/main") == pushed
    assert run("validate", "--store").stdout == "checked 3 rows: all valid\n"
    assert sync.push(Store.open(store)).status == "pushed"  # a fast-forward
    assert not list((store / "machine").glob("restore-*"))


def test_a_damaged_remote_is_not_adopted(store: Path, tmp_path: Path, run: Run) -> None:
    hub = bare_hub(tmp_path)
    sync.add_remote(Store.open(store), "origin", str(hub))
    sync.push(Store.open(store))
    truncate(hub, "main:machine.json")
    truncate(store, "main:machine.json")
    before = files(store)

    result = run("recover", "--from", "origin", "--yes")

    assert result.exit_code != 0
    assert result.stderr.startswith("Error: ")
    assert files(store) == before


def test_an_intact_store_is_not_restored_over(
    store: Path, tmp_path: Path, run: Run
) -> None:
    hub = bare_hub(tmp_path)
    sync.add_remote(Store.open(store), "origin", str(hub))
    result = run("recover", "--from", "origin", "--yes")
    assert result.stdout == f"the store {store} is intact; nothing to recover\n"


def test_a_ref_naming_a_live_blob_or_tree_is_dropped_and_nothing_is_moved(
    store: Path, run: Run
) -> None:
    # Issue 25: a version naming a row's blob (or the branch's tree) made
    # recover set that live blob aside, and a second recover lose every row.
    blob = rev(store, f"main:{paths_of(ROW_A)}")
    tree = rev(store, "main^{tree}")
    (store / "refs" / "tags" / "rowblob").write_text(blob + "\n")
    (store / "refs" / "tags" / "tree").write_text(tree + "\n")
    head = rev(store, "main")
    result = run("recover", "--yes")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[:2] == [
        f"damaged: the ref refs/tags/rowblob names {blob[:12]}, a blob, not a commit",
        f"damaged: the ref refs/tags/tree names {tree[:12]}, a tree, not a commit",
    ]
    assert lines[2].startswith(f"newest intact commit: {head[:12]} good {ROW_C}: hi")
    assert lines[3] == "going back to it loses 0 rows"
    assert git(store, "cat-file", "-t", blob) == "blob\n"  # not set aside
    again = run("recover", "--yes")
    assert (again.exit_code, again.stdout) == (
        0,
        f"the store {store} is intact; nothing to recover\n",
    )
    listed = git(store, "ls-tree", "-r", "--name-only", "main", "rows").split()
    assert listed == [paths_of(r) for r in (ROW_A, ROW_B, ROW_C)]
    assert git(store, "for-each-ref", "--format=%(refname)", "refs/tags") == (
        "refs/tags/v1\n"
    )
    fsck = subprocess.run(
        ["git", "-C", str(store), "fsck", "--full"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (fsck.returncode, fsck.stderr) == (0, "")


def paths_of(row_id: str) -> str:
    from machine_git.rows import rows

    return rows.row_path(row_id)
