from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from machine_git.core.errors import NoSessionError
from machine_git.core.errors import SessionError
from machine_git.core.errors import TurnError
from machine_git.rows import schemas
from machine_git.sessions import pi
from tests.conftest import FIXTURES
from tests.conftest import PI_SESSIONS
from tests.conftest import entry_with_text
from tests.conftest import fixture_lines
from tests.conftest import install_session
from tests.conftest import session_id

HANDWRITTEN = FIXTURES / "pi" / "handwritten"
REAL = sorted(PI_SESSIONS.glob("*.jsonl"))


def read(name: str, entry: str | None = None) -> pi.Turn:  # type: ignore[name-defined]
    turn, report = pi.read_turn(PI_SESSIONS / f"{name}.jsonl", entry)
    assert report.warning() is None
    return turn


def test_basic_last_turn_is_the_whole_second_run() -> None:
    turn = read("basic")
    assert turn.session_id == session_id("basic")
    assert (turn.model, turn.provider, turn.cwd) == (
        "fake-1",
        "fake",
        "/tmp/machine-fixture/proj",
    )
    # The last five entries of the file: user, assistant, 2 results, answer.
    last5 = fixture_lines("basic")[-5:]
    assert turn.entry_ids == [e["id"] for e in last5]
    user_at, call_at, read_at, ls_at, answer_at = (e["timestamp"] for e in last5)
    assert turn.records == [
        {
            "role": "meta",
            "source": "pi",
            "cwd": "/tmp/machine-fixture/proj",
            "model": "fake-1",
        },
        {
            "role": "user",
            "content": "Now two-tools: read notes.md and list /nonexistent-dir.",
            "timestamp": user_at,
        },
        {
            "role": "reasoning",
            "content": "Read the notes and list the missing directory in one go.",
            "timestamp": call_at,
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_3bdfa7d2_0_0",
                    "name": "read",
                    "args": '{"path":"notes.md"}',
                },
                {
                    "id": "call_3bdfa7d2_0_1",
                    "name": "bash",
                    "args": '{"command":"ls /nonexistent-dir"}',
                },
            ],
            "timestamp": call_at,
        },
        {
            "role": "tool",
            "tool_call_id": "call_3bdfa7d2_0_0",
            "content": "# Notes\nfixture notes line 2\n",
            "timestamp": read_at,
            "ok": True,
        },
        {
            "role": "tool",
            "tool_call_id": "call_3bdfa7d2_0_1",
            "content": "Error: ls: cannot access '/nonexistent-dir': No such file or "
            "directory\n\n\nCommand exited with code 2",
            "timestamp": ls_at,
            "ok": False,
        },
        {
            "role": "assistant",
            "content": 'notes.md starts with "# Notes". The command '
            "`ls /nonexistent-dir` "
            "failed: ls: cannot access '/nonexistent-dir': No such file or directory",
            "timestamp": answer_at,
        },
    ]


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_every_real_session_gives_valid_trajectory_records(path: Path) -> None:
    turn, _ = pi.read_turn(path)
    assert schemas.check(schemas.validator("trajectory-v1"), turn.records) == []


def test_the_active_branch_is_followed_not_file_order() -> None:
    turn = read("compaction-branch")
    assert turn.user_text == "Branch turn: run `echo on-the-branch`."
    assert turn.answer == "The command printed: on-the-branch"
    assert turn.leaf_id == fixture_lines("compaction-branch")[-1]["id"]


def test_entry_selects_the_turn_of_an_older_branch() -> None:
    leaf = entry_with_text("compaction-branch", "The command printed: third-turn")
    turn = read("compaction-branch", entry=leaf)
    assert turn.user_text == "Third turn after compaction: run `echo third-turn`."
    assert turn.entry_ids[0] == entry_with_text("compaction-branch", "Third turn")
    assert turn.entry_ids[-1] == leaf and len(turn.entry_ids) == 4
    assert turn.answer == "The command printed: third-turn"


def test_entry_in_the_middle_of_a_turn_ends_the_turn_there() -> None:
    user = entry_with_text("compaction-branch", "Third turn")
    call = next(
        e["id"] for e in fixture_lines("compaction-branch") if e.get("parentId") == user
    )
    turn = read("compaction-branch", entry=call)
    assert [r["role"] for r in turn.records] == [
        "meta",
        "user",
        "reasoning",
        "assistant",
    ]
    assert turn.answer is None


def test_an_unknown_entry_id_is_one_clear_error() -> None:
    with pytest.raises(SessionError, match=r"no entry 'nope' in this session$"):
        pi.read_turn(PI_SESSIONS / "basic.jsonl", "nope")


def test_aborted_and_errored_turns_carry_their_stop_reason() -> None:
    aborted = read("aborted")
    assert (aborted.stop_reason, aborted.error) == ("aborted", "Request was aborted")
    errored = read("errored")
    assert errored.stop_reason == "error"
    assert errored.error == (
        "fake provider: invalid_request_error: scripted failure for this fixture"
    )


def test_images_become_a_placeholder_and_are_carried_inline() -> None:
    turn = read("image")
    assert turn.user_text.endswith("What is in this image?\n[image]")
    assert "base64" not in turn.user_text
    (block,) = [
        b
        for line in fixture_lines("image")
        for b in (line.get("message") or {}).get("content") or []
        if isinstance(b, dict) and b.get("type") == "image"
    ]
    assert turn.user_images == [{"media_type": "image/png", "base64": block["data"]}]
    assert turn.records[1]["images"] == turn.user_images


def test_text_and_tool_call_in_one_message_become_two_records() -> None:
    turn = read("mixed")
    assert [(r["role"], r.get("content")) for r in turn.records[1:3]] == [
        ("user", "mixed-answer: what do the notes say?"),
        ("assistant", "Let me look at the notes file first."),
    ]
    assert turn.records[3]["tool_calls"][0]["name"] == "bash"


def test_bash_execution_is_not_part_of_the_agent_run() -> None:
    turn = read("bash-execution")
    assert [r["role"] for r in turn.records] == ["meta", "user", "assistant"]


@pytest.mark.parametrize("name", ["v1-linear", "v2-hookmessage"])
def test_old_versions_are_migrated_like_pi_does(name: str) -> None:
    ours, _ = pi.read_turn(HANDWRITTEN / f"{name}.jsonl")
    # The same session after pi itself migrated it to version 3 on load.
    theirs, _ = pi.read_turn(HANDWRITTEN / f"{name}.migrated-by-pi.jsonl")
    assert ours.records == theirs.records
    assert ours.answer is not None


def test_corrupt_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    lines = (PI_SESSIONS / "basic.jsonl").read_bytes().split(b"\n")
    lines.insert(3, b'{"type":"message","id":"trunc')
    lines.insert(5, b"\xff\xfe not utf-8")
    lines.insert(7, b'{"type":"hologram","id":"h1","parentId":null}')
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"\n".join(lines))
    turn, report = pi.read_turn(path)
    assert turn.answer == read("basic").answer
    assert report.warning() == (
        f"{path}: skipped 2 corrupt lines (line 4, 6); 1 entry (line 8) of unknown "
        "type 'hologram'"
    )


def test_a_file_that_is_not_a_pi_session(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"type":"user","message":{}}\n')
    with pytest.raises(
        SessionError, match=r"not a Pi session \(no 'session' header line\)"
    ):
        pi.read_turn(path)


def test_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SessionError, match=r"x.jsonl: no such session file$"):
        pi.read_turn(tmp_path / "x.jsonl")


def test_a_session_with_only_a_header(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"type":"session","version":3,"id":"s","cwd":"/p"}\n')
    with pytest.raises(TurnError, match="the session has no entries yet"):
        pi.read_turn(path)


def test_a_newer_session_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"type":"session","version":9,"id":"s"}\n')
    with pytest.raises(SessionError, match="session version 9 is newer"):
        pi.read_turn(path)


def test_a_parent_cycle_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(
        '{"type":"session","version":3,"id":"s"}\n'
        '{"type":"label","id":"a","parentId":"b"}\n'
        '{"type":"label","id":"b","parentId":"a"}\n'
    )
    with pytest.raises(SessionError, match="is its own ancestor"):
        pi.read_turn(path)


def test_find_session_picks_the_newest_of_the_project(project: Path) -> None:
    install_session(project, "basic")
    newest = install_session(project, "multi-turn")
    assert pi.find_session(project) == newest


def test_find_session_includes_subfolders_by_header_cwd(project: Path) -> None:
    sub = project / "pkg"
    sub.mkdir()
    folder = pi.agent_dir() / "sessions" / pi.encode_cwd(sub)
    folder.mkdir(parents=True)
    target = folder / "s.jsonl"
    target.write_text(f'{{"type":"session","version":3,"id":"s","cwd":"{sub}"}}\n')
    assert pi.find_session(project) == target
    # A sibling whose name merely starts the same way is not the project's.
    other = project.parent / f"{project.name}-other"
    other.mkdir()
    folder2 = pi.agent_dir() / "sessions" / pi.encode_cwd(other)
    folder2.mkdir(parents=True)
    decoy = folder2 / "s.jsonl"
    decoy.write_text(f'{{"type":"session","version":3,"id":"s","cwd":"{other}"}}\n')
    os.utime(decoy, (2_000_000_000, 2_000_000_000))
    assert pi.find_session(project) == target


def test_no_session_says_where_it_looked(project: Path) -> None:
    with pytest.raises(NoSessionError) as e:
        pi.find_session(project)
    where = pi.agent_dir() / "sessions" / pi.encode_cwd(project)
    assert str(e.value) == (
        f"no Pi session for {project} in {where} (run pi in the project first, "
        "set PI_CODING_AGENT_DIR, or pass --session PATH)"
    )


def test_encode_cwd_matches_pi() -> None:
    assert pi.encode_cwd(Path("/home/user/proj")) == "--home-user-proj--"


def _contexts(name: str) -> list[dict[str, Any]]:
    # The raw machine-context entries, read without machine's reader.
    return [
        line["data"]
        for line in fixture_lines(name)
        if line.get("type") == "custom" and line.get("customType") == pi.CONTEXT_ENTRY
    ]


def test_a_turn_has_the_context_recorded_last_before_it() -> None:
    first, third = _contexts("context")
    turn = read("context")
    assert turn.context == {"system": third["systemPrompt"], "tools": third["tools"]}
    assert [t["name"] for t in turn.context["tools"] or []] == ["read", "bash"]
    # run 2 (no entry of its own: nothing changed) has run 1's
    earlier = read(
        "context", entry_with_text("context", "The command printed: context-two")
    )
    assert earlier.context == {"system": first["systemPrompt"], "tools": first["tools"]}
    # a session written without machine's extension says nothing: unknown
    assert read("basic").context is None
