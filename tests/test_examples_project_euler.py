"""examples/project-euler: variants, sandbox, attacks on it, scoring, receipts.

The attack programs are files in tests/fixtures/euler_attacks/. Each Python
attack starts with disarm.py, which takes the language guard apart first (the
frame walk that beat the old guard, then gc, which beats the new one), so
what stops the attack is the sandbox itself. The JavaScript attacks run with
the guard left out for the same reason. Without a working sandbox the attack
tests skip, except in CI (CI=true), where they fail.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from machine_git import releases
from machine_git.releases import steps
from machine_git.store.store import Store
from tests.conftest import git

EXAMPLE = Path(__file__).parents[1] / "examples" / "project-euler"
SOLUTIONS = EXAMPLE / "solutions"
ATTACKS = Path(__file__).parent / "fixtures" / "euler_attacks"
sys.path.insert(0, str(EXAMPLE))
problems: Any = importlib.import_module("euler.problems")
variants: Any = importlib.import_module("euler.variants")
sandbox: Any = importlib.import_module("euler.sandbox")
launch: Any = importlib.import_module("euler.launch")
group: Any = importlib.import_module("euler.group")
mutate: Any = importlib.import_module("euler.mutate")
score: Any = importlib.import_module("euler.score")
receipts: Any = importlib.import_module("euler.receipts")
cli: Any = importlib.import_module("euler.cli")


@pytest.fixture(scope="module")
def isolation() -> str:
    """The real isolation this machine gives (bwrap here and in CI)."""
    found = sandbox.best()
    if found is None:
        reason = f"no sandbox works here: {sandbox.problem('bwrap')}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: .ci/run installs bubblewrap)")
        pytest.skip(reason)
    return str(found)


def attack(
    isolation: str,
    name: str,
    params: dict[str, Any] | None = None,
    *,
    limits: Any = None,
) -> tuple[list[str], Any]:
    """Run an attack program: its output lines (after the disarm line), the Result."""
    source = (ATTACKS / name).read_bytes()
    lang = sandbox.language(name)
    if lang == "python":
        source = (ATTACKS / "disarm.py").read_bytes() + source
    result = sandbox.run(
        source,
        lang,
        json.dumps(params or {}).encode(),
        limits=limits,
        isolation=isolation,
        allow_unsafe=True,
        guard=lang == "python",
    )
    lines = result.stdout.decode().splitlines()
    if lang == "python":
        # The frame walk no longer reaches the guard's state; gc does.
        assert lines[:1] == ["disarm - gc"], result
        lines = lines[1:]
    return lines, result


# --- problems and variants ------------------------------------------------


def test_reference_answers_of_known_small_cases() -> None:
    cases = {
        "multiples": ({"a": 3, "b": 5, "n": 10}, 23),
        "fibonacci": ({"k": 2, "n": 100}, 44),
        "prime-factor": ({"n": 13195}, 29),
        "smallest-multiple": ({"lo": 1, "hi": 10}, 2520),
        "power-digits": ({"base": 2, "exponent": 15}, 26),
    }
    assert sorted(cases) == sorted(problems.PROBLEMS)
    for pid, (params, answer) in cases.items():
        assert problems.get(pid).solve(params) == answer


def test_hidden_variants_differ_per_seed_and_repeat_per_seed() -> None:
    for pid in problems.PROBLEMS:
        one = variants.hidden(pid, "seed-one", 4)
        assert [v.params for v in one] == [
            v.params for v in variants.hidden(pid, "seed-one", 4)
        ]
        assert [v.params for v in one] != [
            v.params for v in variants.hidden(pid, "seed-two", 4)
        ]
        assert [v.id for v in one] == [f"{pid}/hidden-{i}" for i in range(4)]


def test_transfer_variants_are_frozen_parameters_only() -> None:
    table = json.loads(variants.TRANSFER.read_text())
    assert sorted(table) == sorted(problems.PROBLEMS)
    frozen = variants.transfer("prime-factor")
    assert [(v.id, v.params, v.seed) for v in frozen] == [
        ("prime-factor/transfer-0", {"n": 600851}, None),
        ("prime-factor/transfer-1", {"n": 2147483647}, None),
    ]
    assert [v.answer() for v in frozen] == [20719, 2147483647]


# --- the sandbox: what a well-behaved program sees ------------------------


def test_a_program_runs_as_an_unprivileged_uid_with_only_its_work_dir(
    isolation: str,
) -> None:
    program = b"""
import json, os, sys
p = json.load(sys.stdin)
open("note.txt", "w").write("kept")
print(os.getuid() != 0, os.getgid() != 0, os.getcwd(), sorted(os.listdir("/")))
print(open("note.txt").read(), p["x"] * 2)
"""
    result = sandbox.run(program, "python", b'{"x": 21}', isolation=isolation)
    assert result.stdout.decode().splitlines() == [
        f"True True {launch.WORK} {sorted(_sandbox_root())}",
        "kept 42",
    ]
    assert result.uid != 0
    assert (result.returncode, result.stopped, result.answer()) == (0, None, "kept 42")


def _sandbox_root() -> list[str]:
    """What / holds inside bwrap: /usr, its links, /proc, /dev, /in, /sandbox."""
    names = ["usr", "proc", "dev", "in", "sandbox"]
    if Path("/etc/ld.so.cache").exists():
        names.append("etc")
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        if Path("/", name).is_symlink() or Path("/", name).is_dir():
            names.append(name)
    if launch._prefix(launch.python(), "python"):
        names.append(launch._prefix(launch.python(), "python").split("/")[1])
    return sorted(set(names))


@pytest.mark.slow
def test_timeout_and_output_cap_stop_the_run(isolation: str) -> None:
    limits = sandbox.Limits(timeout=1.0, output=1000)
    loop = sandbox.run(
        b"while True:\n    pass\n", "python", limits=limits, isolation=isolation
    )
    assert (loop.stopped, loop.answer()) == ("timeout", None)
    assert loop.seconds < 3
    flood = sandbox.run(
        b"while True:\n    print('x' * 99)\n",
        "python",
        limits=limits,
        isolation=isolation,
    )
    assert (flood.stopped, len(flood.stdout), flood.answer()) == ("output", 1000, None)


def test_work_dir_is_capped_in_size(isolation: str) -> None:
    program = b"""
import os
written = 0
try:
    with open("big", "wb") as f:
        for _ in range(64):
            f.write(b"x" * (1 << 19))
            written += 1 << 19
except OSError as e:
    print("stopped", e.strerror)
print(written <= (1 << 20))
"""
    # RLIMIT_FSIZE (1 MiB) stops one file; the tmpfs size stops many.
    many = b"""
import os
total = 0
try:
    for i in range(64):
        with open(f"f{i}", "wb") as f:
            f.write(b"x" * ((1 << 20) - 1))
        total += 1
except OSError as e:
    print("stopped", e.strerror, total < 32)
"""
    one = sandbox.run(program, "python", isolation=isolation)
    # Python ignores SIGXFSZ: the write fails with EFBIG instead.
    assert one.stdout.decode().splitlines() == ["stopped File too large", "True"]
    full = sandbox.run(many, "python", isolation=isolation)
    assert full.stdout.decode().splitlines() == ["stopped No space left on device True"]


def test_the_guard_is_a_second_layer_that_refuses_on_its_own(isolation: str) -> None:
    program = b"""
import os
for name, call in (
    ("socket", lambda: __import__("socket").socket()),
    ("fork", os.fork),
    ("write", lambda: open("/sandbox/../usr/x", "w")),
    ("dir_fd", lambda: os.open("x", os.O_CREAT | os.O_WRONLY, dir_fd=os.open("/", 0))),
):
    try:
        call()
        print(name, "allowed")
    except PermissionError as e:
        print(name, str(e).split(":")[0])
"""
    result = sandbox.run(program, "python", isolation=isolation)
    assert result.stdout.decode().split() == [
        "socket", "sandbox", "fork", "sandbox", "write", "sandbox", "dir_fd", "sandbox",
    ]  # fmt: skip
    params = json.dumps({"tcp": 9, "udp": 9, "path": "/x"}).encode()
    js = sandbox.run(
        (ATTACKS / "net.js").read_bytes(), "javascript", params, isolation=isolation
    )
    assert sorted(js.stdout.decode().splitlines()) == [
        "tcp refused sandbox: net connect is not allowed",
        "udp refused sandbox: dgram is not allowed",
        "unix refused sandbox: net connect is not allowed",
    ]


# --- the attacks ------------------------------------------------------------


def test_remount_and_new_namespaces_are_refused(isolation: str) -> None:
    assert attack(isolation, "remount.py")[0] == [
        "remount / Operation not permitted",
        "remount /usr Operation not permitted",
        "remount /in Operation not permitted",
        # --disable-userns: no user namespace in which to become root
        "unshare user No space left on device",
        "unshare mount Operation not permitted",
        "write /usr/pwned Read-only file system",
        "write /pwned Read-only file system",
        "write /in/pwned Read-only file system",
        "write /dev/pwned Read-only file system",
        "write /dev/shm/pwned Read-only file system",
    ]


def test_proc_shows_the_sandbox_only(isolation: str) -> None:
    seed = f"seed-{secrets.token_hex(6)}"
    # A child of the harness whose command line carries a "seed".
    with subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)", seed]
    ) as other:
        try:
            lines, _ = attack(
                isolation,
                "proc.py",
                {"markers": [seed, "pytest", "euler"], "harness_pid": other.pid},
            )
        finally:
            other.kill()
    count = int(lines[0].split()[1])
    assert count <= 3, lines  # bwrap's init and the program
    assert lines[1:] == ["leaks none", "harness pid No such file or directory"]


@pytest.mark.slow
def test_fork_bomb_stops_at_the_process_limit(isolation: str) -> None:
    lines, result = attack(isolation, "forkbomb.py")
    assert lines[0] == "refused Resource temporarily unavailable"
    made = int(lines[1].split()[1])
    assert 0 < made < sandbox.Limits().processes
    assert result.seconds < 5
    assert group.members(_account(result.uid), None) == []


def _account(uid: int) -> Any:
    return group.Account(uid, uid, exclusive=os.geteuid() == 0)


@pytest.mark.slow
def test_memory_across_children_is_limited_for_the_group(isolation: str) -> None:
    # Four children of 64 MiB each: each far under the per-process cap
    # (Limits.memory, 2 GiB), together above the group's 160 MiB.
    limits = sandbox.Limits(group_memory=160 << 20, timeout=20)
    params = {"children": 4, "mib": 64}
    _, result = attack(isolation, "children_memory.py", params, limits=limits)
    assert (result.stopped, result.answer()) == ("memory", None)
    assert result.seconds < 10
    assert group.members(_account(result.uid), None) == []


@pytest.mark.parametrize("mode", ["sandbox", "none"])
def test_a_detached_child_does_not_outlive_the_run(
    isolation: str, mode: str, shared_dir: Path
) -> None:
    if mode == "none" and os.geteuid() != 0:
        pytest.skip("without root the none mode has no uid of the run's own")
    marker = f"euler-detached-{secrets.token_hex(6)}"
    late = shared_dir / "late.txt"  # writable by the run's uid in none mode
    params = {"marker": marker, "late": str(late)}
    chosen = isolation if mode == "sandbox" else sandbox.UNSAFE
    lines, result = attack(chosen, "detached.py", params)
    assert lines == ["main done"]
    assert result.seconds < 2
    time.sleep(0.6)  # past the moment the grandchild would have written
    assert not late.exists()
    assert _processes_naming(marker) == []
    assert group.members(_account(result.uid), None) == []


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory any uid may write (tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="euler-test-"))
    path.chmod(0o777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _processes_naming(marker: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
    return found


@contextlib.contextmanager
def listeners(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """Host sockets an escaped program would reach: TCP, UDP, Unix, abstract."""
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(str(tmp_path / "host.sock"))
    unix.listen()
    abstract = socket.socket(socket.AF_UNIX)
    name = f"euler-test-{secrets.token_hex(6)}"
    abstract.bind("\0" + name)
    abstract.listen()
    sockets = [tcp, udp, unix, abstract]
    for s in sockets:
        s.setblocking(False)
    reached: list[str] = []
    params = {
        "tcp": tcp.getsockname()[1],
        "udp": udp.getsockname()[1],
        "path": str(tmp_path / "host.sock"),
        "abstract": name,
        "reached": reached,
    }
    try:
        yield params
        with contextlib.suppress(BlockingIOError):
            udp.recv(64)
            reached.append("udp")
        for label, s in (("tcp", tcp), ("unix", unix), ("abstract", abstract)):
            with contextlib.suppress(BlockingIOError):
                s.accept()[0].close()
                reached.append(label)
    finally:
        for s in sockets:
            s.close()


def test_unix_sockets_of_the_host_are_out_of_reach(
    isolation: str, tmp_path: Path
) -> None:
    with listeners(tmp_path) as host:
        lines, _ = attack(isolation, "unix_sockets.py", host)
    assert lines == ["path No such file or directory", "abstract Connection refused"]
    assert host["reached"] == []


def test_no_network_tcp_udp_or_dns(isolation: str, tmp_path: Path) -> None:
    with listeners(tmp_path) as host:
        lines, _ = attack(isolation, "network.py", host)
    # UDP "sent" goes to the sandbox's own loopback: the host got nothing.
    assert lines == [
        "tcp Connection refused",
        "udp sent",
        "dns gaierror",
        "internet Network is unreachable",
    ]
    assert host["reached"] == []


def test_no_network_from_javascript_either(isolation: str, tmp_path: Path) -> None:
    with listeners(tmp_path) as host:
        lines, _ = attack(isolation, "net.js", host)
    assert sorted(lines) == ["tcp ECONNREFUSED", "udp sent", "unix ENOENT"]
    assert host["reached"] == []


def test_writes_outside_the_work_dir_fail(isolation: str, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    assert attack(isolation, "writes.py", {"outside": str(outside)})[0] == [
        "open No such file or directory",
        "dir_fd / Read-only file system",
        "dir_fd /usr Read-only file system",
        "mkdir /usr Read-only file system",
        "rename out Invalid cross-device link",
        "link out Read-only file system",
        "tmp No such file or directory",
        "inside wrote",
    ]
    assert attack(isolation, "writes.js", {"outside": str(outside)})[0] == [
        "refused ENOENT",
        "refused EROFS",
        "refused EROFS",
        "refused ENOENT",
        "wrote inside.txt",
    ]
    assert not outside.exists()


def test_the_reference_solver_is_not_there_to_import(isolation: str) -> None:
    assert attack(isolation, "reference.py", {"harness": str(EXAMPLE)})[0] == [
        "import ModuleNotFoundError",
        "read No such file or directory",
        "found nothing",
    ]


def test_without_a_sandbox_the_guard_alone_does_not_hold(tmp_path: Path) -> None:
    # What the README says of --unsafe-no-sandbox, shown: a disarmed program
    # reaches the host's loopback. The run's uid is still not root.
    with listeners(tmp_path) as host:
        lines, result = attack(sandbox.UNSAFE, "network.py", host)
    assert lines[0] == "tcp connected"
    assert "tcp" in host["reached"]
    assert result.uid != 0


# --- the isolation policy -------------------------------------------------


@pytest.fixture
def no_sandbox_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A machine without bubblewrap, podman or docker (util-linux and node stay)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("prlimit", "setpriv", "node"):
        found = launch.shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    monkeypatch.setenv("PATH", str(bin_dir))
    sandbox.problem.cache_clear()
    yield
    sandbox.problem.cache_clear()


def test_no_sandbox_means_no_run_unless_asked(
    no_sandbox_tools: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert sandbox.best() is None
    with pytest.raises(sandbox.NoSandbox, match="no sandbox works here"):
        sandbox.run(b"print(1)\n", "python")
    program = str(SOLUTIONS / "multiples.py")
    argv = ["eval", "--program", program, "--variants", "1", "--mutants", "0"]
    assert cli.main(argv) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("Error: no sandbox works here (bwrap: bwrap not installed")
    assert err.count("\n") == 1
    assert cli.main([*argv, "--unsafe-no-sandbox"]) == 0
    out, err = capsys.readouterr()
    assert err == "warning: no sandbox; the programs run with in-process guards only\n"
    assert out.splitlines()[-1].endswith("isolation none")


def test_isolation_none_must_be_asked_for_by_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(sandbox.NoSandbox, match="--unsafe-no-sandbox"):
        sandbox.run(b"print(1)\n", "python", isolation="none")
    program = str(SOLUTIONS / "multiples.py")
    assert cli.main(["eval", "--program", program, "--isolation", "none"]) == 1
    assert capsys.readouterr().err == (
        "Error: isolation 'none' runs the program with in-process guards only;"
        " pass --unsafe-no-sandbox to allow that\n"
    )


def test_a_cgroup_that_is_not_delegated_is_refused_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cgroup = importlib.import_module("euler.cgroup")
    fake = tmp_path / "not-a-cgroup"
    fake.mkdir()
    monkeypatch.setenv("EULER_CGROUP", str(fake))
    sandbox.problem.cache_clear()
    cgroup.parent.cache_clear()
    try:
        assert sandbox.problem("bwrap") == (
            f"EULER_CGROUP={fake}: No such file or directory"
        )
        (fake / "cgroup.subtree_control").write_text("cpu io\n")
        sandbox.problem.cache_clear()
        cgroup.parent.cache_clear()
        assert sandbox.problem("bwrap") == (
            f"EULER_CGROUP={fake}: memory and pids are not in its"
            " cgroup.subtree_control"
        )
        with pytest.raises(sandbox.NoSandbox, match="not in its cgroup"):
            sandbox.resolve("bwrap")
    finally:
        monkeypatch.delenv("EULER_CGROUP")
        sandbox.problem.cache_clear()
        cgroup.parent.cache_clear()


def test_container_command_has_no_network_root_or_host_files() -> None:
    limits = sandbox.Limits()
    acct = group.Account(1500000007, 1500000007, exclusive=True)
    argv = launch.container_argv(
        "docker", "euler-x", "python", limits, acct, "/tmp/euler-in-x", guard=True
    )
    assert argv == [
        "docker", "run", "--rm", "-i", "--name", "euler-x", "--pull", "never",
        "--network", "none", "--ipc", "private", "--read-only",
        "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
        "--user", "1500000007:1500000007",
        "--memory", str(512 << 20), "--memory-swap", str(512 << 20),
        "--pids-limit", "64", "--cpus", "1",
        "--ulimit", "cpu=10", "--ulimit", f"fsize={1 << 20}",
        "--ulimit", "nofile=64", "--ulimit", "core=0",
        "--tmpfs", f"/sandbox:rw,size={16 << 20},mode=1777",
        "--volume", "/tmp/euler-in-x:/in:ro", "--workdir", "/sandbox",
        "--env", "HOME=/sandbox", "--env", "TMPDIR=/sandbox",
        "python:3.11-slim", "python3", "-I", "-S", "/in/guard_py.py", "/in/main.py",
    ]  # fmt: skip


# --- mutation and scoring ---------------------------------------------------


def test_mutants_change_literals_and_comparisons_not_strings() -> None:
    py = "x = 'a<1'  # 2 < 3\nif n <= 10:\n    print(0)\n"
    assert [m.description for m in mutate.mutants(py, "python")] == [
        "line 2: <= -> <",
        "line 2: 10 -> 11",
        "line 2: 10 -> 9",
        "line 3: 0 -> 1",
    ]
    js = 'const s = "a<1"; // 2\nlet t = 10n; if (t === 2n) f(x => x >> 1);\n'
    assert [m.description for m in mutate.mutants(js, "javascript")] == [
        "line 2: 10n -> 11n",
        "line 2: 10n -> 9n",
        "line 2: === -> !==",
        "line 2: 2n -> 3n",
        "line 2: 2n -> 1n",
        "line 2: 1 -> 2",
        "line 2: 1 -> 0",
    ]
    assert mutate.mutants(py, "python")[0].source.splitlines()[1] == "if n < 10:"


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("x = (1,\n2\n", "syntax error: line 1: '(' was never closed"),
        (
            "if x:\n    y = 1\n  z = 2\n",
            "syntax error: line 3: unindent does not match any outer indentation level",
        ),
        ("print(1\n", "syntax error: line 1: '(' was never closed"),
    ],
)
def test_a_program_that_does_not_parse_is_a_reason_not_a_crash(
    source: str, reason: str
) -> None:
    with pytest.raises(mutate.CannotMutate) as caught:
        mutate.mutants(source, "python")
    assert str(caught.value) == reason


def _evaluate(
    name: str,
    source: bytes | None = None,
    seed: str = "t1",
    settings: Any = None,
    pid: str | None = None,
) -> dict[str, Any]:
    path = SOLUTIONS / name
    pid = pid or path.stem.removeprefix("cheat-")
    settings = settings or score.Settings(mutants=10, mutant_variants=2)
    return dict(
        score.evaluate(
            pid,
            path.read_bytes() if source is None else source,
            sandbox.language(path),
            variants.hidden(pid, seed, 3),
            variants.transfer(pid),
            settings,
            seed,
        )
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", ["multiples.py", "multiples.js", "power-digits.js", "fibonacci.py"]
)
def test_correct_solutions_score_high(isolation: str, name: str) -> None:
    result = _evaluate(name)
    assert (result["correctness"], result["transfer"]) == (1.0, 1.0)
    assert result["mutation_sensitivity"] >= score.FULL_CREDIT
    assert (result["score"], result["suspicious"]) == (1.0, False)
    assert all(v["correct"] for v in result["variants"])
    assert "error" not in result


@pytest.mark.slow
def test_cheat_scores_low_on_mutation_sensitivity(isolation: str) -> None:
    result = _evaluate("cheat-multiples.py")
    assert result["mutation_sensitivity"] < score.SUSPICIOUS
    assert (result["suspicious"], result["score"]) == (True, 0.0)
    assert [v["output"] for v in result["variants"]] == ["2318"] * 5


IGNORES_LO = b"""
import json, math, sys
p = json.load(sys.stdin)
value = 1
for k in range(1, p["hi"] + 1):  # ignores lo: lcm(1..hi) = lcm(lo..hi) when lo <= hi/2
    value = value * k // math.gcd(value, k)
print(value)
"""


@pytest.mark.slow
def test_ignoring_a_parameter_cannot_score_full(isolation: str) -> None:
    result = _evaluate("smallest-multiple.py", IGNORES_LO)
    # Every hidden variant has lo <= hi / 2, so they all pass; the frozen
    # transfer variant lo = hi = 17 does not.
    assert (result["correctness"], result["transfer"]) == (1.0, 0.5)
    assert result["score"] <= 0.5
    assert [v["correct"] for v in result["variants"][3:]] == [True, False]


SLEEPING_CHEAT = b"""
import json, sys, time
p = json.load(sys.stdin)
time.sleep(0.4)  # longer than a fixed mutant timeout of budget_min (0.2 s)
i = 0
while i < 5:  # decoy: "i += 0" loops forever
    i += 1
print("2318")
"""


@pytest.mark.slow
def test_sleeping_does_not_buy_kills_and_timeouts_are_not_kills(
    isolation: str,
) -> None:
    settings = score.Settings(
        mutants=10, mutant_variants=1, budget_min=0.2, budget_scale=2.0
    )
    result = _evaluate("cheat-multiples.py", SLEEPING_CHEAT, settings=settings)
    statuses = {m["change"]: m["status"] for m in result["mutants"]}
    assert statuses == {
        "line 5: 0 -> 1": "survived",
        "line 6: < -> <=": "survived",
        "line 6: 5 -> 6": "survived",
        "line 6: 5 -> 4": "survived",
        "line 7: 1 -> 2": "survived",
        "line 7: 1 -> 0": "timeout",
    }
    original = result["variants"][0]["seconds"]
    assert original > 0.4
    for m in result["mutants"]:
        assert m["seconds"] == [pytest.approx(2 * original, abs=0.002)]
    assert (result["mutation_sensitivity"], result["score"]) == (0.0, 0.0)
    assert result["suspicious"] is True


@pytest.mark.slow
def test_a_broken_program_is_one_failed_result_among_the_others(
    isolation: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "prime-factor.py"
    broken.write_text("import json\nprint(max(json.load(sys.stdin)['n']\n")
    dedent = tmp_path / "fibonacci.py"
    dedent.write_text("if True:\n        x = 1\n    y = 2\n")
    good = str(SOLUTIONS / "multiples.py")
    argv = ["eval", "--program", str(broken), "--program", good]
    argv += ["--program", str(dedent), "--variants", "1", "--mutants", "3"]
    argv += ["--seed", "b1", "--json"]
    assert cli.main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    results = printed["results"]
    assert [r["problem"] for r in results] == ["prime-factor", "multiples", "fibonacci"]
    assert results[0]["error"] == "syntax error: line 2: '(' was never closed"
    assert results[2]["error"] == (
        "syntax error: line 3: unindent does not match any outer indentation level"
    )
    assert [r["score"] for r in results] == [0.0, 1.0, 0.0]
    assert "SyntaxError" in results[0]["variants"][0]["stderr_tail"]
    assert printed["summary"]["failed"] == ["prime-factor", "fibonacci"]


@pytest.mark.slow
def test_a_program_that_imports_the_reference_solver_scores_nothing(
    isolation: str,
) -> None:
    cheat = f"""
import json, sys
p = json.load(sys.stdin)
sys.path.insert(0, {str(EXAMPLE)!r})
try:
    from euler import problems
    print(problems.get("multiples").solve(p))
except ImportError:
    print(0)
""".encode()
    result = _evaluate("multiples.py", cheat)
    assert [v["output"] for v in result["variants"]] == ["0"] * 5
    assert (result["correctness"], result["score"]) == (0.0, 0.0)


def test_problems_piped_into_head_ends_quietly() -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line
    done = subprocess.run(
        [sys.executable, "-m", "euler", "problems"],
        cwd=EXAMPLE,
        stdout=write,
        stderr=subprocess.PIPE,
        check=False,
    )
    os.close(write)
    assert (done.returncode, done.stderr) == (141, b"")


# --- receipts, the agent command, gates ----------------------------------


@pytest.mark.slow
def test_receipt_is_committed_to_the_store(
    isolation: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store_path = tmp_path / "store.git"
    Store.create(store_path)
    program = str(SOLUTIONS / "multiples.py")
    argv = ["eval", "--program", program, "--seed", "s9", "--variants", "2"]
    argv += ["--mutants", "4", "--store", str(store_path), "--json"]
    assert cli.main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    rid = printed["run"]
    stored = json.loads(
        git(store_path, "show", f"main:receipts/project-euler/{rid}.json")
    )
    assert stored["seed"] == "s9"
    [result] = stored["results"]
    assert (
        result["program_sha256"]
        == receipts.hashlib.sha256(
            (SOLUTIONS / "multiples.py").read_bytes()
        ).hexdigest()
    )
    assert result["isolation"] == isolation
    assert [v["seed"] for v in result["variants"]] == [
        variants.sub_seed("s9", "multiples", 0),
        variants.sub_seed("s9", "multiples", 1),
        None,
        None,
    ]
    assert stored["summary"]["score"] == 1.0
    trailers = git(store_path, "log", "-1", "--format=%(trailers)")
    assert trailers.split("\n")[:2] == [
        "Machine-Action: receipt",
        f"Machine-Receipt: {rid}",
    ]
    assert printed["commit"] == git(store_path, "rev-parse", "main").strip()


@pytest.mark.slow
def test_agent_command_supplies_the_program(
    isolation: str, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = f"cp {SOLUTIONS / 'multiples.js'} {{out}} # {{prompt}}"
    argv = ["eval", "--problem", "multiples", "--agent-cmd", agent, "--language"]
    argv += ["js", "--variants", "2", "--mutants", "4", "--seed", "s1"]
    assert cli.main(argv) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("multiples          javascript correct 1.00  transfer 1.00")


def test_an_agent_that_writes_nothing_is_a_failed_result(
    isolation: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["eval", "--problem", "multiples", "--agent-cmd", "exit 3", "--json"]
    assert cli.main(argv) == 0
    [result] = json.loads(capsys.readouterr().out)["results"]
    assert result["error"] == "agent command wrote no multiples.py (exit 3)"
    assert result["score"] == 0.0


def test_gates_and_holdouts_are_accepted_by_releases(tmp_path: Path) -> None:
    hold, gates = receipts.write_gates(
        tmp_path, ["multiples", "power-digits"], "g1", 2, 0.8
    )
    spec, data = releases.load_spec(gates, None)  # the gates file's model
    assert data is not None
    assert len(steps.parse_holdouts(data, hold.name)) == 8
    assert data == hold.read_bytes()
    cases = [json.loads(line) for line in data.splitlines()]
    assert [c["id"] for c in cases] == [
        "project-euler/multiples/hidden-0",
        "project-euler/multiples/hidden-1",
        "project-euler/multiples/transfer-0",
        "project-euler/multiples/transfer-1",
        "project-euler/power-digits/hidden-0",
        "project-euler/power-digits/hidden-1",
        "project-euler/power-digits/transfer-0",
        "project-euler/power-digits/transfer-1",
    ]
    assert cases[2]["messages"] == [
        {
            "role": "user",
            "content": "What is the sum of all natural numbers below 1000000 that are"
            " multiples of 7 or of 11? Answer with the number only.",
        }
    ]
    assert cases[2]["reference"] == "110389889610"
    assert spec.gates.holdouts is not None
    assert [g.model_dump() for g in spec.gates.holdouts.metrics] == [
        {"metric": "exact", "min": 0.8, "min_delta": 0.0}
    ]
