"""Failure drills: many writers at once, and writers killed mid-commit."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import orjson
import pytest

from machine_git import paths
from machine_git import rows
from machine_git.sessions import pi
from tests.conftest import PI_SESSIONS
from tests.conftest import git

pytestmark = pytest.mark.slow


def session_copies(tmp_path: Path, count: int) -> list[Path]:
    """``count`` copies of a real session, each with its own session id."""
    lines = (PI_SESSIONS / "basic.jsonl").read_bytes().split(b"\n")
    header = orjson.loads(lines[0])
    out = []
    folder = tmp_path / "sessions"
    folder.mkdir(exist_ok=True)
    for n in range(count):
        header["id"] = f"copy-{n:04d}"
        path = folder / f"s{n:04d}.jsonl"
        path.write_bytes(b"\n".join([orjson.dumps(header), *lines[1:]]))
        out.append(path)
    return out


def expected_id(path: Path) -> str:
    turn, _ = pi.read_turn(path)
    return rows.make_id("pi", turn.session_id, turn.entry_ids, "answer")


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}


def tag_command(session: Path, project: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "machine_git",
        "good",
        "--session",
        str(session),
        "--project",
        str(project),
    ]


def store_rows(project: Path) -> set[str]:
    names = git(paths.store_path(project), "ls-tree", "-r", "--name-only", "HEAD")
    return {i for i in map(rows.id_of_path, names.split()) if i}


def assert_consistent(project: Path) -> None:
    store = paths.store_path(project)
    git(store, "fsck", "--strict", "--no-dangling")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "machine_git",
            "validate",
            "--store",
            "--project",
            str(project),
        ],
        capture_output=True,
        text=True,
        env=env(),
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_several_processes_tagging_at_once_all_land(
    project: Path, tmp_path: Path
) -> None:
    sessions = session_copies(tmp_path, 24)
    workers = [sessions[i::6] for i in range(6)]
    script = "\n".join(
        [
            "import subprocess, sys",
            "for s in sys.argv[2:]:",
            "    subprocess.run([sys.executable, '-m', 'machine_git', 'good',",
            "        '--session', s, '--project', sys.argv[1]], check=True)",
        ]
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(project), *map(str, group)],
            env=env(),
            stdout=subprocess.DEVNULL,
        )
        for group in workers
    ]
    assert [p.wait(timeout=120) for p in procs] == [0] * 6
    assert store_rows(project) == {expected_id(s) for s in sessions}
    log = git(paths.store_path(project), "log", "--format=%H").split()
    assert len(log) == 25  # init + one commit per tag, none lost, none doubled
    assert_consistent(project)


KILLER = textwrap.dedent(
    """
    import os, signal, sys
    import pygit2
    from machine_git import store
    point = os.environ["KILL_AT"]
    real = pygit2.Repository.create_commit
    def create_commit(self, *args, **kwargs):
        if point == "before-ref":
            os.kill(os.getpid(), signal.SIGKILL)
        oid = real(self, *args, **kwargs)
        if point == "after-ref":
            os.kill(os.getpid(), signal.SIGKILL)
        return oid
    pygit2.Repository.create_commit = create_commit
    from machine_git.cli import main
    sys.argv = ["machine", *sys.argv[1:]]
    main()
    """
)


@pytest.mark.parametrize("point", ["before-ref", "after-ref"])
def test_a_writer_killed_inside_a_commit_leaves_a_consistent_store(
    project: Path, tmp_path: Path, point: str
) -> None:
    first, second, third = session_copies(tmp_path, 3)
    subprocess.run(
        tag_command(first, project), env=env(), check=True, capture_output=True
    )
    killed = subprocess.run(
        [
            sys.executable,
            "-c",
            KILLER,
            "good",
            "--session",
            str(second),
            "--project",
            str(project),
        ],
        env={**env(), "KILL_AT": point},
        capture_output=True,
        text=True,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL
    assert killed.stdout == ""  # nothing was reported as done
    assert_consistent(project)
    landed = store_rows(project)
    assert (expected_id(second) in landed) is (point == "after-ref")
    # No stale lock: the next writer goes straight through.
    started = time.monotonic()
    subprocess.run(
        tag_command(third, project), env=env(), check=True, capture_output=True
    )
    assert time.monotonic() - started < 10
    assert expected_id(third) in store_rows(project)


def test_writers_killed_at_random_moments_lose_no_reported_tag(
    project: Path, tmp_path: Path
) -> None:
    rng = random.Random(1234)
    sessions = session_copies(tmp_path, 12)
    reported: set[str] = set()
    for session in sessions:
        proc = subprocess.Popen(
            tag_command(session, project),
            env=env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        time.sleep(rng.uniform(0.05, 0.35))
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        if out.startswith(b"good "):
            reported.add(out.split()[1].decode())
    assert reported <= store_rows(project)
    assert_consistent(project)
