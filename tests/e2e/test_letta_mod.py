"""The generated Letta Code mods, driven by node with a stand-in ``letta`` object.

Letta Code with mods (>= 0.30) does not install here; drive_letta_mod.mjs
loads the mods ``machine install letta`` writes the way a TypeScript host
does (jiti, from the Pi install of install_pi.sh) and activates them against
a stand-in that follows Letta Code's mod API as its sources define it
(commands, providers with listModels, events, panels, the conversation
handle). machine is the real CLI: the test's isolated store and a loopback
stand-in for Tinker's OpenAI-compatible endpoint. A recorder stands in for
machine where the exact argv and the history file matter, and a machine that
never exits shows that every process the mod starts is bounded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from machine_git.agents import install
from machine_git.core import paths
from machine_git.rows import rows
from tests.agents import conftest as oai_stub
from tests.conftest import FIXTURES
from tests.conftest import Run
from tests.conftest import git

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
HISTORY = FIXTURES / "letta" / "api-history.json"
MACHINE = [sys.executable, "-m", "machine_git"]
INKLING = "thinkingmachines/Inkling-Small:peft:262144"
CHECKPOINT = "tinker://run-1/sampler_weights/000080"
WORK = "anthropic/claude-e2e"
ANSWER = "Make it deterministic and run the tests."
NO_KEY = (
    "TINKER_API_KEY is not set: export TINKER_API_KEY=<your Tinker API key>, "
    "then start Letta Code again"
)
RECORDER = """\
import json, pathlib, sys
args = sys.argv[1:]
history = None
if "--session" in args:
    path = pathlib.Path(args[args.index("--session") + 1])
    history = json.loads(path.read_text())
    mode = oct(path.stat().st_mode & 0o777)
else:
    mode = None
pathlib.Path(sys.argv[0]).with_suffix(".out").write_text(
    json.dumps({"args": args, "history": history, "mode": mode})
)
print("recorded", " ".join(args))
"""
# A machine that never exits, with a child of its own; both write their pids.
NEVER = """\
import os, pathlib, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with pathlib.Path(sys.argv[0]).with_suffix(".pids").open("a") as pids:
    pids.write(f"{os.getpid()} {child.pid} ")
time.sleep(600)
"""


def installed() -> list[Path]:
    """``machine install letta``: the commands mod, then the provider mod."""
    done = install.install_letta()
    return [o.path for o in done if o.path.suffix == ".ts"]


def drive(
    pi: Path,
    project: Path,
    steps: list[dict[str, Any]],
    mods: list[Path] | None = None,
    **plan: Any,
) -> dict[str, Any]:
    plan_file = project.parent / "plan.json"
    plan_file.write_text(
        json.dumps(
            {
                "mods": [str(m) for m in (mods or installed())],
                "history": str(HISTORY),
                "model": {
                    "id": WORK,
                    "displayName": "Claude e2e",
                    "provider": "anthropic",
                    "reasoningEffort": None,
                },
                "steps": steps,
                **plan,
            }
        )
    )
    done = subprocess.run(
        [
            "node",
            str(HERE / "drive_letta_mod.mjs"),
            str(pi.parent.parent),  # <cache>/node_modules/.bin/pi -> node_modules
            str(plan_file),
            str(project),
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    value = json.loads(done.stdout)
    assert isinstance(value, dict)
    return value


def with_machine(argv: list[str], tmp_path: Path) -> Path:
    """The installed commands mod, rewritten to run ``argv`` as machine."""
    mod = installed()[0]
    text = mod.read_text().replace(json.dumps(MACHINE), json.dumps(argv))
    target = tmp_path / "machine.ts"
    target.write_text(text)
    return target


def recording_mod(tmp_path: Path) -> tuple[Path, Path]:
    recorder = tmp_path / "recorder.py"
    recorder.write_text(RECORDER)
    return with_machine(
        [sys.executable, str(recorder)], tmp_path
    ), recorder.with_suffix(".out")


def output(text: str, success: bool = True) -> dict[str, Any]:
    return {"type": "output", "output": text, "success": success}


def panel(step: dict[str, Any]) -> list[str]:
    (shown,) = step["panels"]
    assert shown["id"] == "machine"
    lines = shown["lines"]
    assert isinstance(lines, list)
    return lines


def counts(
    train: int = 0, traces: int = 0, rejected: int = 0, observed: int = 0
) -> str:
    return f"train {train}, traces {traces}, rejected {rejected}, observed {observed}"


NUDGE = "machine: last turn untagged (/good, /bad) | "


# -- commands -----------------------------------------------------------------------


def test_good_passes_the_history_as_a_private_file(
    pi_bin: Path, project: Path, tmp_path: Path
) -> None:
    mod, out = recording_mod(tmp_path)
    driven = drive(
        pi_bin,
        project,
        [{"command": "good", "args": '--as "It is flaky." timing'}],
        mods=[mod],
    )
    assert driven["registered"]["commands"] == [
        "good",
        "bad",
        "tagged",
        "machine",
        "train",
    ]
    # every command, event and panel goes when the mod is disposed (/reload)
    assert driven["left"] == {"commands": 0, "providers": 0, "events": 0, "panels": 0}
    (step,) = driven["steps"]
    assert step["conversation"] == [{"getHistory": {"limit": 500, "order": "asc"}}]
    record = json.loads(out.read_text())
    session = record["args"][4]
    assert record["args"] == [
        "good",
        "--host",
        "letta",
        "--session",
        session,
        "--as",
        "It is flaky.",
        "timing",
    ]
    assert Path(session).name == "conv-e2e.json"
    assert not Path(session).parent.exists()  # deleted after the command
    assert record["history"] == json.loads(HISTORY.read_text())
    assert record["mode"] == "0o600"
    assert step["result"] == output(
        f"recorded good --host letta --session {session} --as It is flaky. timing"
    )


def test_machine_subcommands_get_the_history_only_when_they_read_it(
    pi_bin: Path, project: Path, tmp_path: Path
) -> None:
    mod, out = recording_mod(tmp_path)
    driven = drive(
        pi_bin,
        project,
        [
            {"command": "machine", "args": "fork 'use Julia'"},
            {"exec": ["cp", str(out), str(tmp_path / "fork.out")]},
            {"command": "machine", "args": "observe"},
            {"command": "bad", "args": '"oops'},
        ],
        mods=[mod],
    )
    fork, _, observe, unbalanced = driven["steps"]
    assert json.loads((tmp_path / "fork.out").read_text())["args"] == [
        "fork",
        "use Julia",
    ]
    assert fork["conversation"] == []
    assert json.loads(out.read_text())["args"][:3] == ["observe", "--host", "letta"]
    assert observe["conversation"] == [{"getHistory": {"limit": 500, "order": "asc"}}]
    # the mod's own errors carry the one prefix machine's do
    assert unbalanced["result"] == output('Error: unbalanced " in: "oops', False)
    assert unbalanced["spawns"] == []


def test_the_installed_mod_runs_this_machine(pi_bin: Path, project: Path) -> None:
    driven = drive(
        pi_bin,
        project,
        [
            {"command": "tagged", "args": ""},
            {"command": "good", "args": "timing"},
            {"command": "machine", "args": "observe"},
            {"command": "machine", "args": "auto status"},
            {"command": "machine", "args": "label nope good"},
            {"command": "machine", "args": ""},
        ],
    )
    tagged, good, observed, status, failed, bare = (
        s["result"] for s in driven["steps"]
    )
    assert tagged == output("nothing tagged yet")
    # the history file the mod writes is read by machine's Letta API reader
    assert good["success"] is True
    (line,) = good["output"].splitlines()
    assert line.startswith("good ") and line.endswith(f" -> train: {ANSWER}")
    row_id = line.split()[1]
    row = json.loads(
        git(paths.store_path(project), "show", f"HEAD:{rows.row_path(row_id)}")
    )
    assert (row["source"]["host"], row["note"]) == ("letta", "timing")
    # observe reads the same history: the turn is in the dataset already, once
    assert observed["output"] == f"already recorded {row_id} as train; nothing changed"
    assert status["output"] == f"auto-capture off for {project}"
    # machine's error, with its one "Error: "
    assert failed == output(
        "Error: bad row id 'nope': expected 1 to 12 hex characters", False
    )
    # a bare /machine: machine's help, then what differs inside Letta Code
    help_text, letta_help = bare["output"].split("\n\nIn Letta Code:\n")
    assert help_text.startswith("Usage: machine [OPTIONS] COMMAND [ARGS]...")
    assert "/machine edit ID         not here (the mod API has no editor)" in letta_help


def test_a_history_the_backend_cannot_give_is_one_line(
    pi_bin: Path, project: Path, run: Run
) -> None:
    run("auto", "on")
    end = {
        "event": "turn_end",
        "data": {"conversationId": "conv-e2e", "stopReason": "end_turn"},
    }
    driven = drive(
        pi_bin,
        project,
        [{"command": "good", "args": ""}, end],
        historyError="Conversation conv-e2e not found",
    )
    good, turn = driven["steps"]
    assert good["result"] == output("Error: Conversation conv-e2e not found", False)
    assert good["spawns"] == []
    # a failed observation never fails the turn: a diagnostic, and the footer
    assert turn["result"] == [None]
    message = "Error: cannot read the conversation: Conversation conv-e2e not found"
    assert turn["diagnostics"] == [{"message": message, "severity": "warning"}]
    assert panel(turn) == [NUDGE + counts(), message]


# -- the Tinker provider ---------------------------------------------------------------


def test_the_provider_publishes_its_catalog_from_list_models(
    pi_bin: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TINKER_API_KEY", "tml-e2e")
    with oai_stub.serve() as stub:
        monkeypatch.setenv("MACHINE_TINKER_OAI_URL", stub.url)
        mods = installed()
        install.add_letta_model(CHECKPOINT)  # what machine student does
        driven = drive(pi_bin, project, [{"listModels": {}}], mods=mods)
        requests = list(stub.requests)
    # activation used nothing the API removed (setStatus and the like)
    assert driven["registered"]["diagnostics"] == []
    assert driven["registered"]["events"] == [
        "conversation_open",
        "turn_start",
        "turn_end",
        "compact_start",
    ]
    assert driven["registered"]["panels"] == [{"id": "machine", "order": -1}]
    config = driven["registered"]["providers"]["tinker"]
    assert config == {
        "name": "Tinker (machine)",
        "description": "Tinker's OpenAI-compatible chat endpoint (machine's students)",
        "api": "openai-completions",
        "baseUrl": stub.url,
        "connect": False,
        "listModels": "function",
        "apiKey": "TINKER_API_KEY",  # the variable's name: it is set
    }
    ((step),) = driven["steps"]
    models = step["result"]["models"]
    # base models, then the students machine offered, then what Tinker lists
    assert [m["id"] for m in models] == [
        INKLING,
        "thinkingmachines/Inkling:peft:262144",
        CHECKPOINT,
        "Qwen/Qwen3-8B",
    ]
    assert models[0] == {
        "id": INKLING,
        "name": "Inkling-Small (Tinker)",
        "reasoning": False,
        "input": ["text"],
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
        "contextWindow": 262144,
        "maxTokens": 8192,
        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
    }
    assert (models[2]["name"], models[2]["contextWindow"]) == (
        "checkpoint 000080 (Tinker)",
        32768,
    )
    assert requests == [
        {"path": "/oai/api/v1/models", "authorization": "Bearer tml-e2e", "body": None}
    ]


def test_without_a_key_the_provider_sends_nothing(
    pi_bin: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    with oai_stub.serve() as stub:
        monkeypatch.setenv("MACHINE_TINKER_OAI_URL", stub.url)
        driven = drive(pi_bin, project, [{"listModels": {}}])
        requests = list(stub.requests)
    config = driven["registered"]["providers"]["tinker"]
    # no apiKey at all: Letta Code would send a bare variable name as the key
    assert "apiKey" not in config
    assert config["connect"] is False
    assert driven["steps"][0]["result"] == {"name": "tinker", "error": NO_KEY}
    assert requests == []


def test_an_unreachable_tinker_is_said_in_one_line(
    pi_bin: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TINKER_API_KEY", "tml-e2e")
    url = oai_stub.closed_port_url()
    monkeypatch.setenv("MACHINE_TINKER_OAI_URL", url)
    driven = drive(pi_bin, project, [{"listModels": {}}])
    error = driven["steps"][0]["result"]["error"]
    assert error.startswith(f"Tinker is unreachable at {url}: ")
    assert "\n" not in error


# -- the student -----------------------------------------------------------------------


def test_machine_student_switches_this_conversation_and_work_switches_back(
    pi_bin: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TINKER_API_KEY", "tml-e2e")
    driven = drive(
        pi_bin,
        project,
        [
            {"command": "machine", "args": f"student {CHECKPOINT}"},
            {"command": "machine", "args": "student"},
            {"command": "machine", "args": "work"},
        ],
    )
    chosen, shown, back = driven["steps"]
    assert chosen["spawns"] == [
        [*MACHINE, "student", CHECKPOINT, "--work-model", WORK, "--json"]
    ]
    # this conversation only (scope "conversation"), to the provider mod's model
    assert chosen["conversation"] == [
        {"updateLlmConfig": {"model": f"tinker/{CHECKPOINT}", "scope": "conversation"}}
    ]
    assert chosen["result"] == output(
        f"student {CHECKPOINT} (checkpoint)\n"
        f"this conversation now chats with tinker/{CHECKPOINT}; other conversations "
        "keep their model"
    )
    # the catalog the provider mod publishes now offers it
    offered = install.letta_offered_path()
    assert json.loads(offered.read_text()) == [CHECKPOINT]
    assert shown["result"] == output(
        f"student {CHECKPOINT}\nthis conversation: the student (tinker/{CHECKPOINT})"
    )
    assert back["spawns"] == [[*MACHINE, "work", "--work-model", WORK, "--json"]]
    assert back["conversation"] == [
        {"updateLlmConfig": {"model": WORK, "scope": "conversation"}}
    ]
    assert back["result"] == output(
        f"chatting with the working model {WORK}\n"
        f"this conversation chats with {WORK} again"
    )
    assert driven["model"]["id"] == WORK


def test_the_student_needs_a_key_before_anything_happens(
    pi_bin: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    driven = drive(
        pi_bin, project, [{"command": "machine", "args": f"student {INKLING}"}]
    )
    (step,) = driven["steps"]
    assert step["result"] == output(f"Error: {NO_KEY}", False)
    assert (step["spawns"], step["conversation"]) == ([], [])
    assert not paths.store_path(project).exists()


def test_a_switch_letta_refuses_is_said(
    pi_bin: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TINKER_API_KEY", "tml-e2e")
    driven = drive(
        pi_bin,
        project,
        [{"command": "machine", "args": f"student {INKLING}"}],
        refuseModels=[f"tinker/{INKLING}"],
    )
    assert driven["steps"][0]["result"] == output(
        f"Error: student {INKLING} (base)\n"
        f"cannot switch this conversation to tinker/{INKLING}: "
        f"Model tinker/{INKLING} not found",
        False,
    )
    assert driven["model"]["id"] == WORK


def test_a_conversation_the_mod_switched_follows_machine_work_from_a_shell(
    pi_bin: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TINKER_API_KEY", "tml-e2e")
    turn = {"event": "turn_start", "data": {"conversationId": "conv-e2e", "input": []}}
    driven = drive(
        pi_bin,
        project,
        [
            {"command": "machine", "args": f"student {INKLING}"},
            turn,  # stays
            {"exec": [*MACHINE, "work"]},  # machine work, from a shell
            turn,  # goes back
            turn,  # no process
            # the user's own /model to Tinker is theirs: never undone
            {
                "model": {
                    "id": f"tinker/{INKLING}",
                    "displayName": "Inkling",
                    "provider": "tinker",
                    "reasoningEffort": None,
                }
            },
            turn,
        ],
    )
    _, stays, _, back, quiet, _, own = driven["steps"]
    student = [*MACHINE, "student", "--json"]
    assert (stays["spawns"], stays["conversation"]) == ([student], [])
    assert stays["result"] == [None]  # the input is left as it is
    assert back["spawns"] == [student]
    assert back["conversation"] == [
        {"updateLlmConfig": {"model": WORK, "scope": "conversation"}}
    ]
    assert panel(back)[-1] == f"back to the working model {WORK} (machine work)"
    assert (quiet["spawns"], own["spawns"], own["conversation"]) == ([], [], [])
    assert driven["model"]["id"] == f"tinker/{INKLING}"


# -- nothing blocks Letta Code ---------------------------------------------------------


def test_a_machine_that_never_exits_is_stopped(
    pi_bin: Path, project: Path, tmp_path: Path
) -> None:
    never = tmp_path / "never.py"
    never.write_text(NEVER)
    mod = with_machine([sys.executable, str(never)], tmp_path)
    driven = drive(
        pi_bin,
        project,
        [
            {"run": ["data"], "limit": 1},
            {"run": ["tagged"], "reloadAfter": 0.5},  # /reload while it runs
            {"run": ["tagged"]},  # after: nothing starts
        ],
        mods=[mod],
    )
    step, reloaded, after = driven["steps"]
    assert reloaded["result"]["code"] == 124
    assert reloaded["result"]["stderr"] == (
        "machine tagged was stopped: Letta Code reloaded or quit"
    )
    assert reloaded["seconds"] < 10
    assert (after["spawns"], after["result"]["stderr"]) == (
        [],
        "machine tagged was not started: Letta Code reloaded or quit",
    )
    assert step["result"]["code"] == 124
    assert step["result"]["stderr"] == (
        "machine data took longer than 1 s and was stopped; run it in a shell"
    )
    assert step["seconds"] < 10  # stopped, not waited out (it sleeps 600 s)
    # each and the child it started are gone: the whole process group was stopped
    pids = [int(p) for p in never.with_suffix(".pids").read_text().split()]
    assert len(pids) == 4
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids)
    # a session of its own (no terminal), stdin not a TTY, no pager, no editor
    assert driven["spawnOptions"] == 2 * [
        {
            "stdin": "ignore",
            "detached": True,
            "env": {
                "PAGER": "cat",
                "GIT_PAGER": "cat",
                "EDITOR": "false",
                "VISUAL": "false",
                "GIT_EDITOR": "false",
                "GIT_TERMINAL_PROMPT": "0",
            },
        }
    ]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its parent) counts as gone
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_edit_and_train_run_say_what_to_run_in_a_shell(
    pi_bin: Path, project: Path
) -> None:
    driven = drive(
        pi_bin,
        project,
        [
            {"command": "machine", "args": "edit 1a2b3c"},
            {"command": "train", "args": "run --yes"},
            {"command": "machine", "args": "train run"},
        ],
    )
    edit, train, machine_train = driven["steps"]
    assert edit["result"] == output(
        "Error: /machine edit needs an editor and Letta Code's mod API has none; "
        "in a shell run: machine edit 1a2b3c",
        False,
    )
    refused = (
        "Error: machine train run trains for a long time and would hold Letta Code; "
        "run it in a shell: machine train run"
    )
    assert train["result"] == output(f"{refused} --yes", False)
    assert machine_train["result"] == output(refused, False)
    assert [s["spawns"] for s in driven["steps"]] == [[], [], []]


# -- the footer and observed runs ------------------------------------------------------


def test_the_footer_and_auto_observation_follow_the_turns(
    pi_bin: Path, project: Path, run: Run
) -> None:
    end = {
        "event": "turn_end",
        "data": {"conversationId": "conv-e2e", "stopReason": "end_turn"},
    }
    failed = {
        "event": "turn_end",
        "data": {"conversationId": "conv-e2e", "stopReason": "error"},
    }
    approval = {
        "event": "turn_end",
        "data": {"conversationId": "conv-e2e", "stopReason": "requires_approval"},
    }
    compact = {
        "event": "compact_start",
        "data": {"conversationId": "conv-e2e", "trigger": "context_window_limit"},
    }
    open_ = {
        "event": "conversation_open",
        "data": {"reason": "startup", "conversationId": "conv-e2e"},
    }
    driven = drive(
        pi_bin,
        project,
        [
            open_,
            end,  # auto off: known, no process
            {"exec": [*MACHINE, "auto", "on"]},  # from a shell
            end,  # the branch moved: look again, then observe
            failed,
            compact,  # observed already: nothing new
            {"command": "good", "args": ""},
            approval,
        ],
    )
    opened, off, _, observed, error, compacted, good, waiting = driven["steps"]
    data = [*MACHINE, "data", "--json"]
    assert opened["spawns"] == [data]
    assert panel(opened) == [f"machine: {counts()}"]
    assert (off["spawns"], panel(off)) == ([], [NUDGE + counts()])
    assert off["result"] == [None]  # turn_end never continues the turn
    (session,) = [
        a[a.index("--session") + 1] for a in observed["spawns"] if "--session" in a
    ]
    assert observed["spawns"] == [
        data,
        [*MACHINE, "observe", "--host", "letta", "--session", session, "--if-auto"],
    ]
    (row_id,) = [
        line.split()[1].rstrip(":")
        for line in panel(observed)
        if line.startswith("observed ")
    ]
    assert panel(observed) == [
        NUDGE + counts(observed=1),
        f"observed {row_id}: {ANSWER}",
    ]
    # a failed turn: no nudge, no observation, no process
    assert (error["spawns"], panel(error)) == ([], [f"machine: {counts(observed=1)}"])
    # before compaction (local backend): the branch moved (the observation), so
    # one look, then observe, which finds the run recorded and says nothing
    assert [a[3] for a in compacted["spawns"]] == ["data", "observe"]
    assert panel(compacted) == [f"machine: {counts(observed=1)}"]
    # /good on the observed turn labels that row: one row, one verdict
    assert good["result"] == output(
        f"labeled {row_id} good: observed -> traces: {ANSWER}"
    )
    assert panel(good) == [f"machine: {counts(traces=1)}"]
    # a turn waiting for an approval is not over
    assert (waiting["spawns"], panel(waiting)) == ([], panel(good))
    assert json.loads(run("observed", "--json").stdout) == []


def test_without_panels_no_store_lookup_until_a_turn_ends(
    pi_bin: Path, project: Path
) -> None:
    end = {
        "event": "turn_end",
        "data": {"conversationId": "conv-e2e", "stopReason": "end_turn"},
    }
    driven = drive(
        pi_bin,
        project,
        [{"event": "conversation_open", "data": {"reason": "startup"}}, end, end],
        capabilities={"ui": {"panels": False}},
    )
    opened, first, second = driven["steps"]
    assert driven["registered"]["panels"] == []
    assert opened["spawns"] == []
    # auto off: one look at the store, then nothing while its branch stands
    assert first["spawns"] == [[*MACHINE, "data", "--json"]]
    assert second["spawns"] == []
    assert [s["panels"] for s in driven["steps"]] == [[], [], []]
