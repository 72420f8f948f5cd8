from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from machine_git.core.errors import NoSessionError
from machine_git.core.errors import SessionError
from machine_git.core.errors import TurnError
from machine_git.sessions import SessionReader
from machine_git.sessions import claude
from machine_git.sessions import codex
from machine_git.sessions import detect
from machine_git.sessions import letta
from tests.conftest import FIXTURES
from tests.conftest import PI_SESSIONS
from tests.conftest import install_session

LETTA = FIXTURES / "letta"
CLAUDE_SESSION = next((FIXTURES / "claude").glob("-*/*.jsonl"))
CODEX_ROLLOUT = next((FIXTURES / "codex").glob("sessions/*/*/*/rollout-*.jsonl"))
TRANSCRIPT = next(LETTA.glob("transcript/*/*/transcript.jsonl"))

FILES = [
    (PI_SESSIONS / "basic.jsonl", "pi"),
    (PI_SESSIONS / "file-repair.jsonl", "pi"),
    (LETTA / "local-backend" / "bash-tool" / "messages.jsonl", "letta-local"),
    (TRANSCRIPT, "letta-transcript"),
    (LETTA / "api-history.json", "letta-history"),
    (LETTA / "agent.af", "letta-agent-file"),
    (CLAUDE_SESSION, "claude"),
    (CODEX_ROLLOUT, "codex"),
    (FIXTURES / "gemini" / "real" / "basic.jsonl", "gemini"),
]
TRIED = (
    "Pi session, Letta Code local-backend conversation, Letta Code transcript, "
    "Letta API message history, Letta Agent File, Claude Code session, Codex "
    "rollout, Gemini CLI session"
)


@pytest.fixture(autouse=True)
def _host_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    monkeypatch.setenv("LETTA_LOCAL_BACKEND_DIR", str(tmp_path / "lc-local-backend"))
    monkeypatch.setenv("LETTA_TRANSCRIPT_ROOT", str(tmp_path / "transcripts"))


@pytest.mark.parametrize(("path", "name"), FILES, ids=lambda v: getattr(v, "name", v))
def test_the_format_is_recognized_from_the_content(
    path: Path, name: str, tmp_path: Path
) -> None:
    assert detect.sniff(path).name == name
    # The name of the file plays no part.
    renamed = tmp_path / "session.txt"
    shutil.copyfile(path, renamed)
    assert detect.sniff(renamed).name == name
    turn, _ = detect.read(renamed)
    assert turn.host == detect.sniff(path).host


@pytest.mark.parametrize(("path", "name"), FILES, ids=lambda v: getattr(v, "name", v))
def test_each_host_reads_its_formats_through_the_reader_interface(
    path: Path, name: str
) -> None:
    form = detect.BY_NAME[name]
    host = detect.reader(form.host)
    assert isinstance(host, SessionReader)
    # The host names the format from a line (or the whole document) ...
    text = path.read_bytes()
    value = json.loads(text) if form.document else json.loads(text.split(b"\n")[0])
    assert host.recognize(value) == name
    # ... and reads it with or without being told which format it is.
    told, _ = host.read_turn(path, None, name)
    untold, _ = host.read_turn(path)
    assert told == untold == detect.read(path)[0]
    assert told.host == form.host


def test_no_host_claims_another_hosts_format() -> None:
    for path, name in FILES:
        text = path.read_bytes()
        form = detect.BY_NAME[name]
        value = json.loads(text) if form.document else json.loads(text.split(b"\n")[0])
        claims = {h: detect.reader(h).recognize(value) for h in detect.HOSTS}
        assert {h: n for h, n in claims.items() if n is not None} == {form.host: name}


@pytest.mark.parametrize(("path", "name"), [FILES[0], FILES[6], FILES[7]])
def test_reading_a_session_loads_only_the_hosts_before_it_in_the_sniff_order(
    path: Path, name: str
) -> None:
    # Pi is asked first: `machine good` in Pi loads no other host's reader.
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from machine_git.sessions import detect\n"
        "detect.read(Path(sys.argv[1]))\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith("
        "'machine_git.sessions.'))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = {m.split(".")[2] for m in done.stdout.split()}
    hosts = {"pi", "codex", "claude", "letta"} & loaded
    wanted = {
        "pi": {"pi"},
        "codex": {"pi", "codex"},
        "claude": {"pi", "codex", "claude"},
    }
    assert hosts == wanted[name]


def test_a_history_on_one_line_is_still_json(tmp_path: Path) -> None:
    compact = tmp_path / "h.json"
    compact.write_text(json.dumps(json.loads((LETTA / "api-history.json").read_text())))
    assert detect.sniff(compact).name == "letta-history"


def test_a_leading_corrupt_line_does_not_hide_the_format(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"type":"sess\n' + CODEX_ROLLOUT.read_bytes())
    assert detect.sniff(path).name == "codex"


@pytest.mark.parametrize(
    "content",
    [
        '{"hello": "world"}\n{"another": 1}\n',
        "just some text\n",
        "[1, 2, 3]",
        '{"agents": []}',
    ],
)
def test_an_unknown_format_is_one_line_naming_what_was_tried(
    tmp_path: Path, content: str
) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text(content)
    with pytest.raises(SessionError) as e:
        detect.sniff(path)
    assert str(e.value) == (
        f"{path}: not a session file of a known format (tried: {TRIED})"
    )


def test_an_empty_or_missing_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(TurnError, match=r"empty.jsonl: the session file is empty$"):
        detect.sniff(empty)
    with pytest.raises(SessionError, match=r"gone.jsonl: no such session file$"):
        detect.sniff(tmp_path / "gone.jsonl")


# -- locate -------------------------------------------------------------------------


def install_claude(project: Path, stamp: int) -> Path:
    folder = claude.config_dir() / "projects" / claude.encode_cwd(project)
    folder.mkdir(parents=True)
    target = folder / CLAUDE_SESSION.name
    shutil.copyfile(CLAUDE_SESSION, target)
    os.utime(target, (stamp, stamp))
    return target


def install_codex(project: Path, stamp: int) -> Path:
    folder = codex.home() / "sessions" / "2026" / "11" / "29"
    folder.mkdir(parents=True)
    target = folder / CODEX_ROLLOUT.name
    target.write_text(
        CODEX_ROLLOUT.read_text().replace("/workspace/greeter", str(project))
    )
    os.utime(target, (stamp, stamp))
    return target


def install_transcript(project: Path, stamp: int) -> Path:
    agent, conversation = TRANSCRIPT.parts[-3:-1]
    target = letta.transcript_root() / agent / conversation / "transcript.jsonl"
    target.parent.mkdir(parents=True)
    shutil.copyfile(TRANSCRIPT, target)
    os.utime(target, (stamp, stamp))
    (project / ".letta").mkdir()
    (project / ".letta" / "settings.local.json").write_text(
        json.dumps({"lastSession": {"agentId": agent, "conversationId": conversation}})
    )
    return target


def test_auto_with_only_pi_says_nothing(project: Path) -> None:
    session = install_session(project, "basic")
    found = detect.locate(project)
    assert (found.host, found.path, found.format, found.announce) == (
        "pi",
        session,
        detect.PI,
        False,
    )


def test_auto_picks_the_newest_session_across_hosts(project: Path) -> None:
    pi_session = install_session(project, "basic")  # mtime 1_800_000_001
    claude_session = install_claude(project, 1_800_000_050)
    codex_session = install_codex(project, 1_800_000_020)
    found = detect.locate(project)
    assert (found.host, found.path, found.announce) == ("claude", claude_session, True)
    os.utime(pi_session, (1_800_000_100, 1_800_000_100))
    found = detect.locate(project)
    assert (found.host, found.path, found.announce) == ("pi", pi_session, True)
    os.utime(codex_session, (1_800_000_200, 1_800_000_200))
    assert detect.locate(project).path == codex_session


def test_auto_with_one_other_host_says_which(project: Path) -> None:
    transcript = install_transcript(project, 1_800_000_000)
    found = detect.locate(project)
    assert (found.host, found.path, found.format, found.announce) == (
        "letta",
        transcript,
        detect.LETTA_TRANSCRIPT,
        True,
    )


def test_a_named_host_reads_only_that_host(project: Path) -> None:
    install_session(project, "basic")
    claude_session = install_claude(project, 1_700_000_000)  # older than Pi's
    found = detect.locate(project, "claude")
    assert (found.host, found.path, found.announce) == ("claude", claude_session, False)
    with pytest.raises(NoSessionError, match=r"^no Codex session for "):
        detect.locate(project, "codex")


def test_no_session_of_any_host(project: Path) -> None:
    with pytest.raises(NoSessionError) as e:
        detect.locate(project)
    assert str(e.value) == (
        f"no agent session for {project} (looked for Pi, Letta Code, Claude Code and "
        "Codex sessions; run your agent in the project first, or pass --host HOST "
        "or --session PATH)"
    )


def test_a_given_session_must_match_a_named_host(project: Path) -> None:
    found = detect.locate(project, "auto", CODEX_ROLLOUT)
    assert (found.host, found.format, found.announce) == ("codex", detect.CODEX, False)
    assert detect.locate(project, "codex", CODEX_ROLLOUT).host == "codex"
    with pytest.raises(SessionError) as e:
        detect.locate(project, "pi", CODEX_ROLLOUT)
    assert str(e.value) == (
        f"{CODEX_ROLLOUT} is a Codex rollout, not a Pi session "
        "(pass --host codex or --host auto)"
    )


def test_an_unknown_host_is_refused(project: Path) -> None:
    with pytest.raises(SessionError, match=r"unknown host 'vim' \(expected one of "):
        detect.locate(project, "vim")
