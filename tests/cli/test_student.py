"""machine student, work, ask and models: the student and its endpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from machine_git.agents import install
from machine_git.core import jsonio
from machine_git.core import paths
from machine_git.core.errors import INVALID
from machine_git.core.errors import NOT_FOUND
from machine_git.core.errors import SERVICE
from machine_git.core.errors import USAGE
from machine_git.sessions import pi
from machine_git.store.store import Change
from machine_git.store.store import Store
from tests import helpers
from tests.agents import conftest as oai_stub
from tests.conftest import Run
from tests.conftest import install_session

INKLING = "thinkingmachines/Inkling-Small:peft:262144"


def store_of(project: Path) -> Path:
    return paths.store_path(project)


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
    assert (result.exit_code, result.stdout) == (SERVICE, "")
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
    assert down.exit_code == SERVICE
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
        SERVICE,
        "",
        "Error: TINKER_API_KEY is not set; create a key in the Tinker console "
        "and export TINKER_API_KEY\n",
    )
    monkeypatch.setenv("TINKER_API_KEY", "tml-test")
    url = oai_stub.closed_port_url()
    monkeypatch.setenv("MACHINE_TINKER_OAI_URL", url)
    down = run("models", "--timeout", "2")
    assert down.exit_code == SERVICE
    assert down.stderr.startswith(f"Error: Tinker is unreachable at {url}: ")
    assert down.stderr.count("\n") == 1


# -- --json ----------------------------------------------------------------------


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
