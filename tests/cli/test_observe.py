"""machine auto, observe, observed, label, fork and correction."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import orjson
import pytest

from machine_git.core import paths
from machine_git.core.errors import INVALID
from machine_git.core.errors import NOT_FOUND
from machine_git.core.errors import USAGE
from machine_git.rows import rows
from machine_git.sessions import detect
from machine_git.sessions import pi
from tests.conftest import FIXTURES
from tests.conftest import PI_SESSIONS
from tests.conftest import Run
from tests.conftest import git
from tests.conftest import install_session

BASIC_USER = "Now two-tools: read notes.md and list /nonexistent-dir."


def store_of(project: Path) -> Path:
    return paths.store_path(project)


def observed_id(name: str = "basic") -> str:
    turn, _ = pi.read_turn(PI_SESSIONS / f"{name}.jsonl")
    return rows.make_id("pi", turn.session_id, turn.entry_ids, "observed")


def row_at_head(project: Path, row_id: str) -> dict[str, object]:
    value = orjson.loads(
        git(store_of(project), "show", f"HEAD:{rows.row_path(row_id)}")
    )
    assert isinstance(value, dict)
    return value


def test_auto_on_off_status(project: Path, run: Run) -> None:
    assert run("auto").stdout == f"auto-capture off for {project}\n"
    assert not store_of(project).exists()
    assert run("auto", "on").stdout == (
        f"auto-capture on for {project}: finished pi -p runs and compactions "
        "are recorded as observed rows\n"
    )
    assert run("auto", "on").stdout == "auto-capture was already on; nothing changed\n"
    assert run("auto", "status", "--json").stdout == (
        json.dumps(
            {"auto": True, "commit": None, "project": str(project)},
            separators=(",", ":"),
        )
        + "\n"
    )
    assert run("auto", "off").stdout == f"auto-capture off for {project}\n"
    assert git(store_of(project), "log", "--format=%s") == (
        "set auto = false\nset auto = true\ninit store\n"
    )


def test_observe_if_auto_does_nothing_while_auto_is_off(
    project: Path, run: Run
) -> None:
    session = install_session(project, "basic")
    result = run("observe", "--if-auto", "--session", str(session))
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "")
    assert not store_of(project).exists()


def test_observe_records_a_run_once(project: Path, run: Run) -> None:
    install_session(project, "basic")
    row_id = observed_id()
    result = run("observe")
    assert result.exit_code == 0, result.output
    assert result.stdout == f"observed {row_id}: {BASIC_USER}\n"
    row = row_at_head(project, row_id)
    assert (row["kind"], row["tag"]) == ("observed", "observed")
    assert run("observe").stdout == (
        f"already recorded {row_id} as observed; nothing changed\n"
    )
    run("auto", "on")
    quiet = run("observe", "--if-auto")
    assert (quiet.stdout, quiet.stderr) == ("", "")
    assert run("observed").stdout == (
        f"{row_id}  {str(row['created_at'])[:16].replace('T', ' ')}  "
        "Now two-tools: read notes.md and list /nonexisten…\n"
    )


def test_a_forked_run_points_at_its_parent(
    project: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = install_session(project, "multi-turn")
    monkeypatch.setenv("MACHINE_FORK_PARENT", "a1b2c3d4e5f6")
    result = run("observe", "--session", str(session))
    row_id = observed_id("multi-turn")
    assert result.stdout == (
        f"observed {row_id}: Turn three: write-file summary.txt with a short summary. "
        "(fork of a1b2c3d4e5f6)\n"
    )
    source = row_at_head(project, row_id)["source"]
    assert isinstance(source, dict) and source["parent_row"] == "a1b2c3d4e5f6"


def test_observe_a_letta_history(project: Path, run: Run) -> None:
    history = FIXTURES / "letta" / "api-history.json"
    turn, _ = detect.read(history)
    row_id = rows.make_id("letta", turn.session_id, turn.entry_ids, "observed")
    result = run("observe", "--host", "letta", "--session", str(history))
    assert result.stdout == (
        f"observed {row_id}: Make it deterministic and run the tests.\n"
    )
    assert row_at_head(project, row_id)["source"]["host"] == "letta"  # type: ignore[index]


def test_observe_refuses_a_failed_run(project: Path, run: Run) -> None:
    install_session(project, "aborted")
    result = run("observe")
    assert result.exit_code == INVALID
    assert result.stderr == (
        "Error: the run was aborted: Request was aborted; nothing observed\n"
    )


def test_observed_before_anything(project: Path, run: Run) -> None:
    assert run("observed").stdout == (
        "no observed runs yet (machine auto on records pi -p runs)\n"
    )


def test_label_turns_an_observed_run_into_a_trace(project: Path, run: Run) -> None:
    install_session(project, "basic")
    run("observe")
    row_id = observed_id()
    result = run("label", row_id[:5], "good", "--note", "right tools")
    assert result.stdout == (
        f"labeled {row_id} good: observed -> traces: {BASIC_USER}\n"
    )
    row = row_at_head(project, row_id)
    assert (row["kind"], row["tag"], row["note"]) == ("traces", "good", "right tools")
    assert run("observed").stdout.startswith("no observed runs yet")
    head = git(store_of(project), "rev-parse", "HEAD")
    same = run("label", row_id, "good")
    assert (same.exit_code, same.stdout) == (
        0,
        f"{row_id} is already good (traces); nothing changed\n",
    )
    again = run("label", row_id, "bad")
    assert again.exit_code == USAGE
    assert again.stderr == (
        f"Error: row {row_id} is a traces row, not observed; "
        f"use machine move {row_id} --to bad\n"
    )
    assert git(store_of(project), "rev-parse", "HEAD") == head


# -- forks -----------------------------------------------------------------------


def fake_pi(tmp_path: Path, status: int = 0, writes: Path | None = None) -> Path:
    """A stand-in ``pi`` that records its argv and MACHINE_FORK* environment,
    and leaves the session file ``writes`` (one the real pi wrote) behind."""
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "pi"
    copy = f'cp "{writes}" "{writes.parent / "fork.jsonl"}"\n' if writes else ""
    script.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$@" > "{tmp_path}/pi-args"\n'
        f'env | grep "^MACHINE_FORK" | sort > "{tmp_path}/pi-env"\n'
        f"{copy}"
        f"exit {status}\n"
    )
    script.chmod(stat.S_IRWXU)
    return folder


def test_fork_without_an_observed_run(project: Path, run: Run) -> None:
    result = run("fork", "again")
    assert result.exit_code == NOT_FOUND
    assert result.stderr == (
        "Error: no observed run to fork (machine auto on, then run pi -p; "
        "or machine correction --id ID)\n"
    )


def test_fork_prints_prompt_and_command_without_pi(
    project: Path, run: Run, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    install_session(project, "multi-turn")
    run("observe")
    row_id = observed_id("multi-turn")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    result = run("fork", "write", "it", "in", "markdown")
    prompt = (
        "Redo this task with a correction.\n\n"
        "Task:\nTurn three: write-file summary.txt with a short summary.\n\n"
        "Previous answer:\nWrote summary.txt.\n\n"
        "Correction:\nwrite it in markdown\n"
    )
    assert result.exit_code == 0, result.output
    assert (
        result.stderr == "warning: pi is not on PATH; run the command below yourself\n"
    )
    assert result.stdout == (
        f"prompt (fork of {row_id}):\n{prompt}\n"
        "command:\n"
        f"MACHINE_FORK=1 MACHINE_FORK_PARENT={row_id} pi -p '{prompt}'\n"
    )
    dry = run("fork", "--dry-run", "write", "it", "in", "markdown")
    assert (dry.stdout, dry.stderr) == (result.stdout, "")


def test_fork_runs_pi_with_the_parent_in_its_environment(
    project: Path, run: Run, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    install_session(project, "multi-turn")
    run("observe")
    row_id = observed_id("multi-turn")
    monkeypatch.setenv("PATH", f"{fake_pi(tmp_path)}{os.pathsep}/usr/bin:/bin")
    result = run("fork", "use", "markdown")
    assert result.exit_code == 0, result.output
    assert result.stderr == (
        f"fork of {row_id}: running pi -p\n"
        f"warning: the fork of {row_id} left no Pi session; nothing recorded\n"
    )
    assert (
        (tmp_path / "pi-args")
        .read_text()
        .startswith("-p\nRedo this task with a correction.\n")
    )
    assert (tmp_path / "pi-env").read_text() == (
        f"MACHINE_FORK=1\nMACHINE_FORK_PARENT={row_id}\n"
    )


def test_fork_records_the_new_run_with_its_parent_while_auto_is_off(
    project: Path, run: Run, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    install_session(project, "multi-turn")
    run("observe")
    parent = observed_id("multi-turn")
    # the session the forked pi writes (a real one: the basic fixture)
    target = pi.agent_dir() / "sessions" / pi.encode_cwd(project) / "src.jsonl"
    target.write_bytes((PI_SESSIONS / "basic.jsonl").read_bytes())
    monkeypatch.setenv(
        "PATH", f"{fake_pi(tmp_path, writes=target)}{os.pathsep}/usr/bin:/bin"
    )
    result = run("fork", "use", "markdown")
    assert result.exit_code == 0, result.output
    assert run("auto").stdout == f"auto-capture off for {project}\n"
    fork_id = observed_id()
    assert result.stderr == (
        f"fork of {parent}: running pi -p\n"
        f"observed {fork_id}: {BASIC_USER} (fork of {parent})\n"
    )
    row = row_at_head(project, fork_id)
    assert row["source"]["parent_row"] == parent  # type: ignore[index]
    assert row["source"]["session_file"].endswith("/fork.jsonl")  # type: ignore[index]


def test_correction_of_a_train_row_passes_pi_failures_on(
    project: Path, run: Run, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    install_session(project, "basic")
    tagged = run("good", "--json")
    row_id = json.loads(tagged.stdout)["id"]
    monkeypatch.setenv(
        "PATH", f"{fake_pi(tmp_path, status=3)}{os.pathsep}/usr/bin:/bin"
    )
    result = run("correction", "--id", row_id[:6], "skip", "the", "read")
    assert result.exit_code == 3
    args = (tmp_path / "pi-args").read_text()
    assert args.endswith("Correction:\nskip the read\n\n")
    assert f"Task:\n{BASIC_USER}\n" in args


# -- --json ----------------------------------------------------------------------


def test_fork_json_without_pi_gives_the_prompt_and_command(
    project: Path, run: Run, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    install_session(project, "multi-turn")
    run("observe")
    row_id = observed_id("multi-turn")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    result = run("fork", "write", "it", "in", "markdown", "--json")
    prompt = (
        "Redo this task with a correction.\n\n"
        "Task:\nTurn three: write-file summary.txt with a short summary.\n\n"
        "Previous answer:\nWrote summary.txt.\n\n"
        "Correction:\nwrite it in markdown\n"
    )
    assert result.exit_code == 0, result.output
    assert orjson.loads(result.stdout) == {
        "parent": row_id,
        "prompt": prompt,
        "command": f"MACHINE_FORK=1 MACHINE_FORK_PARENT={row_id} pi -p '{prompt}'",
        "ran": False,
        "status": None,
        "observed": None,
    }
    assert result.stdout.count("\n") == 1
    assert result.stderr == (
        "warning: pi is not on PATH; run the command below yourself\n"
    )
    same = run("correction", "--id", row_id, "write it in markdown", "--json")
    assert same.stdout == result.stdout


def test_fork_json_sends_pi_s_output_to_stderr(
    project: Path,
    run: Run,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    install_session(project, "multi-turn")
    run("observe")
    parent = observed_id("multi-turn")
    target = pi.agent_dir() / "sessions" / pi.encode_cwd(project) / "src.jsonl"
    target.write_bytes((PI_SESSIONS / "basic.jsonl").read_bytes())
    folder = fake_pi(tmp_path, writes=target)
    script = folder / "pi"
    script.write_text(  # pi -p prints its answer on stdout
        script.read_text().replace("#!/bin/sh\n", "#!/bin/sh\necho pi answered\n")
    )
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}/usr/bin:/bin")
    capfd.readouterr()
    result = run("fork", "use", "markdown", "--json")
    assert result.exit_code == 0, result.output
    fork_id = observed_id()
    found = orjson.loads(result.stdout)
    assert (found["parent"], found["ran"], found["status"], found["observed"]) == (
        parent,
        True,
        0,
        fork_id,
    )
    assert result.stdout.count("\n") == 1
    assert capfd.readouterr().err == "pi answered\n"  # pi's stdout, on fd 2
