from __future__ import annotations

import json
import os
from pathlib import Path

import orjson
import pytest

from machine_git.core import jsonio
from machine_git.core import paths
from machine_git.core.errors import INVALID
from machine_git.rows import rows
from machine_git.store.store import Change
from machine_git.store.store import Store
from tests import helpers
from tests.conftest import Run
from tests.conftest import git
from tests.conftest import install_session


def test_data_before_anything_is_tagged(project: Path, run: Run) -> None:
    result = run("data")
    location = paths.store_path(project)
    assert result.stdout == (
        f"store    {location} (not created yet)\n"
        f"project  {project}\n"
        "rows     0 (train 0, traces 0, rejected 0, observed 0)\n"
        "auto     off\n"
        "images   at most 5,000,000 bytes each\n"
    )
    assert not location.exists()


def test_data_shows_counts_and_head(project: Path, run: Run) -> None:
    install_session(project, "basic")
    run("good")
    run("good", "--trace")
    install_session(project, "multi-turn")
    run("bad")
    result = run("data", "--json")
    info = orjson.loads(result.stdout)
    head = git(paths.store_path(project), "rev-parse", "HEAD").strip()
    assert info["counts"] == {"train": 1, "traces": 1, "rejected": 1, "observed": 0}
    assert info["head"]["commit"] == head
    assert info["exists"] is True and info["auto"] is False
    text = run("data").stdout.splitlines()
    assert text[2] == "rows     3 (train 1, traces 1, rejected 1, observed 0)"
    assert text[5].startswith(f"head     {head[:12]} bad ")


def test_counts_follow_moves_and_stay_right_after_outside_commits(
    project: Path, run: Run
) -> None:
    install_session(project, "basic")
    run("good")
    run("bad")
    assert orjson.loads(run("data", "--json").stdout)["counts"]["rejected"] == 1
    # A commit made without machine's cache (as a pull would) is still counted.
    store = Store.open(paths.store_path(project))
    row = helpers.train_row("abcabcabcabc")
    store.write(
        lambda snap: Change("x", {rows.row_path("abcabcabcabc"): jsonio.canonical(row)})
    )
    counts = orjson.loads(run("data", "--json").stdout)["counts"]
    assert counts == {"train": 1, "traces": 0, "rejected": 1, "observed": 0}


def test_tagged_lists_newest_first_with_kind_filter(
    project: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # notes in full (tests/core/test_table.py: 80)
    install_session(project, "basic")
    run("good", "first")
    install_session(project, "multi-turn")
    run("bad", "second")
    listed = run("tagged").stdout.splitlines()
    assert len(listed) == 2
    assert listed[0].split()[1] == "rejected" and listed[0].endswith("(second)")
    assert listed[1].split()[1] == "train" and listed[1].endswith("(first)")
    only = run("tagged", "--kind", "train", "--json")
    assert [r["note"] for r in orjson.loads(only.stdout)] == ["first"]
    assert len(run("tagged", "-n", "1").stdout.splitlines()) == 1


def test_tagged_on_an_empty_project(project: Path, run: Run) -> None:
    assert run("tagged").stdout == "nothing tagged yet\n"


def test_validate_files_prints_file_line_path_problem(
    project: Path, run: Run, tmp_path: Path
) -> None:
    good = helpers.train_row()
    bad = helpers.mutate(helpers.traces_row(), ["trajectory", 1, "content"], 5)
    path = tmp_path / "rows.jsonl"
    path.write_bytes(jsonio.line(good) + jsonio.line(bad) + b"{not json\n")
    result = run("validate", str(path))
    assert result.exit_code == INVALID
    assert result.stdout == (
        f'{path}:2: $.trajectory[1].content: 5 is not of type "string"\n'
        f"{path}:3: $: not valid JSON (unexpected character, expected a string key: "
        "line 1 column 2 (char 1))\n"
    )
    assert result.stderr == "checked 3 rows: 2 invalid\n"


def test_validate_accepts_good_files(project: Path, run: Run, tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b"".join(jsonio.line(r) for r in helpers.valid_rows()))
    result = run("validate", str(path))
    assert (result.exit_code, result.stdout) == (0, "checked 13 rows: all valid\n")


def test_validate_store_checks_every_row(project: Path, run: Run) -> None:
    install_session(project, "basic")
    run("good")
    run("good", "--trace")
    result = run("validate", "--store")
    assert (result.exit_code, result.stdout) == (0, "checked 2 rows: all valid\n")


def test_validate_store_reports_rows_that_arrived_broken(
    project: Path, run: Run
) -> None:
    install_session(project, "basic")
    run("good")
    store_path = paths.store_path(project)
    # Bypass machine (as a hand-edited push would) to plant a broken row.
    import pygit2

    repo = pygit2.Repository(str(store_path))
    head = repo.references["refs/heads/main"].peel(pygit2.Commit)
    index = pygit2.Index()
    index.read_tree(head.tree)
    broken = json.dumps({"id": "abcabcabcabc", "kind": "train"}).encode()
    index.add(
        pygit2.IndexEntry(
            "rows/ab/ca/abcabcabcabc.json",
            repo.create_blob(broken),
            pygit2.enums.FileMode.BLOB,
        )
    )
    sig = pygit2.Signature("t", "t@example.com")
    repo.create_commit(
        "refs/heads/main", sig, sig, "x\n", index.write_tree(repo), [head.id]
    )
    result = run("validate", "--store")
    assert result.exit_code == INVALID
    assert result.stdout.splitlines()[0] == (
        'rows/ab/ca/abcabcabcabc.json:1: $: "tag" is a required property'
    )
    assert result.stderr == "checked 2 rows: 1 invalid\n"


def test_validate_needs_something_to_check(project: Path, run: Run) -> None:
    result = run("validate")
    assert result.exit_code == 2
    assert "name JSONL files to validate, or pass --store" in result.stderr


def test_validate_recognizes_each_export_format(
    project: Path, run: Run, tmp_path: Path
) -> None:
    install_session(project, "basic")
    run("good", "--trace")  # tool calls: null content in openai, "" in tinker
    run("bad", "--as", "Read notes.md first.")  # a rewrite: one dpo pair
    expected = {
        "tinker": "2 tinker/openai chat lines",
        "openai": "2 openai chat lines",
        "dpo": "1 dpo pair",
        "openai-dpo": "1 openai-dpo pair",
    }
    for fmt, checked in expected.items():
        out = tmp_path / f"{fmt}.jsonl"
        pairs = fmt in ("dpo", "openai-dpo")
        kinds = [] if pairs else ["--kind", "traces", "--kind", "rejected"]
        assert run("export", "--format", fmt, *kinds, "-o", str(out)).exit_code == 0
        result = run("validate", str(out))
        assert (result.exit_code, result.stdout, result.stderr) == (
            0,
            f"checked {checked}: all valid\n",
            "",
        )
        as_json = orjson.loads(run("validate", str(out), "--json").stdout)
        assert as_json["formats"] == {str(out): fmt}
    # A line that breaks the format is named by its field, as a row's would be.
    broken = tmp_path / "broken.jsonl"
    lines = (tmp_path / "openai.jsonl").read_bytes().splitlines(keepends=True)
    broken.write_bytes(lines[0] + lines[1].replace(b'"role":"user"', b'"role":"me"'))
    result = run("validate", str(broken))
    assert result.exit_code == INVALID
    assert result.stdout == (
        f'{broken}:2: $.messages[0].role: "me" is not one of '
        '"system", "user", "assistant", "tool"\n'
    )
    assert result.stderr == "checked 2 openai chat lines: 1 invalid\n"


def test_validate_dash_reads_stdin_beside_files(
    project: Path, run: Run, tmp_path: Path
) -> None:
    install_session(project, "basic")
    run("good")
    exported = run("export").stdout
    rows_file = tmp_path / "rows.jsonl"
    rows_file.write_bytes(jsonio.line(helpers.train_row()))
    result = run("validate", str(rows_file), "-", input=exported)
    assert (result.exit_code, result.stdout) == (
        0,
        "checked 1 row and 1 tinker/openai chat line: all valid\n",
    )
    bad = run("validate", "-", input='{"kind": "train"}\n')
    assert bad.exit_code == INVALID
    assert bad.stdout.startswith("<stdin>:1: $: ")
    assert not Path("-").exists()


HUGE = 256 * 1024 * 1024


def plant_zeros(store: Path, size: int) -> str:
    """A loose blob of ``size`` zero bytes, written in chunks; its id."""
    import hashlib
    import zlib

    chunk = bytes(1 << 20)
    header = b"blob %d\0" % size
    digest = hashlib.sha1(header, usedforsecurity=False)
    deflate = zlib.compressobj()
    parts = [deflate.compress(header)]
    for _ in range(size // len(chunk)):
        digest.update(chunk)
        parts.append(deflate.compress(chunk))
    parts.append(deflate.flush())
    name = digest.hexdigest()
    (store / "objects" / name[:2]).mkdir(exist_ok=True)
    (store / "objects" / name[:2] / name[2:]).write_bytes(b"".join(parts))
    return name


def test_validate_store_reads_no_huge_file_it_would_refuse(
    project: Path, run: Run
) -> None:
    # Issue 25: 256 MiB of zeros at a row's path (0.25 MB on disk) made
    # validate --store read it whole (a 512 MiB one took 1.1 GB).
    import subprocess
    import sys

    install_session(project, "basic")
    run("good")
    store = paths.store_path(project)
    blob = plant_zeros(store, HUGE)
    path = "rows/ab/ca/abcabcabcabc.json"
    head = git(store, "rev-parse", "main").strip()
    listing = git(store, "ls-tree", "-r", "main") + f"100644 blob {blob}\t{path}\n"
    env = {**os.environ, "GIT_INDEX_FILE": str(project / "index")}
    subprocess.run(
        ["git", "-C", str(store), "read-tree", "--empty"], env=env, check=True
    )
    subprocess.run(
        ["git", "-C", str(store), "update-index", "--index-info"],
        input=listing.encode(),
        env=env,
        check=True,
    )
    tree = subprocess.run(
        ["git", "-C", str(store), "write-tree"], env=env, capture_output=True, text=True
    ).stdout.strip()
    new = git(store, "commit-tree", tree, "-p", head, "-m", "huge").strip()
    git(store, "update-ref", "refs/heads/main", new, head)
    measure = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "print(done.returncode, repr(done.stdout), repr(done.stderr))\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    command = [sys.executable, "-m", "machine_git", "validate", "--store"]
    done = subprocess.run(
        [sys.executable, "-c", measure, *command, "--project", str(project)],
        capture_output=True,
        text=True,
        check=True,
    )
    result, peak = done.stdout.splitlines()
    assert result == " ".join(
        [
            str(INVALID),
            repr(
                f"{path}:0: $: a file of 256.0 MiB is over the 64.0 MiB limit "
                "for a file; not read\n"
            ),
            repr("checked 2 rows: 1 invalid\n"),
        ]
    )
    assert int(peak) * 1024 < HUGE // 2  # KiB: far below the file's size
