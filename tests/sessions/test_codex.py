from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git.core.errors import NoSessionError
from machine_git.core.errors import SessionError
from machine_git.core.errors import TurnError
from machine_git.rows import rows
from machine_git.rows import schemas
from machine_git.sessions import codex
from tests.conftest import FIXTURES
from tests.helpers import loose

DAY = FIXTURES / "codex" / "sessions" / "2026" / "11" / "29"
ROLLOUT = next(DAY.glob("rollout-*.jsonl"))
SESSION_ID = "01a226bf-4900-7a3c-9d41-5e8f2b6c0a17"
STAMP = "2026-11-29T10:00:00.000Z"


def expected() -> list[dict[str, Any]]:
    value = orjson.loads((DAY / "expected.json").read_bytes())
    assert isinstance(value, list)
    return value


def lines() -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in ROLLOUT.read_bytes().splitlines()]


def item(kind: str, **payload: Any) -> dict[str, Any]:
    return {"timestamp": STAMP, "type": kind, "payload": payload}


def user(text: str) -> dict[str, Any]:
    content = [{"type": "input_text", "text": text}]
    return item("response_item", type="message", role="user", content=content)


def answer(text: str) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text}]
    return item("response_item", type="message", role="assistant", content=content)


def write(path: Path, rows_: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"\n".join(orjson.dumps(r) for r in rows_) + b"\n")
    return path


@pytest.fixture(autouse=True)
def _codex_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))


def test_last_turn_is_the_expected_trajectory() -> None:
    turn, report = codex.read_turn(ROLLOUT)
    assert turn.records == expected()
    assert schemas.check(schemas.validator("trajectory-v1"), turn.records) == []
    assert report.warning() is None


def test_turn_records_where_it_came_from() -> None:
    turn, _ = codex.read_turn(ROLLOUT)
    source = lines()
    # Line ids: the response items and reasoning events of the turn, from the
    # user's message (line 18) on; the UI's duplicate events are not entries.
    kept = [
        f"L{n}"
        for n, r in enumerate(source, start=1)
        if n >= 18
        and (
            (r["type"] == "response_item" and r["payload"]["type"] != "reasoning")
            or r["payload"]["type"] == "agent_reasoning"
        )
    ]
    assert turn.source() == {
        "host": "codex",
        "session_id": SESSION_ID,
        "session_file": str(ROLLOUT),
        "entry_ids": kept,
        "leaf_id": f"L{len(source)}",
        "model": "gpt-5-codex",
        "provider": "openai",
        "cwd": "/workspace/greeter",
        "git_branch": "feature/greeting",
    }


def test_injected_context_is_not_a_user_turn(tmp_path: Path) -> None:
    path = write(
        tmp_path / "r.jsonl",
        [
            user("fix the bug"),
            answer("Fixed."),
            user("# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>be brief"),
            user("<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"),
        ],
    )
    turn, _ = codex.read_turn(path)
    assert (turn.user_text, turn.answer) == ("fix the bug", "Fixed.")
    assert turn.entry_ids == ["L1", "L2"]


@pytest.mark.parametrize(
    ("output", "ok", "content"),
    [
        ('{"output":"ok\\n","metadata":{"exit_code":0}}', True, None),
        ('{"output":"boom","metadata":{"exit_code":2}}', False, None),
        ("Exit code: 1\nWall time: 0 seconds\nOutput:\nboom", False, None),
        ("Chunk ID: 1\nProcess exited with code 0\nOutput:\nfine", True, None),
        ("Plan updated", None, None),
        ({"content": "done", "success": False}, False, "Error: done"),
        ("Output:\nExit code: 3", None, None),  # in the output, not the header
    ],
)
def test_ok_comes_from_the_exit_code_codex_writes(
    tmp_path: Path, output: Any, ok: bool | None, content: str | None
) -> None:
    path = write(
        tmp_path / "r.jsonl",
        [
            user("run it"),
            item(
                "response_item",
                type="function_call",
                name="shell",
                arguments="{}",
                call_id="c1",
            ),
            item(
                "response_item",
                type="function_call_output",
                call_id="c1",
                output=output,
            ),
            answer("Ran it."),
        ],
    )
    turn, _ = codex.read_turn(path)
    result = turn.records[3]
    assert result.get("ok") == ok and ("ok" in result) == (ok is not None)
    text = output if isinstance(output, str) else None
    want = content or (f"Error: {text}" if ok is False else text)
    assert result.get("content") == want


def test_parallel_calls_share_one_record(tmp_path: Path) -> None:
    path = write(
        tmp_path / "r.jsonl",
        [
            user("read both"),
            item(
                "response_item",
                type="function_call",
                name="read",
                arguments='{"p":"a"}',
                call_id="c1",
            ),
            item(
                "response_item",
                type="function_call",
                name="read",
                arguments='{"p":"b"}',
                call_id="c2",
            ),
            item(
                "response_item", type="function_call_output", call_id="c2", output="B"
            ),
            item(
                "response_item", type="function_call_output", call_id="c1", output="A"
            ),
            answer("A and B."),
        ],
    )
    turn, _ = codex.read_turn(path)
    assert [r["role"] for r in turn.records] == [
        "meta",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert [c["id"] for c in loose(turn.records[2])["tool_calls"]] == ["c1", "c2"]
    assert [r.get("tool_call_id") for r in turn.records[3:5]] == ["c2", "c1"]


def test_reasoning_summary_when_there_are_no_reasoning_events(tmp_path: Path) -> None:
    summary = [{"type": "summary_text", "text": "**Planning**"}]
    path = write(
        tmp_path / "r.jsonl",
        [
            user("plan it"),
            item(
                "response_item",
                type="reasoning",
                summary=summary,
                encrypted_content="x",
            ),
            answer("Planned."),
        ],
    )
    turn, _ = codex.read_turn(path)
    assert turn.records[2] == {
        "role": "reasoning",
        "content": "**Planning**",
        "timestamp": STAMP,
    }


@pytest.mark.parametrize(
    ("event", "stop"),
    [
        (
            item("event_msg", type="turn_aborted", reason="interrupted"),
            ("aborted", "interrupted"),
        ),
        (
            item("event_msg", type="error", message="stream disconnected"),
            ("error", "stream disconnected"),
        ),
    ],
)
def test_an_aborted_or_errored_turn_is_kept_by_bad_only(
    tmp_path: Path, event: dict[str, Any], stop: tuple[str, str]
) -> None:
    path = write(tmp_path / "r.jsonl", [user("go"), answer("Starting."), event])
    turn, _ = codex.read_turn(path)
    assert (turn.stop_reason, turn.error) == stop
    with pytest.raises(TurnError, match="nothing tagged"):
        rows.build(turn, label="good", trace=False)
    kept = rows.build(turn, label="bad", trace=False)  # bad keeps it as it was
    assert kept.get("failure") == {"stop_reason": stop[0], "error": stop[1]}


def test_entry_selects_the_first_turn() -> None:
    turn, _ = codex.read_turn(ROLLOUT, "L15")
    assert turn.user_text == "Add a greet(name) function to greeter.py."
    assert (
        turn.answer == "Added `greet(name)` to greeter.py; it returns `Hello, <name>!`."
    )
    assert turn.leaf_id == "L15"
    with pytest.raises(SessionError, match=r"no entry 'L99' in this session$"):
        codex.read_turn(ROLLOUT, "L99")


def test_corrupt_and_unknown_lines_are_counted(tmp_path: Path) -> None:
    text = ROLLOUT.read_bytes().split(b"\n")
    text.insert(3, b'{"timestamp":"x","type":"response_item","payload":')
    text.insert(4, b'{"timestamp":"x","type":"hologram","payload":{}}')
    text.insert(5, b'{"timestamp":"x","type":"event_msg","payload":"not an object"}')
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"\n".join(text))
    turn, report = codex.read_turn(path)
    assert turn.records == expected()
    assert report.warning() == (
        f"{path}: skipped 2 corrupt lines (line 4, 6); 1 entry (line 5) of unknown "
        "type 'hologram'"
    )


def test_a_rollout_with_no_user_message(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", lines()[:3])
    with pytest.raises(TurnError, match="no user message in this session"):
        codex.read_turn(path)


def install(project: Path, name: str, stamp: int, cwd: Path | None = None) -> Path:
    folder = codex.home() / "sessions" / "2026" / "11" / "29"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"rollout-{name}.jsonl"
    text = ROLLOUT.read_text().replace("/workspace/greeter", str(cwd or project))
    target.write_text(text)
    os.utime(target, (stamp, stamp))
    return target


def test_find_session_picks_the_newest_rollout_of_the_project(project: Path) -> None:
    install(project, "a", 1_800_000_000)
    newest = install(project, "b", 1_800_000_100, cwd=project / "sub")
    install(project, "c", 1_900_000_000, cwd=project.parent / "other")
    assert codex.find_session(project) == newest


def test_a_newer_session_with_no_prompt_is_passed_over(project: Path) -> None:
    # codex exec "/good" with machine's hook: a rollout whose only prompt was
    # blocked holds the injected context and no prompt of the user's.
    older = install(project, "a", 1_800_000_000)
    first = ROLLOUT.read_text().replace("/workspace/greeter", str(project))
    context = first.splitlines()[:3]
    assert all("Add a greet" not in line for line in context)
    empty = codex.home() / "sessions" / "2026" / "11" / "29" / "rollout-b.jsonl"
    empty.write_text("\n".join(context) + "\n")
    os.utime(empty, (1_800_000_100, 1_800_000_100))
    assert codex.find_session(project) == older
    older.unlink()  # nothing else: the empty one, for the reader to refuse
    assert codex.find_session(project) == empty


def test_no_session_says_where_it_looked(project: Path) -> None:
    with pytest.raises(NoSessionError) as e:
        codex.find_session(project)
    assert str(e.value) == (
        f"no Codex session for {project} in {codex.home() / 'sessions'} (run codex "
        "in the project first, set CODEX_HOME, or pass --session PATH)"
    )


def test_the_rollout_s_instructions_are_the_context(tmp_path: Path) -> None:
    # The fixture's rollout (cli 0.46) records "instructions": null: unknown.
    assert codex.read_turn(ROLLOUT)[0].context is None
    older = lines()
    older[0]["payload"]["instructions"] = "You are Codex, a coding agent."
    turn, _ = codex.read_turn(write(tmp_path / "older.jsonl", older))
    assert turn.context == {"system": "You are Codex, a coding agent.", "tools": None}
    # newer Codex writes base_instructions.text, which wins
    newer = lines()
    newer[0]["payload"]["base_instructions"] = {"text": "Base instructions."}
    turn, _ = codex.read_turn(write(tmp_path / "newer.jsonl", newer))
    assert turn.context == {"system": "Base instructions.", "tools": None}
