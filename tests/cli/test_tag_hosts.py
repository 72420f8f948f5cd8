"""``machine good``/``bad`` on every host's sessions: same rows whatever the agent."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git.core import paths
from machine_git.core.errors import INVALID
from machine_git.core.errors import NOT_FOUND
from machine_git.rows import context
from machine_git.rows import images
from machine_git.rows import rows
from machine_git.sessions import claude
from machine_git.sessions import codex
from machine_git.sessions import letta
from tests.conftest import FIXTURES
from tests.conftest import Run
from tests.conftest import git
from tests.conftest import install_session

LETTA = FIXTURES / "letta"
LOCAL = LETTA / "local-backend" / "bash-tool"
TRANSCRIPT = next(LETTA.glob("transcript/*/*/transcript.jsonl"))
CLAUDE = next((FIXTURES / "claude").glob("-*/*.jsonl"))
CODEX = next((FIXTURES / "codex").glob("sessions/*/*/*/rollout-*.jsonl"))
RETRY_USER = "Make it deterministic and run the tests."
RETRY_ANSWER = (
    "The test now injects a fake sleep, so it no longer depends on timing; both "
    "tests pass."
)
AGENT = "agent-local-7d625a20-2b34-40f7-87e1-c816c34d783d"


@dataclass(frozen=True)
class Fixture:
    """One host's fixture and what tagging its last turn must record."""

    name: str
    path: Path
    expected: Path
    host: str
    session_id: str
    first: str
    last: str
    model: str | None
    user: str
    answer: str
    # The session holds the system prompt the turn ran with (README: "Context").
    system_prompt: bool = False

    def row_id(self, shape: str = "answer") -> str:
        return rows.make_id(self.host, self.session_id, [self.first, self.last], shape)


def _agent_file_session() -> str:
    key = orjson.dumps(["retry-helper", "2026-11-29T10:00:00.000000+00:00"])
    return f"agent-0-{hashlib.sha256(key).hexdigest()[:12]}"


FIXTURES_BY_HOST = [
    Fixture(
        "letta-local",
        LOCAL / "messages.jsonl",
        LOCAL / "expected.json",
        "letta",
        f"{AGENT}/local-conv-1",
        "ui-msg-1",
        "ui-msg-4",
        "fake-model",
        "Say hello using bash",
        "Done: the command printed hello-from-letta.",
    ),
    Fixture(
        "letta-transcript",
        TRANSCRIPT,
        TRANSCRIPT.parent / "expected.json",
        "letta",
        "/".join(TRANSCRIPT.parts[-3:-1]),
        "user-b83f27a4",
        "otid-5fa19c37",
        None,
        RETRY_USER,
        RETRY_ANSWER,
    ),
    Fixture(
        "letta-history",
        LETTA / "api-history.json",
        LETTA / "api-history.expected.json",
        "letta",
        "letta-api",
        "message-0b6f1e3a-0000-4000-8000-000000000008",
        "message-0b6f1e3a-0000-4000-8000-000000000019",
        None,
        RETRY_USER,
        RETRY_ANSWER,
        system_prompt=True,
    ),
    Fixture(
        "letta-agent-file",
        LETTA / "agent.af",
        LETTA / "agent.expected.json",
        "letta",
        _agent_file_session(),
        "message-10",
        "message-18",
        "gpt-4.1-mini-2025-04-14",
        "Save that decision to archival memory and tell me when done.",
        "Archival memory was unreachable, so I saved the retry policy to core "
        "memory instead.",
        system_prompt=True,
    ),
    Fixture(
        "claude",
        CLAUDE,
        CLAUDE.parent / "expected.json",
        "claude",
        CLAUDE.stem,
        "0000000b-1c2d-4e3f-8a4b-5c6d7e8f9a0b",
        "0000001d-1c2d-4e3f-8a4b-5c6d7e8f9a1d",
        "claude-sonnet-4-5-20250929",
        "Make it deterministic and run the tests. The CI screenshot is in "
        "docs/flaky.png.",
        "The test now passes a no-op `fake_sleep` into `retry()`, so it no longer "
        "depends on wall-clock time. Both tests pass.",
    ),
    Fixture(
        "codex",
        CODEX,
        CODEX.parent / "expected.json",
        "codex",
        "01a226bf-4900-7a3c-9d41-5e8f2b6c0a17",
        "L18",
        "L33",
        "gpt-5-codex",
        "Now add a test for it and run the tests; fix anything that fails.",
        "Added `test_greeter.py`. The first run failed because the test expected "
        "`Hello, Ada` without the `!`; I fixed the test and it now passes.",
    ),
]


@pytest.fixture(autouse=True)
def _host_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    monkeypatch.setenv("LETTA_LOCAL_BACKEND_DIR", str(tmp_path / "lc-local-backend"))
    monkeypatch.setenv("LETTA_TRANSCRIPT_ROOT", str(tmp_path / "transcripts"))


def row_at_head(project: Path, row_id: str) -> dict[str, Any]:
    text = git(paths.store_path(project), "show", f"HEAD:{rows.row_path(row_id)}")
    value = orjson.loads(text)
    assert isinstance(value, dict)
    return value


def words(text: str) -> str:
    return rows.first_words({"messages": [{"role": "user", "content": text}]})


@pytest.mark.parametrize("fx", FIXTURES_BY_HOST, ids=lambda f: f.name)
def test_good_session_tags_every_hosts_last_turn(
    project: Path, run: Run, fx: Fixture
) -> None:
    result = run("good", "--session", str(fx.path))
    assert result.exit_code == 0, result.output
    assert result.stdout == f"good {fx.row_id()} -> train: {words(fx.user)}\n"
    assert result.stderr == ""
    row = row_at_head(project, fx.row_id())
    assert row["messages"] == [
        {"role": "user", "content": fx.user},
        {"role": "assistant", "content": fx.answer},
    ]
    source = row["source"]
    assert (source["host"], source["session_id"], source["session_file"]) == (
        fx.host,
        fx.session_id,
        str(fx.path),
    )
    assert (source["entry_ids"][0], source["entry_ids"][-1]) == (fx.first, fx.last)
    assert source["model"] == fx.model
    trailers = git(paths.store_path(project), "log", "-1", "--format=%(trailers:only)")
    assert f"Machine-Source: {fx.host} {fx.session_id} {fx.first}..{fx.last}\n" in (
        trailers
    )


@pytest.mark.parametrize("fx", FIXTURES_BY_HOST, ids=lambda f: f.name)
def test_a_trace_is_the_same_records_for_every_host(
    project: Path, run: Run, fx: Fixture
) -> None:
    # The expectation holds images inline, as read; the store names them by hash.
    inline = orjson.loads(fx.expected.read_bytes())
    records = images.stored({"kind": "traces", "trajectory": inline})[0]["trajectory"]
    result = run("good", "--trace", "--session", str(fx.path))
    assert result.stdout == f"good {fx.row_id('trace')} -> traces: {words(fx.user)}\n"
    row = row_at_head(project, fx.row_id("trace"))
    assert row["trajectory"] == [r for r in records if r["role"] != "reasoning"]
    # A Letta message list and Agent File keep the compiled system prompt (this
    # hand-written .af has no tool schemas); the others hold neither prompt
    # nor tools (Claude Code never writes them; this Letta conversation
    # predates system-prompt.json; Codex 0.46 records "instructions": null),
    # so the row says its context is unknown.
    if fx.system_prompt:
        stored = orjson.loads(
            git(
                paths.store_path(project),
                "show",
                f"HEAD:{context.path_of(row['context'])}",
            )
        )
        assert stored["system"].startswith("You are ") and stored["tools"] is None
    else:
        assert row["context"] is None
    result = run("bad", "--trace", "--reasoning", "--session", str(fx.path))
    assert result.stdout == (
        f"moved {fx.row_id('trace')} traces -> rejected: {words(fx.user)}\n"
    )
    assert row_at_head(project, fx.row_id("trace"))["trajectory"] == records


# -- finding the session: --host and auto ----------------------------------------------


def install_claude(project: Path, stamp: int = 1_800_000_050) -> Path:
    folder = claude.config_dir() / "projects" / claude.encode_cwd(project)
    folder.mkdir(parents=True)
    target = folder / CLAUDE.name
    shutil.copyfile(CLAUDE, target)
    os.utime(target, (stamp, stamp))
    return target


def install_codex(project: Path, stamp: int = 1_800_000_050) -> Path:
    folder = codex.home() / "sessions" / "2026" / "11" / "29"
    folder.mkdir(parents=True)
    target = folder / CODEX.name
    target.write_text(CODEX.read_text().replace("/workspace/greeter", str(project)))
    os.utime(target, (stamp, stamp))
    return target


def install_letta(project: Path, stamp: int = 1_800_000_050) -> Path:
    folder = letta.backend_dir() / "conversations"
    target = (
        folder / letta.conversation_folder("local-conv-1", AGENT) / "messages.jsonl"
    )
    target.parent.mkdir(parents=True)
    old = "/tmp/machine-letta-fixtures/bash-tool/project"
    target.write_text(
        LOCAL.joinpath("messages.jsonl").read_text().replace(old, str(project))
    )
    os.utime(target, (stamp, stamp))
    return target


INSTALLERS = {"letta": install_letta, "claude": install_claude, "codex": install_codex}
BY_HOST = {
    "letta": FIXTURES_BY_HOST[0],
    "claude": FIXTURES_BY_HOST[4],
    "codex": FIXTURES_BY_HOST[5],
}


@pytest.mark.parametrize("host", sorted(INSTALLERS))
def test_host_finds_the_projects_session(project: Path, run: Run, host: str) -> None:
    install_session(project, "basic")  # Pi's is there too; --host decides
    path = INSTALLERS[host](project, 1_700_000_000)  # and older
    fx = BY_HOST[host]
    result = run("good", "--host", host)
    assert result.exit_code == 0, result.output
    assert result.stdout == f"good {fx.row_id()} -> train: {words(fx.user)}\n"
    assert result.stderr == ""
    assert row_at_head(project, fx.row_id())["source"]["session_file"] == str(path)


@pytest.mark.parametrize("host", sorted(INSTALLERS))
def test_auto_says_which_session_it_used(project: Path, run: Run, host: str) -> None:
    path = INSTALLERS[host](project)
    fx = BY_HOST[host]
    result = run("good")
    assert result.exit_code == 0, result.output
    assert result.stderr == f"using {host} session {path}\n"
    assert result.stdout == f"good {fx.row_id()} -> train: {words(fx.user)}\n"


def test_auto_takes_the_newest_across_hosts(project: Path, run: Run) -> None:
    pi_session = install_session(project, "basic")  # mtime 1_800_000_001
    codex_session = install_codex(project, 1_800_000_050)
    result = run("bad", "--json")
    assert result.stderr == f"using codex session {codex_session}\n"
    assert orjson.loads(result.stdout)["id"] == BY_HOST["codex"].row_id()
    os.utime(pi_session, (1_800_000_100, 1_800_000_100))
    result = run("bad", "--json")
    assert result.stderr == f"using pi session {pi_session}\n"
    assert (
        row_at_head(project, orjson.loads(result.stdout)["id"])["source"]["host"]
        == "pi"
    )


def test_no_session_of_any_host_is_one_line(project: Path, run: Run) -> None:
    result = run("good")
    assert result.exit_code == NOT_FOUND
    assert result.stderr == (
        f"Error: no agent session for {project} (looked for Pi, Letta Code, Claude "
        "Code and Codex sessions; run your agent in the project first, or pass "
        "--host HOST or --session PATH)\n"
    )


def test_a_session_of_another_host_than_named(project: Path, run: Run) -> None:
    result = run("good", "--host", "pi", "--session", str(CLAUDE))
    assert result.exit_code == INVALID
    assert result.stderr == (
        f"Error: {CLAUDE} is a Claude Code session, not a Pi session "
        "(pass --host claude or --host auto)\n"
    )
    assert not paths.store_path(project).exists()


def test_a_file_of_no_known_format(project: Path, run: Run, tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text(json.dumps({"note": "not a session"}) + "\n")
    result = run("good", "--session", str(path))
    assert result.exit_code == INVALID
    assert result.stderr == (
        f"Error: {path}: not a session file of a known format (tried: Pi session, "
        "Letta Code local-backend conversation, Letta Code transcript, Letta API "
        "message history, Letta Agent File, Claude Code session, Codex rollout, "
        "Gemini CLI session)\n"
    )


def test_skipped_lines_of_any_host_are_one_warning(
    project: Path, run: Run, tmp_path: Path
) -> None:
    path = tmp_path / "rollout.jsonl"
    path.write_bytes(CODEX.read_bytes() + b'{"timestamp":"2026-11-29T10:03:00Z","typ')
    result = run("good", "--session", str(path))
    assert result.exit_code == 0
    assert result.stderr == f"warning: {path}: skipped 1 corrupt line (line 35)\n"


def test_an_unfinished_turn_needs_an_answer(
    project: Path, run: Run, tmp_path: Path
) -> None:
    path = tmp_path / "rollout.jsonl"
    path.write_bytes(
        b"\n".join(CODEX.read_bytes().split(b"\n")[:26])
    )  # before the answer
    result = run("good", "--session", str(path))
    assert result.exit_code == INVALID
    assert result.stderr == (
        "Error: the last turn has no answer yet (it ended on a tool call); tag it "
        "with --as TEXT to supply one\n"
    )
    result = run("good", "--session", str(path), "--as", "The test fails; fixing it.")
    assert result.exit_code == 0, result.output


def test_a_claude_file_without_parent_links_is_tagged_in_file_order(
    project: Path, run: Run, tmp_path: Path
) -> None:
    # letta-ai/trajectory's Claude Code fixtures have no parentUuid: such a
    # file was refused "no user message on the active branch".
    session = tmp_path / "linkless.jsonl"
    lines = [
        {
            "type": "user",
            "uuid": "u1",
            "sessionId": "s9",
            "cwd": str(project),
            "timestamp": "2026-03-06T14:15:22.394Z",
            "message": {"role": "user", "content": "fix the flaky retry test"},
        },
        {
            "type": "assistant",
            "uuid": "a1",
            "timestamp": "2026-03-06T14:15:30.000Z",
            "message": {
                "role": "assistant",
                "model": "claude-opus-4-6",
                "content": [{"type": "text", "text": "Patched the backoff."}],
            },
        },
    ]
    session.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    result = run("good", "--session", str(session))
    assert result.exit_code == 0, result.output
    row_id = result.stdout.split()[1]
    assert result.stdout == f"good {row_id} -> train: fix the flaky retry test\n"
    row = row_at_head(project, row_id)
    assert row["messages"][1] == {
        "role": "assistant",
        "content": "Patched the backoff.",
    }
    assert row["source"]["entry_ids"] == ["u1", "a1"]
