"""The command Codex runs for each prompt and each finished turn, run as Codex does.

Codex starts the hook with ``sh -c <command>`` in the session's folder, the
prompt as JSON on stdin; ``notify`` with the turn as its last argument.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from machine_git.agents import codex_hook
from machine_git.agents import codex_install
from machine_git.core import paths
from machine_git.rows import rows
from machine_git.sessions.codex.find import has_prompt
from tests.conftest import Run
from tests.conftest import git

FIXTURE = next(
    (Path(__file__).parents[1] / "fixtures" / "codex" / "sessions").rglob(
        "rollout-*.jsonl"
    )
)
MACHINE = [sys.executable, "-m", "machine_git"]


def hook(
    project: Path, payload: Mapping[str, object]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", "-c", codex_install.hook_command()],
        cwd=project,
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("prompt", "argv"),
    [
        ("Fix the bug in /good/path.py", None),
        ("/goodness", None),
        ("please /good", None),
        ("/good", [*MACHINE, "good", "--host", "codex", "--session", "R"]),
        (
            "  /bad --note 'wrong file'\n",
            [
                *MACHINE,
                "bad",
                "--host",
                "codex",
                "--session",
                "R",
                "--note",
                "wrong file",
            ],
        ),
        ("/machine tagged -n 3", [*MACHINE, "tagged", "-n", "3"]),
    ],
)
def test_which_prompts_run_machine(prompt: str, argv: list[str] | None) -> None:
    assert codex_hook.command_for(prompt, "R") == argv


def test_an_ordinary_prompt_passes_untouched(project: Path) -> None:
    done = hook(project, {"prompt": "Run the tests.", "cwd": str(project)})
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_good_typed_as_the_prompt_tags_the_turn_before_it(
    project: Path, run: Run
) -> None:
    rollout = project.parent / FIXTURE.name
    shutil.copyfile(FIXTURE, rollout)
    payload = {
        "prompt": "/good --note 'from codex'",
        "cwd": str(project),
        "transcript_path": str(rollout),
        "hook_event_name": "UserPromptSubmit",
    }
    done = hook(project, payload)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["decision"] == "block"
    found = re.fullmatch(
        r"good (\S+) -> train: Now add a test for it.*", answer["reason"]
    )
    assert found, answer
    # The row is in the store, from that rollout, with the note.
    path = rows.row_path(found.group(1))
    row = json.loads(git(paths.store_path(project), "show", f"HEAD:{path}"))
    assert row["source"]["host"] == "codex"
    assert row["source"]["session_id"] == "01a226bf-4900-7a3c-9d41-5e8f2b6c0a17"
    assert "from codex" in json.dumps(row)
    assert run("tagged").stdout.count(found.group(1)) == 1


def test_an_open_quote_blocks_the_prompt_and_runs_nothing(project: Path) -> None:
    done = hook(project, {"prompt": "/good --note 'oops", "cwd": str(project)})
    answer = json.loads(done.stdout)
    assert answer == {
        "decision": "block",
        "reason": "machine: No closing quotation; nothing ran",
    }


def test_notify_finds_no_rollout_for_an_id_that_is_a_path(tmp_path: Path) -> None:
    (tmp_path / "sessions").mkdir()
    assert codex_hook.rollout_of("../../etc/passwd", tmp_path) is None
    payload = {"type": "agent-turn-complete", "thread-id": "x/..", "turn-id": "t"}
    assert codex_hook.on_notify(payload, tmp_path) == 0


def test_good_in_a_session_with_no_prompt_means_the_session_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    day = tmp_path / "sessions" / "2026" / "11" / "29"
    day.mkdir(parents=True)
    earlier = day / FIXTURE.name
    shutil.copyfile(FIXTURE, earlier)
    context = "<environment_context>\n  <cwd>/workspace/greeter</cwd>\n"
    fresh = (
        day / "rollout-2026-11-29T11-00-00-01a226bf-0000-7000-8000-000000000000.jsonl"
    )
    fresh.write_text(
        json.dumps({"type": "session_meta", "payload": {"cwd": "/workspace/greeter"}})
        + "\n"
        + json.dumps(
            {
                "type": "response_item",
                "payload": {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": context}],
                },
            }
        )
        + "\n"
    )
    monkeypatch.setenv("CODEX_HOME", str(tmp_path))
    assert has_prompt(earlier) and not has_prompt(fresh)
    assert codex_hook._turns_in(earlier) == str(earlier)
    assert codex_hook._turns_in(fresh) == str(earlier)
    earlier.write_text(earlier.read_text().replace("/workspace/greeter", "/elsewhere"))
    assert codex_hook._turns_in(fresh) is None  # only a session of the same folder


def test_machine_past_its_time_limit_is_stopped_with_what_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(codex_hook, "TIMEOUT", 1.0)
    mark = tmp_path / "child-ran"
    # The child's own child would touch the file after the limit if left alive.
    script = f"sh -c 'sleep 3; touch {mark}' & wait"
    code, said = codex_hook._run(["sh", "-c", script], str(tmp_path))
    assert (code, said) == (1, "machine did not finish within 1 s; stopped")
    time.sleep(3)
    assert not mark.exists()
