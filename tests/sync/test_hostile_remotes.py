"""Hostile remotes: what arrives is checked before any ref of the store moves.

Each case crafts a remote by hand with raw object writes (``git hash-object
--literally`` for trees git itself would never write: unsorted, duplicate
entries, ``..`` and ``.git`` names), serves it over a real ``git daemon`` on
127.0.0.1, and pulls it; the same objects are pushed from a ``machine
clone``. After each refusal: one line, no ref moved, no object left behind,
no row lost or hidden, ``git fsck --full`` clean, and ``recover --yes``
twice changes nothing.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pygit2
import pytest

from machine_git import hooks
from machine_git.core import jsonio
from machine_git.core import paths
from machine_git.core.errors import REMOTE
from machine_git.core.errors import RemoteError
from machine_git.rows import rows
from machine_git.store.layout import WORK
from machine_git.store.store import Store
from machine_git.sync import incoming
from machine_git.sync import sharing as sync
from tests import helpers
from tests.conftest import Run
from tests.conftest import git
from tests.recovery.test_recover import ROW_A
from tests.recovery.test_recover import ROW_B
from tests.recovery.test_recover import ROW_C
from tests.recovery.test_recover import tagged_store
from tests.sync.test_transport import GitServer
from tests.sync.test_transport import git_daemon  # noqa: F401  (a fixture)

TREE, BLOB, LINK, EXE, GITLINK = "40000", "100644", "120000", "100755", "160000"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
AWS = f"AKIAIOSFODNN7EXAMPLE aws_secret_access_key={SECRET_KEY}"
Entry = tuple[str, bytes, str]  # mode, name, hex id


# -- raw objects -----------------------------------------------------------------------


def write(repo: Path, kind: str, data: bytes) -> str:
    """Any object, as git stores it, with none of git's checks (``--literally``)."""
    done = subprocess.run(
        ["git", "-C", str(repo), "hash-object", "--literally", "-w", "-t", kind,
         "--stdin"],
        input=data, capture_output=True, check=True,
    )  # fmt: skip
    return done.stdout.decode().strip()


def raw_tree(repo: Path, entries: list[Entry], order: bool = True) -> str:
    """A tree of exactly ``entries`` (sorted as git sorts, unless ``order`` is off)."""
    if order:
        entries = sorted(entries, key=lambda e: e[1] + (b"/" if e[0] == TREE else b""))
    data = b"".join(
        f"{mode} ".encode() + name + b"\0" + bytes.fromhex(oid)
        for mode, name, oid in entries
    )
    return write(repo, "tree", data)


def entries_of(repo: Path, tree: str) -> list[Entry]:
    found = pygit2.Repository(str(repo))[tree].peel(pygit2.Tree)
    return [(f"{e.filemode:o}", e.raw_name or b"", str(e.id)) for e in found]


def graft(repo: Path, tree: str, path: str, entry: tuple[str, str] | None) -> str:
    """``tree`` with ``path`` set to ``entry`` (mode, id), or removed if None."""
    head, _, rest = path.partition("/")
    kept = [e for e in entries_of(repo, tree) if e[1] != head.encode()]
    if rest:
        old = next(
            (e[2] for e in entries_of(repo, tree) if e[1] == head.encode()), None
        )
        sub = graft(repo, old or raw_tree(repo, []), rest, entry)
        kept.append((TREE, head.encode(), sub))
    elif entry is not None:
        kept.append((entry[0], head.encode(), entry[1]))
    return raw_tree(repo, kept)


def commit(repo: Path, tree: str, parents: list[str], message: str = "evil") -> str:
    args = [a for p in parents for a in ("-p", p)]
    return git(repo, "commit-tree", tree, *args, "-m", message).strip()


def set_ref(repo: Path, ref: str, oid: str) -> None:
    # Written by hand: git itself refuses a branch that names a tree.
    path = repo / ref if (repo / "HEAD").is_file() else repo / ".git" / ref
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(oid + "\n")


def annotated(repo: Path, target: str, kind: str = "commit", name: str = "v") -> str:
    body = f"object {target}\ntype {kind}\ntag {name}\n"
    body += "tagger Evil <evil@example.com> 1700000000 +0000\n\nevil\n"
    return write(repo, "tag", body.encode())


def row_bytes(row_id: str, **extra: object) -> bytes:
    return jsonio.canonical(helpers.train_row(row_id, **extra))


def main_of(repo: Path) -> str:
    return git(repo, "rev-parse", "refs/heads/main").strip()


def on_main(repo: Path, path: str, entry: tuple[str, str] | None) -> str:
    """A commit on main that sets ``path``; main moved to it."""
    head = main_of(repo)
    tree = graft(repo, git(repo, "rev-parse", "main^{tree}").strip(), path, entry)
    made = commit(repo, tree, [head])
    set_ref(repo, "refs/heads/main", made)
    return made


def blob(repo: Path, data: bytes) -> str:
    return write(repo, "blob", data)


def with_root(repo: Path, extra: list[Entry], order: bool = True) -> None:
    """A commit on main whose root tree also lists ``extra`` (hand-sorted)."""
    root = git(repo, "rev-parse", "main^{tree}").strip()
    tree = raw_tree(repo, [*entries_of(repo, root), *extra], order)
    set_ref(repo, "refs/heads/main", commit(repo, tree, [main_of(repo)]))


# -- the cases: each makes a remote hostile and says what the refusal names ------------

NEW = "d00000000004"
NEW_PATH = rows.row_path(NEW)
OLD_PATH = rows.row_path(ROW_A)


def tag_of_a_row_blob(r: Path) -> list[str]:
    set_ref(r, "refs/tags/rowblob", git(r, "rev-parse", f"main:{OLD_PATH}").strip())
    return ["version rowblob names a blob, not an annotated tag of a commit"]


def tag_of_a_tree(r: Path) -> list[str]:
    set_ref(r, "refs/tags/tree", git(r, "rev-parse", "main^{tree}").strip())
    return ["version tree names a tree"]


def main_names_a_tree(r: Path) -> list[str]:
    set_ref(r, "refs/heads/main", git(r, "rev-parse", "main^{tree}").strip())
    return ["main names a tree, not a commit"]


def unsorted_tree(r: Path) -> list[str]:
    root = git(r, "rev-parse", "main^{tree}").strip()
    tree = raw_tree(r, list(reversed(entries_of(r, root))), order=False)
    set_ref(r, "refs/heads/main", commit(r, tree, [main_of(r)]))
    return ["treeNotSorted"]


def duplicate_entries(r: Path) -> list[str]:
    bad = blob(r, row_bytes(NEW, kind="bogus"))
    good = blob(r, row_bytes(NEW))
    name = NEW_PATH.rsplit("/", 1)[1].encode()
    leaf = raw_tree(r, [(BLOB, name, bad), (BLOB, name, good)], order=False)
    on_main(r, NEW_PATH.rsplit("/", 1)[0], (TREE, leaf))
    return ["duplicateEntries"]


def new_row_as_a_link(r: Path) -> list[str]:
    on_main(r, NEW_PATH, (LINK, blob(r, row_bytes(NEW))))
    return [f"{NEW_PATH}:1: $: a symbolic link, not a regular file (100644)"]


def row_flipped_to_a_link(r: Path) -> list[str]:
    on_main(r, OLD_PATH, (LINK, git(r, "rev-parse", f"main:{OLD_PATH}").strip()))
    return [f"{OLD_PATH}:1: $: a symbolic link, not a regular file (100644)"]


def executable_row(r: Path) -> list[str]:
    on_main(r, NEW_PATH, (EXE, blob(r, row_bytes(NEW))))
    return [f"{NEW_PATH}:1: $: an executable, not a regular file (100644)"]


def dotdot_at_the_top(r: Path) -> list[str]:
    inner = raw_tree(r, [(BLOB, b"x.json", blob(r, row_bytes(NEW)))])
    with_root(r, [(TREE, b"..", inner)])
    return ["hasDotdot"]


def dot_git_config(r: Path) -> list[str]:
    config = blob(r, b"[core]\n\tfsmonitor = touch /tmp/pwned\n")
    inner = raw_tree(r, [(BLOB, b"config", config)])
    with_root(r, [(TREE, b".git", inner)])
    return ["hasDotgit"]


def dot_git_hooks(r: Path) -> list[str]:
    hook = raw_tree(r, [(EXE, b"post-checkout", blob(r, b"#!/bin/sh\ntouch pwned\n"))])
    inner = raw_tree(r, [(TREE, b"hooks", hook)])
    with_root(r, [(TREE, b".GIT", inner)])
    return ["hasDotgit"]


def slash_in_a_name(r: Path) -> list[str]:
    with_root(r, [(BLOB, b"rows/ab/cd/x.json", blob(r, row_bytes(NEW)))])
    return ["fullPathname"]


def gitmodules_with_a_gitlink(r: Path) -> list[str]:
    modules = blob(r, b'[submodule "x"]\n\tpath = sub\n\turl = https://example.com/x\n')
    with_root(r, [(BLOB, b".gitmodules", modules), (GITLINK, b"sub", "1" * 40)])
    return [".gitmodules:1: $: not a file machine writes", "sub:1: $: a submodule"]


def gitattributes_with_a_filter(r: Path) -> list[str]:
    on_main(r, ".gitattributes", (BLOB, blob(r, b"* filter=evil\n")))
    return [".gitattributes:1: $: not a file machine writes"]


def notes_with_a_cloud_key(r: Path) -> list[str]:
    on_main(r, "notes.txt", (BLOB, blob(r, AWS.encode())))
    return ["notes.txt:1: $: not a file machine writes"]


def settings_with_a_cloud_key(r: Path) -> list[str]:
    data = jsonio.canonical({"note": AWS})
    on_main(r, "settings.json", (BLOB, blob(r, data)))
    return ["settings.json:1: $: holds an unredacted secret (aws-access-key"]


def invalid_row(r: Path) -> list[str]:
    on_main(r, NEW_PATH, (BLOB, blob(r, row_bytes(NEW, kind="bogus"))))
    return ["1 invalid row in 1 commit"]


def forged_release(r: Path) -> list[str]:
    record = jsonio.canonical({"id": "BR-001", "title": "forged"})
    on_main(r, "releases/BR-001/prereg.json", (BLOB, blob(r, record)))
    return ["release records that only machine's release commands write"]


def lightweight_version(r: Path) -> list[str]:
    set_ref(r, "refs/tags/light", main_of(r))
    return ["version light names a commit, not an annotated tag of a commit"]


def version_off_history(r: Path) -> list[str]:
    orphan = commit(r, git(r, "rev-parse", "main^{tree}").strip(), [])
    set_ref(r, "refs/tags/stray", annotated(r, orphan))
    return ["version stray names commit"]


def tag_of_a_tag(r: Path) -> list[str]:
    inner = annotated(r, main_of(r), name="inner")
    set_ref(r, "refs/tags/nested", annotated(r, inner, kind="tag"))
    return ["version nested tags a tag, not a commit"]


def run_ref_to_a_blob(r: Path) -> list[str]:
    set_ref(r, "refs/runs/sft-00000000-000000", blob(r, row_bytes(NEW)))
    return ["run ref sft-00000000-000000 names a blob, not a commit"]


def a_huge_blob(r: Path) -> list[str]:
    on_main(r, NEW_PATH, (BLOB, blob(r, bytes(incoming.MAX_BLOB + 1))))
    return ["a file of 64.0 MiB", "is over the 64.0 MiB limit for files"]


def a_huge_tree(r: Path) -> list[str]:
    one = blob(r, b"{}")
    count = incoming.MAX_TREE // 40 + 1
    names = [(BLOB, f"{i:012x}.json".encode(), one) for i in range(count)]
    on_main(r, "rows/ff/ff", (TREE, raw_tree(r, names)))
    return ["is over the 4.0 MiB limit for trees"]


CASES: list[Callable[[Path], list[str]]] = [
    tag_of_a_row_blob,
    tag_of_a_tree,
    main_names_a_tree,
    unsorted_tree,
    duplicate_entries,
    new_row_as_a_link,
    row_flipped_to_a_link,
    executable_row,
    dotdot_at_the_top,
    dot_git_config,
    dot_git_hooks,
    slash_in_a_name,
    gitmodules_with_a_gitlink,
    gitattributes_with_a_filter,
    notes_with_a_cloud_key,
    settings_with_a_cloud_key,
    invalid_row,
    forged_release,
    lightweight_version,
    version_off_history,
    tag_of_a_tag,
    run_ref_to_a_blob,
    a_huge_blob,
    a_huge_tree,
]


# -- the store's state -----------------------------------------------------------------


def state(store: Path) -> tuple[str, str, set[str]]:
    """Its refs, its objects, its row ids: what a refusal must leave as it was."""
    refs = git(store, "for-each-ref", "--format=%(refname) %(objectname)")
    objects = git(store, "cat-file", "--batch-all-objects", "--batch-check")
    return refs, objects, row_ids(store)


def row_ids(store: Path) -> set[str]:
    listed = git(store, "ls-tree", "-r", "--name-only", "main", "rows").split()
    return {str(rows.id_of_path(p)) for p in listed}


def assert_untouched(store: Path, before: tuple[str, str, set[str]]) -> None:
    assert state(store) == before
    assert not list((store / WORK).glob("incoming-*"))
    fsck = subprocess.run(
        ["git", "-C", str(store), "fsck", "--full", "--strict"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert (fsck.returncode, fsck.stderr) == (0, "")


def assert_recover_keeps_every_row(store: Path, run: Run, before: set[str]) -> None:
    for _ in range(2):
        done = run("recover", "--yes")
        assert (done.exit_code, done.stdout) == (
            0,
            f"the store {store} is intact; nothing to recover\n",
        )
    assert row_ids(store) >= before
    listed = run("tagged", "--json")
    assert listed.exit_code == 0
    assert {r["id"] for r in helpers.json_output(listed.stdout)[0]} >= before


@pytest.fixture
def ours(project: Path) -> Path:
    """Three rows (A, B, C) in three commits, version v1 at the last."""
    store = tagged_store(paths.store_path(project))
    assert row_ids(store.path) == {ROW_A, ROW_B, ROW_C}
    return store.path


def evil_remote(ours: Path, served: Path) -> Path:
    """A copy of our store (main and v1) that the case then makes hostile."""
    evil = served / "evil.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(ours), str(evil)], check=True)
    return evil


# -- pull ------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_a_hostile_remote_is_refused_by_pull_and_nothing_moves(
    case: Callable[[Path], list[str]],
    ours: Path,
    git_daemon: GitServer,  # noqa: F811
    run: Run,
) -> None:
    evil = evil_remote(ours, git_daemon.base)
    said = case(evil)
    store = Store.open(ours)
    sync.add_remote(store, "evil", git_daemon.url("evil.git"))
    before = state(ours)
    with pytest.raises(RemoteError) as e:
        sync.pull(store, "evil", audit=hooks.audit)
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith("evil ")
    shown = " ".join([message, *e.value.details])
    for part in said:
        assert part in shown, (part, message, e.value.details)
    assert_untouched(ours, before)
    result = run("pull", "evil")
    assert result.exit_code == REMOTE
    assert result.stderr.splitlines()[-1] == f"Error: {message}"
    assert_untouched(ours, before)
    assert_recover_keeps_every_row(ours, run, before[2])


def test_a_shallow_remote_is_refused_and_is_not_damage(
    ours: Path,
    git_daemon: GitServer,  # noqa: F811
    run: Run,
    tmp_path: Path,
) -> None:
    shallow = git_daemon.base / "shallow.git"
    subprocess.run(
        ["git", "clone", "-q", "--bare", "--depth=1", f"file://{ours}", str(shallow)],
        check=True,
    )
    other = Store.create(tmp_path / "other")
    sync.add_remote(other, "evil", git_daemon.url("shallow.git"))
    before = state(other.path)
    with pytest.raises(RemoteError) as e:
        sync.pull(other, "evil")
    assert "shallow" in str(e.value) and "\n" not in str(e.value)
    assert_untouched(other.path, before)
    assert not (other.path / "shallow").exists()
    # Our own store, pulling a shallow copy of itself: nothing is missing
    # (every commit is ours), so it is up to date, and never damage.
    store = Store.open(ours)
    sync.add_remote(store, "evil", git_daemon.url("shallow.git"))
    before = state(ours)
    assert sync.pull(store, "evil").status == "up-to-date"
    assert not (ours / "shallow").exists()
    assert row_ids(ours) == before[2]
    assert run("versions").exit_code == 0
    assert_recover_keeps_every_row(ours, run, before[2])


def test_a_partial_remote_is_refused_and_is_not_damage(
    ours: Path,
    git_daemon: GitServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    # A partial clone (--filter=blob:none) whose own remote is gone cannot
    # send the rows it lacks: one line, and our store is as it was.
    git(ours, "config", "uploadpack.allowFilter", "true")
    partial = git_daemon.base / "partial.git"
    subprocess.run(
        ["git", "clone", "-q", "--bare", "--filter=blob:none", f"file://{ours}",
         str(partial)],
        check=True,
    )  # fmt: skip
    git(partial, "config", "remote.origin.url", str(tmp_path / "gone"))
    other = Store.create(tmp_path / "other")
    sync.add_remote(other, "evil", git_daemon.url("partial.git"))
    before = state(other.path)
    with pytest.raises(RemoteError) as e:
        sync.pull(other, "evil")
    assert str(e.value) == (
        "evil is refused: it is a partial copy (some of its objects are only on "
        "its own remote); pull from a full copy; nothing was pulled"
    )
    assert_untouched(other.path, before)


def test_an_honest_pull_still_lands_with_its_version(
    ours: Path,
    git_daemon: GitServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    evil = evil_remote(ours, git_daemon.base)
    other = Store.create(tmp_path / "other")
    sync.add_remote(other, "hub", git_daemon.url(evil.name))
    result = sync.pull(other, "hub")
    assert (result.status, result.versions) == ("fast-forward", ["v1"])
    assert row_ids(other.path) == {ROW_A, ROW_B, ROW_C}
    assert not list((other.path / WORK).glob("incoming-*"))
    # The second pull fetches nothing new and moves nothing.
    before = state(other.path)
    assert sync.pull(other, "hub").status == "up-to-date"
    assert state(other.path) == before


# -- push from a clone -----------------------------------------------------------------

PUSHED: dict[Callable[[Path], list[str]], list[str]] = {
    # case: the refs it sets, pushed as they are
    tag_of_a_row_blob: ["refs/tags/rowblob"],
    tag_of_a_tree: ["refs/tags/tree"],
    unsorted_tree: ["refs/heads/main"],
    duplicate_entries: ["refs/heads/main"],
    new_row_as_a_link: ["refs/heads/main"],
    row_flipped_to_a_link: ["refs/heads/main"],
    executable_row: ["refs/heads/main"],
    dotdot_at_the_top: ["refs/heads/main"],
    dot_git_config: ["refs/heads/main"],
    dot_git_hooks: ["refs/heads/main"],
    slash_in_a_name: ["refs/heads/main"],
    gitmodules_with_a_gitlink: ["refs/heads/main"],
    gitattributes_with_a_filter: ["refs/heads/main"],
    notes_with_a_cloud_key: ["refs/heads/main"],
    settings_with_a_cloud_key: ["refs/heads/main"],
    invalid_row: ["refs/heads/main"],
    forged_release: ["refs/heads/main"],
    lightweight_version: ["refs/tags/light"],
    version_off_history: ["refs/tags/stray"],
    tag_of_a_tag: ["refs/tags/nested"],
    run_ref_to_a_blob: ["refs/runs/sft-00000000-000000"],
    a_huge_blob: ["refs/heads/main"],
    a_huge_tree: ["refs/heads/main"],
}


def push(clone: Path, *specs: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(clone), "push", "-q", "origin", *specs],
        capture_output=True, text=True, check=False,
        env={**os.environ, "LC_ALL": "C"},
    )  # fmt: skip


def refusals(stderr: str) -> list[str]:
    return [
        line.removeprefix("remote: ").strip()
        for line in stderr.splitlines()
        if "push rejected" in line or line.startswith("remote: error: object ")
    ]


@pytest.mark.parametrize("case", list(PUSHED), ids=lambda c: c.__name__)
def test_a_hostile_push_from_a_clone_is_refused_and_nothing_moves(
    case: Callable[[Path], list[str]], ours: Path, tmp_path: Path, run: Run
) -> None:
    clone = sync.clone(Store.open(ours), tmp_path / "clone")
    said = case(clone)
    before = state(ours)
    done = push(clone, *(f"{ref}:{ref}" for ref in PUSHED[case]))
    assert done.returncode == 1, done.stderr
    lines = refusals(done.stderr)
    assert lines, done.stderr
    assert any(part in done.stderr for part in said), (said, done.stderr)
    assert_untouched(ours, before)
    assert_recover_keeps_every_row(ours, run, before[2])


def test_a_clone_cannot_rewrite_main_move_or_delete_a_version(
    ours: Path, tmp_path: Path, run: Run
) -> None:
    clone = sync.clone(Store.open(ours), tmp_path / "clone")
    before = state(ours)
    first = git(clone, "rev-list", "--reverse", "main").split()[1]  # 1 row
    cases = {
        ("+refs/tags/v1^{}~1:refs/heads/main",): "main would lose commits",
        (f"+{first}:refs/heads/main",): "main would lose commits",
        (f"+{first}:refs/tags/v1",): "version v1 exists; a name never moves",
        (":refs/tags/v1",): "deleting version v1 is not allowed",
        (":refs/heads/main",): "deleting main is not allowed",
        ("main:refs/heads/other",): "refs/heads/other is not a ref machine keeps",
        ("main:refs/notes/x",): "refs/notes/x is not a ref machine keeps",
    }
    # git's own checks (receive.denyDeletes, denyNonFastForwards) refuse
    # some first; with them off, the hook still does.
    for config in ("true", "false"):
        for key in ("receive.denyDeletes", "receive.denyNonFastForwards"):
            git(ours, "config", key, config)
        for specs, reason in cases.items():
            done = push(clone, *specs)
            assert done.returncode == 1, (specs, done.stderr)
            if config == "false" or "machine" in done.stderr:
                assert f"machine: push rejected: {reason}" in done.stderr, (
                    specs,
                    done.stderr,
                )
            assert_untouched(ours, before)
    assert_recover_keeps_every_row(ours, run, before[2])


def test_an_honest_push_from_a_clone_still_lands(ours: Path, tmp_path: Path) -> None:
    clone = sync.clone(Store.open(ours), tmp_path / "clone")
    (clone / NEW_PATH).parent.mkdir(parents=True)
    (clone / NEW_PATH).write_bytes(row_bytes(NEW))
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", "a row by hand")
    git(clone, "tag", "-a", "-m", "by hand", "v2")
    done = push(clone, "main", "refs/tags/v2")
    assert done.returncode == 0, done.stderr
    assert row_ids(ours) == {ROW_A, ROW_B, ROW_C, NEW}
    assert git(ours, "rev-parse", "v2^{}") == git(clone, "rev-parse", "main")
