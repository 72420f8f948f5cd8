from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from machine_git.store import packs
from machine_git.store.objects import open_repository
from machine_git.store.store import Store
from tests import helpers
from tests.conftest import git


@pytest.fixture
def store(tmp_path: Path) -> Path:
    made = Store.create(tmp_path / "s")
    for n in range(3):
        helpers.commit_row(made, helpers.train_row(f"a0000000000{n}"))
    git(made.path, "gc", "--quiet")
    return made.path


def the_pack(store: Path) -> Path:
    return next((store / "objects" / "pack").glob("*.pack"))


def offset_of(store: Path, oid: str) -> int:
    listed = subprocess.run(
        ["git", "show-index"],
        stdin=the_pack(store).with_suffix(".idx").open("rb"),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return next(int(o) for o, h, *_ in map(str.split, listed.splitlines()) if h == oid)


def flip(store: Path, oid: str) -> None:
    pack = the_pack(store)
    data = bytearray(pack.read_bytes())
    data[offset_of(store, oid) + 6] ^= 0xFF
    pack.write_bytes(bytes(data))


def test_an_intact_pack_has_no_problem(store: Path) -> None:
    assert [(p.path, p.problem) for p in packs.check(store / "objects")] == [
        (the_pack(store), None)
    ]
    names, crcs, offsets = packs.read_index(the_pack(store).with_suffix(".idx"))
    assert (
        len(names)
        == len(crcs)
        == len(offsets)
        == int(git(store, "count-objects", "-v").split("in-pack: ")[1].split()[0])
    )


def test_a_flipped_bit_is_found_by_its_checksum(store: Path) -> None:
    blob = git(store, "rev-parse", "main:rows/a0/00/a00000000001.json").strip()
    flip(store, blob)
    [found] = packs.check(store / "objects")
    assert (found.problem, found.damaged) == (
        "1 object in it does not match its checksum",
        [blob],
    )
    assert not found.index_only


def test_a_pack_is_taken_apart_into_what_still_reads(store: Path) -> None:
    blob = git(store, "rev-parse", "main:rows/a0/00/a00000000001.json").strip()
    flip(store, blob)
    [found] = packs.check(store / "objects")
    written, lost = packs.unpack_readable(
        found, open_repository(store), store / "objects"
    )
    assert lost == [blob]
    loose = {p.parent.name + p.name for p in (store / "objects").glob("??/*")}
    assert len(loose) == written and blob not in loose
    head = git(store, "rev-parse", "main").strip()
    assert head in loose
    for oid in loose:  # each one whole: git reads it from the loose file
        assert git(store, "cat-file", "-t", oid).strip() in ("blob", "tree", "commit")


def test_an_index_that_does_not_read_is_built_again(store: Path) -> None:
    index = the_pack(store).with_suffix(".idx")
    good = index.read_bytes()
    index.write_bytes(good[:100])
    [found] = packs.check(store / "objects")
    assert found.index_only
    assert found.problem is not None and found.problem.startswith(
        "its index does not read"
    )
    assert packs.rebuild_index(found.path)
    assert index.read_bytes() == good
    assert oct(index.stat().st_mode & 0o777) == oct(0o600)


def test_a_pack_cut_short_has_its_last_objects_damaged(store: Path) -> None:
    pack = the_pack(store)
    pack.write_bytes(pack.read_bytes()[: pack.stat().st_size // 2])
    [found] = packs.check(store / "objects")
    assert found.damaged
    assert not packs.rebuild_index(found.path)  # git cannot index half a pack
