from __future__ import annotations

import os
import zlib
from collections.abc import Callable
from pathlib import Path

import pygit2
import pytest
from pygit2.enums import FileMode

from machine_git.store.objects import CorruptObjectError
from machine_git.store.objects import Objects
from machine_git.store.objects import damaged_loose
from machine_git.store.objects import open_repository
from tests.conftest import git

SIG = pygit2.Signature("t", "t@example.com")


@pytest.fixture
def repo(tmp_path: Path) -> pygit2.Repository:
    pygit2.init_repository(str(tmp_path / "store"), bare=True)
    return open_repository(tmp_path / "store")


def loose_file(repo: pygit2.Repository, oid: pygit2.Oid) -> Path:
    path = Path(repo.path) / "objects" / str(oid)[:2] / str(oid)[2:]
    path.chmod(0o600)
    return path


def truncate(repo: pygit2.Repository, oid: pygit2.Oid) -> None:
    path = loose_file(repo, oid)
    path.write_bytes(path.read_bytes()[:12])


def _tree(repo: pygit2.Repository, blobs: dict[str, pygit2.Oid]) -> pygit2.Oid:
    builder = repo.TreeBuilder()
    for name, oid in blobs.items():
        builder.insert(name, oid, FileMode.BLOB)
    return builder.write()


def _history(repo: pygit2.Repository, n: int) -> list[pygit2.Oid]:
    """``n`` commits on main, each adding dir/rN; oldest first."""
    made: list[pygit2.Oid] = []
    blobs: dict[str, pygit2.Oid] = {}
    for i in range(n):
        blobs[f"r{i}"] = repo.create_blob(f"row {i}\n".encode())
        sub = _tree(repo, blobs)
        top = repo.TreeBuilder()
        top.insert("dir", sub, FileMode.TREE)
        made.append(
            repo.create_commit(
                "refs/heads/main", SIG, SIG, f"c{i}\n", top.write(), made[-1:]
            )
        )
    return made


def test_loose_and_packed_blobs_read_alike(repo: pygit2.Repository) -> None:
    loose = repo.create_blob(b"loose row\n")
    assert Objects(repo).blob(loose) == b"loose row\n"
    packed = repo.create_blob(b"packed row\n")
    repo.create_commit(
        "refs/heads/main", SIG, SIG, "x\n", _tree(repo, {"a": loose, "b": packed}), []
    )
    git(Path(repo.path), "gc", "--quiet")  # packed after the repository opened
    assert Objects(repo).blob(packed, verify=True) == b"packed row\n"
    assert not (Path(repo.path) / "objects" / str(packed)[:2]).exists()


def test_objects_are_written_private_and_readable_by_git(
    repo: pygit2.Repository,
) -> None:
    oid = repo.create_blob(b"a row\n")
    path = Path(repo.path) / "objects" / str(oid)[:2] / str(oid)[2:]
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    assert git(Path(repo.path), "cat-file", "-p", str(oid)) == "a row\n"


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda d: d[:12], "truncated loose object"),
        (lambda d: b"not zlib at all", "not a zlib stream"),
        (lambda d: zlib.compress(b"blob 99\x00short"), "bad loose object header"),
        (lambda d: zlib.compress(b"blob 5\x00other"), "content does not match"),
    ],
)
def test_a_damaged_loose_object_is_an_error_before_libgit2_reads_it(
    repo: pygit2.Repository, damage: Callable[[bytes], bytes], problem: str
) -> None:
    oid = repo.create_blob(b"a row that will be damaged\n")
    path = loose_file(repo, oid)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(CorruptObjectError) as caught:
        Objects(repo).blob(oid)
    assert str(caught.value).startswith(f"{oid}: {problem}")
    with pytest.raises(CorruptObjectError):
        repo[oid]  # the same guard, whoever asks


def test_every_pygit2_read_goes_through_the_guard(repo: pygit2.Repository) -> None:
    # libgit2 reads these objects itself (a walk, a revision, a path lookup);
    # unguarded, each would spin forever on the truncated object.
    first, middle, last = _history(repo, 3)
    truncate(repo, middle)
    fresh = open_repository(repo.path)
    reads: list[Callable[[], object]] = [
        lambda: list(fresh.walk(last)),
        lambda: fresh.revparse_single("main~2"),
        lambda: fresh[last].peel(pygit2.Commit).parents,
    ]
    for read in reads:
        with pytest.raises(CorruptObjectError, match="truncated loose object"):
            read()
    # A merge base asks whether the object exists first: a damaged one does not.
    with pytest.raises(pygit2.GitError, match="object not found"):
        fresh.merge_base(last, first)
    subtree = fresh[last].peel(pygit2.Commit).tree["dir"].id
    truncate(repo, subtree)
    with pytest.raises(pygit2.GitError, match="object not found"):
        open_repository(repo.path)[last].peel(pygit2.Commit).tree["dir/r0"]


def test_short_ids_find_loose_objects(repo: pygit2.Repository) -> None:
    commits = _history(repo, 2)
    assert repo.revparse_single(str(commits[1])[:8]).id == commits[1]
    with pytest.raises(KeyError):
        repo.revparse_single("deadbeef")


def test_writing_damaged_content_again_heals_it_and_keeps_the_damage(
    repo: pygit2.Repository,
) -> None:
    oid = repo.create_blob(b"tagged twice\n")
    truncate(repo, oid)
    assert repo.create_blob(b"tagged twice\n") == oid
    assert Objects(repo).blob(oid) == b"tagged twice\n"
    aside = list((Path(repo.path) / "machine" / "damaged-objects").iterdir())
    assert [p.name.split(".")[0] for p in aside] == [str(oid)]
    assert len(aside[0].read_bytes()) == 12


def test_damaged_loose_lists_every_damaged_file(repo: pygit2.Repository) -> None:
    good = repo.create_blob(b"good\n")
    bad = repo.create_blob(b"bad\n")
    truncate(repo, bad)
    found = list(damaged_loose(Path(repo.path) / "objects"))
    assert found == [(str(loose_file(repo, bad)), "truncated loose object")]
    assert Objects(repo).blob(good) == b"good\n"


def test_a_tree_is_not_a_blob_nor_a_commit(repo: pygit2.Repository) -> None:
    tree = _tree(repo, {"a": repo.create_blob(b"x")})
    with pytest.raises(CorruptObjectError, match="a tree, not a blob"):
        Objects(repo).blob(tree)
    with pytest.raises(CorruptObjectError, match="a tree, not a commit"):
        Objects(repo).commit(tree)
    assert len(Objects(repo).tree(tree)) == 1


def test_a_missing_object_is_a_key_error(repo: pygit2.Repository) -> None:
    oid = repo.create_blob(b"gone\n")
    os.unlink(loose_file(repo, oid))
    with pytest.raises(KeyError):
        Objects(repo).blob(oid)
