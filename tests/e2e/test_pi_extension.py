"""End to end: the real Pi agent runs the extension `machine install pi` wrote.

Pi (npm @mariozechner/pi-coding-agent, installed by install_pi.sh into a cache
folder) runs fully offline: the fake provider of tests/fixtures/pi is a global
extension in the test's agent dir and the default model, so plain ``pi -p``
works, tools really run, and ``machine fork`` can start a real pi. PATH holds
node and the system folders only, not the venv: the extension must reach
machine through the command baked into it.

Without node/npm the tests skip with the reason, except in CI (CI=true), where
they must run and fail instead (tests/e2e/conftest.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git import paths
from machine_git import rows
from machine_git.sessions import pi as pi_sessions
from tests.conftest import FIXTURES
from tests.conftest import Run
from tests.conftest import git

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
SETTINGS = {
    "defaultProvider": "fake",
    "defaultModel": "fake-1",
    "compaction": {"enabled": False, "keepRecentTokens": 32},
    "retry": {"enabled": False},
}
INKLING = "thinkingmachines/Inkling-Small:peft:262144"


@dataclass
class Pi:
    """Runs the real pi in the project with the test's isolated environment."""

    bin: Path
    cwd: Path
    env: dict[str, str]

    def __call__(self, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(self.bin), *args],
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert "Extension error" not in done.stderr, done.stderr
        assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
        return done

    def session(self) -> Path:
        folder = pi_sessions.agent_dir() / "sessions" / pi_sessions.encode_cwd(self.cwd)
        (found,) = folder.glob("*.jsonl")
        return found

    def entries(self) -> list[dict[str, Any]]:
        lines = self.session().read_bytes().splitlines()
        return [orjson.loads(line) for line in lines[1:] if line.strip()]


@pytest.fixture
def agent(pi_bin: Path, project: Path, run: Run) -> Pi:
    """The agent dir with the fake provider, and machine installed globally."""
    agent_dir = pi_sessions.agent_dir()
    (agent_dir / "extensions").mkdir(parents=True)
    shutil.copyfile(
        FIXTURES / "pi" / "fake-provider.ts",
        agent_dir / "extensions" / "fake-provider.ts",
    )
    (agent_dir / "settings.json").write_text(json.dumps(SETTINGS))
    installed = run("install", "pi")
    assert installed.exit_code == 0, installed.output
    node = shutil.which("node")
    assert node is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINKER_")}
    env.update(
        PATH=os.pathsep.join([str(Path(node).parent), "/usr/bin", "/bin"]),
        PI_OFFLINE="1",
        PI_SKIP_VERSION_CHECK="1",
        PI_TELEMETRY="0",
    )
    env.pop("MACHINE_FORK_PARENT", None)
    return Pi(pi_bin, project, env)


def store_of(project: Path) -> Path:
    return paths.store_path(project)


def row_at_head(project: Path, row_id: str) -> dict[str, Any]:
    value = orjson.loads(
        git(store_of(project), "show", f"HEAD:{rows.row_path(row_id)}")
    )
    assert isinstance(value, dict)
    return value


def said(pattern: str, stderr: str) -> str:
    """The row id in the one stderr line matching ``pattern`` (``ID`` marks it)."""
    regex = re.compile("^" + re.escape(pattern).replace("ID", "([0-9a-f]{12})") + "$")
    found = [m.group(1) for line in stderr.splitlines() if (m := regex.match(line))]
    assert len(found) == 1, stderr
    return found[0]


def test_good_and_bad_inside_pi_tag_the_turn_on_screen(agent: Pi) -> None:
    agent("-p", "Run `echo e2e-first`.")
    agent("-c", "-p", "Run `echo e2e-second`.")
    last = agent.entries()[-1]

    traced = agent("-c", "-p", "/good --trace")
    trace_id = said("good ID -> traces: Run `echo e2e-second`.", traced.stderr)
    row = row_at_head(agent.cwd, trace_id)
    assert row["source"]["session_file"] == str(agent.session())
    assert row["source"]["leaf_id"] == last["id"]
    assert [r["role"] for r in row["trajectory"]] == [
        "meta",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert row["trajectory"][2]["tool_calls"][0]["name"] == "bash"
    assert (
        row["trajectory"][2]["tool_calls"][0]["args"] == '{"command":"echo e2e-second"}'
    )
    assert row["trajectory"][3]["content"] == "e2e-second\n"
    assert row["trajectory"][4]["content"] == "The command printed: e2e-second"

    bad = agent("-c", "-p", "/bad too terse")
    bad_id = said("bad ID -> rejected: Run `echo e2e-second`.", bad.stderr)
    rejected = row_at_head(agent.cwd, bad_id)
    assert rejected["note"] == "too terse"
    assert rejected["messages"] == [
        {"role": "user", "content": "Run `echo e2e-second`."},
        {"role": "assistant", "content": "The command printed: e2e-second"},
    ]

    # a /tree jump back to turn 1 (in memory only, as in the TUI), then /good
    # with a quoted --as: the row is turn 1, the one on screen
    jumped = agent(
        "-e",
        str(HERE / "tree-jump.ts"),
        "-c",
        "-p",
        "/jump",
        '/good --as "It printed e2e-first." jumped back',
    )
    assert agent.entries()[-1] == last  # the jump wrote nothing to the file
    train_id = said("good ID -> train: Run `echo e2e-first`.", jumped.stderr)
    train = row_at_head(agent.cwd, train_id)
    assert train["note"] == "jumped back"
    assert train["messages"][1] == {
        "role": "assistant",
        "content": "It printed e2e-first.",
    }
    assert train["original_answer"] == "The command printed: e2e-first"

    listed = agent("-c", "-p", "/tagged -n 3", "/machine label nope good", code=1)
    assert [line.split()[:2] for line in listed.stderr.splitlines()] == [
        [train_id, "train"],
        [bad_id, "rejected"],
        [trace_id, "traces"],
        ["Error:", "bad"],
    ]
    assert listed.stderr.endswith(
        "\nError: bad row id 'nope': expected 1 to 12 hex characters\n"
    )


def test_auto_capture_observes_print_json_and_compaction_then_forks(
    agent: Pi, run: Run
) -> None:
    agent("-p", "Run `echo before-auto`.")
    assert not store_of(agent.cwd).exists()  # auto is off: nothing recorded

    # each pi process below is one step a user would take; the observation of
    # a run starts at agent_end and pi waits for it before exiting
    first = agent("-c", "-p", "/machine auto on", "Run `echo observed-run`.")
    assert first.stderr.startswith(f"auto-capture on for {agent.cwd}:")
    first_id = said("observed ID: Run `echo observed-run`.", first.stderr)

    agent("-c", "-p", "/machine auto off", "Run `echo while-off`.")
    compacted = agent("-c", "-p", "/machine auto on", "/mkcompact")
    assert any(e["type"] == "compaction" for e in agent.entries())
    boundary_id = said("observed ID: Run `echo while-off`.", compacted.stderr)

    # observed at agent_end and at the compaction right after, by two machine
    # processes at once: one row, one line
    twice = agent("-c", "-p", "Run `echo twice`.", "/mkcompact")
    twice_id = said("observed ID: Run `echo twice`.", twice.stderr)
    assert twice.stderr.count("\n") == 1

    streamed = agent("-c", "--mode", "json", "Run `echo json-mode`.")
    events = [json.loads(line) for line in streamed.stdout.splitlines()]
    assert events[0]["type"] == "session" and events[-1]["type"] == "agent_end"
    json_id = said("observed ID: Run `echo json-mode`.", streamed.stderr)

    listed = run("observed")
    assert [line.split()[0] for line in listed.stdout.splitlines()] == [
        json_id,
        twice_id,
        boundary_id,
        first_id,
    ]

    # machine fork from a shell: a real pi -p run, observed with its parent
    pi_path = os.pathsep.join([str(agent.bin.parent), agent.env["PATH"]])
    forked = subprocess.run(
        [sys.executable, "-m", "machine_git", "fork", "use", "printf", "instead"],
        cwd=agent.cwd,
        env={**agent.env, "PATH": pi_path},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert forked.returncode == 0, forked.stderr
    assert forked.stdout == "The command printed: json-mode\n"
    fork_id = said(
        f"observed ID: Redo this task with a correction. Task: Run `echo json-mode… "
        f"(fork of {json_id})",
        forked.stderr,
    )
    row = row_at_head(agent.cwd, fork_id)
    assert row["source"]["parent_row"] == json_id
    assert row["trajectory"][1]["content"] == (
        "Redo this task with a correction.\n\n"
        "Task:\nRun `echo json-mode`.\n\n"
        "Previous answer:\nThe command printed: json-mode\n\n"
        "Correction:\nuse printf instead\n"
    )

    labeled = run("label", fork_id, "good")
    assert labeled.stdout.startswith(f"labeled {fork_id} good: observed -> traces: ")
    assert row_at_head(agent.cwd, fork_id)["kind"] == "traces"


def test_global_and_project_installs_register_once_and_switch_models(
    agent: Pi, run: Run
) -> None:
    assert run("install", "pi", "--project").exit_code == 0
    agent("-p", "Run `echo once`.")
    tagged = agent("-c", "-p", "/good")
    said("good ID -> train: Run `echo once`.", tagged.stderr)
    assert tagged.stderr.count("\n") == 1
    users = [
        e
        for e in agent.entries()
        if e["type"] == "message" and e["message"]["role"] == "user"
    ]
    assert len(users) == 1  # /good reached the extension, not the model

    agent.env["TINKER_API_KEY"] = "tml-e2e"
    student = agent("-c", "-p", f"/machine student {INKLING}")
    assert (
        student.stderr == f"student {INKLING} (base); in Pi: /model, provider tinker\n"
    )
    work = agent("-c", "-p", "/machine work")
    assert work.stderr == "chatting with the working model fake/fake-1\n"
    changes = [
        (e["provider"], e["modelId"])
        for e in agent.entries()
        if e["type"] == "model_change"
    ]
    assert changes[-2:] == [("tinker", INKLING), ("fake", "fake-1")]
    assert (
        run("student").stdout
        == f"student {INKLING} (chatting with the working model)\n"
    )
