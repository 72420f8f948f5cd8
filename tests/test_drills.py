"""Failure drills: many writers at once, writers killed mid-commit, a full
disk, a read-only store and damaged objects. Each is bounded to seconds."""

from __future__ import annotations

import errno
import hashlib
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from machine_git.core import paths
from machine_git.core.errors import DAMAGED
from machine_git.core.errors import IO
from machine_git.rows import rows
from machine_git.sessions import pi
from machine_git.store.store import Store
from tests import helpers
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
    from machine_git.store import store
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
    # On a loaded machine every kill can land before the store exists.
    Store.create(paths.store_path(project), project)
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


# -- many writers at once --------------------------------------------------------

WORKER = textwrap.dedent(
    """
    import sys
    import pygit2
    from machine_git.cli import cli
    # SIGKILL and contention leave the page cache intact, so fsync changes
    # only the timing here; without it the drill takes seconds, not minutes,
    # on a shared disk.
    pygit2.settings.enable_fsync_gitdir(False)
    import machine_git.cli.tag  # loaded before the start signal
    project, *sessions = sys.argv[1:]
    sys.stdin.readline()  # every worker starts at the same moment
    for session in sessions:
        cli.main(
            ["good", "--session", session, "--project", project],
            standalone_mode=False,
        )
    """
)


def test_eight_processes_tagging_fifty_rows_each_lose_nothing(
    project: Path, tmp_path: Path
) -> None:
    sessions = session_copies(tmp_path, 400)
    location = paths.store_path(project)
    Store.create(location, project)
    # Pack often, so that background packers run while the others tag.
    git(location, "config", "gc.auto", "256")
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(project), *map(str, sessions[i::8])],
            env=env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for i in range(8)
    ]
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write(b"go\n")
        worker.stdin.flush()
    errors = [w.communicate(timeout=240)[1] for w in workers]
    assert [w.returncode for w in workers] == [0] * 8, errors
    assert store_rows(project) == {expected_id(s) for s in sessions}
    log = git(location, "log", "--format=%H").split()
    assert len(log) == 401  # init + one commit per tag, none lost, none doubled
    assert_consistent(project)


# -- a writer killed again and again ---------------------------------------------

DRIVER = textwrap.dedent(
    """
    import os, random, select, signal, sys, time
    import orjson
    import pygit2
    from machine_git.cli import cli

    pygit2.settings.enable_fsync_gitdir(False)  # as in WORKER
    import machine_git.cli.tag  # loaded before the fork, not in every child
    project, template, folder, wanted = sys.argv[1:]
    rng = random.Random(4321)
    lines = open(template, "rb").read().split(b"\\n")
    header = orjson.loads(lines[0])

    def session(n):
        header["id"] = f"kill-{n:05d}"
        path = os.path.join(folder, f"k{n:05d}.jsonl")
        with open(path, "wb") as f:
            f.write(b"\\n".join([orjson.dumps(header), *lines[1:]]))
        return path

    kills = 0
    first = 0
    while kills < int(wanted):
        # A child that tags in a loop; machine is imported once, before the
        # fork, so a round costs milliseconds rather than a Python start-up.
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            os.dup2(write_end, 1)
            for n in range(first, first + 1000):
                cli.main(
                    ["good", "--session", session(n), "--project", project],
                    standalone_mode=False,
                )
            os._exit(0)
        os.close(write_end)
        first += 1000
        # Once the child has tagged one row (after waiting out a ref lock the
        # last kill may have left), kill it at a random point of later tags.
        select.select([read_end], [], [], 30)
        time.sleep(rng.uniform(0.0, 0.04))
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        with os.fdopen(read_end, "rb") as pipe:
            sys.stdout.buffer.write(pipe.read())  # what the user was told
        kills += os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    sys.stdout.flush()
    """
)


def test_a_writer_killed_at_random_points_a_hundred_times(
    project: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    Store.create(paths.store_path(project), project)
    driver = subprocess.run(
        [
            sys.executable,
            "-c",
            DRIVER,
            str(project),
            str(PI_SESSIONS / "basic.jsonl"),
            str(folder),
            "100",
        ],
        env=env(),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert driver.returncode == 0, driver.stderr
    # What the killed children printed is what a user was told was done.
    reported = {
        line.split()[1] for line in driver.stdout.splitlines() if line[:5] == "good "
    }
    landed = store_rows(project)
    assert reported <= landed
    assert len(reported) > 0
    assert_consistent(project)
    # No lock left behind: the next tag goes through without waiting it out.
    last = session_copies(tmp_path, 1)[0]
    done = subprocess.run(
        tag_command(last, project),
        env={**env(), "MACHINE_LOCK_TIMEOUT": "5"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"good {expected_id(last)} -> train: ")


# -- a full disk -------------------------------------------------------------------


def files_of(store: Path) -> dict[str, bytes]:
    """Every file of the store and its bytes: "unchanged" means this is equal."""
    return {
        str(p.relative_to(store)): p.read_bytes()
        for p in sorted(store.rglob("*"))
        if p.is_file()
    }


def mount_tmpfs(where: Path, size: str) -> bool:
    """A small filesystem at ``where``; False where mounting is not allowed."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


def unmount(where: Path) -> None:
    subprocess.run(["umount", str(where)], capture_output=True, check=True)


def fill(folder: Path) -> Path:
    """Write a file in ``folder`` until the filesystem has no byte left."""
    filler = folder / "filler"
    with filler.open("wb", buffering=0) as f:
        for chunk in (1 << 16, 1 << 12, 1 << 9, 1):
            try:
                while True:
                    f.write(b"\0" * chunk)
            except OSError as e:
                assert e.errno == errno.ENOSPC
    return filler


def file_size_limit() -> None:
    # Runs in the child: any write past 200 bytes fails with EFBIG (Python ignores
    # SIGXFSZ), which is how a full disk looks where nothing can be mounted.
    resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))


def test_a_full_disk_fails_the_tag_in_one_line_and_changes_nothing(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = mount_tmpfs(disk, "2m")  # else: a file size limit, below
    try:
        monkeypatch.setenv("MACHINE_DATA_DIR", str(disk / "data"))
        store = paths.store_path(project)
        first, second = session_copies(tmp_path, 2)
        subprocess.run(tag_command(first, project), env=env(), check=True)
        before = files_of(store)
        filler = fill(disk) if mounted else None

        done = subprocess.run(
            tag_command(second, project),
            env=env(),
            capture_output=True,
            text=True,
            check=False,
            preexec_fn=None if mounted else file_size_limit,
        )

        why = "no space left on the device" if mounted else "file size limit reached"
        assert done.stderr == f"Error: {store}: {why}; nothing was written\n"
        assert (done.returncode, done.stdout) == (IO, "")
        assert files_of(store) == before
        git(store, "fsck", "--strict")
        if filler is not None:
            filler.unlink()
        subprocess.run(tag_command(second, project), env=env(), check=True)
        assert store_rows(project) == {expected_id(first), expected_id(second)}
    finally:
        if mounted:
            unmount(disk)


def test_a_file_size_limit_fails_the_tag_in_one_line_and_changes_nothing(
    project: Path, tmp_path: Path
) -> None:
    store = paths.store_path(project)
    first, second = session_copies(tmp_path, 2)
    subprocess.run(tag_command(first, project), env=env(), check=True)
    before = files_of(store)

    done = subprocess.run(
        tag_command(second, project),
        env=env(),
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=file_size_limit,
    )

    assert done.stderr == (
        f"Error: {store}: file size limit reached; nothing was written\n"
    )
    assert (done.returncode, done.stdout) == (IO, "")
    assert files_of(store) == before
    git(store, "fsck", "--strict")


# -- a bulk write (an import) killed or out of space -----------------------------

BULK_KILLER = textwrap.dedent(
    """
    import os, signal, sys
    from machine_git.store import bulk
    from machine_git.store.store import Store
    point = os.environ["KILL_AT"]

    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    if point == "writing":  # half way through the pack's objects
        real_header = bulk._entry_header
        seen = []
        def entry_header(kind, size):
            seen.append(1)
            if len(seen) == 150:
                die()
            return real_header(kind, size)
        bulk._entry_header = entry_header
    elif point == "between-renames":  # the pack in place, its index not
        real_replace = os.replace
        def replace(src, dst, *args, **kwargs):
            if str(dst).endswith(".idx"):
                die()
            return real_replace(src, dst, *args, **kwargs)
        os.replace = replace
    elif point == "before-ref":  # pack and index in place, the branch not moved
        real_sync = bulk._sync_folder
        def sync_folder(folder):
            real_sync(folder)
            die()
        bulk._sync_folder = sync_folder
    elif point == "after-ref":
        Store._after_commit = lambda self: die()
    from machine_git.cli import main
    sys.argv = ["machine", *sys.argv[1:]]
    main()
    """
)


def rows_file(tmp_path: Path, count: int, start: int = 0) -> Path:
    path = tmp_path / f"rows-{start}.jsonl"
    ids = [
        hashlib.sha1(b"%d" % n).hexdigest()[:12] for n in range(start, start + count)
    ]
    path.write_bytes(b"".join(orjson.dumps(helpers.train_row(i)) + b"\n" for i in ids))
    return path


def import_command(rows: Path, project: Path) -> list[str]:
    return [
        sys.executable, "-m", "machine_git", "import", str(rows),
        "--project", str(project),
    ]  # fmt: skip


def pack_folder(project: Path) -> list[str]:
    return sorted(
        p.name for p in (paths.store_path(project) / "objects/pack").iterdir()
    )


@pytest.mark.parametrize(
    "point", ["writing", "between-renames", "before-ref", "after-ref"]
)
def test_an_import_killed_inside_its_bulk_write_leaves_a_consistent_store(
    project: Path, tmp_path: Path, point: str
) -> None:
    first, second = rows_file(tmp_path, 3), rows_file(tmp_path, 120, start=1000)
    subprocess.run(import_command(first, project), env=env(), check=True)
    killed = subprocess.run(
        [sys.executable, "-c", BULK_KILLER, *import_command(second, project)[3:]],
        env={**env(), "KILL_AT": point},
        capture_output=True,
        text=True,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert killed.stdout == ""  # nothing was reported as done
    assert_consistent(project)
    landed = store_rows(project)
    assert len(landed) == (123 if point == "after-ref" else 3)
    # Importing again lands every row, and what the kill left is gone.
    done = subprocess.run(
        import_command(second, project), env=env(), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert len(store_rows(project)) == 123
    assert not [n for n in pack_folder(project) if n.startswith("tmp_")]
    names = pack_folder(project)
    assert {n[:-5] for n in names if n.endswith(".pack")} == {
        n[:-4] for n in names if n.endswith(".idx")
    }
    assert_consistent(project)


def test_imports_killed_at_random_moments_lose_nothing_reported(
    project: Path, tmp_path: Path
) -> None:
    rng = random.Random(99)
    reported = 0
    for round_ in range(6):
        rows = rows_file(tmp_path, 400, start=1000 * round_)
        proc = subprocess.Popen(
            import_command(rows, project),
            env=env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        time.sleep(rng.uniform(0.2, 1.5))
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        if out.startswith(b"imported "):
            reported += 400
        assert_consistent(project)
        assert len(store_rows(project)) >= reported


def test_a_file_size_limit_fails_an_import_in_one_line_and_changes_nothing(
    project: Path, tmp_path: Path
) -> None:
    store = paths.store_path(project)
    first = session_copies(tmp_path, 1)[0]
    subprocess.run(tag_command(first, project), env=env(), check=True)
    before = files_of(store)

    done = subprocess.run(
        import_command(rows_file(tmp_path, 100), project),
        env=env(),
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=file_size_limit,
    )

    assert done.stderr == (
        f"Error: {store}: file size limit reached; nothing was written\n"
    )
    assert (done.returncode, done.stdout) == (IO, "")
    assert files_of(store) == before
    git(store, "fsck", "--strict")


# -- a read-only store ------------------------------------------------------------


def read_only(store: Path, how: str) -> tuple[list[str], str, Callable[[], None]]:
    """Make ``store`` read-only: (command prefix, expected reason, undo).

    Permission bits do not stop root, so as root the commands run without
    capabilities (setpriv); a read-only bind mount gives EROFS where mounting
    is allowed, and falls back to permissions where it is not.
    """
    if how == "mount" and os.geteuid() == 0:
        bound = subprocess.run(
            ["mount", "--bind", str(store), str(store)], capture_output=True
        )
        if bound.returncode == 0:
            subprocess.run(
                ["mount", "-o", "remount,bind,ro", str(store)],
                capture_output=True,
                check=True,
            )
            return [], "Read-only file system", lambda: unmount(store)
    subprocess.run(["chmod", "-R", "a-w", str(store)], check=True)
    prefix = (
        ["setpriv", "--inh-caps=-all", "--bounding-set=-all", "--"]
        if os.geteuid() == 0
        else []
    )

    def undo() -> None:
        subprocess.run(["chmod", "-R", "u+w", str(store)], check=True)

    return prefix, "Permission denied", undo


@pytest.mark.parametrize("how", ["mount", "permissions"])
def test_a_read_only_store_refuses_tags_in_one_line_and_still_reads(
    project: Path, tmp_path: Path, how: str
) -> None:
    store = paths.store_path(project)
    first, second = session_copies(tmp_path, 2)
    subprocess.run(tag_command(first, project), env=env(), check=True)
    before = files_of(store)
    prefix, reason, undo = read_only(store, how)
    try:

        def machine(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [*prefix, sys.executable, "-m", "machine_git", *args],
                env=env(),
                capture_output=True,
                text=True,
                check=False,
            )

        tagged = machine("good", "--session", str(second), "--project", str(project))
        assert tagged.stderr == f"Error: {store}: the store is read-only ({reason})\n"
        assert (tagged.returncode, tagged.stdout) == (IO, "")
        # Reading still works: listing, counting, checking, exporting.
        listed = machine("tagged", "--project", str(project))
        assert listed.stdout.startswith(expected_id(first))
        counted = machine("data", "--project", str(project), "--json")
        assert orjson.loads(counted.stdout)["counts"]["train"] == 1
        checked = machine("validate", "--store", "--project", str(project))
        assert checked.stdout == "checked 1 row: all valid\n"
        exported = machine("export", "--project", str(project))
        assert exported.stdout.count("\n") == 1
        assert [listed.stderr, counted.stderr, checked.stderr] == ["", "", ""]
        assert files_of(store) == before
    finally:
        undo()


# -- damaged objects -----------------------------------------------------------------


def corrupt(store: Path, damage: str) -> str:
    """Damage the store; returns the id of the object hit (or '' for a pack)."""
    blob = git(store, "rev-parse", f"main:{rows.row_path(ROW_IDS[1])}").strip()
    loose = store / "objects" / blob[:2] / blob[2:]
    if damage == "flipped byte in a loose row":
        data = bytearray(loose.read_bytes())
        data[len(data) // 2] ^= 0xFF
        loose.write_bytes(bytes(data))
    elif damage == "truncated loose row":
        loose.write_bytes(loose.read_bytes()[:30])
    elif damage == "missing loose row":
        loose.unlink()
    else:
        git(store, "gc", "--quiet")
        pack = next(store.glob("objects/pack/*.pack"))
        pack.chmod(0o600)
        data = bytearray(pack.read_bytes())
        if damage == "truncated pack":
            del data[len(data) // 2 :]
        else:
            data[len(data) // 2] ^= 0xFF
        pack.write_bytes(bytes(data))
        return ""
    return blob


# Under three rows/ab folders, so two workers each get a part to read.
ROW_IDS = ["a00000000001", "b00000000002", "c00000000003"]


def three_rows(project: Path) -> Path:
    """A store of the ROW_IDS rows, one commit each; returns its location."""
    location = paths.store_path(project)
    store = Store.create(location, project)
    for row_id in ROW_IDS:
        helpers.commit_row(store, helpers.train_row(row_id))
    return location


FINDING = re.compile(
    r"^rows\S*:0: \$: (missing or corrupt object|unreadable tree object): \S+"
    r"|^refs/heads/main:0: \$: (damaged store \S+: the branch's commit|corrupt)"
)


@pytest.mark.parametrize(
    "damage",
    [
        "flipped byte in a loose row",
        "truncated loose row",
        "missing loose row",
        "truncated pack",
        "flipped byte in a pack",
    ],
)
@pytest.mark.parametrize("jobs", ["1", "2"])  # in this process, and in workers
def test_damaged_objects_are_findings_of_validate_store(
    project: Path, damage: str, jobs: str
) -> None:
    location = three_rows(project)
    hit = corrupt(location, damage)

    done = subprocess.run(
        [sys.executable, "-m", "machine_git", "validate", "--store"],
        env={**env(), "MACHINE_JOBS": jobs},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,  # libgit2 <= 1.9 loops forever on a truncated loose object
    )

    assert done.returncode == DAMAGED
    assert "Traceback" not in done.stderr
    lines = done.stdout.splitlines()
    findings = [line for line in lines if FINDING.match(line)]
    assert findings
    # Then the store's diagnosis: what is damaged, and the way back.
    told = lines[len(findings) :]
    assert told[0].startswith("damaged: "), told
    way_back = ("newest intact commit: ", "no commit the branch has been at")
    assert any(line.startswith(way_back) for line in told), told
    assert re.fullmatch(
        r"checked \d rows: [1-3] invalid; the store is damaged\n", done.stderr
    )
    where = f"{rows.row_path(ROW_IDS[1])}:0: $: missing or corrupt object: {hit}: "
    if damage == "truncated loose row":
        assert findings == [where + "truncated loose object"]
        assert f"damaged: object {hit} is damaged (truncated loose object)" in told
        assert done.stderr == "checked 3 rows: 1 invalid; the store is damaged\n"
    elif damage == "missing loose row":
        assert findings == [where + "no such object"]
    elif hit:
        assert findings[0].startswith(where)


def flip_in_pack(store: Path, blob: str) -> None:
    """Flip a byte inside ``blob``'s compressed data in the store's pack."""
    git(store, "gc", "--quiet")
    index = next(store.glob("objects/pack/*.idx"))
    listed = subprocess.run(
        ["git", "show-index"],
        stdin=index.open("rb"),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    offset = next(
        int(o) for o, oid, *_ in map(str.split, listed.splitlines()) if oid == blob
    )
    pack = index.with_suffix(".pack")
    pack.chmod(0o600)
    data = bytearray(pack.read_bytes())
    data[offset + 6] ^= 0xFF  # past the type-and-size header: the zlib stream
    pack.write_bytes(bytes(data))


def read_with(reader: str, project: Path) -> subprocess.CompletedProcess[str]:
    """Run one of READERS in ``project``; "in workers" means MACHINE_JOBS=2."""
    return subprocess.run(
        [sys.executable, "-m", "machine_git", *READERS[reader]],
        env={**env(), "MACHINE_JOBS": "2" if reader.endswith("workers") else "1"},
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,  # libgit2 <= 1.9 loops forever on a truncated loose object
    )


READERS = {
    "export": ["export"],
    "export in workers": ["export"],
    "data": ["data"],
    "diff": ["diff", "HEAD~2", "HEAD"],
    "show": ["show", "HEAD~1"],
}


@pytest.mark.parametrize(
    "damage", ["missing loose row", "flipped byte in the packed row"]
)
@pytest.mark.parametrize("reader", list(READERS))
def test_reading_a_damaged_store_is_one_line_not_a_traceback(
    project: Path, damage: str, reader: str
) -> None:
    location = three_rows(project)
    blob = git(location, "rev-parse", f"main:{rows.row_path(ROW_IDS[1])}").strip()
    if damage == "missing loose row":
        (location / "objects" / blob[:2] / blob[2:]).unlink()
    else:
        flip_in_pack(location, blob)

    done = read_with(reader, project)

    assert done.returncode == DAMAGED
    hint = " ('machine recover' shows the way back)\n"
    if damage == "missing loose row":
        assert done.stderr == (
            f"Error: cannot read the store: object {blob} is missing{hint}"
        )
    else:
        assert re.fullmatch(
            rf"Error: cannot read the store: {blob}: [^\n]+{re.escape(hint)}",
            done.stderr,
        ), done.stderr


@pytest.mark.parametrize("reader", ["export", "export in workers", "diff"])
def test_a_truncated_loose_row_stops_export_and_diff_in_one_line(
    project: Path, reader: str
) -> None:
    # libgit2 <= 1.9 loops forever inflating a truncated loose object (#7342):
    # these readers check loose objects themselves first.
    location = three_rows(project)
    blob = corrupt(location, "truncated loose row")

    done = read_with(reader, project)

    assert done.returncode == DAMAGED
    # Export streams: the row before the damaged one may be out already.
    assert done.stdout.count("\n") <= (1 if reader.startswith("export") else 0)
    assert done.stderr == (
        f"Error: cannot read the store: {blob}: truncated loose object "
        "('machine recover' shows the way back)\n"
    )
