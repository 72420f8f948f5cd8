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
from machine_git.sessions import claude
from tests.conftest import FIXTURES
from tests.helpers import loose

FOLDER = FIXTURES / "claude" / "-workspace-retry-lib"
SESSION = FOLDER / "7c1e4a52-3b9d-4f0e-a6c8-2d5f9b1e8a40.jsonl"
SESSION_ID = "7c1e4a52-3b9d-4f0e-a6c8-2d5f9b1e8a40"


def expected() -> list[dict[str, Any]]:
    value = orjson.loads((FOLDER / "expected.json").read_bytes())
    assert isinstance(value, list)
    return value


def lines() -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in SESSION.read_bytes().splitlines()]


def write(path: Path, rows_: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"\n".join(orjson.dumps(r) for r in rows_) + b"\n")
    return path


def row(kind: str, uuid: str, parent: str | None, **fields: Any) -> dict[str, Any]:
    return {
        "type": kind,
        "uuid": uuid,
        "parentUuid": parent,
        "isSidechain": False,
        "sessionId": "s1",
        "cwd": "/w",
        "timestamp": f"2026-11-29T10:00:{len(uuid):02d}.000Z",
        **fields,
    }


def user(uuid: str, parent: str | None, content: Any, **fields: Any) -> dict[str, Any]:
    return row(
        "user", uuid, parent, message={"role": "user", "content": content}, **fields
    )


def assistant(
    uuid: str, parent: str | None, message_id: str, blocks: list[Any], **fields: Any
) -> dict[str, Any]:
    message = {
        "id": message_id,
        "role": "assistant",
        "model": "claude-x",
        "content": blocks,
        "stop_reason": None,
    }
    return row("assistant", uuid, parent, message=message, **fields)


@pytest.fixture(autouse=True)
def _claude_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))


def test_last_turn_is_the_expected_trajectory() -> None:
    turn, report = claude.read_turn(SESSION)
    assert turn.records == expected()
    assert schemas.check(schemas.validator("trajectory-v1"), turn.records) == []
    assert report.warning() is None


def test_turn_records_where_it_came_from() -> None:
    turn, _ = claude.read_turn(SESSION)
    source = lines()
    # Rows 14..32 (1-based) minus the two sidechain rows; the noise after the
    # answer is on the branch (the leaf) but not in the turn.
    kept = [r["uuid"] for r in source[13:32] if not r.get("isSidechain")]
    assert turn.source() == {
        "host": "claude",
        "session_id": SESSION_ID,
        "session_file": str(SESSION),
        "entry_ids": kept,
        "leaf_id": source[-1]["uuid"],
        "model": "claude-sonnet-4-5-20250929",
        "provider": None,
        "cwd": "/workspace/retry-lib",
        "git_branch": "fix/flaky-retry",
    }
    assert turn.stop_reason == "end_turn"


def test_sidechain_and_noise_rows_are_not_part_of_the_turn() -> None:
    turn, _ = claude.read_turn(SESSION)
    source = lines()
    sidechain = {r["uuid"] for r in source if r.get("isSidechain")}
    noise = {r["uuid"] for r in source[32:]}
    assert len(sidechain) == 2 and len(noise) == 3
    assert not (sidechain | noise) & set(turn.entry_ids)
    # The subagent's answer arrives once, as the Task call's result.
    answers = [r for r in turn.records if "time.sleep(delay" in str(r.get("content"))]
    assert [r["role"] for r in answers] == ["tool"]


def test_rows_of_one_response_are_grouped(tmp_path: Path) -> None:
    path = write(
        tmp_path / "s.jsonl",
        [
            user("u1", None, "look at both files"),
            assistant("a1", "u1", "msg_1", [{"type": "text", "text": "Reading both."}]),
            assistant(
                "a2",
                "a1",
                "msg_1",
                [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"p": "a"}}],
            ),
            assistant(
                "a3",
                "a2",
                "msg_1",
                [{"type": "tool_use", "id": "t2", "name": "Read", "input": {"p": "b"}}],
            ),
            user(
                "u2",
                "a3",
                [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "A"},
                    {"type": "tool_result", "tool_use_id": "t2", "content": "B"},
                ],
            ),
            assistant("a4", "u2", "msg_2", [{"type": "text", "text": "A and B."}]),
        ],
    )
    turn, _ = claude.read_turn(path)
    assert [r["role"] for r in turn.records] == [
        "meta",
        "user",
        "assistant",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert loose(turn.records[3])["tool_calls"] == [
        {"id": "t1", "name": "Read", "args": '{"p":"a"}'},
        {"id": "t2", "name": "Read", "args": '{"p":"b"}'},
    ]
    # the record's stamp is its first row's
    assert turn.records[3].get("timestamp") == "2026-11-29T10:00:02.000Z"


def test_a_rewind_is_followed_on_the_active_branch(tmp_path: Path) -> None:
    source = lines()
    end_of_turn_1 = source[7]["uuid"]
    path = write(
        tmp_path / "s.jsonl",
        [
            *source,
            user("b1", end_of_turn_1, "Instead, just explain the fix."),
            assistant("b2", "b1", "msg_b", [{"type": "text", "text": "Inject sleep."}]),
        ],
    )
    turn, _ = claude.read_turn(path)
    assert (turn.user_text, turn.answer) == (
        "Instead, just explain the fix.",
        "Inject sleep.",
    )
    assert turn.entry_ids == ["b1", "b2"]
    # The other branch's last answer is still reachable with --entry.
    old, _ = claude.read_turn(path, source[31]["uuid"])
    assert old.records == expected()


def test_a_file_without_parent_links_is_read_in_file_order(tmp_path: Path) -> None:
    # The shape of letta-ai/trajectory's own Claude Code fixtures: uuids, but
    # no parentUuid after the first row. There is no tree to follow.
    rows_ = [
        user("u1", None, "fix the flaky retry test"),
        assistant(
            "a1",
            None,
            "msg_1",
            [
                {"type": "text", "text": "Looking at retry.py now."},
                {
                    "type": "tool_use",
                    "id": "toolu_01A",
                    "name": "Read",
                    "input": {"file_path": "retry.py"},
                },
            ],
        ),
        user(
            "u2",
            None,
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01A",
                    "content": [{"type": "text", "text": "1\tdef retry():"}],
                    "is_error": True,
                }
            ],
        ),
        assistant("a2", None, "msg_2", [{"type": "text", "text": "Patched it."}]),
    ]
    for r in rows_:
        del r["parentUuid"]
    path = write(tmp_path / "s.jsonl", rows_)
    turn, _ = claude.read_turn(path)
    assert (turn.user_text, turn.answer) == ("fix the flaky retry test", "Patched it.")
    assert turn.entry_ids == ["u1", "a1", "u2", "a2"]
    assert [(r["role"], r.get("content")) for r in turn.records[1:]] == [
        ("user", "fix the flaky retry test"),
        ("assistant", "Looking at retry.py now."),
        ("assistant", None),
        ("tool", "Error: 1\tdef retry():"),
        ("assistant", "Patched it."),
    ]
    assert turn.records[4].get("ok") is False
    # --entry still names a row, by uuid.
    first, _ = claude.read_turn(path, "a1")
    assert first.entry_ids == ["u1", "a1"]


def test_entry_selects_the_first_turn() -> None:
    source = lines()
    turn, _ = claude.read_turn(SESSION, source[7]["uuid"])
    assert turn.user_text == source[2]["message"]["content"]
    assert turn.answer == source[7]["message"]["content"][0]["text"]
    with pytest.raises(SessionError, match=r"no entry 'nope' in this session$"):
        claude.read_turn(SESSION, "nope")


def test_an_interrupted_turn_is_aborted(tmp_path: Path) -> None:
    path = write(
        tmp_path / "s.jsonl",
        [
            user("u1", None, "run the slow tests"),
            assistant(
                "a1",
                "u1",
                "m1",
                [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}],
            ),
            user(
                "u2",
                "a1",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": "Interrupted by user",
                        "is_error": True,
                    }
                ],
            ),
            user(
                "u3", "u2", [{"type": "text", "text": "[Request interrupted by user]"}]
            ),
        ],
    )
    turn, _ = claude.read_turn(path)
    assert turn.user_text == "run the slow tests"
    assert (turn.stop_reason, turn.error) == ("aborted", "Request interrupted by user")
    with pytest.raises(TurnError, match="was aborted"):
        rows.build(turn, label="good", trace=True)


def test_an_api_error_answer_is_an_errored_turn(tmp_path: Path) -> None:
    error = assistant(
        "a1",
        "u1",
        "m1",
        [{"type": "text", "text": "API Error: 529 overloaded"}],
        isApiErrorMessage=True,
    )
    error["message"]["model"] = "<synthetic>"
    path = write(tmp_path / "s.jsonl", [user("u1", None, "hi"), error])
    turn, _ = claude.read_turn(path)
    assert (turn.stop_reason, turn.error) == ("error", "API Error: 529 overloaded")
    assert turn.model is None  # the harness's made-up model name is not a model


def test_a_subagent_file_is_read_as_its_own_session(tmp_path: Path) -> None:
    source = [dict(r, isSidechain=True) for r in lines()[19:21]]
    turn, _ = claude.read_turn(write(tmp_path / "agent-1.jsonl", source))
    assert turn.user_text == "List every time.sleep call under src/ with file:line."
    assert turn.answer == "src/retry.py:8 time.sleep(delay * 2 ** i)"


def test_corrupt_lines_and_unknown_message_rows_are_counted(tmp_path: Path) -> None:
    text = SESSION.read_bytes().split(b"\n")
    text.insert(5, b'{"type":"assistant","message":{"id":"msg_')
    text.insert(6, b'{"type":"hologram","uuid":"h","message":{"role":"user"}}')
    text.insert(7, b'{"type":"queue-operation","operation":"enqueue"}')
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"\n".join(text))
    turn, report = claude.read_turn(path)
    assert turn.records == expected()
    assert report.warning() == (
        f"{path}: skipped 1 corrupt line (line 6); 1 entry (line 7) of unknown type "
        "'hologram'"
    )


def test_a_file_without_user_messages(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", [lines()[0], lines()[1]])
    with pytest.raises(TurnError, match="no user message on the active branch"):
        claude.read_turn(path)


def test_find_session_picks_the_newest_of_the_project(project: Path) -> None:
    folder = claude.config_dir() / "projects" / claude.encode_cwd(project)
    folder.mkdir(parents=True)
    older, newer = folder / "a.jsonl", folder / "b.jsonl"
    for stamp, path in ((1_800_000_000, older), (1_800_000_100, newer)):
        path.write_bytes(SESSION.read_bytes())
        os.utime(path, (stamp, stamp))
    subagent = folder / "agent-9.jsonl"  # a subagent's file is not a session
    subagent.write_bytes(SESSION.read_bytes())
    os.utime(subagent, (1_900_000_000, 1_900_000_000))
    assert claude.find_session(project) == newer


def test_find_session_includes_subfolders_by_their_rows_cwd(project: Path) -> None:
    sub = project / "pkg"
    sub.mkdir()
    # proj/pkg and the sibling proj-pkg share one folder: the name is lossy.
    sibling = project.parent / f"{project.name}-pkg"
    folder = claude.config_dir() / "projects" / claude.encode_cwd(sub)
    assert claude.encode_cwd(sibling) == folder.name
    folder.mkdir(parents=True)
    target = write(folder / "mine.jsonl", [user("u", None, "x", cwd=str(sub))])
    decoy = write(folder / "theirs.jsonl", [user("u", None, "x", cwd=str(sibling))])
    os.utime(decoy, (2_000_000_000, 2_000_000_000))
    assert claude.find_session(project) == target


def test_no_session_says_where_it_looked(project: Path) -> None:
    with pytest.raises(NoSessionError) as e:
        claude.find_session(project)
    where = claude.config_dir() / "projects" / claude.encode_cwd(project)
    assert str(e.value) == (
        f"no Claude Code session for {project} in {where} (run claude in the "
        "project first, set CLAUDE_CONFIG_DIR, or pass --session PATH)"
    )


def test_encode_cwd_matches_claude_code() -> None:
    assert claude.encode_cwd(Path("/workspace/retry-lib")) == "-workspace-retry-lib"
    assert claude.encode_cwd(Path("/home/a.b/my_proj")) == "-home-a-b-my-proj"
