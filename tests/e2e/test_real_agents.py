"""The real Claude Code and Codex CLIs, run offline against the fake model
servers, write sessions that machine tags: ``machine good`` and ``machine good
--trace`` find the session themselves, and every row is compared with what the
turn was (tests/e2e/expected_turns.py). ``/good`` typed in a real ``claude -p``
run, after ``machine install claude``, tags that very turn; so does ``/good``
typed as a real ``codex exec`` prompt after ``machine install codex``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git.core import paths
from machine_git.rows import images
from machine_git.rows import rows
from machine_git.sessions import claude as claude_sessions
from machine_git.sessions import codex as codex_sessions
from tests.conftest import Run
from tests.conftest import git
from tests.e2e import expected_turns
from tests.e2e import fake_anthropic
from tests.e2e import fake_gemini
from tests.e2e import fake_openai_responses
from tests.e2e import realagents

pytestmark = pytest.mark.slow


def _binary(name: str) -> Path:
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        reason = (
            f"{' and '.join(missing)} not found: the {name} e2e tests need node and npm"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: these tests must run in CI)")
        pytest.skip(reason)
    try:
        return realagents.install(name)
    except RuntimeError as e:
        pytest.fail(str(e))


@pytest.fixture(scope="module")
def claude_bin() -> Path:
    return _binary("claude")


@pytest.fixture(scope="module")
def codex_bin() -> Path:
    return _binary("codex")


@pytest.fixture(scope="module")
def gemini_bin() -> Path:
    return _binary("gemini")


@pytest.fixture(scope="module")
def gemini_api() -> Iterator[fake_gemini.Server]:
    with fake_gemini.serve() as server:
        yield server


@pytest.fixture(scope="module")
def anthropic() -> Iterator[fake_anthropic.Server]:
    with fake_anthropic.serve() as server:
        yield server


@pytest.fixture(scope="module")
def responses() -> Iterator[fake_openai_responses.Server]:
    with fake_openai_responses.serve() as server:
        yield server


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A real git project, the current directory, with the fixtures' files."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "notes.md").write_text("# Notes\nfixture notes line 2\n")
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    monkeypatch.chdir(root)
    return root


def claude(
    binary: Path, url: str, project: Path, *args: str, stdin: str | None = None
) -> str:
    # The agent's HOME is the test's HOME: machine finds its sessions there.
    env = realagents.claude_env(Path.home(), url)
    done = realagents.run([str(binary), *args], project, env, stdin=stdin)
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stdout


def codex(binary: Path, url: str, project: Path, *args: str) -> str:
    env = realagents.codex_env(Path.home(), url)
    argv = [str(binary), "exec", "--skip-git-repo-check", *args]
    done = realagents.run(argv, project, env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def in_project(
    records: expected_turns.Expected, project: Path
) -> expected_turns.Expected:
    """The expectations with the fixtures' project folder replaced by ``project``."""
    text = json.dumps(
        [{k: v for k, v in r.items() if not isinstance(v, re.Pattern)} for r in records]
    ).replace(expected_turns.CLAUDE_CWD, str(project))
    moved: expected_turns.Expected = json.loads(text)
    for new, old in zip(moved, records, strict=True):
        new.update({k: v for k, v in old.items() if isinstance(v, re.Pattern)})
    return moved


def tagged(project: Path, stdout: str) -> dict[str, Any]:
    """The row ``machine good``/``bad`` named on ``stdout``, read back from git."""
    found = re.match(r"(?:good|bad|moved) (\S+) ", stdout)
    assert found, stdout
    text = git(
        paths.store_path(project), "show", f"HEAD:{rows.row_path(found.group(1))}"
    )
    value = orjson.loads(text)
    assert isinstance(value, dict)
    return value


def check_rows(
    run: Run,
    project: Path,
    host: str,
    expected: expected_turns.Expected,
    context: bool = True,
) -> str:
    """``machine good`` then ``machine good --trace``: both rows are the turn;
    the trace row's id."""
    # The expectation holds images inline, as read; the store names them by hash.
    inline = [r for r in expected if r["role"] != "reasoning"]
    trace: dict[str, Any] = {"kind": "traces", "trajectory": inline}
    records: expected_turns.Expected = images.stored(trace)[0]["trajectory"]
    result = run("good", "--host", host)
    assert result.exit_code == 0, result.output
    row = tagged(project, result.stdout)
    pair = [{"role": "user", **records[0]}, {"role": "assistant", **records[-1]}]
    assert expected_turns.mismatches(row["messages"], pair) == []
    assert row["source"]["host"] == host
    result = run("good", "--trace", "--host", host)
    assert result.exit_code == 0, result.output
    row = tagged(project, result.stdout)
    ignore_ids = host == "gemini"  # Gemini CLI's call ids come from the clock
    assert (
        expected_turns.mismatches(
            row["trajectory"], records, any_order=True, ignore_ids=ignore_ids
        )
        == []
    )
    # Claude Code and Codex record their system prompt; Gemini CLI does not.
    assert (row["context"] is not None) == context
    return str(row["id"])


# -- Claude Code -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "prompt"),
    [
        ("parallel-tools", "parallel-tools: echo one and two, and read notes.md."),
        ("failing-tool", "failing-tool: show missing.txt."),
    ],
)
def test_claude_code_sessions_are_tagged(
    claude_bin: Path,
    anthropic: fake_anthropic.Server,
    workdir: Path,
    run: Run,
    name: str,
    prompt: str,
) -> None:
    claude(claude_bin, anthropic.url, workdir, "-p", prompt)
    expected, _, _ = expected_turns.CLAUDE[name]
    check_rows(run, workdir, "claude", in_project(expected, workdir))


def test_claude_code_prompt_image_is_stored_once_and_shown(
    claude_bin: Path, anthropic: fake_anthropic.Server, workdir: Path, run: Run
) -> None:
    png = base64.b64decode(expected_turns.PIXEL["base64"])
    line = realagents.claude_user_line("no-tools: what is in this image?", png)
    claude(
        claude_bin,
        anthropic.url,
        workdir,
        *realagents.claude_stream_args(),
        stdin=line,
    )
    expected, _, _ = expected_turns.CLAUDE["prompt-image"]
    trace = check_rows(run, workdir, "claude", expected)
    sha = hashlib.sha256(png).hexdigest()
    store = paths.store_path(workdir)
    listed = git(store, "ls-tree", "-r", "--name-only", "HEAD", "images").split()
    assert listed == [images.path_of(sha)]  # the answer row and the trace share it
    shown = run("show", trace)
    assert shown.exit_code == 0, shown.stderr
    assert shown.stdout.endswith(
        f"}}\nimage {sha[:12]} image/png {len(png)} bytes 2x2 (trajectory[1])\n"
    )


def test_claude_code_prompt_command_is_a_turn(
    claude_bin: Path, anthropic: fake_anthropic.Server, workdir: Path, run: Run
) -> None:
    commands = workdir / ".claude" / "commands"
    commands.mkdir(parents=True)
    (commands / "greet.md").write_text(
        "---\ndescription: Greet someone\n---\nno-tools: greet $ARGUMENTS warmly.\n"
    )
    claude(claude_bin, anthropic.url, workdir, "-p", "Run `echo before-command`.")
    claude(claude_bin, anthropic.url, workdir, "-c", "-p", "/greet world")
    claude(claude_bin, anthropic.url, workdir, "-c", "-p", "/cost")  # local: noise
    expected, _, _ = expected_turns.CLAUDE["custom-command"]
    check_rows(run, workdir, "claude", expected)


def test_good_typed_in_claude_code_tags_that_turn(
    claude_bin: Path, anthropic: fake_anthropic.Server, workdir: Path, run: Run
) -> None:
    result = run("install", "claude")
    assert result.exit_code == 0, result.output
    commands = claude_sessions.config_dir() / "commands"
    assert sorted(p.name for p in commands.iterdir()) == [
        "bad.md",
        "good.md",
        "machine.md",
    ]
    claude(
        claude_bin, anthropic.url, workdir, "-p", "Please run `echo hello-from-tool`."
    )
    said = claude(claude_bin, anthropic.url, workdir, "-c", "-p", "/good --trace")
    # The model was sent machine's output and repeated it: the row's id.
    found = re.fullmatch(r"good (\S+) -> traces: (.*)\n", said)
    assert found, said
    row = tagged(workdir, said)
    assert row["id"] == found.group(1)
    expected, _, _ = expected_turns.CLAUDE["basic"]
    records = [r for r in expected if r["role"] != "reasoning"]
    assert expected_turns.mismatches(row["trajectory"], records) == []
    # Another /good after it still means that turn, not machine's own exchange.
    said = claude(claude_bin, anthropic.url, workdir, "-c", "-p", "/good")
    found = re.fullmatch(r"good (\S+) -> train: Please run .*\n", said)
    assert found, said
    assert run("good", "--host", "claude").stdout == (
        f"already tagged {found.group(1)} as train; nothing changed\n"
    )
    # /machine runs any machine command.
    said = claude(claude_bin, anthropic.url, workdir, "-c", "-p", "/machine tagged")
    assert said.count(found.group(1)) == 1 and "traces" in said, said
    result = run("uninstall", "claude")
    assert result.exit_code == 0, result.output
    assert not any(commands.iterdir())


# -- Codex -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "prompts"),
    [
        ("parallel-tools", ["parallel-tools: echo one and two."]),
        ("failing-tool", ["failing-tool: list /nonexistent-dir."]),
        (
            "resume",
            ["Run `echo first-turn`.", "Resumed with --last: run `echo second-turn`."],
        ),
    ],
)
def test_codex_sessions_are_tagged(
    codex_bin: Path,
    responses: fake_openai_responses.Server,
    workdir: Path,
    run: Run,
    name: str,
    prompts: list[str],
) -> None:
    codex(codex_bin, responses.url, workdir, prompts[0])
    for prompt in prompts[1:]:
        codex(codex_bin, responses.url, workdir, "resume", "--last", prompt)
    assert len(list((codex_sessions.home() / "sessions").rglob("rollout-*.jsonl"))) == 1
    expected, _, _ = expected_turns.CODEX[name]
    check_rows(run, workdir, "codex", expected)


def test_codex_images_are_read_stored_once_and_shown(
    codex_bin: Path, responses: fake_openai_responses.Server, workdir: Path, run: Run
) -> None:
    png = base64.b64decode(expected_turns.PIXEL["base64"])
    (workdir / "pixel.png").write_bytes(png)
    # attached to the prompt (-i), then seen by the view_image tool
    prompt = "no-tools: what is in this image?"
    codex(codex_bin, responses.url, workdir, prompt, "-i", "pixel.png")  # -i takes many
    check_rows(run, workdir, "codex", expected_turns.CODEX["image"][0])
    codex(codex_bin, responses.url, workdir, "view-image: look at pixel.png.")
    trace = check_rows(run, workdir, "codex", expected_turns.CODEX["view-image"][0])
    # four rows, one image file
    sha = hashlib.sha256(png).hexdigest()
    store = paths.store_path(workdir)
    listed = git(store, "ls-tree", "-r", "--name-only", "HEAD", "images").split()
    assert listed == [images.path_of(sha)]
    shown = run("show", trace)
    assert shown.exit_code == 0, shown.stderr
    assert shown.stdout.endswith(
        f"}}\nimage {sha[:12]} image/png {len(png)} bytes 2x2 (trajectory[3])\n"
    )


def test_codex_failed_request_is_refused_and_kept_as_bad(
    codex_bin: Path, responses: fake_openai_responses.Server, workdir: Path, run: Run
) -> None:
    env = realagents.codex_env(Path.home(), responses.url)
    argv = [str(codex_bin), "exec", "--skip-git-repo-check", "stream-error: fail."]
    assert realagents.run(argv, workdir, env).returncode != 0
    result = run("good", "--host", "codex")
    assert result.exit_code != 0
    assert result.stderr.endswith(
        "the last turn ended with an error: stream disconnected before completion: "
        "fake model: scripted stream failure; nothing tagged (machine bad keeps a "
        "failed turn)\n"
    ), result.stderr
    result = run("bad", "--host", "codex")
    assert result.exit_code == 0, result.output
    row = tagged(workdir, result.stdout)
    assert row["failure"]["stop_reason"] == "error"


def test_machine_runs_from_this_python() -> None:
    # The commands machine install claude writes run this Python's machine.
    from machine_git.agents import claude_commands

    assert sys.executable in claude_commands.render("good")
    # and so do the hook and notify machine install codex writes.
    from machine_git.agents import codex_install

    assert codex_install.hook_argv("prompt")[0] == sys.executable


def _codex_installed(url: str, run: Run) -> dict[str, str]:
    """``machine install codex`` over the fake provider's config; the run's env."""
    env = realagents.codex_env(Path.home(), url)  # writes config.toml first
    result = run("install", "codex")
    assert result.exit_code == 0, result.output
    return env


def _codex_exec(binary: Path, project: Path, env: dict[str, str], *args: str) -> str:
    argv = [str(binary), "exec", "--skip-git-repo-check", *args]
    done = realagents.run(argv, project, env)
    assert done.returncode == 0, done.stderr
    return done.stdout


# Codex runs a hook only once the user trusted it (/hooks in the TUI); this
# flag is Codex's own way to run hooks in automation without that review.
TRUST = "--dangerously-bypass-hook-trust"


def test_good_typed_in_codex_tags_that_turn(
    codex_bin: Path, responses: fake_openai_responses.Server, workdir: Path, run: Run
) -> None:
    env = _codex_installed(responses.url, run)
    start = len(responses.requests)
    _codex_exec(codex_bin, workdir, env, "Please run `echo hello-from-tool`.")
    # Codex offered machine's skills (copied to ~/.agents/skills) to the model.
    sent = json.dumps(responses.requests[start]["body"])
    assert "machine-tagging" in sent and "machine-release" in sent
    asked = len(responses.requests)
    resume = ("resume", "--last")
    said = _codex_exec(codex_bin, workdir, env, TRUST, *resume, "/good --trace")
    # The hook blocked the prompt: the model was not asked, nothing was said.
    assert len(responses.requests) == asked
    assert said == ""
    result = run("good", "--trace", "--host", "codex")
    found = re.fullmatch(
        r"already tagged (\S+) as traces; nothing changed\n", result.stdout
    )
    assert found, result.output
    row = tagged(workdir, f"good {found.group(1)} ")
    expected, _, _ = expected_turns.CODEX["basic"]
    records = [r for r in expected if r["role"] != "reasoning"]
    assert expected_turns.mismatches(row["trajectory"], records) == []
    assert row["source"]["host"] == "codex"
    # A second /good still means that turn: the blocked one left no trace.
    _codex_exec(codex_bin, workdir, env, TRUST, *resume, "/good")
    result = run("good", "--host", "codex")
    found = re.fullmatch(
        r"already tagged (\S+) as train; nothing changed\n", result.stdout
    )
    assert found, result.output
    assert tagged(workdir, f"good {found.group(1)} ")["messages"][0]["content"] == (
        "Please run `echo hello-from-tool`."
    )
    # /machine runs any machine command.
    _codex_exec(codex_bin, workdir, env, TRUST, *resume, "/machine auto on")
    assert run("auto", "status").stdout.startswith("auto-capture on for "), said
    assert len(responses.requests) == asked
    # Without trust, Codex skips the hook: /good goes to the model as text.
    _codex_exec(codex_bin, workdir, env, *resume, "/good")
    assert len(responses.requests) > asked
    sent = responses.requests[asked]["body"]["input"][-1]
    assert sent["role"] == "user" and "/good" in json.dumps(sent["content"]), sent


def test_good_in_a_new_codex_exec_session_tags_the_turn_before(
    codex_bin: Path, responses: fake_openai_responses.Server, workdir: Path, run: Run
) -> None:
    env = _codex_installed(responses.url, run)
    _codex_exec(codex_bin, workdir, env, "Please run `echo hello-from-tool`.")
    asked = len(responses.requests)
    # `codex exec "/good"` starts a session with no turn: the one before counts.
    _codex_exec(codex_bin, workdir, env, TRUST, "/good")
    assert len(responses.requests) == asked
    listed = run("tagged").stdout
    assert re.fullmatch(
        r"\S+  train  \S+ \S+  Please run `echo hello-from-tool`\.\n", listed
    ), listed
    # and machine good from a shell passes over that session with no prompt.
    tag = listed.split(" ", 1)[0]
    assert run("good", "--host", "codex").stdout == (
        f"already tagged {tag} as train; nothing changed\n"
    )


def test_codex_notify_records_each_turn_when_auto_is_on(
    codex_bin: Path, responses: fake_openai_responses.Server, workdir: Path, run: Run
) -> None:
    env = _codex_installed(responses.url, run)
    # (With auto off, notify records nothing: machine observe --if-auto. Not
    # checked here: Codex does not wait for notify, so there is no moment at
    # which "nothing was recorded" is final.)
    assert run("auto", "on").exit_code == 0
    _codex_exec(codex_bin, workdir, env, "Please run `echo hello-from-tool`.")
    # Codex does not wait for notify: wait for the row (at most 30 s).
    deadline = time.monotonic() + 30
    listed = run("observed").stdout
    while "hello-from-tool" not in listed and time.monotonic() < deadline:
        time.sleep(0.2)
        listed = run("observed").stdout
    assert "Please run `echo hello-from-tool`." in listed, listed
    found = re.match(r"(\S+) ", listed)
    assert found, listed
    row = tagged(workdir, f"good {found.group(1)} ")
    assert row["source"]["host"] == "codex"
    expected, _, _ = expected_turns.CODEX["basic"]
    records = [r for r in expected if r["role"] != "reasoning"]
    assert expected_turns.mismatches(row["trajectory"], records) == []
    result = run("uninstall", "codex")
    assert result.exit_code == 0, result.output
    assert (Path.home() / ".codex" / "config.toml").read_text() == (
        fake_openai_responses.config_toml(responses.url)
    )
    assert not (Path.home() / ".codex" / "hooks.json").exists()


# -- Gemini CLI ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "prompt"),
    [
        ("parallel-tools", "parallel-tools: read notes.md and list the folder."),
        ("failing-tool", "failing-tool: read missing.txt."),
    ],
)
def test_gemini_cli_sessions_are_tagged(
    gemini_bin: Path,
    gemini_api: fake_gemini.Server,
    workdir: Path,
    run: Run,
    name: str,
    prompt: str,
) -> None:
    env = realagents.gemini_env(Path.home(), gemini_api.url)
    done = realagents.run([str(gemini_bin), "-p", prompt], workdir, env, timeout=90)
    assert done.returncode == 0, done.stderr
    expected, _, _ = expected_turns.GEMINI[name]
    check_rows(run, workdir, "gemini", expected, context=False)
