from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pygit2
import pytest

from machine_git.store.objects import open_repository
from machine_git.store.packread import PackBlobs
from tests.conftest import git


def blob_id(data: bytes) -> bytes:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).digest()


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A bare repository whose blobs are packed by git: some whole, some deltas."""
    path = tmp_path / "s.git"
    repo = pygit2.init_repository(str(path), bare=True)
    builder = repo.TreeBuilder()
    base = b"".join(b"line %d of a long shared text\n" % i for i in range(400))
    for n in range(12):
        # Near copies of one text: git stores most of them as deltas.
        data = base + b"row %d\n" % n
        builder.insert(f"r{n:02}", repo.create_blob(data), pygit2.GIT_FILEMODE_BLOB)
    builder.insert("tiny", repo.create_blob(b"x"), pygit2.GIT_FILEMODE_BLOB)
    builder.insert("empty", repo.create_blob(b""), pygit2.GIT_FILEMODE_BLOB)
    sig = pygit2.Signature("t", "t@example.invalid", 0, 0)
    repo.create_commit("refs/heads/main", sig, sig, "m", builder.write(), [])
    git(path, "repack", "-a", "-d", "-f", "--quiet")
    return path


def packed_objects(path: Path) -> dict[str, tuple[str, bool]]:
    """Every object of the pack: its type, and whether it is a delta."""
    index = next((path / "objects" / "pack").glob("*.idx"))
    listed = subprocess.run(
        ["git", "verify-pack", "-v", str(index)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = {}
    for line in listed.splitlines():
        fields = line.split()
        if len(fields) >= 5 and len(fields[0]) == 40:
            found[fields[0]] = (fields[1], len(fields) > 5)
    return found


def test_every_whole_blob_reads_as_libgit2_reads_it_and_deltas_are_left_to_it(
    store: Path,
) -> None:
    repo = open_repository(store)
    blobs = PackBlobs(store / "objects")
    listed = packed_objects(store)
    whole = [h for h, (kind, delta) in listed.items() if kind == "blob" and not delta]
    deltas = [h for h, (kind, delta) in listed.items() if kind == "blob" and delta]
    others = [h for h, (kind, _) in listed.items() if kind != "blob"]
    assert len(whole) >= 3 and deltas and others  # the fixture has all three
    for name in whole:
        data = blobs.blob(bytes.fromhex(name), 1 << 20)
        assert data == repo.read(name)[1]
        assert data is not None and blob_id(data).hex() == name
    # Deltas, trees and commits: not this reader's, the caller reads them.
    assert [blobs.blob(bytes.fromhex(h), 1 << 20) for h in deltas + others] == [
        None
    ] * (len(deltas) + len(others))


def test_a_missing_object_or_one_over_the_limit_is_none(store: Path) -> None:
    blobs = PackBlobs(store / "objects")
    assert blobs.blob(b"\x00" * 20, 1 << 20) is None
    assert blobs.blob(b"\xff" * 20, 1 << 20) is None
    tiny = blob_id(b"x")
    assert blobs.blob(tiny, 1) == b"x"
    big = next(
        h
        for h, (kind, delta) in packed_objects(store).items()
        if kind == "blob" and not delta and h != tiny.hex() and h != blob_id(b"").hex()
    )
    assert blobs.blob(bytes.fromhex(big), 100) is None  # never inflated


def test_damaged_bytes_never_read_as_another_blob(store: Path) -> None:
    """A flipped byte in a blob's zlib stream: None or bytes that do not hash
    to the id, so the caller (validate --store) reads it the old way."""
    listed = packed_objects(store)
    small = {blob_id(b"x").hex(), blob_id(b"").hex()}
    name = next(
        h
        for h, (kind, delta) in listed.items()
        if kind == "blob" and not delta and h not in small
    )
    index = next((store / "objects" / "pack").glob("*.idx"))
    shown = subprocess.run(
        ["git", "show-index"], stdin=index.open("rb"), capture_output=True, text=True
    ).stdout
    rows = map(str.split, shown.splitlines())
    offset = next(int(o) for o, h, *_ in rows if h == name)
    pack = index.with_suffix(".pack")
    data = bytearray(pack.read_bytes())
    for at in (offset + 6, offset + 40):
        damaged = bytearray(data)
        damaged[at] ^= 0xFF
        pack.chmod(0o600)
        pack.write_bytes(bytes(damaged))
        read = PackBlobs(store / "objects").blob(bytes.fromhex(name), 1 << 20)
        assert read is None or blob_id(read).hex() != name


@pytest.mark.parametrize(
    "damage",
    [
        lambda idx, pack: idx.write_bytes(b"\xfftOc" + b"\x00" * 60),
        lambda idx, pack: idx.write_bytes(idx.read_bytes()[:500]),
        lambda idx, pack: idx.write_bytes(b""),
        lambda idx, pack: pack.write_bytes(pack.read_bytes()[:10]),
        lambda idx, pack: pack.write_bytes(b"PACK\0\0\0\x09" + pack.read_bytes()[8:]),
        lambda idx, pack: pack.unlink(),
    ],
    ids=["garbled index", "cut index", "empty index", "cut pack", "v9", "no pack"],
)
def test_a_pack_it_cannot_read_is_left_out(store: Path, damage: object) -> None:
    index = next((store / "objects" / "pack").glob("*.idx"))
    pack = index.with_suffix(".pack")
    for f in (index, pack):
        f.chmod(0o600)
    damage(index, pack)  # type: ignore[operator]
    blobs = PackBlobs(store / "objects")
    assert blobs.packs == []
    assert blobs.blob(blob_id(b"x"), 1 << 20) is None


def test_a_pack_cut_after_its_header_reads_nothing_past_the_end(store: Path) -> None:
    index = next((store / "objects" / "pack").glob("*.idx"))
    pack = index.with_suffix(".pack")
    pack.chmod(0o600)
    pack.write_bytes(pack.read_bytes()[: pack.stat().st_size // 2])
    blobs = PackBlobs(store / "objects")
    for name in names_in(index):
        read = blobs.blob(bytes.fromhex(name), 1 << 20)
        assert read is None or blob_id(read).hex() == name


def names_in(index: Path) -> list[str]:
    shown = subprocess.run(
        ["git", "show-index"], stdin=index.open("rb"), capture_output=True, text=True
    ).stdout
    return [h for _, h, *_ in map(str.split, shown.splitlines())]
