"""Files a user names: never a block, never unbounded memory, one clear line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from machine_git.core import inputs
from machine_git.core.errors import INVALID
from machine_git.core.errors import USAGE
from machine_git.core.errors import UsageError
from machine_git.export import importer
from machine_git.recovery import validate
from machine_git.sessions import detect
from tests import helpers
from tests.conftest import FIXTURES
from tests.conftest import PI_SESSIONS
from tests.conftest import Run

CLAUDE_SESSION = next((FIXTURES / "claude").glob("-*/*.jsonl"))
CODEX_ROLLOUT = next((FIXTURES / "codex").glob("sessions/*/*/*/rollout-*.jsonl"))


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    """A named pipe nobody writes to: reading it the usual way blocks forever."""
    path = tmp_path / "pipe.jsonl"
    os.mkfifo(path)
    return path


def machine(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The real command in its own process, with a time limit: a block fails."""
    return subprocess.run(
        [sys.executable, "-m", "machine_git", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("command", ["good", "bad"])
def test_a_fifo_or_a_device_as_session_is_one_line(
    project: Path, fifo: Path, command: str
) -> None:
    for path, kind in ((fifo, "a FIFO"), (Path("/dev/zero"), "a character device")):
        done = machine(command, "--session", str(path), cwd=project)
        assert done.returncode == INVALID
        assert done.stderr == (
            f"Error: {path}: cannot read session: not a regular file ({kind})\n"
        )


def test_import_and_validate_of_a_fifo_are_one_line(project: Path, fifo: Path) -> None:
    imported = machine("import", str(fifo), cwd=project)
    assert imported.returncode == USAGE
    assert imported.stderr == (
        f"Error: cannot read {fifo}: not a regular file (a FIFO)\n"
    )
    checked = machine("validate", str(fifo), "/dev/zero", cwd=project)
    assert checked.returncode == INVALID
    assert checked.stdout == (
        f"{fifo}:0: $: cannot read: not a regular file (a FIFO)\n"
        "/dev/zero:0: $: cannot read: not a regular file (a character device)\n"
    )


def test_a_file_over_the_limit_is_refused_before_it_is_read(
    tmp_path: Path, run: Run, project: Path
) -> None:
    big = tmp_path / "big.jsonl"
    with big.open("wb") as f:
        f.truncate(inputs.SESSION_LIMIT + inputs.MIB)  # sparse: no disk used
    result = run("good", "--session", str(big))
    assert result.exit_code == INVALID
    assert result.stderr == (
        f"Error: {big}: cannot read session: 513 MiB, more than the 512 MiB "
        "machine reads from one file\n"
    )
    with big.open("wb") as f:
        f.truncate(inputs.JSONL_LIMIT + 1)
    with pytest.raises(UsageError) as e:
        importer.load(big)
    assert str(e.value) == (
        f"cannot read {big}: 1024 MiB, more than the 1024 MiB machine reads "
        "from one file"
    )


def test_read_stops_at_the_limit_even_if_the_size_said_less(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    assert inputs.read(path, 100) == b"x" * 100
    with pytest.raises(inputs.Unreadable) as e:
        inputs.read(path, 99)
    assert (
        str(e.value) == "100 bytes, more than the 99 bytes machine reads from one file"
    )
    # A /proc file says it is empty and is not: the limit holds while reading.
    status = Path("/proc/self/status")
    assert status.stat().st_size == 0
    with pytest.raises(inputs.Unreadable) as e:
        inputs.read(status, 10)
    assert str(e.value) == (
        "more than 10 bytes, more than the 10 bytes machine reads from one file"
    )


def test_a_folder_and_a_missing_file_keep_their_words(tmp_path: Path) -> None:
    with pytest.raises(inputs.Unreadable) as e:
        inputs.read(tmp_path, 10)
    assert (str(e.value), e.value.folder) == ("is a folder", True)
    with pytest.raises(inputs.Unreadable) as e:
        inputs.read(tmp_path / "nope", 10)
    assert (str(e.value), e.value.missing) == ("No such file or directory", True)
    with pytest.raises(inputs.Unreadable, match=r"^not a valid path$"):
        inputs.read(tmp_path / "a\x00b", 10)


@pytest.mark.parametrize(
    ("source", "host"),
    [
        (PI_SESSIONS / "basic.jsonl", "pi"),
        (CLAUDE_SESSION, "claude"),
        (CODEX_ROLLOUT, "codex"),
    ],
)
def test_a_session_starting_with_a_byte_order_mark_reads_as_without(
    tmp_path: Path, source: Path, host: str
) -> None:
    marked = tmp_path / f"marked{source.suffix}"
    marked.write_bytes(inputs.BOM + source.read_bytes())
    assert detect.sniff(marked).host == host
    plain, _ = detect.read(source)
    turn, _ = detect.read(marked)
    assert turn.records == plain.records
    assert turn.records  # a turn was read


def test_import_and_validate_accept_a_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(inputs.BOM + orjson.dumps(helpers.train_row()) + b"\n")
    assert [r["id"] for r in importer.load(path).rows] == ["a1b2c3d4e5f6"]
    tally = validate.Tally()
    assert list(validate.check_file(path, tally)) == []
    assert tally.rows == 1


def test_the_session_file_a_row_names_is_absolute(
    project: Path, run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    (folder / "s.jsonl").write_bytes((PI_SESSIONS / "basic.jsonl").read_bytes())
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "rows.jsonl"
    result = run("good", "--session", "sessions/../sessions/s.jsonl", "--out", str(out))
    assert result.exit_code == 0, result.stderr
    row = orjson.loads(out.read_bytes())
    assert row["source"]["session_file"] == str(folder / "s.jsonl")
