"""Versions' row counts are counted once per commit, and checked before believed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from pygit2 import Commit

from machine_git.history import versions
from machine_git.store import stats
from machine_git.store.store import WORK
from machine_git.store.store import Store
from tests import helpers


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store.create(tmp_path / "s")
    for n in range(3):
        helpers.commit_row(s, helpers.train_row(f"{n:012x}"))
    return s


def head(store: Store) -> Commit:
    found = store.head
    assert found is not None
    return found


def counted(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    calls: list[Any] = []
    real = stats.counts

    def counting(store: Store, at: Commit | None = None) -> dict[str, int]:
        if at is not None:  # counts of the head are the store's own cache
            calls.append(at)
        return real(store, at)

    monkeypatch.setattr(stats, "counts", counting)
    return calls


def test_a_version_is_counted_once(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    v1 = versions.create(store, "v1", head(store))
    for n in range(3, 6):
        helpers.commit_row(store, helpers.train_row(f"{n:012x}"))
    v2 = versions.create(store, "v2", head(store))
    calls = counted(monkeypatch)
    listed = versions.listing(store)
    found = versions.counts(store, listed)
    assert calls == []  # both were counted when they were named
    assert found[str(v1.commit.id)]["train"] == 3
    assert found[str(v2.commit.id)]["train"] == 6
    kept = orjson.loads((store.path / WORK / "versions.json").read_bytes())
    assert kept == found


def test_a_version_that_arrived_unknown_is_counted_then_kept(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = head(store).parents[0]
    versions.create(store, "v1", old)
    (store.path / WORK / "versions.json").unlink()  # as after a pull
    calls = counted(monkeypatch)
    listed = versions.listing(store)
    assert versions.counts(store, listed)[str(old.id)]["train"] == 2
    assert len(calls) == 1
    versions.counts(store, listed)
    assert len(calls) == 1


@pytest.mark.parametrize(
    "kept",
    [
        b"not json",
        b"[1, 2]",
        b'{"COMMIT": {"train": "three"}}',
        b'{"COMMIT": {"train": -1}}',
        b'{"COMMIT": {"train": 2.5}}',
        b'{"COMMIT": {"train": true}}',
        b'{"not a commit": {"train": 3}}',
    ],
)
def test_a_wrong_kept_count_is_counted_again(store: Store, kept: bytes) -> None:
    v1 = versions.create(store, "v1", head(store))
    key = str(v1.commit.id)
    (store.path / WORK / "versions.json").write_bytes(
        kept.replace(b"COMMIT", key.encode())
    )
    found = versions.counts(store, versions.listing(store))
    assert found == {key: {"train": 3, "traces": 0, "rejected": 0, "observed": 0}}
    assert (
        orjson.loads((store.path / WORK / "versions.json").read_bytes())[key]
        == (found[key])
    )
