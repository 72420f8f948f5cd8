"""The counts cache: checked before it is believed, kept by the store itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from machine_git.store import stats
from machine_git.store.store import WORK
from machine_git.store.store import Change
from machine_git.store.store import Store
from tests import helpers
from tests.conftest import Run
from tests.conftest import git
from tests.conftest import install_session

TRUTH = {"observed": 0, "rejected": 1, "train": 2, "traces": 0}


def three_rows(path: Path) -> Store:
    store = Store.create(path)
    helpers.commit_row(store, helpers.train_row("a00000000001"))
    helpers.commit_row(store, helpers.train_row("b00000000002"))
    helpers.commit_row(
        store, helpers.train_row("c00000000003", kind="rejected", tag="bad")
    )
    return store


def cache_file(store: Store) -> Path:
    return store.path / WORK / stats.CACHE_FILE


def cached(store: Store) -> dict[str, object]:
    value = json.loads(cache_file(store).read_text())
    assert isinstance(value, dict)
    return value


def test_counts_are_cached_for_the_head_with_a_check(tmp_path: Path) -> None:
    store = three_rows(tmp_path / "s")
    assert not cache_file(store).exists()  # nobody asked yet: nothing counted
    assert stats.counts(store) == TRUTH
    value = cached(store)
    assert value["commit"] == git(store.path, "rev-parse", "main").strip()
    assert value["counts"] == TRUTH
    assert isinstance(value["check"], str) and len(value["check"]) == 16


def test_every_commit_brings_an_existing_cache_along(tmp_path: Path) -> None:
    store = three_rows(tmp_path / "s")
    stats.counts(store)
    helpers.commit_row(store, helpers.traces_row("d00000000004"))
    assert cached(store)["commit"] == git(store.path, "rev-parse", "main").strip()
    assert cached(store)["counts"] == {**TRUTH, "traces": 1}


@pytest.mark.parametrize(
    "damage",
    [
        b'{"commit": 5}',
        b'{"commit": 5, "counts": {}}',
        b"\x00\xff{",
        b"[1, 2]",
        b'{"commit": "x", "counts": {"train": 3}}',
        b'{"commit": "%(head)s", "counts": {"train": "2"}}',
        b'{"commit": "%(head)s", "counts": {"train": -1}}',
        b'{"commit": "%(head)s", "counts": {"train": 2.0}}',
        b'{"commit": "%(head)s", "counts": {"bogus": 1}}',
        # the right shape, the head's commit, but counts nobody computed
        b'{"commit": "%(head)s", "counts": {"train": 0}}',
        b'{"commit": "%(missing)s", "counts": {"train": 0}, "check": "x"}',
    ],
)
def test_a_cache_that_cannot_be_right_is_counted_again(
    tmp_path: Path, damage: bytes
) -> None:
    store = three_rows(tmp_path / "s")
    head = git(store.path, "rev-parse", "main").strip()
    cache_file(store).write_bytes(
        damage % {b"head": head.encode(), b"missing": b"1" * 40}
    )
    assert stats.counts(store) == TRUTH
    assert cached(store)["counts"] == TRUTH


def test_a_hand_edited_count_does_not_match_its_check(tmp_path: Path) -> None:
    store = three_rows(tmp_path / "s")
    stats.counts(store)
    value = cached(store)
    value["counts"] = {**TRUTH, "train": 7}
    cache_file(store).write_text(json.dumps(value))
    assert stats.counts(store) == TRUTH


def test_a_cache_of_another_commit_is_brought_along_by_a_diff(tmp_path: Path) -> None:
    store = three_rows(tmp_path / "s")
    stats.counts(store)  # at the third commit
    helpers.commit_row(store, helpers.traces_row("d00000000004"))  # cache: here
    # The branch goes back two commits (as after a recover): not an ancestor
    # of the cache's commit, yet its counts plus the diff are the head's.
    older = git(store.path, "rev-parse", "main~2").strip()
    (store.path / "refs" / "heads" / "main").write_text(older + "\n")
    assert stats.counts(Store.open(store.path)) == {
        "observed": 0,
        "rejected": 0,
        "train": 2,
        "traces": 0,
    }


def test_a_count_that_would_go_below_zero_means_a_recount(tmp_path: Path) -> None:
    store = three_rows(tmp_path / "s")
    stats.counts(store)
    value = cached(store)
    parent = git(store.path, "rev-parse", "main~1").strip()
    # Claims no rejected rows at the parent; the diff to the head adds one,
    # fine; then a removal of that row would take it to -1 from a wrong base.
    wrong = {**TRUTH, "rejected": 0, "train": 0}
    value.update(commit=parent, counts=wrong, check=stats._check(parent, wrong))
    cache_file(store).write_text(json.dumps(value))
    store.write(lambda snap: Change("rm a", {"rows/a0/00/a00000000001.json": None}))
    assert stats.counts(store) == {**TRUTH, "train": 1}


def test_a_cache_problem_never_fails_a_tag(project: Path, run: Run) -> None:
    # Found by damaging stores: a commit of 5 printed a traceback after the
    # tag was committed, so the user thought it had failed.
    install_session(project, "basic")
    location = Path(json.loads(run("good", "--json").stdout)["store"])
    run("data")  # the cache exists: every commit now keeps it
    store = Store.open(location)
    cache_file(store).write_bytes(b'{"commit": 5, "counts": {}}')
    moved = run("bad")
    assert moved.exit_code == 0, moved.stderr
    assert moved.stderr == ""
    assert cached(store)["commit"] == git(location, "rev-parse", "main").strip()
    assert cached(store)["counts"] == {
        "observed": 0,
        "rejected": 1,
        "train": 0,
        "traces": 0,
    }
