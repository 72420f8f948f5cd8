"""Progress of long commands: on stderr when it is a terminal, never otherwise.

Each command runs as a real process whose stderr is a pseudo-terminal (or a
pipe), and what the terminal received is read back.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git.cli import progress
from machine_git.core import paths
from machine_git.core.progress import QUIET
from machine_git.store.store import Store
from tests import helpers
from tests.conftest import Run

ROWS = 120  # above the bulk limit: the import writes a pack


class Done:
    """A finished command: exit status, stdout, and what its stderr got."""

    def __init__(self, status: int, stdout: str, stderr: str) -> None:
        self.status = status
        self.stdout = stdout
        self.stderr = stderr


def machine(*args: str, terminal: bool = True, stdout_terminal: bool = False) -> Done:
    """Run ``machine ARGS`` with stderr on a pseudo-terminal (or a pipe)."""
    command = [sys.executable, "-m", "machine_git", *args]
    if not terminal:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        return Done(done.returncode, done.stdout, done.stderr)
    master, slave = os.openpty()
    out: Any = slave if stdout_terminal else subprocess.PIPE
    proc = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=out, stderr=slave, text=True
    )
    os.close(slave)
    received = b""
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # EIO: the process closed the terminal
            break
        if not chunk:
            break
        received += chunk
    os.close(master)
    stdout = proc.stdout.read() if proc.stdout is not None else ""
    return Done(proc.wait(), stdout, received.decode("utf-8", "replace"))


def rows_file(tmp_path: Path, count: int = ROWS, start: int = 0) -> Path:
    path = tmp_path / f"rows-{start}.jsonl"
    ids = [
        hashlib.sha1(b"%d" % n).hexdigest()[:12] for n in range(start, start + count)
    ]
    path.write_bytes(b"".join(orjson.dumps(helpers.train_row(i)) + b"\n" for i in ids))
    return path


def bar_cleared(stderr: str) -> bool:
    """The last bar's line was cleared, so nothing of it stays on the screen."""
    return stderr.rstrip("\r\n").endswith("\x1b[K\x1b[?25h") or (
        "\x1b[K\x1b[?25h" in stderr
    )


def test_import_shows_rows_checked_and_objects_packed_on_a_terminal(
    project: Path, tmp_path: Path
) -> None:
    done = machine("import", str(rows_file(tmp_path)))
    assert done.status == 0, done.stderr
    assert "checking rows  [" in done.stderr
    assert f"0/{ROWS}" in done.stderr
    assert "packing objects  [" in done.stderr
    assert done.stderr.endswith("\r\x1b[K\x1b[?25h")  # the bars leave no line
    assert done.stdout.startswith(f"imported {ROWS} rows (train {ROWS})")


def test_import_shows_nothing_on_a_pipe_or_with_json(
    project: Path, tmp_path: Path
) -> None:
    piped = machine("import", str(rows_file(tmp_path)), terminal=False)
    assert (piped.status, piped.stderr) == (0, "")
    as_json = machine("import", str(rows_file(tmp_path, start=500)), "--json")
    assert (as_json.status, as_json.stderr) == (0, "")
    assert orjson.loads(as_json.stdout)["imported"] == ROWS


def test_an_import_refused_leaves_its_error_on_a_line_of_its_own(
    project: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(rows_file(tmp_path).read_bytes() + b"{not json\n")
    done = machine("import", str(bad))
    assert done.status == 4
    # The bar's line is cleared before the problems are printed.
    tail = done.stderr.split("\x1b[K\x1b[?25h")[-1]
    assert tail.startswith(f"{bad}:{ROWS + 1}: $: not valid JSON")
    assert tail.endswith(f"\r\nError: {bad}: 1 bad line; nothing imported\r\n")


def test_export_counts_rows_against_the_total_when_it_is_kept(
    project: Path, tmp_path: Path, run: Run
) -> None:
    tagged = tmp_path / "tagged"
    (tagged / ".git").mkdir(parents=True)
    helpers.commit_row(Store.create(paths.store_path(tagged)), helpers.train_row())
    first = machine("export", "-o", str(tmp_path / "a.jsonl"), "--project", str(tagged))
    assert first.status == 0
    assert "exporting rows  [" in first.stderr  # no count kept yet: no total
    assert "0/1" not in first.stderr
    # An import into a store without rows knows every count after it.
    run("import", str(rows_file(tmp_path)))
    done = machine("export", "-o", str(tmp_path / "b.jsonl"))
    assert "exporting rows  [" in done.stderr and f"0/{ROWS}" in done.stderr
    assert done.stderr.endswith(
        f"to {tmp_path / 'b.jsonl'} (sha256 " + (done.stderr.split("(sha256 ")[-1])
    )
    run("data")  # counts kept from then on, whatever commit comes
    again = machine("export", "-o", str(tmp_path / "c.jsonl"))
    assert (tmp_path / "c.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert f"0/{ROWS}" in again.stderr


def test_export_shows_nothing_with_json_or_when_rows_go_to_the_terminal(
    project: Path, tmp_path: Path, run: Run
) -> None:
    run("import", str(rows_file(tmp_path)))
    to_stdout = machine("export")  # rows to a pipe, stderr a terminal
    assert "exporting rows" in to_stdout.stderr
    assert len(to_stdout.stdout.splitlines()) == ROWS
    on_screen = machine("export", stdout_terminal=True)
    assert "exporting rows" not in on_screen.stderr
    assert on_screen.stderr.count("\n") == ROWS  # only the rows themselves
    as_json = machine("export", "-o", str(tmp_path / "c.jsonl"), "--json")
    assert as_json.stderr == ""


def test_validate_store_shows_rows_checked(
    project: Path, tmp_path: Path, run: Run
) -> None:
    run("import", str(rows_file(tmp_path)))  # a large import: the total is known
    done = machine("validate", "--store")
    assert done.status == 0
    assert "checking rows  [" in done.stderr and f"0/{ROWS + 0}" in done.stderr
    assert done.stdout == f"checked {ROWS} rows: all valid\n"
    assert machine("validate", "--store", "--json").stderr == ""
    assert machine("validate", "--store", terminal=False).stderr == ""


def test_gc_shows_git_s_own_progress(project: Path, tmp_path: Path, run: Run) -> None:
    run("import", str(rows_file(tmp_path, 20)))  # loose objects: gc packs them
    done = machine("gc")
    assert done.status == 0, done.stderr
    assert "counting objects  [" in done.stderr
    assert "writing objects  [" in done.stderr
    assert done.stdout.startswith("packed ")
    again = machine("gc", "--json")
    assert again.stderr == "" and orjson.loads(again.stdout)["after"]["packs"] == 1
    assert machine("gc", terminal=False).stderr == ""


def test_pull_of_many_rows_shows_them_checked_and_packed(
    tmp_path: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub = tmp_path / "hub.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(hub)], check=True)
    there, here = tmp_path / "there", tmp_path / "here"
    for folder in (there, here):
        (folder / ".git").mkdir(parents=True)
    monkeypatch.setenv("MACHINE_DATA_DIR", str(tmp_path / "data-there"))
    run("import", str(rows_file(tmp_path)), "--project", str(there))
    run("remote", "add", "origin", str(hub), "--project", str(there))
    run("push", "--project", str(there))
    monkeypatch.setenv("MACHINE_DATA_DIR", str(tmp_path / "data-here"))
    run("import", str(rows_file(tmp_path, 1, start=900)), "--project", str(here))
    run("remote", "add", "origin", str(hub), "--project", str(here))

    done = machine("pull", "--project", str(here))

    assert done.status == 0, done.stderr
    assert "checking rows  [" in done.stderr and f"0/{ROWS}" in done.stderr
    assert "packing objects  [" in done.stderr  # the merge: one pack
    assert done.stdout.startswith("merged origin (")
    assert f"+{ROWS} rows from origin" in done.stdout
    store = paths.store_path(here)
    assert len(list((store / "objects" / "pack").glob("pack-*.idx"))) >= 2


def test_train_validate_shows_rows_rendered(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    lines = [
        {"messages": [{"role": "user", "content": f"{n}+1?"},
                      {"role": "assistant", "content": f"{n + 1}"}]}
        for n in range(40)
    ]  # fmt: skip
    path = tmp_path / "conv.jsonl"
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    done = machine("train", "validate", str(path), "--batch-size", "1")
    assert done.status == 0, done.stderr
    assert "rendering rows  [" in done.stderr and "0/40" in done.stderr
    assert done.stdout.startswith(f"validate {path}: 40 train rows")
    as_json = machine("train", "validate", str(path), "--batch-size", "1", "--json")
    assert as_json.stderr == "" and orjson.loads(as_json.stdout)["rows"] == 40


def test_wanted_only_on_a_terminal_without_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Stream:
        def __init__(self, tty: bool) -> None:
            self.tty = tty

        def isatty(self) -> bool:
            return self.tty

    monkeypatch.setattr(sys, "stderr", Stream(True))
    assert progress.wanted() and not progress.wanted(as_json=True)
    monkeypatch.setattr(sys, "stderr", Stream(False))
    assert not progress.wanted()
    with progress.bars() as shown:
        assert shown is QUIET
