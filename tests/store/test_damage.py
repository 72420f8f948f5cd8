"""The damage matrix: a store damaged in many ways, every command run on each.

Each case copies one small store (three tagged rows, a version), damages it
one way, and runs every reading and writing command on it as a real process
with a time limit, then ``machine recover --yes``, a new tag, ``machine gc``
(git itself must be able to pack what recover left) and ``validate --store``.
What must hold, for every case and command: no hang, no traceback, one
``Error:`` line with exit code 6 when the damage stops it, no exit-0 answer
that calls the store empty or counts it wrong, the writer lock free
afterwards, and a store that works again after ``recover``.

Cases run in a thread pool (each command is its own process), so the matrix
costs what the processes cost, spread over the machine's cores.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

import pytest

from machine_git.core import paths
from machine_git.core.errors import DAMAGED
from machine_git.history import versions
from machine_git.rows import rows
from machine_git.sessions import pi
from machine_git.store.store import Redaction
from machine_git.store.store import Store
from machine_git.tagging import turns
from tests import helpers
from tests.conftest import PI_SESSIONS
from tests.conftest import git

pytestmark = pytest.mark.slow

ROW_A, ROW_B, ROW_C = "a00000000001", "b00000000002", "c00000000003"
TRUTH = "rows     3 (train 2, traces 0, rejected 1, observed 0)"
TIMEOUT = 30  # seconds; every command here takes well under one
REPO = Path(__file__).parents[2]

READS: list[tuple[str, ...]] = [
    ("tagged",),
    ("data",),
    ("show", ROW_B),
    ("log",),
    ("log", "--id", ROW_B),
    ("versions",),
    ("diff",),
    ("export",),
    ("validate", "--store"),
    ("recover",),  # the dry run
]
WRITES: list[tuple[str, ...]] = [
    ("good",),
    ("rewrite", ROW_A, "--as", "Better."),
    ("move", ROW_C, "--to", "good"),
    ("rm", ROW_B),
    ("undo",),
    ("version", "v2"),
    ("gc",),
]
# What an exit-0 answer of a reader must show of the three rows; the phrases
# no answer may give about this store (which is never empty).
MUST_SHOW = {
    "tagged": ROW_C,
    "data": TRUTH,
    "show": ROW_B,
    "log": "init store",
    "versions": "v1",
    "validate": "checked 3 rows: all valid",
}
EMPTY = (
    "nothing tagged yet",
    "rows     0",
    "no commits",
    "not created yet",
    "checked 0 rows",
    "no store at",
)


# -- damage ------------------------------------------------------------------------


def obj(store: Path, rev: str) -> Path:
    oid = git(store, "rev-parse", rev).strip()
    return store / "objects" / oid[:2] / oid[2:]


def rewrite(path: Path, data: bytes) -> None:
    if path.exists():
        path.chmod(0o600)
    path.write_bytes(data)


def truncate(rev: str) -> Callable[[Path], None]:
    def damage(store: Path) -> None:
        path = obj(store, rev)
        rewrite(path, path.read_bytes()[:12])

    return damage


def garble(rev: str) -> Callable[[Path], None]:
    return lambda store: rewrite(obj(store, rev), b"not a zlib stream at all")


def swap(rev: str) -> Callable[[Path], None]:
    # Well formed, but not the object its name says.
    return lambda store: rewrite(obj(store, rev), zlib.compress(b"blob 5\0other"))


def delete(rev: str) -> Callable[[Path], None]:
    return lambda store: obj(store, rev).unlink()


def branch(data: bytes | Callable[[Path], bytes]) -> Callable[[Path], None]:
    def damage(store: Path) -> None:
        value = data(store) if callable(data) else data
        rewrite(store / "refs" / "heads" / "main", value)

    return damage


def file(name: str, data: bytes | None) -> Callable[[Path], None]:
    def damage(store: Path) -> None:
        if data is None:
            (store / name).unlink()
        else:
            rewrite(store / name, data)

    return damage


def id_of(rev: str) -> Callable[[Path], bytes]:
    return lambda store: git(store, "rev-parse", rev).encode()


def flip_in_pack(rev: str) -> Callable[[Path], None]:
    """Flip a byte inside ``rev``'s compressed data in the store's pack."""

    def damage(store: Path) -> None:
        oid = git(store, "rev-parse", rev).strip()
        index = next(store.glob("objects/pack/*.idx"))
        listed = subprocess.run(
            ["git", "show-index"],
            stdin=index.open("rb"),
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        offset = next(
            int(o) for o, h, *_ in map(str.split, listed.splitlines()) if h == oid
        )
        pack = index.with_suffix(".pack")
        data = bytearray(pack.read_bytes())
        data[offset + 6] ^= 0xFF  # past the type-and-size header: the zlib stream
        rewrite(pack, bytes(data))

    return damage


def cut_pack(store: Path) -> None:
    pack = next(store.glob("objects/pack/*.pack"))
    rewrite(pack, pack.read_bytes()[: pack.stat().st_size // 2])


def garble_index(store: Path) -> None:
    index = next(store.glob("objects/pack/*.idx"))
    rewrite(index, b"\xfftOc" + b"\x00" * 60)


def stale_files(store: Path) -> None:
    # What killed writers leave: a ref lock, libgit2's and git's temp objects.
    old = time.time() - 7200
    for name in ("refs/heads/main.lock", "objects/tmp_object_git2_a1B2c3"):
        (store / name).write_bytes(b"half")
        os.utime(store / name, (old, old))
    (store / "objects" / "17").mkdir(exist_ok=True)
    (store / "objects" / "17" / "tmp_obj_x1Y2z3").write_bytes(b"half")
    os.utime(store / "objects" / "17" / "tmp_obj_x1Y2z3", (old, old))


def stats(data: bytes) -> Callable[[Path], None]:
    return lambda store: rewrite(store / "machine" / "stats.json", data)


def stats_wrong_counts(store: Path) -> None:
    head = git(store, "rev-parse", "main").strip()
    counts = b'{"observed":0,"rejected":0,"train":0,"traces":0}'
    rewrite(
        store / "machine" / "stats.json",
        b'{"commit":"%s","counts":%s}\n' % (head.encode(), counts),
    )


@dataclass
class Case:
    name: str
    damage: Callable[[Path], None]
    packed: bool = False  # damage a packed copy of the store
    intact: bool = True  # some commit is intact: recover --yes must work


ROW = f"main:{rows.row_path(ROW_B)}"
CASES = [
    Case("nothing damaged", lambda store: None),
    Case("row blob truncated", truncate(ROW)),
    Case("row blob not zlib", garble(ROW)),
    Case("row blob another object", swap(ROW)),
    Case("row blob missing", delete(ROW)),
    Case("leaf tree rows/b0/00 truncated", truncate("main:rows/b0/00")),
    Case("subtree rows/b0 truncated", truncate("main:rows/b0")),
    Case("rows tree truncated", truncate("main:rows")),
    Case("rows tree missing", delete("main:rows")),
    Case("root tree truncated", truncate("main^{tree}")),
    Case("head commit truncated", truncate("main")),
    Case("head commit missing", delete("main")),
    Case("parent commit truncated", truncate("main~1")),
    Case("parent commit missing", delete("main~1")),
    Case("first commit truncated", truncate("main~3")),
    Case(
        "marker blob of every commit truncated",
        truncate("main:machine.json"),
        intact=False,
    ),
    Case("packed row flipped byte", flip_in_pack(ROW), packed=True),
    Case("pack cut in half", cut_pack, packed=True, intact=False),
    Case("pack index garbled", garble_index, packed=True),
    Case("branch holds garbage", branch(b"garbage\n")),
    Case("branch empty", branch(b"")),
    Case("branch names an unknown id", branch(b"1234567890" * 4 + b"\n")),
    Case("branch names a blob", branch(id_of(ROW))),
    Case("branch names a tree", branch(id_of("main^{tree}"))),
    Case("branch is symbolic", branch(b"ref: refs/heads/other\n")),
    Case("branch file deleted", file("refs/heads/main", None)),
    Case("packed branch garbled", file("packed-refs", b"garbage\n"), packed=True),
    Case("packed-refs garbage line", file("packed-refs", b"\x00junk line\n")),
    Case("HEAD garbage", file("HEAD", b"garbage\n")),
    Case("HEAD missing", file("HEAD", None)),
    Case("config garbage", file("config", b"[core\nbare = \x01\n")),
    Case(
        "objects folder missing", lambda s: shutil.rmtree(s / "objects"), intact=False
    ),
    Case("reflog garbage", file("logs/refs/heads/main", b"\x00garbage\n")),
    Case("stats.json wrong type", stats(b'{"commit": 5, "counts": {}}')),
    Case(
        "stats.json count not a number", stats(b'{"commit":"x","counts":{"train":"2"}}')
    ),
    Case("stats.json wrong counts", stats_wrong_counts),
    Case("leftovers of killed writers", stale_files),
    Case("version tag garbled", file("refs/tags/v1", b"garbage\n")),
]


# -- running -----------------------------------------------------------------------


@dataclass
class Ran:
    args: tuple[str, ...]
    code: int | None  # None: killed after TIMEOUT
    stdout: str
    stderr: str


@dataclass
class Outcome:
    case: Case
    ran: list[Ran] = field(default_factory=list)
    lock_free: bool = False
    after: list[Ran] = field(default_factory=list)


def machine(project: Path, env: dict[str, str], *args: str) -> Ran:
    try:
        done = subprocess.run(
            [sys.executable, "-m", "machine_git", *args],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            errors="replace",
            check=False,
            timeout=TIMEOUT,
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else ""
        return Ran(args, None, out, "")
    return Ran(args, done.returncode, done.stdout, done.stderr)


def template(base: Path) -> tuple[Path, Path]:
    """The store every case copies (loose objects), and a packed copy."""
    loose = base / "template"
    store = Store.create(loose, None)
    for row in (
        helpers.train_row(ROW_A),
        helpers.train_row(ROW_B),
        helpers.train_row(ROW_C, kind="rejected", tag="bad"),
    ):
        turns.commit(store, row, Redaction.SCANNED)
    head = store.head
    assert head is not None
    versions.create(store, "v1", head)
    packed = base / "template-packed"
    shutil.copytree(loose, packed, symlinks=True)
    git(packed, "gc", "--quiet")
    return loose, packed


def run_case(
    case: Case, number: int, base: Path, templates: tuple[Path, Path]
) -> Outcome:
    folder = base / f"case{number:02d}"
    project = folder / "proj"
    (project / ".git").mkdir(parents=True)
    data, agent = folder / "data", folder / "pi"
    store = data / paths.store_name(project)
    shutil.copytree(templates[case.packed], store, symlinks=True)
    sessions = agent / "sessions" / pi.encode_cwd(project)
    sessions.mkdir(parents=True)
    shutil.copyfile(PI_SESSIONS / "basic.jsonl", sessions / "basic.jsonl")
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "MACHINE_DATA_DIR": str(data),
        "PI_CODING_AGENT_DIR": str(agent),
        "MACHINE_LOCK_TIMEOUT": "10",
        "MACHINE_JOBS": "1",
    }
    case.damage(store)
    outcome = Outcome(case)
    for args in [*READS, *WRITES]:
        outcome.ran.append(machine(project, env, *args))
    outcome.lock_free = lock_free(store)
    for args in (("recover", "--yes"), ("good",), ("gc",), ("validate", "--store")):
        outcome.after.append(machine(project, env, *args))
        if outcome.after[-1].code != 0:
            break
    return outcome


def lock_free(store: Path) -> bool:
    lock = store / "machine" / "lock"
    if not lock.exists():
        return True
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


# -- judging -----------------------------------------------------------------------


def problems_of(outcome: Outcome) -> list[str]:
    """Every broken promise of one case, one line each."""
    case = outcome.case
    found: list[str] = []
    for ran in outcome.ran:
        found += [f"{case.name}: machine {' '.join(ran.args)}: {p}" for p in judge(ran)]
    for ran in outcome.after:  # the rows changed since: no counts to check
        found += [
            f"{case.name}: machine {' '.join(ran.args)}: {p}"
            for p in judge(ran, reads=False)
        ]
    if not outcome.lock_free:
        found.append(f"{case.name}: the writer lock is still held")
    codes = [r.code for r in outcome.after]
    if case.intact and codes != [0, 0, 0, 0]:
        last = outcome.after[-1]
        found.append(
            f"{case.name}: after recover: machine {' '.join(last.args)} -> "
            f"{last.code}: {last.stderr.strip() or last.stdout.strip()[:300]}"
        )
    if not case.intact and (
        codes[0] != DAMAGED or "nothing to go back to" not in outcome.after[0].stderr
    ):
        found.append(f"{case.name}: recover --yes did not refuse: {outcome.after[0]}")
    if case.name == "nothing damaged":
        found += [
            f"baseline: machine {' '.join(r.args)} -> {r.code}: {r.stderr.strip()}"
            for r in outcome.ran
            if r.code != 0
        ]
    return found


def judge(ran: Ran, reads: bool = True) -> list[str]:
    if ran.code is None:
        return [f"hung (killed after {TIMEOUT} s)"]
    found: list[str] = []
    if "Traceback" in ran.stderr or "Traceback" in ran.stdout:
        found.append("traceback: " + ran.stderr.strip().splitlines()[-1][:300])
        return found
    if ran.code != 0:
        errors = [line for line in ran.stderr.splitlines() if line.startswith("Error:")]
        if ran.args[0] not in ("validate", "recover") and len(errors) != 1:
            found.append(f"not one Error: line: {ran.stderr.strip()[:300]!r}")
        if ran.code != DAMAGED:
            found.append(f"exit {ran.code}, not {DAMAGED}: {ran.stderr.strip()[:300]}")
        return found
    if reads and ran.args[0] in MUST_SHOW and ran.args[:2] != ("log", "--id"):
        text = ran.stdout + ran.stderr
        empty = [phrase for phrase in EMPTY if phrase in text]
        if empty:
            found.append(f"exit 0 calls the store empty: {empty}")
        if MUST_SHOW[ran.args[0]] not in text:
            found.append(f"exit 0 without {MUST_SHOW[ran.args[0]]!r}: {text[:300]!r}")
    return found


def test_every_command_on_every_damage(tmp_path: Path) -> None:
    templates = template(tmp_path)
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(2, (os.cpu_count() or 2))) as pool:
        outcomes = list(
            pool.map(
                lambda item: run_case(item[1], item[0], tmp_path, templates),
                enumerate(CASES),
            )
        )
    seconds = time.monotonic() - started
    problems = [p for outcome in outcomes for p in problems_of(outcome)]
    assert len(CASES) >= 35
    assert problems == [], (
        f"{len(problems)} broken promises ({seconds:.0f} s):\n" + "\n".join(problems)
    )
