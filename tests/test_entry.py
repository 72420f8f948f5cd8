from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest

from machine_git import entry
from machine_git.cli import cli
from machine_git.core import paths
from machine_git.core.errors import NOT_FOUND
from machine_git.core.errors import USAGE
from tests.conftest import Run
from tests.conftest import install_session

# Forms the fast path takes: it must read each exactly as click does.
TAKEN = [
    [],
    ["too", "terse"],
    ["--trace"],
    ["--trajectory", "--reasoning", "kept", "the", "plan"],
    ["--as", "The exact answer."],
    ["--rewrite=short", "--json"],
    ["--note", "why", "more", "words", "--note", "last wins"],
    ["--note="],
    ["", "an empty word"],
    ["--host", "letta", "--entry", "e12"],
    ["--host=codex", "--no-redact"],
    ["--out", "rows.jsonl", "--json"],
    ["--session", "s.jsonl", "--project", "."],
    ["--session=missing.jsonl", "--project=."],
    ["a", "--trace", "b", "--json", "c"],
]

# Forms it leaves to click (help, errors, anything unusual).
LEFT = [
    ["--help"],
    ["-h"],
    ["--"],
    ["-"],
    ["-5"],
    ["--bogus"],
    ["--not"],  # click has no abbreviations either
    ["--note"],
    ["--note", "-x"],
    ["--trace=yes"],
    ["--host", "nope"],
    ["--session", "."],
    ["--project", "s.jsonl"],
    ["--project", "missing-folder"],
]


def click_params(args: list[str]) -> dict[str, Any]:
    command = cli.get_command(click.Context(cli), "good")
    assert command is not None
    with command.make_context("good", list(args)) as ctx:
        return dict(ctx.params)


@pytest.mark.parametrize("args", TAKEN, ids=" ".join)
def test_the_fast_parser_reads_a_form_as_click_does(
    project: Path, args: list[str]
) -> None:
    (project / "s.jsonl").write_text("{}\n")
    assert entry.parse(args) == click_params(args)


@pytest.mark.parametrize("args", LEFT, ids=" ".join)
def test_the_fast_parser_leaves_other_forms_to_click(
    project: Path, args: list[str]
) -> None:
    (project / "s.jsonl").write_text("{}\n")
    assert entry.parse(args) is None


def main(
    args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["machine", *args])
    with pytest.raises(SystemExit) as done:
        entry.main()
    out, err = capsys.readouterr()
    code = done.value.code
    return (code if isinstance(code, int) else 1), out, err


def test_the_fast_path_and_click_answer_alike(
    project: Path,
    run: Run,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Without a session, both refuse in the same words.
    code, out, err = main(["good"], monkeypatch, capsys)
    refused = run("good")
    assert (code, out, err) == (NOT_FOUND, "", refused.stderr)
    assert err.startswith("Error: no agent session for ")

    install_session(project, "basic")
    code, out, err = main(["good", "--json"], monkeypatch, capsys)
    assert (code, err) == (0, "")
    tagged = click_json(out)
    assert tagged["action"] == "tag"
    # Tagging again: click's answer, then the fast path's, are the same line.
    again = run("good")
    code, out, err = main(["good"], monkeypatch, capsys)
    assert (code, out, err) == (0, again.stdout, "")
    assert out == f"already tagged {tagged['id']} as train; nothing changed\n"
    moved = run("bad", "--json")
    assert click_json(moved.stdout)["action"] == "move"
    code, out, err = main(["good", "too", "terse"], monkeypatch, capsys)
    assert code == 0
    assert out.startswith(f"moved {tagged['id']} rejected -> train: ")


def click_json(text: str) -> dict[str, Any]:
    import orjson

    value = orjson.loads(text)
    assert isinstance(value, dict)
    return value


def test_machine_good_does_not_import_click() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.argv = ['machine', 'good', '--project', '/']; "
            "import machine_git.entry as e\n"
            "try:\n    e.main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'click'))",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stdout.splitlines()[-1] == "[]", done.stderr


def test_the_fast_path_says_which_folder_it_took_outside_git(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    monkeypatch.chdir(folder)
    install_session(folder, "basic")
    code, _, err = main(["good"], monkeypatch, capsys)
    store = paths.store_path(folder)
    assert (code, err) == (
        0,
        f"note: no git repository here, so {folder} is the project; its store was "
        f"created at {store} (pass --project DIR to choose another folder)\n",
    )
    assert main(["bad"], monkeypatch, capsys)[2] == ""


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        ([b"bad", b"x\xffy"], "argument 2 (b'x\\xffy')"),
        ([b"good", b"--as", b"x\xff"], "argument 3 (b'x\\xff')"),
        ([b"import", b"rows\xff.jsonl"], "argument 2 (b'rows\\xff.jsonl')"),
    ],
)
def test_an_argument_that_is_not_utf8_is_one_line(
    project: Path, args: list[bytes], shown: str
) -> None:
    # Issue 25: a note, --as or a file name in another encoding gave a traceback.
    done = subprocess.run(
        [sys.executable, "-m", "machine_git", *args],
        capture_output=True,
        check=False,
        cwd=project,
    )
    assert (done.returncode, done.stdout) == (USAGE, b"")
    assert done.stderr.decode() == (
        f"Error: {shown} is not valid UTF-8; machine takes text (and file names) "
        "in UTF-8 only\n"
    )


_ENGINE_PROBE = (
    "import sys; sys.argv = ['machine', *sys.argv[1:]]\n"
    "import machine_git.entry as e\n"
    "try:\n    e.main()\nexcept SystemExit as x:\n    print('exit', x.code)\n"
    "print('engine loaded:', 'kingfisher_sdk' in sys.modules)"
)


def test_only_a_tag_that_redacts_loads_the_secret_engine(project: Path) -> None:
    # Loading the engine is most of a tag's time (bench/RESULTS.md, Notes):
    # a tag that scans nothing must not pay it.
    # With the warm scanner off, so the engine can only be loaded here (a
    # scanner running keeps it out of the process: tests/secrets/test_warm.py).
    def good(*args: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", _ENGINE_PROBE, "good", *args],
            cwd=project,
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "MACHINE_SECRETS_DAEMON": "0"},
        )
        return done.stdout.splitlines()[-2:]

    install_session(project, "basic")
    assert good("--no-redact") == ["exit 0", "engine loaded: False"]
    install_session(project, "multi-turn")
    assert good() == ["exit 0", "engine loaded: True"]
