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
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from machine_git import paths
from machine_git.agents import install
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
    pi: Path, project: Path, steps: list[dict[str, Any]], session: Path | None = None
) -> dict[str, Any]:
    (extension,) = [o.path for o in install.install_pi() if o.path.suffix == ".ts"]
    plan = project.parent / "steps.json"
    live = {}
    if session is not None:
        live = {"file": str(session), "leaf": fixture_lines(session.stem)[-1]["id"]}
    plan.write_text(json.dumps({"session": live, "steps": steps}))
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
    assert done.returncode == 0, done.stderr
    value = json.loads(done.stdout)
    assert isinstance(value, dict)
    return value


def shown(step: dict[str, Any]) -> list[tuple[str, str]]:
    """What a step showed: ("status", text) and ("info"/"error", message)."""
    return [
        ("status", u["text"])
        if u["method"] == "setStatus"
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
    assert shown(bad)[-1] == ("status", f"machine: {counts(train=1, rejected=1)}")
    assert shown(third) == [("status", NUDGE + counts(train=1, rejected=1))]
    assert shown(tagged)[-1] == ("status", NUDGE + counts(train=1, rejected=1))
    assert shown(last) == [("status", NUDGE + counts(train=1, rejected=1))]
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


def test_tinker_commands_run_the_same_machine_commands(
    pi_bin: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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
        )
    assert driven["commands"] == ["good", "bad", "tagged", "train", "machine", "tinker"]
    assert driven["spawns"] == [
        [*MACHINE, "student", INKLING, "--json", "--work-model", "fake/fake-1"],
        [*MACHINE, "work", "--json"],
        [*MACHINE, "models"],
        [*MACHINE, "train", "sft", "--help"],
    ]
    assert driven["models"] == [f"tinker/{INKLING}", "fake/fake-1"]
    use, work, models, sft, bare, unknown = driven["steps"]
    assert shown(use) == [
        ("info", f"student {INKLING} (base); in Pi: /model, provider tinker")
    ]
    assert shown(work) == [("info", "chatting with the working model fake/fake-1")]
    assert shown(models) == [
        ("info", "Qwen/Qwen3-8B\nthinkingmachines/Inkling:peft:262144")
    ]
    ((level, text),) = shown(sft)
    assert level == "info" and text.startswith("Usage: machine train sft [OPTIONS]\n")
    usage = "usage: /tinker use MODEL | work | sft [OPTIONS] | models"
    assert shown(bare) == [("info", usage)]
    assert shown(unknown) == [
        ("error", f'machine: unknown /tinker command "inkling"; {usage}')
    ]
    assert [r["path"] for r in stub.requests] == ["/oai/api/v1/models"]


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
