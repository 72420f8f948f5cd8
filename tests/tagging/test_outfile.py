"""``--out``: the whole line or nothing, never a wait, one line when it fails."""

from __future__ import annotations

import os
import resource
import stat
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from machine_git.core.errors import IO
from machine_git.core.errors import USAGE
from machine_git.tagging import outfile
from tests import helpers
from tests.conftest import PI_SESSIONS

SESSION = str(PI_SESSIONS / "basic.jsonl")


def machine(
    *args: str, cwd: Path, file_limit: int | None = None
) -> subprocess.CompletedProcess[str]:
    """The real command in its own process (a time limit: a wait fails the test),
    with a file size limit (ulimit -f) if given."""

    def limit() -> None:
        if file_limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))

    return subprocess.run(
        [sys.executable, "-m", "machine_git", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        preexec_fn=limit,
    )


def test_a_line_that_does_not_fit_leaves_the_file_as_it_was(
    project: Path, tmp_path: Path
) -> None:
    out = tmp_path / "rows.jsonl"
    first = machine("good", "--session", SESSION, "--out", str(out), cwd=project)
    assert first.returncode == 0, first.stderr
    before = out.read_bytes()
    # Room for 100 more bytes: the next line (a trace, longer) starts, then
    # the size limit stops it.
    done = machine(
        "good",
        "--trace",
        "--session",
        SESSION,
        "--out",
        str(out),
        cwd=project,
        file_limit=len(before) + 100,
    )
    assert done.returncode == IO
    assert done.stderr == (
        f"Error: cannot write {out}: file size limit reached; nothing was written\n"
    )
    assert out.read_bytes() == before
    assert [orjson.loads(line)["kind"] for line in before.splitlines()] == ["train"]


def test_a_full_device_is_one_line(project: Path) -> None:
    done = machine("good", "--session", SESSION, "--out", "/dev/full", cwd=project)
    assert done.returncode == IO
    assert done.stderr == (
        "Error: cannot write /dev/full: no space left on the device; "
        "nothing was written\n"
    )
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_a_device_that_takes_the_line_is_fine(project: Path) -> None:
    done = machine("good", "--session", SESSION, "--out", "/dev/null", cwd=project)
    assert done.returncode == 0, done.stderr


def test_a_fifo_is_refused_not_waited_on(project: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    done = machine("good", "--session", SESSION, "--out", str(fifo), cwd=project)
    assert done.returncode == USAGE
    assert done.stderr == (
        f"Error: output path '{fifo}' is not a regular file (a FIFO)\n"
    )


def test_write_out_refuses_a_fifo_swapped_in_after_the_check(tmp_path: Path) -> None:
    # The check of the path and the open are apart: the open itself never waits.
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with pytest.raises(Exception, match="not a regular file \\(a FIFO\\)"):
            outfile.append(fifo, helpers.train_row())
    finally:
        os.close(reader)
    with pytest.raises(Exception, match="No such device or address"):
        outfile.append(fifo, helpers.train_row())  # no reader: refused at open


def test_a_line_is_appended_whole(tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    for n in range(3):
        outfile.append(out, helpers.train_row(f"{n:012x}"))
    lines = out.read_bytes().splitlines()
    assert [orjson.loads(line)["id"] for line in lines] == [
        f"{n:012x}" for n in range(3)
    ]
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
