from __future__ import annotations

import os
import re
from pathlib import Path

import orjson

from machine_git.core import paths
from machine_git.core.errors import NOT_FOUND
from tests.conftest import Run
from tests.conftest import git
from tests.conftest import install_session


def count_objects(store: Path) -> dict[str, int]:
    out = git(store, "count-objects", "-v")
    return {k: int(v) for k, v in (line.split(": ") for line in out.splitlines())}


def test_gc_packs_the_store_and_says_what_it_did(project: Path, run: Run) -> None:
    install_session(project, "basic")
    run("good")
    run("good", "--trace")
    store = paths.store_path(project)
    before = count_objects(store)

    result = run("gc")

    after = count_objects(store)
    assert (after["count"], after["packs"]) == (0, 1)
    expected = (  # a store this small is measured in KB
        f"packed {store}: {before['count']} loose objects, 0 packs -> "
        f"0 loose objects, 1 pack; {before['size']:.1f} KB -> "
        f"{after['size-pack']:.1f} KB"
    )
    assert re.fullmatch(re.escape(expected) + r" \(\d+\.\d s\)\n", result.stdout)
    assert result.exit_code == 0
    assert run("tagged").stdout.count("\n") == 2  # both rows still there


def test_gc_json(project: Path, run: Run) -> None:
    install_session(project, "basic")
    run("good")
    result = run("gc", "--json")
    info = orjson.loads(result.stdout)
    assert info["store"] == str(paths.store_path(project))
    assert info["before"]["loose"] == 9  # init 3 objects, the tag 6
    assert info["after"] == {
        "loose": 0,
        "loose_bytes": 0,
        "packs": 1,
        "pack_bytes": info["after"]["pack_bytes"],
    }
    assert info["after"]["pack_bytes"] > 0
    assert info["removed"] == []


def test_gc_says_what_killed_writers_left(project: Path, run: Run) -> None:
    install_session(project, "basic")
    run("good")
    store = paths.store_path(project)
    left = store / "objects" / "tmp_object_git2_a1B2c3"
    left.write_bytes(b"half written")
    os.utime(left, (1_000_000_000, 1_000_000_000))

    result = run("gc")

    assert result.exit_code == 0
    assert result.stdout.splitlines()[0] == (
        "removed 1 leftover of killed writers (objects/tmp_object_git2_a1B2c3)"
    )
    assert not left.exists()


def test_gc_without_a_store(project: Path, run: Run) -> None:
    result = run("gc")
    assert result.exit_code == NOT_FOUND
    assert result.stderr == (
        f"Error: no store at {paths.store_path(project)} yet "
        "(tag a turn with 'machine good')\n"
    )
