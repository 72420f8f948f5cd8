from __future__ import annotations

import os
import stat
from pathlib import Path

import pygit2
import pytest
from pygit2.enums import FileMode

from machine_git.core import jsonio
from machine_git.core.errors import DamagedStoreError
from machine_git.core.errors import RowValidationError
from machine_git.core.errors import StoreError
from machine_git.rows import rows
from machine_git.store.store import Change
from machine_git.store.store import Store
from tests.conftest import git


def make_row(
    row_id: str, kind: str = "train", text: str = "hello"
) -> dict[str, object]:
    return {
        "id": row_id,
        "kind": kind,
        "tag": rows.TAG_OF_KIND[kind],
        "created_at": "2026-11-29T10:00:00.000Z",
        "note": None,
        "source": {"host": "pi", "session_id": "s1", "entry_ids": [row_id[:8]]},
        "messages": [
            {"role": "user", "content": text},
            {"role": "assistant", "content": f"answer to {text}"},
        ],
    }


def put(store: Store, row: dict[str, object]) -> pygit2.Oid | None:
    path = rows.row_path(str(row["id"]))
    return store.write(
        lambda snap: Change(
            summary=f"add {row['id']}", files={path: jsonio.canonical(row)}
        )
    )


def loose_objects(store: Path) -> set[str]:
    found = set()
    for folder in (store / "objects").iterdir():
        if len(folder.name) == 2:
            found |= {folder.name + f.name for f in folder.iterdir()}
    return found


def test_create_makes_a_private_bare_repository_with_one_commit(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    assert store.repo.is_bare
    assert git(store.path, "log", "--format=%s").splitlines() == ["init store"]
    assert git(store.path, "config", "core.logAllRefUpdates") == "always\n"
    for root, dirs, files in os.walk(store.path):
        for d in dirs:
            assert stat.S_IMODE(os.stat(Path(root, d)).st_mode) == 0o700, d
        for f in files:
            assert stat.S_IMODE(os.stat(Path(root, f)).st_mode) == 0o600, f


def test_create_twice_opens_the_same_store(tmp_path: Path) -> None:
    first = Store.create(tmp_path / "s")
    second = Store.create(tmp_path / "s")
    assert first.head is not None and second.head is not None
    assert first.head.id == second.head.id


def test_open_without_a_store_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"^no store at .* yet"):
        Store.open(tmp_path / "missing")


def test_a_commit_writes_the_same_six_objects_whatever_the_size(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    written = []
    for n in range(300):
        before = loose_objects(store.path)
        put(store, make_row(f"{n:012x}"[::-1], text=f"row {n}"))
        written.append(len(loose_objects(store.path) - before))
    # blob + rows/ab/cd, rows/ab, rows, root trees + commit
    assert set(written) == {6}


def test_rows_are_canonical_and_readable_back(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    row = make_row("a1b2c3d4e5f6")
    put(store, row)
    blob = git(store.path, "show", "HEAD:rows/a1/b2/a1b2c3d4e5f6.json")
    assert blob == jsonio.canonical(row).decode()
    assert blob.startswith('{\n  "created_at"') and blob.endswith("}\n")
    assert store.read_row("a1b2c3d4e5f6") == row


def test_an_invalid_row_never_reaches_git(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    before = loose_objects(store.path)
    head = store.head
    row = make_row("a1b2c3d4e5f6")
    row["kind"] = "bogus"
    with pytest.raises(RowValidationError, match=r"\$\.kind: unknown kind 'bogus'"):
        put(store, row)
    assert loose_objects(store.path) == before
    assert store.head is not None and head is not None and store.head.id == head.id


def test_a_row_must_sit_at_the_path_its_id_names(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    row = make_row("a1b2c3d4e5f6")
    with pytest.raises(RowValidationError, match="does not match its path"):
        store.write(
            lambda snap: Change(
                summary="x",
                files={"rows/ff/ff/ffffffffffff.json": jsonio.canonical(row)},
            )
        )


def test_non_canonical_bytes_are_refused(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    row = make_row("a1b2c3d4e5f6")
    with pytest.raises(RowValidationError, match="not canonical JSON"):
        store.write(
            lambda snap: Change(
                summary="x", files={rows.row_path("a1b2c3d4e5f6"): jsonio.line(row)}
            )
        )


def test_no_change_makes_no_commit(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    row = make_row("a1b2c3d4e5f6")
    assert put(store, row) is not None
    assert put(store, row) is None
    assert len(git(store.path, "log", "--format=%H").splitlines()) == 2


def test_delete_removes_empty_fan_out_trees(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    put(store, make_row("a1b2c3d4e5f6"))
    store.write(
        lambda snap: Change(summary="rm", files={rows.row_path("a1b2c3d4e5f6"): None})
    )
    assert git(store.path, "ls-tree", "-r", "--name-only", "HEAD").split() == [
        "machine.json"
    ]


def test_trailers_carry_the_machine_facts(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    store.write(
        lambda snap: Change(
            summary="good a1b2c3d4e5f6: hi",
            body="because",
            files={
                rows.row_path("a1b2c3d4e5f6"): jsonio.canonical(
                    make_row("a1b2c3d4e5f6")
                )
            },
            trailers={"Action": "tag", "Row": "a1b2c3d4e5f6"},
        )
    )
    trailers = git(store.path, "log", "-1", "--format=%(trailers:only,unfold)")
    assert trailers == "Machine-Action: tag\nMachine-Row: a1b2c3d4e5f6\n\n"
    assert git(store.path, "log", "-1", "--format=%s%n%b") == (
        "good a1b2c3d4e5f6: hi\nbecause\n\n"
        "Machine-Action: tag\nMachine-Row: a1b2c3d4e5f6\n\n"
    )


def test_a_stale_ref_lock_left_by_a_killed_writer_is_cleared(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    (store.path / "refs" / "heads" / "main.lock").write_text("stale")
    assert put(store, make_row("a1b2c3d4e5f6")) is not None
    assert not (store.path / "refs" / "heads" / "main.lock").exists()


def test_a_branch_moved_by_someone_else_is_planned_again(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    pushed = make_row("0a0b0c0d0e0f")
    calls = []

    def plan(snap):
        calls.append(snap.commit.id)
        if len(calls) == 1:
            # A push (git receive-pack, which ignores our lock) lands between
            # our read of the branch and our commit.
            repo = pygit2.Repository(str(store.path))
            index = pygit2.Index()
            index.read_tree(snap.tree)
            blob = repo.create_blob(jsonio.canonical(pushed))
            index.add(
                pygit2.IndexEntry(rows.row_path("0a0b0c0d0e0f"), blob, FileMode.BLOB)
            )
            sig = pygit2.Signature("t", "t@example.com")
            repo.create_commit(
                "refs/heads/main",
                sig,
                sig,
                "pushed\n",
                index.write_tree(repo),
                [snap.commit.id],
            )
        return Change(
            summary="mine",
            files={
                rows.row_path("a1b2c3d4e5f6"): jsonio.canonical(
                    make_row("a1b2c3d4e5f6")
                )
            },
        )

    store.write(plan)
    assert len(calls) == 2 and calls[0] != calls[1]
    listed = git(store.path, "ls-tree", "-r", "--name-only", "HEAD").split()
    assert "rows/0a/0b/0a0b0c0d0e0f.json" in listed
    assert "rows/a1/b2/a1b2c3d4e5f6.json" in listed


def test_fsck_accepts_the_store(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    for n in range(5):
        put(store, make_row(f"{n:012x}"))
    git(store.path, "fsck", "--strict", "--no-dangling")


# -- damage: reported, never taken for an empty store ---------------------------


def damaged_branch(tmp_path: Path, value: bytes | None) -> Store:
    store = Store.create(tmp_path / "s")
    put(store, make_row("a1b2c3d4e5f6"))
    ref = store.path / "refs" / "heads" / "main"
    if value is None:
        ref.unlink()
    else:
        ref.write_bytes(value)
    return store


@pytest.mark.parametrize(
    ("value", "what"),
    [
        (b"garbage\n", "the branch refs/heads/main cannot be read"),
        (b"", "the branch refs/heads/main cannot be read"),
        (b"1234567890" * 4 + b"\n", "the branch's commit 123456789012 is missing"),
        (b"ref: refs/heads/other\n", "the branch refs/heads/main points at refs/"),
        (None, "the branch refs/heads/main is missing"),
    ],
)
def test_a_damaged_branch_is_damage_not_an_empty_store(
    tmp_path: Path, value: bytes | None, what: str
) -> None:
    store = damaged_branch(tmp_path, value)
    for opened in (Store.open, lambda path: store):
        with pytest.raises(DamagedStoreError) as caught:
            _ = opened(store.path).head
        assert str(caught.value).startswith(f"damaged store {store.path}: {what}")
        assert str(caught.value).endswith("('machine recover' shows the way back)")
    with pytest.raises(DamagedStoreError):  # a write plans nothing, leaves nothing
        put(store, make_row("b1b2c3d4e5f6"))


def test_a_branch_naming_a_tree_is_damage(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    tree = git(store.path, "rev-parse", "main^{tree}").strip()
    (store.path / "refs" / "heads" / "main").write_text(tree + "\n")
    with pytest.raises(DamagedStoreError, match=f"{tree[:12]} is a tree, not a commit"):
        _ = store.head


def test_a_damaged_head_commit_is_named_and_nothing_is_written(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    put(store, make_row("a1b2c3d4e5f6"))
    head = git(store.path, "rev-parse", "main").strip()
    loose = store.path / "objects" / head[:2] / head[2:]
    loose.write_bytes(loose.read_bytes()[:12])
    objects_before = sorted(p.name for p in (store.path / "objects").rglob("*"))
    with pytest.raises(DamagedStoreError) as caught:
        put(Store.open(store.path), make_row("b1b2c3d4e5f6"))  # a new process
    assert f"the branch's commit {head[:12]} is damaged (truncated loose object)" in (
        str(caught.value)
    )
    assert sorted(p.name for p in (store.path / "objects").rglob("*")) == (
        objects_before
    )


def test_a_store_without_commits_or_reflog_is_empty_not_damaged(
    tmp_path: Path,
) -> None:
    # A process killed while creating the store: HEAD, no branch, no reflog.
    pygit2.init_repository(str(tmp_path / "s"), bare=True, initial_head="main")
    store = Store.open(tmp_path / "s")  # finishes the job
    assert store.head is not None
    assert store.head.message.startswith("init store\n")


def test_a_store_folder_without_head_is_damage(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    (store.path / "HEAD").unlink()
    for attempt in (Store.open, Store.create):
        with pytest.raises(DamagedStoreError, match="its HEAD file is missing"):
            attempt(store.path)
    with pytest.raises(StoreError, match="no store at"):
        Store.open(tmp_path / "none")


def test_a_branch_seen_missing_while_a_first_commit_lands_is_read_again(
    tmp_path: Path,
) -> None:
    # libgit2 appends the reflog before it renames the ref into place: a
    # reader in that instant sees history and no branch. It must wait for
    # the branch, not call the store damaged (a CI drill caught this).
    import threading

    store = Store.create(tmp_path / "s")
    ref_file = tmp_path / "s" / "refs" / "heads" / "main"
    target = ref_file.read_bytes()
    ref_file.unlink()
    timer = threading.Timer(0.1, ref_file.write_bytes, args=(target,))
    timer.start()
    try:
        assert store.head is not None
        assert str(store.head.id) == target.decode().strip()
    finally:
        timer.join()


def test_a_branch_still_missing_after_the_grace_is_damage(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    (tmp_path / "s" / "refs" / "heads" / "main").unlink()
    missing = "the branch refs/heads/main is missing"
    with pytest.raises(DamagedStoreError, match=missing):
        assert store.head is None


def test_a_nul_in_a_summary_or_body_never_cuts_the_trailers(tmp_path: Path) -> None:
    # Issue 25: a prompt with a NUL ended the commit message there.
    store = Store.create(tmp_path / "s")
    oid = store.write(
        lambda snap: Change(
            "good a1: before\x00after",
            {"settings.json": b"{}\n"},
            trailers={"Action": "tag"},
            body="line\x00two",
        )
    )
    message = git(store.path, "cat-file", "commit", str(oid)).split("\n\n", 1)[1]
    assert message == ("good a1: before\\0after\n\nline\\0two\n\nMachine-Action: tag\n")
    assert "\x00" not in message
