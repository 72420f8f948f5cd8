from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import orjson
import pytest

from machine_git import jsonio
from machine_git import paths
from machine_git import rows
from machine_git.agents import install
from machine_git.errors import INVALID
from machine_git.errors import NOT_FOUND
from machine_git.errors import USAGE
from machine_git.sessions import detect
from machine_git.sessions import pi
from machine_git.store import Change
from machine_git.store import Store
from tests import helpers
from tests.agents import conftest as oai_stub
from tests.conftest import FIXTURES
from tests.conftest import PI_SESSIONS
from tests.conftest import Run
from tests.conftest import git
from tests.conftest import install_session

INKLING = "thinkingmachines/Inkling-Small:peft:262144"
BASIC_USER = "Now two-tools: read notes.md and list /nonexistent-dir."
SKILLS = ("machine-dataset", "machine-release", "machine-tagging", "machine-tinker-sft")


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


# -- install ---------------------------------------------------------------------


def test_install_pi_twice_and_uninstall(project: Path, run: Run) -> None:
    agent = pi.agent_dir()
    ext, models = agent / "extensions" / "machine.ts", agent / "models.json"
    first = run("install", "pi")
    assert first.exit_code == 0, first.output
    skills = (
        f"skills {', '.join(SKILLS)}: loaded by the extension from "
        f"{install.skills_dir()}\n"
    )
    assert first.stdout == (
        f"installed {ext}\n"
        f"installed the Tinker provider in {models}\n"
        f"{skills}"
        "run /reload in pi (or start it again) to load the commands\n"
    )
    argv = json.dumps([sys.executable, "-m", "machine_git"])
    assert f"const MACHINE: string[] = {argv};" in ext.read_text()
    again = run("install", "pi")
    assert again.stdout == (
        f"up to date: {ext}\n"
        f"up to date: the Tinker provider in {models}\n"
        f"{skills}"
        "run /reload in pi (or start it again) to load the commands\n"
    )
    gone = run("uninstall", "pi")
    assert gone.stdout == f"removed {ext}\nremoved the Tinker provider from {models}\n"
    assert not ext.exists()
    assert run("uninstall", "pi").stdout == f"not installed: {ext}\n"


def test_install_pi_in_the_project(project: Path, run: Run) -> None:
    result = run("install", "pi", "--project")
    target = project / ".pi" / "extensions" / "machine.ts"
    assert result.stdout.splitlines()[0] == f"installed {target}"
    assert 'const SCOPE: string = "project";' in target.read_text()
    assert run("uninstall", "pi", "--project").stdout.splitlines()[0] == (
        f"removed {target}"
    )


def test_letta_mods_are_global_only(project: Path, run: Run) -> None:
    result = run("install", "letta", "--project")
    assert result.exit_code == USAGE
    assert result.stderr == (
        "Error: Letta Code loads mods from ~/.letta/mods only; drop --project\n"
    )
    done = run("install", "letta")
    target = Path.home() / ".letta" / "mods" / "machine.ts"
    skills = [Path.home() / ".letta" / "skills" / n / "SKILL.md" for n in SKILLS]
    provider = target.with_name("machine-tinker.ts")
    assert done.stdout == (
        f"installed {target}\n"
        f"installed {provider}\n"
        + "".join(f"installed {path}\n" for path in skills)
        + "run /reload in Letta Code (mods need Letta Code 0.30 or newer)\n"
    )
    assert run("uninstall", "letta").stdout == (
        f"removed {target}\nremoved {provider}\n"
        + "".join(f"removed {path}\n" for path in skills)
    )


# -- auto and observe ------------------------------------------------------------


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


# -- the student -----------------------------------------------------------------


def pi_settings(**values: str) -> Path:
    path = pi.agent_dir() / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"theme": "dark", **values}))
    return path


def test_student_set_show_and_back_to_work(
    project: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    assert run("student").stdout == (
        "no student set; choose one with machine student HANDLE "
        "(e.g. thinkingmachines/Inkling-Small:peft:262144)\n"
    )
    run("install", "pi")
    handle = "tinker://run-7:train:0/sampler_weights/final"
    result = run("student", handle, "--work-model", "fake/fake-1")
    assert result.stdout == (
        f"student {handle} (checkpoint); in Pi: /machine student {handle} "
        "switches one session to it\n"
    )
    assert result.stderr == (
        "warning: TINKER_API_KEY is not set; pi and machine ask cannot reach Tinker\n"
    )
    offered = json.loads(install.pi_models_path().read_text())
    assert offered["providers"]["tinker"]["models"][-1]["id"] == handle
    # chosen from a shell: no session switched, Pi's default untouched
    assert run("student").stdout == f"student {handle}\n"
    pi_settings(defaultProvider="fake", defaultModel="fake-1")
    assert run("student").stdout == (
        f"student {handle}\nnew Pi sessions start on fake/fake-1\n"
    )
    # what a session continues with (a real Pi session on the fake model)
    session = install_session(project, "basic")
    assert run("student", "--session", str(session)).stdout == (
        f"student {handle}\n"
        "Pi session basic.jsonl: fake/fake-1\n"
        "new Pi sessions start on fake/fake-1\n"
    )
    assert json.loads(run("work", "--json").stdout) == {
        "chat": "work",
        "chat_session": None,
        "message": "chatting with the working model fake/fake-1",
        "pi_default_was": None,
        "student": handle,
        "student_release": None,
        "switch_to": "fake/fake-1",
        "work_model": "fake/fake-1",
    }


def test_a_student_chosen_in_a_shell_is_offered_in_letta_code(
    project: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TINKER_API_KEY", "tml-test")
    run("install", "letta")
    handle = "tinker://run-7/sampler_weights/final"
    assert run("student", handle).stdout == (
        f"student {handle} (checkpoint); machine install pi offers it in Pi; "
        f"in Letta Code: /machine student {handle} switches one conversation to it\n"
    )
    # the catalog Letta Code's Tinker provider mod lists from
    assert json.loads(install.letta_offered_path().read_text()) == [handle]


def test_work_puts_pi_s_default_back_when_it_is_on_tinker(
    project: Path, run: Run
) -> None:
    """What an older machine left behind: every new Pi session on Tinker."""
    run("student", INKLING, "--work-model", "fake/fake-1")
    path = pi_settings(defaultProvider="tinker", defaultModel=INKLING)
    assert run("student").stdout == (
        f"student {INKLING}\nnew Pi sessions start on the student (tinker/{INKLING})\n"
    )
    done = run("work")
    assert done.stdout == (
        "chatting with the working model fake/fake-1\n"
        f"new Pi sessions start on fake/fake-1 again (Pi's default was "
        f"tinker/{INKLING})\n"
    )
    assert json.loads(path.read_text()) == {
        "theme": "dark",
        "defaultProvider": "fake",
        "defaultModel": "fake-1",
    }
    assert run("work").stdout == "chatting with the working model fake/fake-1\n"


def test_student_json_tells_the_extension_what_to_switch_to(
    project: Path, run: Run, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TINKER_API_KEY", "tml-test")
    session = tmp_path / "live.jsonl"
    result = run("student", INKLING, "--json", "--session", str(session))
    assert json.loads(result.stdout) == {
        "chat": "student",
        "chat_session": str(session),
        "kind": "base",
        "message": f"student {INKLING} (base)",
        "release": None,
        "student": INKLING,
        "student_release": None,
        "switch_to": f"tinker/{INKLING}",
        "warning": None,
        "work_model": None,
    }


def test_a_release_id_is_its_checkpoint_and_a_missing_one_is_refused(
    project: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TINKER_API_KEY", "tml-test")
    missing = run("student", "BR-999")
    assert missing.exit_code == NOT_FOUND
    assert missing.stderr == (
        "Error: no release BR-999 in this project (machine release list)\n"
    )
    assert not store_of(project).exists()  # nothing written
    checkpoint = "tinker://run-7:train:0/sampler_weights/final"
    store = Store.create(store_of(project), project)
    helpers.preregistered_release(store, "BR-001", checkpoint)
    # A preregistration made by hand is tampering, and is refused as such.
    store.write(
        lambda snap: Change(
            summary="release BR-002",
            files={
                "releases/BR-002/prereg.json": jsonio.canonical(
                    {"id": "BR-002", "candidate": {"checkpoint": checkpoint}}
                )
            },
        )
    )
    forged = run("student", "BR-002")
    assert forged.exit_code == INVALID
    assert forged.stderr.startswith(
        "Error: BR-002 was tampered with: releases/BR-002/prereg.json: added in "
    )
    chosen = json.loads(run("student", "BR-001", "--json").stdout)
    assert (chosen["switch_to"], chosen["message"], chosen["release"]) == (
        f"tinker/{checkpoint}",
        f"student BR-001 = {checkpoint} (release); machine install pi offers it in Pi",
        "BR-001",
    )
    assert run("student").stdout == f"student BR-001 = {checkpoint}\n"
    with oai_stub.serve() as stub:
        monkeypatch.setenv("MACHINE_TINKER_OAI_URL", stub.url)
        assert run("ask", "--student", "BR-001", "hi").stdout == "Four.\n"
    assert stub.requests[0]["body"]["model"] == checkpoint


def test_student_refuses_a_bad_handle(project: Path, run: Run) -> None:
    result = run("student", "Inkling")
    assert result.exit_code == USAGE
    assert result.stderr.startswith("Error: 'Inkling' is not a student handle: ")
    assert not store_of(project).exists()


def test_ask_without_a_key_says_so(
    project: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    result = run("ask", "hello")
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == (
        "Error: TINKER_API_KEY is not set; create a key in the Tinker console "
        "and export TINKER_API_KEY\n"
    )
    monkeypatch.setenv("TINKER_API_KEY", "tml-test")
    assert run("ask", "hello").stderr == (
        "Error: no student set; choose one with machine student HANDLE\n"
    )


def test_ask_samples_the_student(
    project: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TINKER_API_KEY", "tml-test")
    run("student", INKLING)
    with oai_stub.serve() as stub:
        monkeypatch.setenv("MACHINE_TINKER_OAI_URL", stub.url)
        result = run("ask", "What", "is", "2+2?", "--max-tokens", "8")
    assert (result.exit_code, result.stdout) == (0, "Four.\n")
    assert stub.requests[0]["body"] == {
        "model": INKLING,
        "messages": [{"role": "user", "content": "What is 2+2?"}],
        "max_tokens": 8,
    }
    url = oai_stub.closed_port_url()
    monkeypatch.setenv("MACHINE_TINKER_OAI_URL", url)
    down = run("ask", "hi", "--timeout", "2")
    assert down.exit_code == 1
    assert down.stderr.startswith(f"Error: Tinker is unreachable at {url}: ")
    assert down.stderr.count("\n") == 1


def test_models_lists_the_endpoint_s_models(
    project: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TINKER_API_KEY", "tml-test")
    with oai_stub.serve() as stub:
        monkeypatch.setenv("MACHINE_TINKER_OAI_URL", stub.url)
        listed = run("models")
        as_json = run("models", "--json")
        stub.models = {"object": "list", "data": []}
        empty = run("models")
    assert (listed.exit_code, listed.stdout) == (
        0,
        "Qwen/Qwen3-8B\nthinkingmachines/Inkling:peft:262144\n",
    )
    assert json.loads(as_json.stdout) == [
        "Qwen/Qwen3-8B",
        "thinkingmachines/Inkling:peft:262144",
    ]
    assert empty.stdout == "Tinker lists no models\n"
    assert not store_of(project).exists()  # no store needed, none made


def test_models_without_a_key_or_a_service(
    project: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    missing = run("models")
    assert (missing.exit_code, missing.stdout, missing.stderr) == (
        1,
        "",
        "Error: TINKER_API_KEY is not set; create a key in the Tinker console "
        "and export TINKER_API_KEY\n",
    )
    monkeypatch.setenv("TINKER_API_KEY", "tml-test")
    url = oai_stub.closed_port_url()
    monkeypatch.setenv("MACHINE_TINKER_OAI_URL", url)
    down = run("models", "--timeout", "2")
    assert down.exit_code == 1
    assert down.stderr.startswith(f"Error: Tinker is unreachable at {url}: ")
    assert down.stderr.count("\n") == 1


# -- --json ----------------------------------------------------------------------


def test_install_and_uninstall_json(project: Path, run: Run) -> None:
    agent = pi.agent_dir()
    ext, models = agent / "extensions" / "machine.ts", agent / "models.json"
    first = run("install", "pi", "--json")
    assert first.exit_code == 0, first.stderr
    assert orjson.loads(first.stdout) == {
        "host": "pi",
        "files": [
            {"path": str(ext), "action": "installed", "detail": ""},
            {"path": str(models), "action": "installed", "detail": ""},
        ],
        "skills": list(SKILLS),
        "skills_dir": str(install.skills_dir()),
        "next": "run /reload in pi (or start it again) to load the commands",
    }
    assert first.stdout.count("\n") == 1
    gone = run("uninstall", "pi", "--json")
    assert gone.stdout == (
        '{"files":['
        f'{{"action":"removed","detail":"","path":"{ext}"}},'
        f'{{"action":"removed","detail":"","path":"{models}"}}'
        '],"host":"pi"}\n'
    )


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


def test_ask_json(project: Path, run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINKER_API_KEY", "tml-test")
    run("student", INKLING)
    with oai_stub.serve() as stub:
        monkeypatch.setenv("MACHINE_TINKER_OAI_URL", stub.url)
        result = run("ask", "What", "is", "2+2?", "--json")
    assert (result.exit_code, result.stdout) == (
        0,
        '{"answer":"Four.","prompt":"What is 2+2?"}\n',
    )
