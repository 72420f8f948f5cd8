from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pygit2
import pytest
from pygit2.enums import FileMode

from machine_git.core import jsonio
from machine_git.core.errors import HookError
from machine_git.recovery.validate import Finding
from machine_git.rows import context
from machine_git.rows import rows
from machine_git.store.store import BRANCH
from machine_git.store.store import Change
from machine_git.store.store import Store
from machine_git.sync import hooks
from machine_git.sync import sharing as sync
from tests import helpers
from tests.conftest import git

REPO = Path(__file__).resolve().parents[2]
ROW = "rows/a1/b2/a1b2c3d4e5f6.json"
KIND = "unknown kind 'bogus' (expected one of train, traces, rejected, observed)"


def put(store: Store, row: dict[str, Any]) -> None:
    path = rows.row_path(row["id"])
    store.write(lambda snap: Change(f"add {row['id']}", {path: jsonio.canonical(row)}))


def run(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(where), *args], capture_output=True, text=True, check=False
    )


def hand_edit(clone: Path, path: str, **fields: Any) -> None:
    """Edit a row the way a person would: json.dumps, not machine's writer."""
    row = json.loads((clone / path).read_text())
    row.update(fields)
    (clone / path).write_text(json.dumps(row, indent=2, sort_keys=True) + "\n")


@pytest.fixture
def store(tmp_path: Path) -> Store:
    made = Store.create(tmp_path / "store")
    put(made, helpers.train_row())
    return made


@pytest.fixture
def clone(store: Store, tmp_path: Path) -> Path:
    return sync.clone(store, tmp_path / "clone")


# -- checking one file -----------------------------------------------------------------


def test_a_canonical_row_at_its_path_passes() -> None:
    assert hooks.check_blob(ROW, jsonio.canonical(helpers.train_row())) == []


def test_files_outside_rows_are_not_checked() -> None:
    assert hooks.check_blob("machine.json", b"not json") == []


@pytest.mark.parametrize(
    ("path", "data", "finding"),
    [
        (ROW, helpers.train_row(kind="bogus"), ("$.kind", KIND)),
        (
            "rows/ff/ff/ffffffffffff.json",
            helpers.train_row(),
            ("$.id", "'a1b2c3d4e5f6' does not match the file name"),
        ),
        (
            "rows/a1/a1b2c3d4e5f6.json",
            helpers.train_row(),
            ("$", "not a row path (rows/ab/cd/<12 hex>.json)"),
        ),
        (
            ROW,
            json.dumps(helpers.train_row()).encode(),
            ("$", "not canonical JSON (sorted keys, indent 2)"),
        ),
        (
            ROW,
            b"{oops",
            (
                "$",
                "not valid JSON (unexpected character, expected a string key: "
                "line 1 column 2 (char 1))",
            ),
        ),
    ],
    ids=["schema", "wrong path", "not a row path", "not canonical", "not JSON"],
)
def test_a_bad_file_is_named_with_its_problem(
    path: str, data: Any, finding: tuple[str, str]
) -> None:
    raw = data if isinstance(data, bytes) else jsonio.canonical(data)
    assert hooks.check_blob(path, raw) == [Finding(path, 1, *finding)]


def test_only_the_blobs_a_commit_changes_are_read(store: Store) -> None:
    # An old commit with a bad row (made behind machine's back), then a good
    # commit on top: checking the new commit alone does not see the old row.
    repo = store.repo
    parent = repo.references[BRANCH].peel(pygit2.Commit)
    index = pygit2.Index()
    index.read_tree(parent.tree)
    bad = repo.create_blob(b"{}")
    index.add(pygit2.IndexEntry("rows/ff/ff/ffffffffffff.json", bad, FileMode.BLOB))
    sig = pygit2.Signature("x", "x@example.com")
    old = repo.create_commit(
        BRANCH, sig, sig, "bad\n", index.write_tree(repo), [parent.id]
    )
    put(store, helpers.train_row("0123456789ab"))
    new = repo.references[BRANCH].peel(pygit2.Commit).id
    assert hooks.check_commits(repo, [new]) == []
    [(commit, findings)] = hooks.check_commits(repo, [old, new])
    assert commit.id == old
    assert findings == hooks.check_blob("rows/ff/ff/ffffffffffff.json", b"{}")
    assert findings[0].path == "$.kind"


# -- installing ------------------------------------------------------------------------


def test_install_is_idempotent_and_bakes_in_this_python(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    assert hooks.install_store_hooks(store.path) == ["pre-receive", "post-receive"]
    assert hooks.install_store_hooks(store.path) == []
    script = (store.path / "hooks" / "pre-receive").read_text()
    assert script.splitlines()[-1] == (
        f"exec {shlex.quote(sys.executable)} -P -m machine_git.hooks pre-receive"
    )
    for name in ("pre-receive", "post-receive"):
        mode = (store.path / "hooks" / name).stat().st_mode
        assert stat.S_IMODE(mode) == 0o700
    assert git(store.path, "config", "core.hooksPath") == "hooks\n"


def test_install_repairs_a_changed_hook_of_ours(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    hooks.install_store_hooks(store.path)
    hook = store.path / "hooks" / "post-receive"
    hook.write_text(hook.read_text() + "echo edited\n")
    assert hooks.install_store_hooks(store.path) == ["post-receive"]
    assert hook.read_bytes() == hooks.render("post-receive")


def test_install_leaves_a_hook_someone_else_wrote(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    (store.path / "hooks").mkdir(exist_ok=True)
    (store.path / "hooks" / "pre-receive").write_text("#!/bin/sh\nexit 0\n")
    with pytest.raises(HookError) as e:
        hooks.install_store_hooks(store.path)
    assert str(e.value) == (
        f"{store.path}/hooks/pre-receive exists and was not written by machine; "
        "move it away, then run 'machine hooks install' again"
    )


def test_fix_permissions_makes_git_writes_private(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    hooks.install_store_hooks(store.path)
    pack = store.path / "objects" / "pack" / "pack-x.pack"
    pack.write_bytes(b"")
    pack.chmod(0o444)
    (store.path / "refs" / "remotes").mkdir(mode=0o755)
    (store.path / "refs" / "remotes").chmod(0o755)
    assert hooks.fix_permissions(store.path) == 2
    assert stat.S_IMODE(pack.stat().st_mode) == 0o600
    assert stat.S_IMODE((store.path / "hooks" / "pre-receive").stat().st_mode) == 0o700
    assert hooks.fix_permissions(store.path) == 0


def test_fix_permissions_since_skips_untouched_object_folders(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    folder = next(p for p in (store.path / "objects").iterdir() if len(p.name) == 2)
    loose = next(folder.iterdir())
    loose.chmod(0o400)
    os.utime(folder, (1_000_000_000, 1_000_000_000))
    assert hooks.fix_permissions(store.path, since=2_000_000_000) == 0
    assert hooks.fix_permissions(store.path, since=500_000_000) == 1


# -- the store's pre-receive hook ------------------------------------------------------


def test_a_push_with_an_invalid_row_is_rejected(store: Store, clone: Path) -> None:
    before = git(store.path, "rev-parse", "HEAD")
    hand_edit(clone, ROW, kind="bogus")
    assert (
        run(clone, "commit", "-q", "--no-verify", "-am", "bogus kind").returncode == 0
    )
    bad = run(clone, "rev-parse", "HEAD").stdout.strip()
    done = run(clone, "push", "-q", "origin", "main")
    assert done.returncode == 1
    said = [
        line.removeprefix("remote: ").rstrip()
        for line in done.stderr.splitlines()
        if line.startswith("remote: ")
    ]
    assert said == [
        f"commit {bad[:12]}: bogus kind",
        f"{ROW}:1: $.kind: {KIND}",
        "machine: push rejected: 1 invalid row in 1 commit; nothing was stored",
    ]
    assert git(store.path, "rev-parse", "HEAD") == before
    assert run(store.path, "cat-file", "-e", bad).returncode != 0


def test_a_push_of_a_non_canonical_or_misplaced_row_is_rejected(
    store: Store, clone: Path
) -> None:
    moved = clone / "rows" / "ff" / "ff" / "ffffffffffff.json"
    moved.parent.mkdir(parents=True)
    shutil.copyfile(clone / ROW, moved)
    row = json.loads((clone / ROW).read_text())
    (clone / ROW).write_text(json.dumps(row, indent=4, sort_keys=True) + "\n")
    run(clone, "add", "-A")
    run(clone, "commit", "-q", "--no-verify", "-m", "two bad files")
    done = run(clone, "push", "-q", "origin", "main")
    assert done.returncode == 1
    assert f"remote: {ROW}:1: $: not canonical JSON (sorted keys, indent 2)" in (
        done.stderr
    )
    assert (
        "remote: rows/ff/ff/ffffffffffff.json:1: $.id: 'a1b2c3d4e5f6' does not "
        "match the file name"
    ) in done.stderr
    assert "2 invalid rows in 1 commit" in done.stderr


def test_a_push_of_a_row_without_its_context_or_a_misnamed_context_is_rejected(
    store: Store, clone: Path
) -> None:
    data = context.canonical(helpers.CONTEXT)
    sha = context.digest(data)
    (clone / ROW).write_bytes(jsonio.canonical(helpers.train_row(context=sha)))
    wrong = clone / context.path_of("0" * 64)
    wrong.parent.mkdir(parents=True)
    wrong.write_bytes(data)
    run(clone, "add", "-A")
    run(clone, "commit", "-q", "--no-verify", "-m", "a row and a stray context")
    done = run(clone, "push", "-q", "origin", "main")
    assert done.returncode == 1
    said = [
        line.removeprefix("remote: ").rstrip()
        for line in done.stderr.splitlines()
        if line.startswith("remote: ")
    ][1:]
    assert said == [
        f"{context.path_of('0' * 64)}:1: $: its content hashes to {sha[:12]}, "
        "not its name",
        f"{ROW}:1: $.context: its context {sha[:12]} is not in the store",
        "machine: push rejected: 2 invalid rows in 1 commit; nothing was stored",
    ]
    # with the context at its name, the same row lands
    right = clone / context.path_of(sha)
    right.parent.mkdir(parents=True, exist_ok=True)
    wrong.rename(right)
    run(clone, "add", "-A")
    run(clone, "commit", "-q", "--amend", "-m", "a row and its context")
    done = run(clone, "push", "-q", "origin", "main")
    assert done.returncode == 0, done.stderr
    assert store.read_row("a1b2c3d4e5f6") == helpers.train_row(context=sha)


def test_a_good_push_from_a_clone_lands_and_stays_private(
    store: Store, clone: Path
) -> None:
    row = helpers.train_row(note="fixed by hand")
    (clone / ROW).write_bytes(jsonio.canonical(row))
    assert run(clone, "commit", "-q", "-am", "fix a note").returncode == 0
    done = run(clone, "push", "-q", "origin", "main")
    assert done.returncode == 0, done.stderr
    assert store.read_row("a1b2c3d4e5f6") == row
    for root, dirs, files in os.walk(store.path):
        for d in dirs:
            assert stat.S_IMODE(os.stat(Path(root, d)).st_mode) == 0o700, d
        for f in files:
            want = 0o700 if Path(root).name == "hooks" else 0o600
            assert stat.S_IMODE(os.stat(Path(root, f)).st_mode) == want, f


# A fake GitHub token, assembled so no file holds it whole.
TOKEN = "ghp_" + "Zq8Lm2Np7Rt3Vw9Xy1Ab" + "5Cd6Ef7Gh8Ij9Kl0Mn"


def _put_canonical(clone: Path, row: dict[str, Any]) -> None:
    (clone / ROW).write_bytes(jsonio.canonical(row))


def _remote_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [
        line.removeprefix("remote: ").rstrip()
        for line in done.stderr.splitlines()
        if line.startswith("remote: ")
    ]


def test_check_secrets_names_only_secrets_the_old_row_lacked() -> None:
    leaky = jsonio.canonical(helpers.train_row(note=f"use {TOKEN}"))
    clean = jsonio.canonical(helpers.train_row())
    problem = "holds an unredacted secret (github-pat)"
    assert hooks.check_secrets(ROW, leaky, None) == [Finding(ROW, 1, "$", problem)]
    assert hooks.check_secrets(ROW, leaky, clean) == [Finding(ROW, 1, "$", problem)]
    assert hooks.check_secrets(ROW, leaky, leaky) == []  # carried over, not new
    assert hooks.check_secrets(ROW, clean, None) == []


def test_a_push_that_brings_a_secret_into_a_row_is_rejected(
    store: Store, clone: Path
) -> None:
    before = git(store.path, "rev-parse", "HEAD")
    _put_canonical(clone, helpers.train_row(note=f"token {TOKEN}"))
    run(clone, "commit", "-q", "--no-verify", "-am", "a note")
    bad = run(clone, "rev-parse", "HEAD").stdout.strip()
    done = run(clone, "push", "-q", "origin", "main")
    assert done.returncode == 1
    assert _remote_lines(done) == [
        f"commit {bad[:12]}: a note",
        f"{ROW}:1: $: holds an unredacted secret (github-pat)",
        "machine: push rejected: 1 invalid row in 1 commit; nothing was stored",
    ]
    assert git(store.path, "rev-parse", "HEAD") == before


def test_a_push_whose_commit_message_holds_a_secret_is_rejected(
    store: Store, clone: Path
) -> None:
    _put_canonical(clone, helpers.train_row(note="better"))
    run(clone, "commit", "-q", "--no-verify", "-am", f"fix\n\nused {TOKEN}")
    done = run(clone, "push", "-q", "origin", "main")
    assert done.returncode == 1
    assert _remote_lines(done)[1:] == [
        "(commit message):1: $: holds an unredacted secret (github-pat)",
        "machine: push rejected: 1 commit message with a secret in 1 commit; "
        "nothing was stored",
    ]
    assert TOKEN not in git(store.path, "log", "--format=%B")


def test_a_push_that_brings_a_secret_in_any_other_file_is_rejected(
    store: Store, clone: Path
) -> None:
    # issue 28: every file of a pushed commit is scanned, not only rows
    before = git(store.path, "rev-parse", "HEAD")
    (clone / "notes").mkdir()
    (clone / "notes" / "deploy.md").write_text(f"# deploy\n\nGITHUB_TOKEN={TOKEN}\n")
    (clone / "logo.bin").write_bytes(b"\x89PNG\x00" + TOKEN.encode())  # binary
    run(clone, "add", "notes", "logo.bin")
    run(clone, "commit", "-q", "--no-verify", "-m", "deploy notes")
    bad = run(clone, "rev-parse", "HEAD").stdout.strip()
    done = run(clone, "push", "-q", "origin", "main")
    assert done.returncode == 1
    # issue 25: a store holds only the files machine writes, so these are
    # refused by their place before their contents are read.
    assert _remote_lines(done) == [
        f"commit {bad[:12]}: deploy notes",
        "logo.bin:1: $: not a file machine writes",
        "notes:1: $: not a folder machine writes",
        "machine: push rejected: 2 refused files in 1 commit; nothing was stored",
    ]
    assert git(store.path, "rev-parse", "HEAD") == before


def test_check_file_secrets_names_only_what_the_old_version_lacked() -> None:
    leaky = f"a\nkey {TOKEN}\n".encode()
    problem = "holds an unredacted secret (github-pat)"
    assert hooks.check_file_secrets("a.txt", leaky, None) == [
        Finding("a.txt", 1, "$", problem)
    ]
    assert hooks.check_file_secrets("a.txt", leaky + b"more\n", leaky) == []
    assert hooks.check_file_secrets("a.txt", b"clean\n", None) == []


def test_an_explicit_no_redact_commit_is_let_through_and_its_secret_carried(
    store: Store, clone: Path
) -> None:
    # machine good --no-redact records "Machine-Redaction: off": the push keeps
    # that choice, and a later change that carries the secret along is fine
    _put_canonical(clone, helpers.train_row(note=f"token {TOKEN}"))
    message = "keep it\n\nMachine-Redaction: off\n"
    assert run(clone, "commit", "-q", "--no-verify", "-am", message).returncode == 0
    assert run(clone, "push", "-q", "origin", "main").returncode == 0
    row = helpers.train_row(note=f"token {TOKEN}", kind="rejected", tag="bad")
    _put_canonical(clone, row)
    assert run(clone, "commit", "-q", "-am", "move it").returncode == 0
    done = run(clone, "push", "-q", "origin", "main")
    assert done.returncode == 0, done.stderr
    moved = store.read_row("a1b2c3d4e5f6")
    assert moved is not None and moved["kind"] == "rejected"


# -- the clone's pre-commit hook -------------------------------------------------------


def test_the_clone_refuses_a_commit_of_a_bad_staged_row(clone: Path) -> None:
    before = run(clone, "rev-parse", "HEAD").stdout
    hand_edit(clone, ROW, kind="bogus")
    done = run(clone, "commit", "-q", "-am", "bogus")
    assert done.returncode == 1
    assert done.stderr == (
        f"{ROW}:1: $.kind: {KIND}\nmachine: commit refused: 1 invalid staged row\n"
    )
    assert run(clone, "rev-parse", "HEAD").stdout == before


def test_the_clone_refuses_a_commit_that_brings_a_secret(clone: Path) -> None:
    before = run(clone, "rev-parse", "HEAD").stdout
    _put_canonical(clone, helpers.train_row(note=f"token {TOKEN}"))
    done = run(clone, "commit", "-q", "-am", "a note")
    assert done.returncode == 1
    assert done.stderr == (
        f"{ROW}:1: $: holds an unredacted secret (github-pat)\n"
        "machine: commit refused: 1 invalid staged row\n"
    )
    assert run(clone, "rev-parse", "HEAD").stdout == before


def test_the_clone_refuses_a_secret_in_a_file_that_is_not_a_row(clone: Path) -> None:
    before = run(clone, "rev-parse", "HEAD").stdout
    (clone / ".env").write_text(f"GITHUB_TOKEN={TOKEN}\n")
    run(clone, "add", ".env")
    done = run(clone, "commit", "-q", "-m", "env")
    assert done.returncode == 1
    assert done.stderr == (
        ".env:1: $: holds an unredacted secret (github-pat)\n"
        "machine: commit refused: 1 invalid staged row\n"
    )
    assert run(clone, "rev-parse", "HEAD").stdout == before


def test_the_clone_commits_a_good_row_and_ignores_unstaged_files(clone: Path) -> None:
    (clone / ROW).write_bytes(jsonio.canonical(helpers.train_row(note="good")))
    run(clone, "add", ROW)
    stray = clone / "rows" / "ff" / "ff" / "ffffffffffff.json"
    stray.parent.mkdir(parents=True)
    stray.write_text("{not staged")
    done = run(clone, "commit", "-q", "-m", "better note")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_the_clone_is_private_with_only_our_hook(clone: Path, store: Store) -> None:
    assert sorted(p.name for p in (clone / ".git" / "hooks").iterdir()) == [
        "pre-commit"
    ]
    assert git(clone, "remote", "get-url", "origin") == f"{store.path}\n"
    assert git(clone, "config", "core.hooksPath") == ".git/hooks\n"
    for root, dirs, files in os.walk(clone):
        for d in dirs:
            assert stat.S_IMODE(os.stat(Path(root, d)).st_mode) == 0o700, d
        for f in files:
            want = 0o700 if Path(root).name == "hooks" else 0o600
            assert stat.S_IMODE(os.stat(Path(root, f)).st_mode) == want, f


def test_clone_refuses_a_folder_that_is_not_empty(store: Store, tmp_path: Path) -> None:
    target = tmp_path / "full"
    target.mkdir()
    (target / "x").write_text("x")
    with pytest.raises(HookError) as e:
        sync.clone(store, target)
    assert str(e.value) == f"{target} exists and is not empty; clone into a new folder"


def test_an_unknown_hook_name_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert hooks.main(["post-checkout"]) == 2
    assert capsys.readouterr().err == (
        "usage: python -m machine_git.hooks pre-receive|post-receive|pre-commit\n"
    )


# -- the pre-commit framework's hooks --------------------------------------------------


def test_machine_validate_passes_good_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.jsonl"
    good.write_bytes(b"".join(jsonio.line(r) for r in helpers.valid_rows()))
    row_file = tmp_path / ROW
    row_file.parent.mkdir(parents=True)
    row_file.write_bytes(jsonio.canonical(helpers.train_row()))
    assert hooks.validate_main([str(good), str(row_file)]) == 0
    assert capsys.readouterr().out == ""


def test_machine_validate_names_file_line_and_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    rows_ = [helpers.train_row(), helpers.train_row(kind="bogus")]
    bad.write_bytes(b"".join(jsonio.line(r) for r in rows_))
    row_file = tmp_path / ROW
    row_file.parent.mkdir(parents=True)
    row_file.write_text(json.dumps(helpers.train_row()))
    assert hooks.validate_main([str(bad), str(row_file)]) == 1
    assert capsys.readouterr().out == (
        f"{bad}:2: $.kind: {KIND}\n"
        f"{row_file}:1: $: not canonical JSON (sorted keys, indent 2)\n"
    )


def test_machine_secrets_reports_kind_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clean = tmp_path / "clean.txt"
    clean.write_text("nothing to see\n")
    leaky = tmp_path / "leaky.env"
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    leaky.write_text(f"# config\nGITHUB={token}\n")
    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"\xff\xfe\x00")
    assert hooks.secrets_main([str(clean), str(binary)]) == 0
    assert hooks.secrets_main([str(clean), str(leaky)]) == 1
    assert capsys.readouterr().out == f"{leaky}:2: secret of kind github-pat\n"


def test_machine_secrets_version_names_the_engine_and_its_rules(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import kingfisher_sdk

    assert hooks.secrets_main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        f"machine-secrets: kingfisher-secret-scanner {kingfisher_sdk.__version__} ("
    )
    count = int(out.split("(", 1)[1].split(" ", 1)[0])
    assert count >= 400  # betterleaks' and Veles' rules
    assert "+ machine's own rules" in out


def test_the_hook_manifest_is_valid() -> None:
    done = subprocess.run(
        [_pre_commit(), "validate-manifest", str(REPO / ".pre-commit-hooks.yaml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _pre_commit() -> str:
    beside = Path(sys.executable).parent / "pre-commit"
    found = str(beside) if beside.exists() else shutil.which("pre-commit")
    assert found, "pre-commit is not installed"
    return found


@pytest.mark.slow
def test_pre_commit_runs_our_hooks_from_this_repository(tmp_path: Path) -> None:
    # pre-commit needs a git repository at a commit: copy the package's files
    # (the working tree, not HEAD, so this test checks the code under test).
    hook_repo = tmp_path / "hook-repo"
    for name in ("machine_git", "schemas", "templates", "hooks", "skills"):
        shutil.copytree(
            REPO / name,
            hook_repo / name,
            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"),
        )
    for name in ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml"):
        shutil.copyfile(REPO / name, hook_repo / name)
    _git_commit(hook_repo, "hook repository")
    sha = git(hook_repo, "rev-parse", "HEAD").strip()

    work = tmp_path / "work"
    work.mkdir()
    (work / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {hook_repo}\n    rev: {sha}\n"
        "    hooks:\n      - id: machine-validate\n      - id: machine-secrets\n"
    )
    (work / "train.jsonl").write_bytes(jsonio.line(helpers.train_row()))
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    _git_commit(work, "config")
    installed = subprocess.run(
        [_pre_commit(), "install"], cwd=work, env=env, capture_output=True, text=True
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr

    (work / "traces.jsonl").write_bytes(jsonio.line(helpers.traces_row()))
    # Other JSON of the repository is not a row: the hook leaves it alone.
    (work / "package.json").write_text('{"name": "web", "private": true}\n')
    (work / "notes.jsonl").write_text('{"kind": null}\n')
    good = _commit(work, env, "good rows")
    assert good.returncode == 0, good.stdout + good.stderr

    (work / "bad.rows.jsonl").write_bytes(jsonio.line(helpers.train_row(kind="bogus")))
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    (work / "notes.txt").write_text(f"one\ntoken {token}\n")
    bad = _commit(work, env, "bad rows")
    assert bad.returncode == 1
    said = bad.stdout + bad.stderr
    assert f"\nbad.rows.jsonl:1: $.kind: {KIND}\n" in said, said
    assert "\nnotes.txt:2: secret of kind github-pat\n" in said, said
    assert "traces.jsonl" not in said and "train.jsonl" not in said


def _git_commit(where: Path, message: str) -> None:
    if not (where / ".git").exists():
        subprocess.run(["git", "init", "-q", "-b", "main", str(where)], check=True)
    git(where, "add", "-A")
    git(where, "commit", "-q", "-m", message)


def _commit(where: Path, env: dict[str, str], message: str) -> Any:
    subprocess.run(["git", "add", "-A"], cwd=where, check=True)
    return subprocess.run(
        ["git", "commit", "-q", "-m", message],
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
    )


def test_a_push_that_leaves_releases_alone_never_loads_the_release_audit(
    store: Store,
) -> None:
    # The audit (and pydantic) load only for commits that touch releases/.
    put(store, helpers.train_row("b1b1b1b1b1b1"))
    head = store.head
    assert head is not None and not hooks.touches_releases(head)
    code = (
        "import sys, pygit2\n"
        "from machine_git.sync import hooks\n"
        f"repo = pygit2.Repository({str(store.path)!r})\n"
        f"oid = pygit2.Oid(hex={str(head.id)!r})\n"
        "assert hooks.releases_refused(repo, [], [oid]) == []\n"
        "print(sorted(m for m in sys.modules if m.startswith(('pydantic', "
        "'machine_git.releases'))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert done.stdout == "[]\n"
