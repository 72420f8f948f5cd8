from __future__ import annotations

import zlib
from collections.abc import Callable
from pathlib import Path

import pygit2
import pytest

from machine_git.objects import CorruptObjectError
from machine_git.objects import Objects
from tests.conftest import git


@pytest.fixture
def repo(tmp_path: Path) -> pygit2.Repository:
    return pygit2.init_repository(str(tmp_path / "store"), bare=True)


def loose_file(repo: pygit2.Repository, oid: pygit2.Oid) -> Path:
    path = Path(repo.path) / "objects" / str(oid)[:2] / str(oid)[2:]
    path.chmod(0o600)
    return path


def test_loose_and_packed_blobs_read_alike(repo: pygit2.Repository) -> None:
    loose = repo.create_blob(b"loose row\n")
    assert Objects(repo).blob(loose) == b"loose row\n"
    packed = repo.create_blob(b"packed row\n")
    repo.create_commit(
        "refs/heads/main",
        pygit2.Signature("t", "t@example.com"),
        pygit2.Signature("t", "t@example.com"),
        "x\n",
        _tree(repo, {"a": loose, "b": packed}),
        [],
    )
    listed = Objects(repo)  # lists the loose objects now...
    git(Path(repo.path), "gc", "--quiet")  # ...and git packs them away
    assert listed.blob(packed, verify=True) == b"packed row\n"
    assert Objects(repo).loose == set()


def _tree(repo: pygit2.Repository, blobs: dict[str, pygit2.Oid]) -> pygit2.Oid:
    builder = repo.TreeBuilder()
    for name, oid in blobs.items():
        builder.insert(name, oid, pygit2.enums.FileMode.BLOB)
    return builder.write()


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


def test_a_tree_is_not_a_blob(repo: pygit2.Repository) -> None:
    tree = _tree(repo, {"a": repo.create_blob(b"x")})
    with pytest.raises(CorruptObjectError, match="not a blob"):
        Objects(repo).blob(tree)
    assert len(Objects(repo).tree(tree)) == 1
