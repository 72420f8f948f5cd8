from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git.core import jsonio
from machine_git.core import paths
from machine_git.core.errors import INVALID
from machine_git.core.errors import NOT_FOUND
from machine_git.core.errors import USAGE
from machine_git.rows import rows
from machine_git.sessions import pi
from tests import helpers
from tests.conftest import PI_SESSIONS
from tests.conftest import Run
from tests.conftest import entry_with_text
from tests.conftest import fixture_lines
from tests.conftest import git
from tests.conftest import install_session
from tests.conftest import session_id

BASIC_USER = "Now two-tools: read notes.md and list /nonexistent-dir."
BASIC_ANSWER = (
    'notes.md starts with "# Notes". The command `ls /nonexistent-dir` failed: '
    "ls: cannot access '/nonexistent-dir': No such file or directory"
)


def store_of(project: Path) -> Path:
    return paths.store_path(project)


def row_at_head(project: Path, row_id: str) -> dict[str, Any]:
    text = git(store_of(project), "show", f"HEAD:{rows.row_path(row_id)}")
    value = orjson.loads(text)
    assert isinstance(value, dict)
    return value


def answer_id(name: str = "basic") -> str:
    turn, _ = pi.read_turn(PI_SESSIONS / f"{name}.jsonl")
    return rows.make_id("pi", turn.session_id, turn.entry_ids, "answer")


def trace_id(name: str = "basic") -> str:
    turn, _ = pi.read_turn(PI_SESSIONS / f"{name}.jsonl")
    return rows.make_id("pi", turn.session_id, turn.entry_ids, "trace")


def head(project: Path) -> str:
    return git(store_of(project), "rev-parse", "HEAD").strip()


def test_good_commits_a_train_row(project: Path, run: Run) -> None:
    session = install_session(project, "basic")
    result = run("good", "clear", "and", "right")
    row_id = answer_id()
    assert result.exit_code == 0, result.output
    assert result.stdout == f"good {row_id} -> train: {BASIC_USER}\n"
    row = row_at_head(project, row_id)
    entry_ids = [e["id"] for e in fixture_lines("basic")[-5:]]
    assert row["kind"] == "train" and row["tag"] == "good"
    assert row["note"] == "clear and right"
    assert row["messages"] == [
        {"role": "user", "content": BASIC_USER},
        {"role": "assistant", "content": BASIC_ANSWER},
    ]
    assert row["source"] == {
        "host": "pi",
        "session_id": session_id("basic"),
        "session_file": str(session),
        "entry_ids": entry_ids,
        "leaf_id": entry_ids[-1],
        "model": "fake-1",
        "provider": "fake",
        "cwd": "/tmp/machine-fixture/proj",
        "git_branch": None,
    }
    log = git(store_of(project), "log", "--format=%s%n%b---")
    assert log == (
        f"good {row_id}: Now two-tools: read notes.md and list /nonexistent-d…\n"
        "clear and right\n\n"
        "Machine-Action: tag\n"
        f"Machine-Row: {row_id}\n"
        "Machine-Kind: train\n"
        "Machine-Tag: good\n"
        f"Machine-Source: pi {session_id('basic')} {entry_ids[0]}..{entry_ids[-1]}\n"
        "---\n"
        "init store\nMachine-Action: init\n---\n"
    )


def test_tagging_the_same_turn_twice_is_reported_not_duplicated(
    project: Path, run: Run
) -> None:
    install_session(project, "basic")
    run("good")
    result = run("good")
    assert result.exit_code == 0
    assert result.stdout == f"already tagged {answer_id()} as train; nothing changed\n"
    assert len(git(store_of(project), "log", "--format=%H").split()) == 2


def test_bad_after_good_moves_the_row_in_one_commit(project: Path, run: Run) -> None:
    install_session(project, "basic")
    run("good")
    result = run("bad", "too", "terse")
    row_id = answer_id()
    assert result.stdout == f"moved {row_id} train -> rejected: {BASIC_USER}\n"
    row = row_at_head(project, row_id)
    assert (row["kind"], row["tag"], row["note"]) == ("rejected", "bad", "too terse")
    files = git(store_of(project), "ls-tree", "-r", "--name-only", "HEAD").split()
    assert files == ["machine.json", rows.row_path(row_id)]
    trailers = git(store_of(project), "log", "-1", "--format=%(trailers:only)")
    assert "Machine-Action: move\n" in trailers and "Machine-From: train\n" in trailers


def test_as_rewrites_the_answer_and_keeps_the_original(project: Path, run: Run) -> None:
    install_session(project, "basic")
    result = run("good", "--as", "notes.md has a header; the directory is missing.")
    assert result.exit_code == 0
    row = row_at_head(project, answer_id())
    assert row["messages"] == [
        {"role": "user", "content": BASIC_USER},
        {
            "role": "assistant",
            "content": "notes.md has a header; the directory is missing.",
        },
    ]
    assert row["original_answer"] == BASIC_ANSWER


def test_trace_keeps_the_turn_without_reasoning_by_default(
    project: Path, run: Run
) -> None:
    install_session(project, "basic")
    turn, _ = pi.read_turn(PI_SESSIONS / "basic.jsonl")
    result = run("good", "--trace")
    trace_id = rows.make_id("pi", turn.session_id, turn.entry_ids, "trace")
    assert result.stdout == f"good {trace_id} -> traces: {BASIC_USER}\n"
    row = row_at_head(project, trace_id)
    assert row["trajectory"] == [r for r in turn.records if r["role"] != "reasoning"]
    with_reasoning = run("bad", "--trajectory", "--reasoning")
    assert (
        with_reasoning.stdout == f"moved {trace_id} traces -> rejected: {BASIC_USER}\n"
    )
    assert row_at_head(project, trace_id)["trajectory"] == turn.records


def test_good_and_good_trace_are_two_rows(project: Path, run: Run) -> None:
    install_session(project, "basic")
    run("good")
    run("good", "--trace")
    result = run("data", "--json")
    assert orjson.loads(result.stdout)["counts"] == {
        "train": 1,
        "traces": 1,
        "rejected": 0,
        "observed": 0,
    }


def turn_id(shape: str, name: str = "basic") -> str:
    turn, _ = pi.read_turn(PI_SESSIONS / f"{name}.jsonl")
    return rows.make_id("pi", turn.session_id, turn.entry_ids, shape)


def row_files(project: Path) -> list[str]:
    files = git(store_of(project), "ls-tree", "-r", "--name-only", "HEAD").split()
    return [f for f in files if f.startswith("rows/")]


def commits(project: Path) -> int:
    return len(git(store_of(project), "log", "--format=%H").split())


def test_bad_after_good_moves_every_row_of_the_turn(project: Path, run: Run) -> None:
    install_session(project, "basic")
    run("good")
    run("good", "--trace")
    before = commits(project)
    result = run("bad", "not", "quite")
    answer, trace = turn_id("answer"), turn_id("trace")
    assert result.stdout == (
        f"moved {answer} train -> rejected: {BASIC_USER}\n"
        f"moved {trace} traces -> rejected (the same turn)\n"
    )
    assert commits(project) == before + 1  # one commit for the turn
    assert [row_at_head(project, i)["kind"] for i in (answer, trace)] == [
        "rejected",
        "rejected",
    ]
    message = git(store_of(project), "log", "-1", "--format=%B")
    assert f"also {trace} traces -> rejected (the same turn)" in message
    assert f"Machine-Also: {trace}\n" in message
    # log of the trace row shows the commit that moved it
    logged = run("log", "--id", trace[:8]).stdout.splitlines()
    assert len(logged) == 2
    # good again: both rows back, still one commit
    again = run("good", "--json")
    assert orjson.loads(again.stdout)["also"] == [
        {"id": trace, "from": "rejected", "kind": "traces"}
    ]
    assert commits(project) == before + 2


def test_tagging_an_observed_turn_labels_that_row(project: Path, run: Run) -> None:
    install_session(project, "basic")
    run("observe")
    observed = turn_id("observed")
    before = commits(project)
    result = run("good", "--as", "The directory does not exist.", "checked")
    assert result.stdout == (
        f"labeled {observed} good: observed -> traces: {BASIC_USER}\n"
    )
    assert commits(project) == before + 1
    assert row_files(project) == [rows.row_path(observed)]  # one row, same id
    row = row_at_head(project, observed)
    assert (row["kind"], row["tag"], row["note"]) == ("traces", "good", "checked")
    assert row["trajectory"][-1]["content"] == "The directory does not exist."
    assert row["original_answer"] == BASIC_ANSWER
    trailers = git(store_of(project), "log", "-1", "--format=%(trailers:only)")
    assert "Machine-Action: label\n" in trailers
    assert "Machine-From: observed\n" in trailers
    # the turn's other shapes find the same row
    assert run("good", "--trace").stdout == (
        f"already tagged {observed} as traces; nothing changed\n"
    )
    moved = run("bad")
    assert moved.stdout == f"moved {observed} traces -> rejected: {BASIC_USER}\n"
    assert row_files(project) == [rows.row_path(observed)]
    assert run("observed").stdout.startswith("no observed runs yet")


def test_observing_a_tagged_turn_records_nothing(project: Path, run: Run) -> None:
    install_session(project, "basic")
    run("good")
    before = commits(project)
    result = run("observe")
    assert result.stdout == (
        f"already recorded {answer_id()} as train; nothing changed\n"
    )
    assert commits(project) == before
    assert row_files(project) == [rows.row_path(answer_id())]
    as_json = orjson.loads(run("observe", "--json").stdout)
    assert (as_json["action"], as_json["id"], as_json["kind"]) == (
        "duplicate",
        answer_id(),
        "train",
    )


def test_out_writes_a_validated_row_and_leaves_no_store(
    project: Path, run: Run, tmp_path: Path
) -> None:
    install_session(project, "basic")
    out = tmp_path / "rows.jsonl"
    result = run("good", "--out", str(out))
    assert result.stdout == f"good {answer_id()} -> {out} (train)\n"
    run("bad", "--out", str(out))
    lines = out.read_bytes().splitlines()
    assert [orjson.loads(x)["kind"] for x in lines] == ["train", "rejected"]
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    assert not store_of(project).exists()


def test_out_to_a_directory_is_refused(project: Path, run: Run, tmp_path: Path) -> None:
    install_session(project, "basic")
    result = run("good", "--out", str(tmp_path))
    assert result.exit_code == USAGE
    assert result.stderr == f"Error: output path {str(tmp_path)!r} is a directory\n"


def test_session_and_entry_pick_an_exact_turn(project: Path, run: Run) -> None:
    session = PI_SESSIONS / "compaction-branch.jsonl"
    leaf = entry_with_text("compaction-branch", "The command printed: third-turn")
    result = run("good", "--session", str(session), "--entry", leaf, "--json")
    out = orjson.loads(result.stdout)
    row = row_at_head(project, out["id"])
    assert row["messages"][1]["content"] == "The command printed: third-turn"
    assert row["source"]["leaf_id"] == leaf


def test_no_session_is_one_line(project: Path, run: Run) -> None:
    # --host pi: auto's message (no session of any host) is in test_tag_hosts.py.
    result = run("good", "--host", "pi")
    assert result.exit_code == NOT_FOUND
    where = pi.agent_dir() / "sessions" / pi.encode_cwd(project)
    assert result.stderr == (
        f"Error: no Pi session for {project} in {where} (run pi in the project "
        "first, set PI_CODING_AGENT_DIR, or pass --session PATH)\n"
    )


ABORTED_USER = "abort-me: write a very long essay."
ERRORED_USER = "provider-error: this request will fail."
PROVIDER_ERROR = (
    "fake provider: invalid_request_error: scripted failure for this fixture"
)


@pytest.mark.parametrize("args", [(), ("--as", "A short essay."), ("--trace",)])
def test_good_refuses_a_failed_turn_with_the_reason(
    project: Path, run: Run, args: tuple[str, ...]
) -> None:
    install_session(project, "aborted")
    result = run("good", *args)
    assert result.exit_code == INVALID
    assert result.stderr == (
        "Error: the last turn was aborted: Request was aborted; nothing tagged "
        "(machine bad keeps a failed turn)\n"
    )
    assert not store_of(project).exists()


def test_bad_keeps_an_aborted_turn_as_it_was(project: Path, run: Run) -> None:
    install_session(project, "aborted")
    result = run("bad", "stopped", "it")
    row_id = answer_id("aborted")
    assert result.exit_code == 0
    assert result.stdout == f"bad {row_id} -> rejected: {ABORTED_USER}\n"
    row = row_at_head(project, row_id)
    assert row["messages"] == [
        {"role": "user", "content": ABORTED_USER},
        {"role": "assistant", "content": "Starting a very "},  # the partial answer
    ]
    assert row["failure"] == {"stop_reason": "aborted", "error": "Request was aborted"}
    assert (row["kind"], row["tag"], row["note"]) == ("rejected", "bad", "stopped it")
    assert run("validate", "--store").stdout == "checked 1 row: all valid\n"


def test_bad_as_on_a_failed_turn_keeps_the_partial_answer_as_the_original(
    project: Path, run: Run
) -> None:
    install_session(project, "aborted")
    rewritten = run("bad", "--as", "A short essay, finished.")
    assert rewritten.exit_code == 0
    row = row_at_head(project, answer_id("aborted"))
    assert row["messages"][1]["content"] == "A short essay, finished."
    assert row["original_answer"] == "Starting a very "
    assert row["failure"]["stop_reason"] == "aborted"
    assert run("validate", "--store").stdout == "checked 1 row: all valid\n"


def test_bad_keeps_an_errored_turn_with_no_answer(project: Path, run: Run) -> None:
    install_session(project, "errored")
    plain = run("bad")
    trace = run("bad", "--trace")
    assert (plain.exit_code, trace.exit_code) == (0, 0)
    answer = row_at_head(project, answer_id("errored"))
    assert answer["messages"] == [{"role": "user", "content": ERRORED_USER}]
    assert answer["failure"] == {"stop_reason": "error", "error": PROVIDER_ERROR}
    traced = row_at_head(project, trace_id("errored"))
    assert [r["role"] for r in traced["trajectory"]] == ["meta", "user"]
    assert traced["failure"] == answer["failure"]
    trailers = git(store_of(project), "log", "-1", "--format=%(trailers)")
    assert "Machine-Kind: rejected\n" in trailers
    # Such a row is not moved to good, and exports skip it (nothing to learn).
    moved = run("move", answer["id"], "--to", "good")
    assert moved.exit_code == INVALID
    assert moved.stderr == (
        f"Error: row {answer['id']} is a turn that ended with an error; only bad "
        "keeps it (nothing moved)\n"
    )
    exported = run("export", "--kind", "rejected")
    assert (exported.stdout, exported.stderr) == (
        "",
        "skipped 2 rejected rows without an answer\n"
        f"warning: no rejected rows to export at {head(project)[:12]}\n",
    )


def test_a_secret_in_the_error_is_redacted(project: Path, run: Run) -> None:
    session = install_session(project, "errored")
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    session.write_text(
        session.read_text().replace("scripted failure", f"bad token {token}")
    )
    result = run("bad")
    assert result.stderr == "redacted 1 secret (github-pat 1)\n"
    row = row_at_head(project, answer_id("errored"))
    assert token not in row["failure"]["error"]
    assert row["redactions"] == {"github-pat": 1}


def test_a_turn_without_an_answer_needs_as(project: Path, run: Run) -> None:
    session = str(PI_SESSIONS / "compaction-branch.jsonl")
    user = entry_with_text("compaction-branch", "Third turn")
    call = next(
        e["id"] for e in fixture_lines("compaction-branch") if e.get("parentId") == user
    )
    result = run("good", "--session", session, "--entry", call)
    assert result.exit_code == INVALID
    assert result.stderr == (
        "Error: the last turn has no answer yet (it ended on a tool call); "
        "tag it with --as TEXT to supply one\n"
    )
    ok = run("good", "--session", session, "--entry", call, "--as", "Done.")
    assert ok.exit_code == 0


def test_corrupt_lines_warn_on_stderr_and_still_tag(project: Path, run: Run) -> None:
    session = install_session(project, "basic")
    session.write_bytes(session.read_bytes() + b'{"type":"message","id":"x","par\n')
    result = run("good")
    assert result.exit_code == 0
    assert result.stderr == f"warning: {session}: skipped 1 corrupt line (line 13)\n"


def test_bad_entry_id_is_one_line(project: Path, run: Run) -> None:
    session = install_session(project, "basic")
    result = run("good", "--entry", "../../etc")
    assert result.exit_code == INVALID
    assert result.stderr == f"Error: {session}: no entry '../../etc' in this session\n"


def test_project_option_uses_that_projects_store(
    project: Path, run: Run, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    install_session(other, "basic")
    result = run("good", "--project", str(other))
    assert result.exit_code == 0
    assert store_of(other).exists() and not store_of(project).exists()
    assert store_of(other).name.startswith("other-")


# -- outside a git repository --------------------------------------------------------


@pytest.fixture
def plain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder in no git repository (nor above it), as the current folder."""
    folder = tmp_path / "notes" / "sub"
    folder.mkdir(parents=True)
    assert not any((p / ".git").exists() for p in (folder, *folder.parents))
    monkeypatch.chdir(folder)
    return folder


def notice(folder: Path) -> str:
    return (
        f"note: no git repository here, so {folder} is the project; its store was "
        f"created at {store_of(folder)} (pass --project DIR to choose another "
        "folder)\n"
    )


def test_outside_git_the_first_store_says_which_folder_is_the_project(
    plain: Path, run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_session(plain, "basic")
    first = run("good")
    assert first.exit_code == 0
    assert first.stderr == notice(plain)
    assert git(store_of(plain), "config", "machine.project").strip() == str(plain)
    # Only the first time: later commands, writing or not, say nothing more.
    for args in (("bad",), ("good", "--trace"), ("tagged",), ("data",)):
        assert run(*args).stderr == "", args
    # A folder beside it is another project, with its own store: said again.
    sibling = plain.parent / "other"
    sibling.mkdir()
    monkeypatch.chdir(sibling)
    rows_file = tmp_path / "rows.jsonl"
    # a whole row: nothing for import to say about what its format lacks
    rows_file.write_bytes(jsonio.line(helpers.train_row()))
    imported = run("import", str(rows_file))
    assert imported.stderr == notice(sibling)
    assert store_of(sibling) != store_of(plain)
    # Chosen with --project, a folder outside git is what the user asked for.
    chosen = plain.parent / "chosen"
    chosen.mkdir()
    quiet = run("import", str(rows_file), "--project", str(chosen))
    assert (quiet.exit_code, quiet.stderr) == (0, "")
    assert (store_of(chosen) / "HEAD").exists()


def test_inside_git_a_new_store_says_nothing(project: Path, run: Run) -> None:
    install_session(project, "basic")
    assert run("good").stderr == ""
    assert run("auto", "on", "--project", str(project)).stderr == ""
