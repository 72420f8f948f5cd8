from __future__ import annotations

import json
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
from machine_git.sessions import letta
from tests.conftest import FIXTURES

LETTA = FIXTURES / "letta"
LOCAL = LETTA / "local-backend"
SCENARIOS = sorted(p.name for p in LOCAL.iterdir() if p.is_dir())
TRANSCRIPT = next(LETTA.glob("transcript/*/*/transcript.jsonl"))
HISTORY = LETTA / "api-history.json"
AGENT_FILE = LETTA / "agent.af"


def expected(path: Path) -> list[dict[str, Any]]:
    value = orjson.loads(path.read_bytes())
    assert isinstance(value, list)
    return value


def lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines() if x.strip()]


@pytest.fixture(autouse=True)
def _letta_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LETTA_LOCAL_BACKEND_DIR", str(tmp_path / "lc-local-backend"))
    monkeypatch.setenv("LETTA_TRANSCRIPT_ROOT", str(tmp_path / "transcripts"))


# -- local backend (real Letta Code 0.25.9 files) --------------------------------------


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_local_backend_last_turn_is_the_expected_trajectory(scenario: str) -> None:
    turn, report = letta.read_local(LOCAL / scenario / "messages.jsonl")
    assert turn.records == expected(LOCAL / scenario / "expected.json")
    assert schemas.check(schemas.validator("trajectory-v1"), turn.records) == []
    assert report.warning() is None


def test_local_backend_turn_records_where_it_came_from() -> None:
    path = LOCAL / "bash-tool" / "messages.jsonl"
    turn, _ = letta.read_local(path)
    agent = lines(path)[0]["metadata"]["agent_id"]
    assert turn.source() == {
        "host": "letta",
        "session_id": f"{agent}/local-conv-1",
        "session_file": str(path),
        "entry_ids": ["ui-msg-1", "ui-msg-2", "ui-msg-3", "ui-msg-4"],
        "leaf_id": "ui-msg-4",
        "model": "fake-model",
        "provider": "llama-cpp",
        "cwd": "/tmp/machine-letta-fixtures/bash-tool/project",
        "git_branch": None,
    }
    assert turn.stop_reason == "stop"


def test_system_reminders_are_not_the_users_words() -> None:
    turn, _ = letta.read_local(LOCAL / "continued" / "messages.jsonl")
    raw = lines(LOCAL / "continued" / "messages.jsonl")[6]["content"]
    assert len(raw) == 4 and raw[0]["text"].startswith("<system-reminder>")
    assert turn.user_text == "Now read the missing file"


def test_a_nonzero_exit_keeps_letta_codes_own_status() -> None:
    # Letta Code stores isError: false for an executed command whatever its exit
    # code; we report the source's status rather than parse "Exit code: 2".
    turn, _ = letta.read_local(LOCAL / "failing-command" / "messages.jsonl")
    result = next(r for r in turn.records if r["role"] == "tool")
    assert result["ok"] is True
    assert result["content"].startswith("Exit code: 2\n")


def test_a_denied_call_is_a_failed_result() -> None:
    turn, _ = letta.read_local(LOCAL / "denied-tool" / "messages.jsonl")
    result = next(r for r in turn.records if r["role"] == "tool")
    assert (result["ok"], result["content"]) == (
        False,
        "Error: Permission denied by rule: Bash(:*) (CLI)",
    )


@pytest.mark.parametrize(
    ("entry", "user", "answer"),
    [
        (
            "ui-msg-4",
            "Say hello using bash",
            "Done: the command printed hello-from-letta.",
        ),
        (
            "ui-msg-6",
            "What is a test fixture? Answer in one sentence.",
            "A test fixture is a fixed input kept in the repository so tests are "
            "repeatable.",
        ),
    ],
)
def test_entry_selects_an_earlier_turn(entry: str, user: str, answer: str) -> None:
    turn, _ = letta.read_local(LOCAL / "continued" / "messages.jsonl", entry)
    assert (turn.user_text, turn.answer, turn.leaf_id) == (user, answer, entry)


def test_an_unknown_entry_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(SessionError, match=r"no entry 'ui-msg-99' in this session$"):
        letta.read_local(LOCAL / "continued" / "messages.jsonl", "ui-msg-99")


def test_an_errored_answer_is_refused_by_rows_build(tmp_path: Path) -> None:
    rows_ = lines(LOCAL / "plain-text" / "messages.jsonl")
    rows_[-1]["stopReason"] = "error"
    rows_[-1]["errorMessage"] = "llama-cpp: 500 upstream failed"
    path = tmp_path / "messages.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(r) for r in rows_))
    turn, _ = letta.read_local(path)
    assert (turn.stop_reason, turn.error) == ("error", "llama-cpp: 500 upstream failed")
    with pytest.raises(TurnError, match="ended with an error: llama-cpp: 500"):
        rows.build(turn, label="good", trace=False)


def test_corrupt_and_unknown_lines_are_counted(tmp_path: Path) -> None:
    text = (LOCAL / "bash-tool" / "messages.jsonl").read_bytes().split(b"\n")
    text.insert(1, b'{"id":"ui-msg-x","role":"assis')
    text.insert(2, b'{"id":"ui-msg-y","role":"bashExecution","command":"ls"}')
    text.insert(3, b'["not", "a", "message"]')
    path = tmp_path / "messages.jsonl"
    path.write_bytes(b"\n".join(text))
    turn, report = letta.read_local(path)
    assert turn.records == expected(LOCAL / "bash-tool" / "expected.json")
    assert report.warning() == (
        f"{path}: skipped 2 corrupt lines (line 2, 4); 1 entry (line 3) of unknown "
        "type 'bashExecution'"
    )


def test_session_id_falls_back_to_conversation_json(tmp_path: Path) -> None:
    folder = tmp_path / "conv"
    folder.mkdir()
    rows_ = lines(LOCAL / "plain-text" / "messages.jsonl")
    for row in rows_:
        del row["metadata"]
    (folder / "messages.jsonl").write_bytes(b"\n".join(orjson.dumps(r) for r in rows_))
    (folder / "conversation.json").write_text('{"id": "c9", "agent_id": "agent-a"}')
    turn, _ = letta.read_local(folder / "messages.jsonl")
    assert turn.session_id == "agent-a/c9"
    # Without metadata the stamps are pi-ai's Unix milliseconds.
    assert turn.records[1].get("timestamp") == "2026-01-01T00:00:01.000Z"


# -- transcript.jsonl ------------------------------------------------------------------


def test_transcript_last_turn_is_the_expected_trajectory() -> None:
    turn, report = letta.read_transcript(TRANSCRIPT)
    assert turn.records == expected(TRANSCRIPT.parent / "expected.json")
    assert report.warning() is None
    agent, conversation = TRANSCRIPT.parts[-3:-1]
    assert turn.session_id == f"{agent}/{conversation}"
    assert turn.entry_ids == [
        "user-b83f27a4",
        "otid-c02d8e61",
        "toolu_01Sx4gVb9Jt2kQe7Wn1cFa8D",
        "toolu_01Pm3ZyT6uR8oB2hKd5sLe9G",
        "toolu_01Lc7NwQ2xE5vA9rJm4tHy3K",
        "otid-5fa19c37",
    ]


def test_a_transcript_ending_in_an_error_row_is_an_errored_turn(tmp_path: Path) -> None:
    rows_ = lines(TRANSCRIPT)[:-1]
    rows_.append(
        {
            "kind": "error",
            "text": "Provider stream error: overloaded (gave up after 3 attempts)",
            "captured_at": "2026-11-29T09:03:30.000Z",
        }
    )
    path = tmp_path / "transcript.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(r) for r in rows_))
    turn, _ = letta.read_transcript(path)
    assert turn.stop_reason == "error"
    assert turn.error == "Provider stream error: overloaded (gave up after 3 attempts)"
    # The first turn's error row was followed by an answer: not an errored turn.
    first, _ = letta.read_transcript(TRANSCRIPT, "otid-9e13a5f4")
    assert first.stop_reason is None and first.answer is not None


# -- API message history ---------------------------------------------------------------


def history(tmp_path: Path, messages: Any, name: str = "history.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(messages, indent=2))
    return path


def test_history_last_turn_is_the_expected_trajectory() -> None:
    turn, report = letta.read_history(HISTORY)
    assert turn.records == expected(LETTA / "api-history.expected.json")
    assert report.warning() is None
    assert turn.cwd == "/home/user/retry-lib"  # from the first turn's reminder
    assert turn.session_id == "letta-api"
    assert turn.entry_ids[0] == "message-0b6f1e3a-0000-4000-8000-000000000008"
    assert turn.entry_ids[-1] == "message-0b6f1e3a-0000-4000-8000-000000000019"


def test_history_newest_first_or_shuffled_reads_the_same(tmp_path: Path) -> None:
    messages = orjson.loads(HISTORY.read_bytes())
    want = expected(LETTA / "api-history.expected.json")
    newest_first = list(reversed(messages))
    assert letta.read_history(history(tmp_path, newest_first))[0].records == want
    by_seq = messages[1::2] + messages[::2]
    assert letta.read_history(history(tmp_path, by_seq, "b.json"))[0].records == want


def test_history_wrapped_in_an_object_names_its_conversation(tmp_path: Path) -> None:
    messages = orjson.loads(HISTORY.read_bytes())
    path = history(tmp_path, {"conversation_id": "conv-7", "messages": messages})
    turn, _ = letta.read_history(path)
    assert turn.session_id == "conv-7"


def base(kind: str, n: int, **fields: Any) -> dict[str, Any]:
    return {
        "id": f"message-{n}",
        "date": f"2026-11-29T10:00:{n:02d}",  # naive: the server's UTC
        "message_type": kind,
        **fields,
    }


def test_client_side_results_in_approval_responses(tmp_path: Path) -> None:
    call = {"name": "Bash", "arguments": '{"command":"ls"}', "tool_call_id": "c1"}
    messages = [
        base("user_message", 1, content="list files"),
        base("approval_request_message", 2, tool_call=call, tool_calls=[call]),
        base(
            "approval_response_message",
            3,
            approvals=[
                {
                    "type": "tool",
                    "tool_call_id": "c1",
                    "tool_return": "a.py",
                    "status": "success",
                }
            ],
        ),
        base("assistant_message", 4, content="One file: a.py."),
    ]
    turn, report = letta.read_history(history(tmp_path, messages))
    assert report.warning() is None
    assert turn.records[1:] == [
        {"role": "user", "content": "list files", "timestamp": "2026-11-29T10:00:01Z"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "name": "Bash", "args": '{"command":"ls"}'}],
            "timestamp": "2026-11-29T10:00:02Z",
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": "a.py",
            "ok": True,
            "timestamp": "2026-11-29T10:00:03Z",
        },
        {
            "role": "assistant",
            "content": "One file: a.py.",
            "timestamp": "2026-11-29T10:00:04Z",
        },
    ]


@pytest.mark.parametrize(
    ("last", "stop"),
    [
        (base("stop_reason", 3, stop_reason="cancelled"), ("aborted", "cancelled")),
        (
            base("stop_reason", 3, stop_reason="llm_api_error"),
            ("error", "llm_api_error"),
        ),
        (
            base("assistant_message", 3, content="Rate limited.", is_err=True),
            ("error", "Rate limited."),
        ),
        (base("stop_reason", 3, stop_reason="end_turn"), (None, None)),
    ],
)
def test_history_endings(
    tmp_path: Path, last: dict[str, Any], stop: tuple[str | None, str | None]
) -> None:
    messages = [
        base("user_message", 1, content="hi"),
        base("assistant_message", 2, content="Hello."),
        last,
    ]
    turn, _ = letta.read_history(history(tmp_path, messages))
    assert (turn.stop_reason, turn.error) == stop


def test_packets_are_not_user_turns(tmp_path: Path) -> None:
    packed = json.dumps({"type": "user_message", "message": "hi there", "time": "t"})
    heartbeat = json.dumps({"type": "heartbeat", "reason": "continue"})
    messages = [
        base("user_message", 1, content=packed),
        base("assistant_message", 2, content="Hello."),
        base("user_message", 3, content=heartbeat),
        base("assistant_message", 4, content="Still here."),
    ]
    turn, _ = letta.read_history(history(tmp_path, messages))
    assert turn.user_text == "hi there"
    assert turn.answer == "Still here."


def test_history_that_is_not_a_message_list(tmp_path: Path) -> None:
    path = history(tmp_path, {"hello": "world"})
    with pytest.raises(SessionError, match=r"not a Letta message list$"):
        letta.read_history(path)
    path = history(tmp_path, [1, "two", {"message_type": "system_message"}])
    with pytest.raises(TurnError, match="no user message in this session"):
        letta.read_history(path)


# -- Agent File ------------------------------------------------------------------------


def test_agent_file_last_turn_is_the_expected_trajectory() -> None:
    turn, report = letta.read_agent_file(AGENT_FILE)
    assert turn.records == expected(LETTA / "agent.expected.json")
    assert report.warning() is None
    assert turn.entry_ids[0] == "message-10" and turn.leaf_id == "message-18"
    assert turn.model == "gpt-4.1-mini-2025-04-14"


def test_agent_file_ids_are_renumbered_so_the_session_id_tells_agents_apart(
    tmp_path: Path,
) -> None:
    data = orjson.loads(AGENT_FILE.read_bytes())
    turn, _ = letta.read_agent_file(AGENT_FILE)
    data["agents"][0]["name"] = "another-agent"
    other = tmp_path / "other.af"
    other.write_bytes(orjson.dumps(data))
    turn2, _ = letta.read_agent_file(other)
    assert turn.session_id.startswith("agent-0-")
    assert turn2.session_id.startswith("agent-0-")
    assert turn.session_id != turn2.session_id
    assert letta.read_agent_file(AGENT_FILE)[0].session_id == turn.session_id


def test_agent_without_send_message_answers_in_its_content(tmp_path: Path) -> None:
    agent = {
        "id": "agent-5d1c9e7a",
        "agent_type": "letta_v1_agent",
        "messages": [
            {
                "role": "user",
                "id": "message-1",
                "content": [{"type": "text", "text": "hi"}],
                "created_at": "2026-11-29T10:00:00+00:00",
            },
            {
                "role": "assistant",
                "id": "message-2",
                "content": [
                    {"type": "reasoning", "reasoning": "Greet back."},
                    {"type": "text", "text": "Hello!"},
                ],
                "created_at": "2026-11-29T10:00:01+00:00",
            },
        ],
    }
    path = tmp_path / "a.af"
    path.write_bytes(orjson.dumps({"agents": [agent, dict(agent, id="agent-2")]}))
    turn, report = letta.read_agent_file(path)
    assert [(r["role"], r.get("content")) for r in turn.records] == [
        ("meta", None),
        ("user", "hi"),
        ("reasoning", "Greet back."),
        ("assistant", "Hello!"),
    ]
    assert turn.session_id == "agent-5d1c9e7a"
    assert report.warning() == f"{path}: skipped 1 more agent(s) in the file not read"


# -- finding a project's session -------------------------------------------------------


def install_local(project: Path, scenario: str) -> Path:
    """A local-backend conversation whose reminders name ``project`` as the cwd."""
    source = LOCAL / scenario
    folder = letta.backend_dir() / "conversations" / f"{scenario}-folder"
    folder.mkdir(parents=True)
    old = f"/tmp/machine-letta-fixtures/{scenario}/project"
    text = (source / "messages.jsonl").read_text().replace(old, str(project))
    (folder / "messages.jsonl").write_text(text)
    return folder / "messages.jsonl"


def test_find_session_by_the_cwd_in_the_reminders(project: Path) -> None:
    older = install_local(project, "bash-tool")
    newer = install_local(project, "continued")
    os.utime(older, (1_800_000_000, 1_800_000_000))
    os.utime(newer, (1_800_000_100, 1_800_000_100))
    install_local(project.parent / "elsewhere", "plain-text")  # not this project
    assert letta.find_session(project) == newer


def test_find_session_by_the_projects_last_session(project: Path) -> None:
    agent, conversation = TRANSCRIPT.parts[-3:-1]
    target = letta.transcript_root() / agent / conversation / "transcript.jsonl"
    target.parent.mkdir(parents=True)
    target.write_bytes(TRANSCRIPT.read_bytes())
    settings = project / ".letta" / "settings.local.json"
    settings.parent.mkdir()
    settings.write_text(
        json.dumps({"lastSession": {"agentId": agent, "conversationId": conversation}})
    )
    assert letta.find_session(project) == target


def test_the_backend_folder_name_is_base64url_of_the_conversation() -> None:
    assert letta.conversation_folder("local-conv-1", "agent-x") == (
        "Y29udmVyc2F0aW9uOmxvY2FsLWNvbnYtMQ"
    )
    assert letta.conversation_folder(None, "agent-x") == "ZGVmYXVsdDphZ2VudC14"


def test_no_letta_session_says_where_it_looked(project: Path) -> None:
    with pytest.raises(NoSessionError) as e:
        letta.find_session(project)
    assert str(e.value) == (
        f"no Letta Code session for {project} in "
        f"{letta.backend_dir() / 'conversations'} or {letta.transcript_root()} "
        "(run letta in the project first, set LETTA_LOCAL_BACKEND_DIR or "
        "LETTA_TRANSCRIPT_ROOT, or pass --session PATH)"
    )


def test_read_turn_recognizes_every_letta_form() -> None:
    for path in (
        LOCAL / "plain-text" / "messages.jsonl",
        TRANSCRIPT,
        HISTORY,
        AGENT_FILE,
    ):
        turn, _ = letta.read_turn(path)
        assert turn.host == "letta"
    with pytest.raises(SessionError, match=r"a Codex rollout, not a Letta session$"):
        letta.read_turn(next(FIXTURES.glob("codex/sessions/*/*/*/rollout-*.jsonl")))


def test_the_local_backend_s_compiled_system_prompt_is_the_context() -> None:
    folder = LOCAL / "system-prompt"
    turn, _ = letta.read_local(folder / "messages.jsonl")
    compiled = json.loads((folder / "system-prompt.json").read_text())
    assert turn.context == {"system": compiled["content"], "tools": None}
    assert compiled["content"].startswith("You are Letta Code")
    # the other scenarios were copied without it: unknown
    other, _ = letta.read_local(LOCAL / "bash-tool" / "messages.jsonl")
    assert other.context is None


def test_a_message_list_s_system_message_is_the_context(tmp_path: Path) -> None:
    listed = json.loads(HISTORY.read_text())
    assert listed[0]["message_type"] == "system_message"
    turn, _ = letta.read_history(HISTORY)
    assert turn.context == {"system": listed[0]["content"], "tools": None}
    # no system message before the turn: unknown
    bare, _ = letta.read_history(history(tmp_path, listed[1:]))
    assert bare.context is None


def test_an_agent_file_s_system_message_and_tool_schemas_are_the_context(
    tmp_path: Path,
) -> None:
    value = json.loads(AGENT_FILE.read_text())
    agent = value["agents"][0]
    system = agent["messages"][0]
    assert system["role"] == "system"
    turn, _ = letta.read_agent_file(AGENT_FILE)
    # this file's tools carry no json_schema: the declaration is unknown
    assert turn.context == {"system": system["content"][0]["text"], "tools": None}
    schemas = [
        {
            "name": tool["name"],
            "description": f"The {tool['name']} tool.",
            "parameters": {
                "type": "object",
                "properties": {"message": {"type": "string"}},
                "required": ["message"],
            },
        }
        for tool in value["tools"]
    ]
    for tool, schema in zip(value["tools"], schemas, strict=True):
        tool["json_schema"] = schema
    value["tools"].append({"id": "tool-9", "name": "unused", "json_schema": {}})
    path = tmp_path / "agent.af"
    path.write_text(json.dumps(value))
    turn, _ = letta.read_agent_file(path)
    # the agent's own tools (tool_ids), in its order
    by_id = {t["id"]: t["json_schema"] for t in value["tools"]}
    assert turn.context is not None
    assert turn.context["tools"] == [by_id[i] for i in agent["tool_ids"]]
    # one of its tools without a schema: unknown, never a partial list
    del value["tools"][1]["json_schema"]
    path.write_text(json.dumps(value))
    turn, _ = letta.read_agent_file(path)
    assert turn.context is not None and turn.context["tools"] is None
