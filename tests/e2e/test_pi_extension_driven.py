"""The generated Pi extension, driven step by step with a stand-in ``pi``.

drive_pi_extension.mjs loads the extension ``machine install pi`` wrote the
way pi does (jiti, from the Pi install of install_pi.sh), plays events and
slash commands against it, and records every process it starts (awaited
before the next step) and every UI call. machine is the real CLI: the test's
isolated store, session files and a loopback stand-in for Tinker. This pins
what each command runs and what the footer shows after each step; the real
pi runs the same extension in test_pi_extension.py.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from machine_git.agents import install
from machine_git.core import paths
from machine_git.sessions import pi as pi_sessions
from tests.agents import conftest as oai_stub
from tests.conftest import Run
from tests.conftest import fixture_lines
from tests.conftest import git
from tests.conftest import install_session

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
MACHINE = [sys.executable, "-m", "machine_git"]
INKLING = "thinkingmachines/Inkling-Small:peft:262144"
STOP = {"messages": [{"role": "user"}, {"role": "assistant", "stopReason": "stop"}]}
ERROR = {"messages": [{"role": "user"}, {"role": "assistant", "stopReason": "error"}]}


def drive(
    pi: Path,
    project: Path,
    steps: list[dict[str, Any]],
    session: Path | None = None,
    editor: list[str | None] | None = None,
    live: dict[str, Any] | None = None,
) -> dict[str, Any]:
    (extension,) = [o.path for o in install.install_pi() if o.path.suffix == ".ts"]
    plan = project.parent / "steps.json"
    if live is None:
        live = {}
    if session is not None:
        live = {"file": str(session), "leaf": fixture_lines(session.stem)[-1]["id"]}
    plan.write_text(
        json.dumps({"session": live, "steps": steps, "editor": editor or []})
    )
    done = subprocess.run(
        [
            "node",
            str(HERE / "drive_pi_extension.mjs"),
            str(pi.parent.parent),  # <cache>/node_modules/.bin/pi -> node_modules
            str(extension),
            str(plan),
            str(project),
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.stdout, done.stderr  # the driver itself ran to the end
    value = json.loads(done.stdout)
    assert isinstance(value, dict)
    value["stderr"] = done.stderr  # what the extension said without a UI
    return value


def shown(step: dict[str, Any]) -> list[tuple[str, str]]:
    """What a step showed: ("status", text), ("info"/"error", message) and
    ("editor", title) for Pi's editor."""
    return [
        ("status", u["text"])
        if u["method"] == "setStatus"
        else ("editor", u["title"])
        if u["method"] == "editor"
        else (u["level"], u["message"])
        for u in step["shown"]
    ]


def counts(train: int = 0, traces: int = 0, rejected: int = 0) -> str:
    return f"train {train}, traces {traces}, rejected {rejected}, observed 0"


NUDGE = "machine: last turn untagged (/good, /bad) | "


def test_the_footer_counts_rows_and_nudges_until_the_turn_is_tagged(
    pi_bin: Path, project: Path
) -> None:
    session = install_session(project, "basic")
    leaf = fixture_lines("basic")[-1]["id"]
    store = paths.store_path(project)
    # Every machine commit keeps the counts cache itself; git does not.
    commit_outside = (
        "import subprocess as s\n"
        f"def g(*a): return s.run(['git', '-C', {str(store)!r}, *a], check=True, "
        "capture_output=True, text=True).stdout.strip()\n"
        "g('update-ref', 'refs/heads/main', g('commit-tree', '-p', 'main', "
        "'-m', 'made outside machine', 'main^{tree}'))\n"
    )
    driven = drive(
        pi_bin,
        project,
        [
            {"event": "session_start", "data": {"reason": "startup"}},
            {"event": "agent_end", "data": STOP},
            {"command": "good", "args": ""},
            {"event": "agent_end", "data": ERROR},
            {"event": "agent_end", "data": STOP},
            {"command": "bad", "args": "--trace too slow"},
            {"event": "agent_end", "data": STOP},
            # a commit made outside machine (the cache is behind), then git gc
            {"exec": [sys.executable, "-c", commit_outside]},
            {"exec": ["git", "-C", str(store), "pack-refs", "--all"]},
            {"command": "tagged", "args": "-n 1"},
            {"event": "agent_end", "data": STOP},
        ],
        session,
    )
    start, turn, good, failed, again, bad, third, tagged, last = [
        s for s in driven["steps"] if "shown" in s
    ]
    assert shown(start) == [("status", f"machine: {counts()}")]  # no store yet
    assert shown(turn) == [("status", NUDGE + counts())]
    (line,) = [text for level, text in shown(good) if level == "info"]
    assert line.startswith("good ") and line.endswith(
        " -> train: Now two-tools: read notes.md and list /nonexistent-dir."
    )
    assert shown(good)[-1] == ("status", f"machine: {counts(train=1)}")
    assert shown(failed) == [("status", f"machine: {counts(train=1)}")]
    assert shown(again) == [("status", NUDGE + counts(train=1))]
    # /bad --trace on the turn tagged good: its trace is rejected and its
    # train row moves with it (a turn carries one verdict)
    assert shown(bad)[-1] == ("status", f"machine: {counts(rejected=2)}")
    assert shown(third) == [("status", NUDGE + counts(rejected=2))]
    assert shown(tagged)[-1] == ("status", NUDGE + counts(rejected=2))
    assert shown(last) == [("status", NUDGE + counts(rejected=2))]
    # one process to find the store, one after the first tag (no cache yet),
    # one after the commit that left the cache behind; turns cost none
    data = [*MACHINE, "data", "--json"]
    where = ["--session", str(session), "--entry", leaf]
    assert driven["spawns"] == [
        data,
        [*MACHINE, "good", *where],
        data,
        [*MACHINE, "bad", *where, "--trace", "too", "slow"],
        [*MACHINE, "tagged", "-n", "1"],
        data,
    ]
    cache = json.loads((store / "machine" / "stats.json").read_text())
    assert cache["commit"] == git(store, "rev-parse", "HEAD").strip()


def test_no_footer_and_no_store_lookup_without_a_ui(
    pi_bin: Path, project: Path
) -> None:
    session = install_session(project, "basic")
    driven = drive(
        pi_bin,
        project,
        [
            {"ui": False},
            {"event": "session_start", "data": {"reason": "startup"}},
            {"event": "agent_end", "data": STOP},
        ],
        session,
    )
    leaf = fixture_lines("basic")[-1]["id"]
    assert driven["spawns"] == [
        [*MACHINE, "observe", "--if-auto", "--session", str(session), "--entry", leaf]
    ]
    assert [s["shown"] for s in driven["steps"][1:]] == [[], []]


def pi_default() -> dict[str, Any]:
    path = pi_sessions.agent_dir() / "settings.json"
    value = json.loads(path.read_text()) if path.exists() else {}
    assert isinstance(value, dict)
    return value


def test_tinker_commands_run_the_same_machine_commands(
    pi_bin: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = install_session(project, "basic")
    monkeypatch.setenv("TINKER_API_KEY", "tml-e2e")
    with oai_stub.serve() as stub:
        monkeypatch.setenv("MACHINE_TINKER_OAI_URL", stub.url)
        driven = drive(
            pi_bin,
            project,
            [
                {"command": "tinker", "args": f"use {INKLING}"},
                {"command": "tinker", "args": "work"},
                {"command": "tinker", "args": "models"},
                {"command": "tinker", "args": "sft --help"},
                {"command": "tinker", "args": ""},
                {"command": "tinker", "args": "inkling"},
            ],
            session,
        )
    assert driven["commands"] == ["good", "bad", "tagged", "train", "machine", "tinker"]
    at = ["--session", str(session)]
    assert driven["spawns"] == [
        [*MACHINE, "student", INKLING, "--work-model", "fake/fake-1", *at, "--json"],
        [*MACHINE, "work", "--work-model", "fake/fake-1", "--json"],
        [*MACHINE, "models"],
        [*MACHINE, "train", "sft", "--help"],
    ]
    assert driven["models"] == [f"tinker/{INKLING}", "fake/fake-1"]
    use, work, models, sft, bare, unknown = driven["steps"]
    assert shown(use) == [
        (
            "info",
            f"student {INKLING} (base)\n"
            f"this session now chats with tinker/{INKLING}; other sessions keep "
            "their model",
        )
    ]
    assert shown(work) == [("info", "chatting with the working model fake/fake-1")]
    assert shown(models) == [
        ("info", "Qwen/Qwen3-8B\nthinkingmachines/Inkling:peft:262144")
    ]
    ((level, text),) = shown(sft)
    assert level == "info" and text.startswith("Usage: machine train sft [OPTIONS]\n")
    usage = "usage: /tinker use MODEL | work | sft [OPTIONS] | models"
    assert shown(bare) == [("info", usage)]
    # Pi's UI puts "Error: " before it: the message carries no prefix of its own
    assert shown(unknown) == [("error", f'unknown /tinker command "inkling"; {usage}')]
    assert [r["path"] for r in stub.requests] == ["/oai/api/v1/models"]
    # Pi's default for new sessions was put back after each switch (Pi had
    # none: the model the session had)
    assert pi_default() == {"defaultProvider": "fake", "defaultModel": "fake-1"}


def test_the_student_needs_a_key_before_anything_happens(
    pi_bin: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = install_session(project, "basic")
    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    driven = drive(
        pi_bin,
        project,
        [{"command": "machine", "args": f"student {INKLING}"}],
        session,
    )
    (step,) = driven["steps"]
    assert shown(step) == [
        (
            "error",
            "TINKER_API_KEY is not set: export TINKER_API_KEY=<your Tinker API key>, "
            "then start pi again",
        )
    ]
    assert (driven["spawns"], driven["models"]) == ([], [])
    assert not paths.store_path(project).exists()


def test_a_session_machine_switched_follows_machine_work_from_a_shell(
    pi_bin: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = install_session(project, "basic")
    monkeypatch.setenv("TINKER_API_KEY", "tml-e2e")
    work = [*MACHINE, "work"]
    driven = drive(
        pi_bin,
        project,
        [
            {"command": "machine", "args": f"student {INKLING}"},
            {"event": "before_agent_start", "data": {"prompt": "hi"}},  # stays
            {"exec": work},  # machine work, from a shell
            {"event": "before_agent_start", "data": {"prompt": "hi"}},  # goes back
            {"event": "before_agent_start", "data": {"prompt": "hi"}},  # no process
            # the user's own /model to Tinker is theirs: never undone
            {"setModel": f"tinker/{INKLING}"},
            {"event": "session_start", "data": {"reason": "resume"}},
        ],
        session,
    )
    assert driven["models"] == [f"tinker/{INKLING}", "fake/fake-1", f"tinker/{INKLING}"]
    student = [*MACHINE, "student", "--json"]
    # one process per prompt while on the student machine chose; none after
    # (the last one is the footer's, at session start)
    assert driven["spawns"][1:] == [student, student, [*MACHINE, "data", "--json"]]
    _, stays, back, quiet, resumed = [s for s in driven["steps"] if "shown" in s]
    assert shown(stays) == []
    assert shown(back) == [
        ("info", "back to the working model fake/fake-1 (machine work)")
    ]
    assert shown(quiet) == []
    assert shown(resumed) == [("status", f"machine: {counts()}")]


def test_errors_have_one_prefix(pi_bin: Path, project: Path, run: Run) -> None:
    run("auto", "on")  # a store to look the row up in
    steps: list[dict[str, Any]] = [
        {"command": "machine", "args": "label zzz good"},
        {"command": "tinker", "args": "inkling"},
    ]
    driven = drive(pi_bin, project, [*steps, {"ui": False}, *steps])
    usage = "usage: /tinker use MODEL | work | sft [OPTIONS] | models"
    # Pi's UI writes "Error: " before an error notification itself
    assert [shown(s) for s in driven["steps"][:2]] == [
        [("error", "bad row id 'zzz': expected 1 to 12 hex characters")],
        [("error", f'unknown /tinker command "inkling"; {usage}')],
    ]
    # without a UI (pi -p) the lines read like machine's own: one "Error: "
    assert driven["stderr"] == (
        "Error: bad row id 'zzz': expected 1 to 12 hex characters\n"
        f'Error: unknown /tinker command "inkling"; {usage}\n'
    )


def test_nothing_machine_runs_can_hold_pi(
    pi_bin: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = install_session(project, "basic")
    # a Tinker that accepts the connection and never answers: machine ask waits
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        monkeypatch.setenv("TINKER_API_KEY", "tml-e2e")
        monkeypatch.setenv("MACHINE_TINKER_OAI_URL", f"http://127.0.0.1:{port}/v1")
        driven = drive(
            pi_bin,
            project,
            [
                {"run": ["ask", "--student", INKLING, "hi"], "limit": 1},
                {"command": "train", "args": "run --yes"},
                {"command": "machine", "args": "train run"},
                {"command": "tagged", "args": ""},
            ],
            session,
        )
    ((ran),) = driven["results"]
    assert ran["code"] == 124
    assert ran["stderr"].endswith(
        "machine ask --student took longer than 1 s and was stopped; run it in a shell"
    )
    assert ran["seconds"] < 10  # stopped, not waited out (machine ask waits 30 s)
    _, train, machine_train, _ = driven["steps"]
    refused = (
        "machine train run trains for a long time and would hold pi; run it in a "
        "shell: machine train run"
    )
    assert shown(train) == [("error", f"{refused} --yes")]
    assert shown(machine_train) == [("error", refused)]
    # the only processes: the stopped ask and /tagged; each in a session of its
    # own (no terminal), stdin not a TTY, no pager and no editor
    assert [argv[3] for argv in driven["spawns"]] == ["ask", "tagged"]
    assert (
        driven["spawnOptions"]
        == [
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
        * 2
    )


def test_machine_edit_uses_pi_s_editor_or_says_what_to_run(
    pi_bin: Path, project: Path, run: Run
) -> None:
    session = install_session(project, "basic")
    row_id = json.loads(run("good", "--json").stdout)["id"]
    row = json.loads(run("show", row_id).stdout)
    broken = json.dumps({**row, "kind": "nonsense"})
    fixed = json.dumps({**row, "note": "edited in pi"})
    driven = drive(
        pi_bin,
        project,
        [
            {"command": "machine", "args": f"edit {row_id[:6]}"},
            {"command": "machine", "args": f"edit {row_id[:6]}"},
            {"ui": False},
            {"command": "machine", "args": f"edit {row_id[:6]}"},
        ],
        session,
        editor=[broken, fixed, None],
    )
    edited, abandoned, printed = [s for s in driven["steps"] if "shown" in s]
    head = git(paths.store_path(project), "rev-parse", "HEAD").strip()
    title = f"machine edit {row_id[:6]}"
    assert shown(edited) == [
        ("editor", f"{title}: save to commit, or empty it to abandon"),
        (
            "editor",
            f"{title}: the edited row is invalid: $.kind: unknown kind 'nonsense' "
            "(expected one of train, traces, rejected, observed); fix it, or "
            "empty it to abandon",
        ),
        ("info", f"edited {row_id} ({head[:12]})"),
    ]
    # the second editor opened on the text as edited, to fix
    assert [u["prefill"] for u in edited["shown"][:2]] == [
        run("show", f"{row_id}", "--at", "HEAD~1").stdout,
        broken,
    ]
    assert json.loads(run("show", row_id).stdout)["note"] == "edited in pi"
    assert shown(abandoned)[-1] == ("info", "edit abandoned; nothing changed")
    assert shown(printed) == []  # print mode: stderr, below
    show = [*MACHINE, "show", row_id[:6]]
    edit = [*MACHINE, "edit", row_id[:6], "--from", "-"]
    assert driven["spawns"] == [show, edit, edit, show]
    assert driven["spawnOptions"][1]["stdin"] == "pipe"
    assert driven["stderr"] == (
        "Error: /machine edit needs Pi's editor (pi with a UI); in a shell run: "
        f"machine edit {row_id[:6]}\n"
    )


def test_tagging_before_the_first_answer_says_there_is_no_turn(
    pi_bin: Path, project: Path, tmp_path: Path
) -> None:
    not_yet = tmp_path / "not-written-yet.jsonl"  # pi writes it with the first answer
    driven = drive(
        pi_bin,
        project,
        [{"command": "good", "args": ""}, {"command": "machine", "args": "bad"}],
        live={"file": str(not_yet), "leaf": "a1b2c3d4", "answered": False},
    )
    assert [shown(s) for s in driven["steps"]] == [
        [("error", "no turn to tag yet: ask the agent something first")],
        [("error", "no turn to tag yet: ask the agent something first")],
    ]
    assert driven["spawns"] == []


def test_completions_end_once_a_command_is_typed_in_full(
    pi_bin: Path, project: Path
) -> None:
    driven = drive(
        pi_bin,
        project,
        [
            {"complete": "machine", "prefix": "d"},
            {"complete": "machine", "prefix": "data"},
            {"complete": "machine", "prefix": "observe"},
            {"complete": "machine", "prefix": "observ"},
            {"complete": "machine", "prefix": "data --json"},
            {"complete": "tinker", "prefix": "use"},
        ],
    )
    assert driven["results"] == [
        [{"value": "data", "label": "data"}, {"value": "diff", "label": "diff"}],
        None,
        None,
        [
            {"value": "observed", "label": "observed"},
            {"value": "observe", "label": "observe"},
        ],
        None,
        None,
    ]


def test_the_nudge_survives_reload(pi_bin: Path, project: Path) -> None:
    session = install_session(project, "basic")
    driven = drive(
        pi_bin,
        project,
        [
            {"event": "session_start", "data": {"reason": "startup"}},
            {"event": "agent_end", "data": STOP},
            {"reload": True},
            {"event": "session_start", "data": {"reason": "reload"}},
            {"command": "good", "args": ""},
            {"reload": True},
            {"event": "session_start", "data": {"reason": "reload"}},
        ],
        session,
    )
    _, turn, reloaded, good, clean = [s for s in driven["steps"] if "shown" in s]
    assert shown(turn) == [("status", NUDGE + counts())]
    assert shown(reloaded) == [("status", NUDGE + counts())]
    assert shown(good)[-1] == ("status", f"machine: {counts(train=1)}")
    assert shown(clean) == [("status", f"machine: {counts(train=1)}")]


def test_the_extension_offers_machine_s_skills(pi_bin: Path, project: Path) -> None:
    driven = drive(
        pi_bin,
        project,
        [{"event": "resources_discover", "data": {"reason": "startup"}}],
    )
    assert driven["results"] == [{"skillPaths": [str(install.skills_dir())]}]


def test_a_cache_that_cannot_be_written_costs_one_process_per_commit(
    pi_bin: Path, project: Path, run: Run
) -> None:
    run("auto", "on")
    cache = paths.store_path(project) / "machine" / "stats.json"
    cache.mkdir()  # stats cannot write its cache: counts stay unknown
    driven = drive(
        pi_bin,
        project,
        [
            {"event": "session_start", "data": {"reason": "startup"}},
            {"event": "agent_end", "data": STOP},
            {"event": "agent_end", "data": STOP},
        ],
    )
    assert driven["spawns"] == [[*MACHINE, "data", "--json"]] * 2
    nudge = ("status", "machine: last turn untagged (/good, /bad)")
    assert [shown(s) for s in driven["steps"]] == [
        [("status", "machine")],
        [nudge, nudge],  # shown, then shown again after the one refresh
        [nudge],
    ]
