from __future__ import annotations

import json
from pathlib import Path

from machine_git.agents import footer
from machine_git.core import paths
from machine_git.store import stats
from machine_git.store.store import Store
from tests.conftest import Run
from tests.conftest import git
from tests.conftest import install_session
from tests.helpers import commit_row
from tests.helpers import train_row


def cache(project: Path) -> dict[str, object]:
    value = json.loads(
        footer.cache_path(Store.open(paths.store_path(project))).read_text()
    )
    assert isinstance(value, dict)
    value.pop("check")  # stats.py's own digest of the other two
    return value


def head(project: Path) -> str:
    return git(paths.store_path(project), "rev-parse", "refs/heads/main").strip()


def test_the_cache_is_where_stats_writes_it(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "store", tmp_path)
    commit_row(store, train_row())
    assert not footer.cache_path(store).exists()  # no reader yet: no count
    stats.counts(store)
    value = json.loads(footer.cache_path(store).read_text())
    # What the Pi extension reads (templates/pi-extension.ts.tmpl, readCounts).
    assert value["commit"] == str(store.head.id) if store.head is not None else None
    assert value["counts"] == {"observed": 0, "rejected": 0, "train": 1, "traces": 0}


def test_every_write_brings_the_cache_to_the_new_head(project: Path, run: Run) -> None:
    install_session(project, "basic")
    run("auto", "on")
    assert not footer.cache_path(Store.open(paths.store_path(project))).exists()
    run("data", "--json")  # what the Pi extension runs once per session
    tagged = json.loads(run("good", "--json").stdout)
    assert cache(project) == {
        "commit": head(project),
        "counts": {"observed": 0, "rejected": 0, "train": 1, "traces": 0},
    }
    row = tagged["id"]
    for args in (
        ("move", row, "--to", "bad"),
        ("rewrite", row, "--as", "Better."),
        ("undo",),
        ("rm", row),
        ("observe",),
        ("auto", "off"),
        ("student", "thinkingmachines/Inkling-Small:peft:262144"),
        ("work",),
    ):
        assert run(*args).exit_code == 0, args
        assert cache(project)["commit"] == head(project), args
    observed = json.loads(run("observed", "--json").stdout)[0]["id"]
    run("label", observed, "good")
    assert cache(project) == {
        "commit": head(project),
        "counts": {"observed": 0, "rejected": 0, "train": 0, "traces": 1},
    }
