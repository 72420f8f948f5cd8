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
import queue
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git.agents import install
from machine_git.core import paths
from machine_git.rows import rows
from machine_git.sessions import pi as pi_sessions
from tests.agents import conftest as oai_stub
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
    # the turn's trace carries the new verdict too: a turn is good or bad, once
    assert bad.stderr.endswith(f"moved {trace_id} traces -> rejected (the same turn)\n")
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
        [trace_id, "rejected"],
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
    assert student.stderr == (
        f"student {INKLING} (base)\n"
        f"this session now chats with tinker/{INKLING}; other sessions keep their "
        "model\n"
    )
    work = agent("-c", "-p", "/machine work")
    assert work.stderr == "chatting with the working model fake/fake-1\n"
    changes = [
        (e["provider"], e["modelId"])
        for e in agent.entries()
        if e["type"] == "model_change"
    ]
    assert changes[-2:] == [("tinker", INKLING), ("fake", "fake-1")]
    assert run("student").stdout == (
        f"student {INKLING}\n"
        f"Pi session {agent.session().name}: fake/fake-1\n"
        "new Pi sessions start on fake/fake-1\n"
    )


class Rpc:
    """The real pi in RPC mode (a UI: the footer is drawn) with JSON lines to read."""

    def __init__(self, agent: Pi) -> None:
        self.stderr = agent.cwd.parent / "rpc.stderr"
        with self.stderr.open("w") as errors:
            self.process = subprocess.Popen(
                [str(agent.bin), "--mode", "rpc"],
                cwd=agent.cwd,
                env=agent.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
            )
        self.lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.strip():
                self.lines.put(json.loads(line))
        self.lines.put(None)

    def send(self, **command: Any) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def wait(self, what: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The next line ``what`` accepts (the lines before it are kept in seen)."""
        while True:
            line = self.lines.get(timeout=60)
            assert line is not None, "pi exited"
            self.seen.append(line)
            if what(line):
                return line

    def close(self) -> str:
        """End pi (stdin closed) and keep its last lines; returns its stderr."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        while (line := self.lines.get(timeout=60)) is not None:
            self.seen.append(line)
        code = self.process.wait(timeout=60)
        stderr = self.stderr.read_text()
        assert code == 0, stderr
        return stderr


def status(text: str) -> Callable[[dict[str, Any]], bool]:
    return lambda line: (
        line.get("method") == "setStatus"
        and line.get("statusKey") == "machine"
        and line.get("statusText") == text
    )


def test_the_footer_in_a_pi_with_a_ui_and_the_skills_it_loads(
    agent: Pi, run: Run
) -> None:
    # both installs: the skills still load once (the global extension steps aside)
    assert run("install", "pi", "--project").exit_code == 0
    rpc = Rpc(agent)
    rows = "train 0, traces 0, rejected 0, observed 0"
    rpc.wait(status(f"machine: {rows}"))
    rpc.send(id="commands", type="get_commands")
    listed = rpc.wait(lambda line: line.get("id") == "commands")["data"]["commands"]
    names = [c["name"] for c in listed]
    assert names.count("tinker") == 1 and names.count("good") == 1
    skills = [c for c in listed if c["source"] == "skill"]
    assert [c["name"] for c in skills] == [
        "skill:machine-dataset",
        "skill:machine-release",
        "skill:machine-tagging",
        "skill:machine-tinker-sft",
    ]
    assert {Path(c["sourceInfo"]["path"]).parent.parent for c in skills} == {
        install.skills_dir()
    }

    rpc.send(type="prompt", message="Run `echo footer`.")
    rpc.wait(status(f"machine: last turn untagged (/good, /bad) | {rows}"))
    rpc.send(type="prompt", message="/good")
    note = rpc.wait(lambda line: line.get("method") == "notify")
    assert note["message"].endswith(" -> train: Run `echo footer`.")
    rpc.wait(status("machine: train 1, traces 0, rejected 0, observed 0"))
    assert "Extension error" not in rpc.close()
    footers = [
        line["statusText"] for line in rpc.seen if line.get("method") == "setStatus"
    ]
    assert footers[-1] == "machine: train 1, traces 0, rejected 0, observed 0"


def test_tinker_use_work_and_models_inside_pi(agent: Pi, run: Run) -> None:
    agent("-p", "Run `echo tinker`.")
    agent.env["TINKER_API_KEY"] = "tml-e2e"
    used = agent("-c", "-p", f"/tinker use {INKLING}")
    assert used.stderr == (
        f"student {INKLING} (base)\n"
        f"this session now chats with tinker/{INKLING}; other sessions keep their "
        "model\n"
    )
    work = agent("-c", "-p", "/tinker work")
    assert work.stderr == "chatting with the working model fake/fake-1\n"
    changes = [
        (e["provider"], e["modelId"])
        for e in agent.entries()
        if e["type"] == "model_change"
    ]
    assert changes[-2:] == [("tinker", INKLING), ("fake", "fake-1")]
    with oai_stub.serve() as stub:
        agent.env["MACHINE_TINKER_OAI_URL"] = stub.url
        listed = agent("-c", "-p", "/tinker models")
    assert listed.stderr == "Qwen/Qwen3-8B\nthinkingmachines/Inkling:peft:262144\n"
    assert stub.requests[0]["authorization"] == "Bearer tml-e2e"
    agent.env["MACHINE_TINKER_OAI_URL"] = oai_stub.closed_port_url()
    down = agent("-c", "-p", "/tinker models --timeout 2", code=1)
    assert down.stderr.startswith("Error: Tinker is unreachable at http://127.0.0.1:")


# -- issue 20: the student per session, no blocking, each turn once ----------------


def sessions(agent: Pi) -> list[Path]:
    folder = pi_sessions.agent_dir() / "sessions" / pi_sessions.encode_cwd(agent.cwd)
    return sorted(folder.glob("*.jsonl"))


def pi_settings() -> dict[str, Any]:
    value = json.loads((pi_sessions.agent_dir() / "settings.json").read_text())
    assert isinstance(value, dict)
    return value


def test_the_student_is_chosen_for_one_session_only(
    agent: Pi, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    with oai_stub.serve() as stub:
        # the provider points at a stand-in Tinker that records each request
        monkeypatch.setenv("MACHINE_TINKER_OAI_URL", stub.url)
        agent.env["MACHINE_TINKER_OAI_URL"] = stub.url
        assert run("install", "pi").exit_code == 0
        agent.env["TINKER_API_KEY"] = "tml-e2e"
        agent("-p", "Run `echo in-a`.")
        (first,) = sessions(agent)
        chosen = agent("-c", "-p", f"/machine student {INKLING}")
        assert chosen.stderr.endswith("other sessions keep their model\n")
        # Pi's default for new sessions is what it was
        assert pi_settings() == SETTINGS

        # a second session, started after: the working model, no request to Tinker
        second = agent("-p", "Run `echo in-b`.")
        assert second.stdout == "The command printed: in-b\n"
        assert stub.requests == []
        assert run("student").stdout == (
            f"student {INKLING}\n"
            f"Pi session {first.name}: the student (tinker/{INKLING})\n"
            "new Pi sessions start on fake/fake-1\n"
        )

        # the first session, continued: still the student (the request reaches
        # Tinker, with the key; the stand-in's answer is no stream pi can read)
        assert agent("--session", str(first), "-p", "Hello student.").stdout == ""
        (request,) = stub.requests
        assert request["authorization"] == "Bearer tml-e2e"
        assert request["body"]["model"] == INKLING

        # machine work from a shell: the first session goes back when it next runs
        assert run("work").stdout == "chatting with the working model fake/fake-1\n"
        back = agent("--session", str(first), "-p", "Run `echo back`.")
        assert back.stdout == "The command printed: back\n"
        assert back.stderr == "back to the working model fake/fake-1 (machine work)\n"
        assert len(stub.requests) == 1
    assert pi_settings() == SETTINGS
    assert run("student").stdout == (
        f"student {INKLING}\n"
        f"Pi session {first.name}: fake/fake-1\n"
        "new Pi sessions start on fake/fake-1\n"
    )


def test_no_key_no_switch_and_the_key_s_name_is_never_sent(
    agent: Pi, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent("-p", "Run `echo keyless`.")
    refused = agent("-c", "-p", f"/machine student {INKLING}", code=1)
    assert refused.stderr == (
        "Error: TINKER_API_KEY is not set: export TINKER_API_KEY=<your Tinker API "
        "key>, then start pi again\n"
    )
    assert not store_of(agent.cwd).exists()  # nothing was chosen
    assert [e for e in agent.entries() if e["type"] == "model_change"] == [
        agent.entries()[0]
    ]
    # Pi's own --model tinker/... without the key: Pi refuses to send the request
    with oai_stub.serve() as stub:
        monkeypatch.setenv("MACHINE_TINKER_OAI_URL", stub.url)
        agent.env["MACHINE_TINKER_OAI_URL"] = stub.url
        assert run("install", "pi").exit_code == 0
        direct = agent("--model", f"tinker/{INKLING}", "-p", "hello", code=1)
    assert stub.requests == []
    assert 'Failed to resolve API key for provider "tinker"' in (
        direct.stdout + direct.stderr
    )


def test_machine_edit_inside_pi_never_blocks(agent: Pi, run: Run) -> None:
    agent("-p", "Run `echo edit-me`.")
    tagged = agent("-c", "-p", "/good")
    row_id = said("good ID -> train: Run `echo edit-me`.", tagged.stderr)
    # print mode: no editor to open, the shell command instead, at once
    agent.env["EDITOR"] = "vim"
    printed = agent("-c", "-p", f"/machine edit {row_id}", code=1)
    assert printed.stderr == (
        "Error: /machine edit needs Pi's editor (pi with a UI); in a shell run: "
        f"machine edit {row_id}\n"
    )
    # with a UI (RPC mode): Pi's own editor; pi still answers while it is open
    rpc = Rpc(agent)
    rpc.send(type="prompt", message=f"/machine edit {row_id}")
    request = rpc.wait(
        lambda line: (
            line.get("type") == "extension_ui_request"
            and line.get("method") == "editor"
        )
    )
    assert request["title"] == (
        f"machine edit {row_id}: save to commit, or empty it to abandon"
    )
    rpc.send(id="state", type="get_state")
    rpc.wait(lambda line: line.get("id") == "state")
    row = json.loads(request["prefill"])
    row["note"] = "edited in pi's editor"
    rpc.send(type="extension_ui_response", id=request["id"], value=json.dumps(row))
    done = rpc.wait(lambda line: line.get("method") == "notify")
    head = git(store_of(agent.cwd), "rev-parse", "HEAD").strip()
    assert done["message"] == f"edited {row_id} ({head[:12]})"
    assert "Extension error" not in rpc.close()
    assert row_at_head(agent.cwd, row_id)["note"] == "edited in pi's editor"


def test_a_turn_observed_then_tagged_is_one_row(agent: Pi) -> None:
    first = agent("-p", "/machine auto on", "Run `echo once-only`.")
    observed = said("observed ID: Run `echo once-only`.", first.stderr)
    store = store_of(agent.cwd)
    before = git(store, "rev-list", "--count", "HEAD")
    tagged = agent("-c", "-p", "/good")
    assert tagged.stderr == (
        f"labeled {observed} good: observed -> traces: Run `echo once-only`.\n"
    )
    assert int(git(store, "rev-list", "--count", "HEAD")) == int(before) + 1
    files = git(store, "ls-tree", "-r", "--name-only", "HEAD").split()
    assert [f for f in files if f.startswith("rows/")] == [rows.row_path(observed)]
    assert row_at_head(agent.cwd, observed)["kind"] == "traces"


def test_a_fork_with_auto_off_is_linked_and_a_fork_of_it_quotes_the_task(
    agent: Pi, run: Run
) -> None:
    first = agent("-p", "/machine auto on", "Run `echo original-task`.")
    parent = said("observed ID: Run `echo original-task`.", first.stderr)
    assert run("auto", "off").exit_code == 0
    pi_path = os.pathsep.join([str(agent.bin.parent), agent.env["PATH"]])

    def fork(*words: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "machine_git", "fork", *words],
            cwd=agent.cwd,
            env={**agent.env, "PATH": pi_path},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done

    forked = fork("use", "printf")
    child = said(
        "observed ID: Redo this task with a correction. Task: Run `echo original-… "
        f"(fork of {parent})",
        forked.stderr,
    )
    assert row_at_head(agent.cwd, child)["source"]["parent_row"] == parent
    again = fork("say", "more")
    grandchild = said(
        "observed ID: Redo this task with a correction. Task: Run `echo original-… "
        f"(fork of {child})",
        again.stderr,
    )
    row = row_at_head(agent.cwd, grandchild)
    assert row["trajectory"][1]["content"] == (
        "Redo this task with a correction.\n\n"
        "Task:\nRun `echo original-task`.\n\n"
        "Previous answer:\nThe command printed: original-task\n\n"
        "Correction:\nsay more\n"
    )


def test_each_run_s_context_is_recorded_once_and_a_shell_tag_finds_it(
    agent: Pi, run: Run
) -> None:
    agent("-p", "Run `echo ctx-one`.")
    agent("-c", "-p", "Run `echo ctx-two`.")  # the same prompt and tools
    agent("-c", "--tools", "read,bash", "-p", "Run `echo ctx-three`.")
    entries = agent.entries()
    marks = [
        i
        for i, e in enumerate(entries)
        if e["type"] == "custom" and e["customType"] == "machine-context"
    ]
    users = [
        i
        for i, e in enumerate(entries)
        if e["type"] == "message" and e["message"]["role"] == "user"
    ]
    # one record before the first run, none for the unchanged second run, a
    # new one before the third (other tools): each right before its run
    assert marks == [users[0] - 1, users[2] - 1]
    first, third = (entries[i]["data"] for i in marks)
    assert [t["name"] for t in first["tools"]] == ["read", "bash", "edit", "write"]
    assert [t["name"] for t in third["tools"]] == ["read", "bash"]
    bash = third["tools"][1]
    assert bash["parameters"]["required"] == ["command"]
    assert "command" in bash["parameters"]["properties"]
    assert "bash" in third["systemPrompt"]

    # `machine good` from a shell, with no pi running: the row has the run's
    # context, stored once by its hash
    tagged = run("good", "--trace", "--json")
    assert tagged.exit_code == 0, tagged.stderr
    row = row_at_head(agent.cwd, orjson.loads(tagged.stdout)["id"])
    stored = git(store_of(agent.cwd), "show", f"HEAD:{context_path(row['context'])}")
    assert orjson.loads(stored) == {
        "system": third["systemPrompt"],
        "tools": third["tools"],
    }
    files = git(store_of(agent.cwd), "ls-tree", "-r", "--name-only", "HEAD").split()
    assert [f for f in files if f.startswith("context/")] == [
        context_path(row["context"])
    ]


def context_path(sha: str) -> str:
    return f"context/{sha[:2]}/{sha}.json"
