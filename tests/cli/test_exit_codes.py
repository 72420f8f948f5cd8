"""Exit codes match the one table (machine_git/core/errors.py) for every
command: the walk below names each command of the click tree and the common
failures it meets (no store, no such row, run, release or revision, no
Tinker key), and each is one ``Error:`` line with the table's code."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from machine_git.cli import cli
from machine_git.core import jsonio
from machine_git.core.errors import NOT_FOUND
from machine_git.core.errors import REMOTE
from machine_git.core.errors import SERVICE
from machine_git.core.errors import USAGE
from tests import helpers
from tests.conftest import Run

ROW = "abcdef123456"  # no row has it
NO_STORE = "no store at "
NO_ROW = f"no row '{ROW}' in the store"
NO_REV = "unknown revision 'nosuch'"
NO_RUNS = "no training runs yet"
NO_RELEASE = "no release BR-009"
NO_KEY = "TINKER_API_KEY is not set"
NO_SESSION = "no agent session for "

# (command words, setup, arguments, exit code, start of the error line).
# Setup "none": a project without a store; "store": one with a few rows.
CASES: list[tuple[str, str, tuple[str, ...], int, str]] = [
    ("good", "none", (), NOT_FOUND, NO_SESSION),
    ("bad", "none", (), NOT_FOUND, NO_SESSION),
    ("observe", "none", (), NOT_FOUND, NO_SESSION),
    ("diff", "none", (), NOT_FOUND, NO_STORE),
    ("diff", "store", ("HEAD", "nosuch"), NOT_FOUND, NO_REV),
    ("export", "none", (), NOT_FOUND, NO_STORE),
    ("export", "store", ("nosuch",), NOT_FOUND, NO_REV),
    ("gc", "none", (), NOT_FOUND, NO_STORE),
    ("log", "none", (), NOT_FOUND, NO_STORE),
    ("log", "store", ("nosuch",), NOT_FOUND, NO_REV),
    ("show", "none", ("HEAD",), NOT_FOUND, NO_STORE),
    ("show", "store", (ROW,), NOT_FOUND, f"'{ROW}' is neither a row id"),
    ("version", "none", ("v1",), NOT_FOUND, NO_STORE),
    ("version", "store", ("v1", "nosuch"), NOT_FOUND, NO_REV),
    ("versions", "none", (), NOT_FOUND, NO_STORE),
    ("undo", "none", (), NOT_FOUND, NO_STORE),
    ("redo", "none", (), NOT_FOUND, NO_STORE),
    ("recover", "none", (), NOT_FOUND, NO_STORE),
    ("clone", "none", ("copy",), NOT_FOUND, NO_STORE),
    ("push", "none", (), NOT_FOUND, NO_STORE),
    ("pull", "store", (), REMOTE, "no remote 'origin'"),
    ("validate", "none", ("--store",), NOT_FOUND, NO_STORE),
    ("edit", "store", (ROW,), NOT_FOUND, NO_ROW),
    ("rm", "store", (ROW,), NOT_FOUND, NO_ROW),
    ("move", "store", (ROW, "--to", "bad"), NOT_FOUND, NO_ROW),
    ("label", "store", (ROW, "good"), NOT_FOUND, NO_ROW),
    ("rewrite", "store", (ROW, "--as", "x"), NOT_FOUND, NO_ROW),
    ("rewrite", "store", ("zz", "--as", "x"), USAGE, "bad row id 'zz'"),
    ("correction", "store", ("x", "--id", ROW), NOT_FOUND, NO_ROW),
    ("fork", "store", (), NOT_FOUND, "no observed run to fork"),
    ("runs", "none", (), NOT_FOUND, NO_STORE),
    ("runs", "store", ("nosuch",), NOT_FOUND, NO_RUNS),
    ("lineage", "store", ("nosuch",), NOT_FOUND, NO_RUNS),
    ("train run", "store", ("nosuch", "--yes"), NOT_FOUND, NO_RUNS),
    ("train smoke", "store", ("nosuch", "--yes"), NOT_FOUND, NO_RUNS),
    ("train sft", "none", (), NOT_FOUND, NO_STORE),
    ("train dpo", "none", (), NOT_FOUND, NO_STORE),
    ("train validate", "store", ("nosuch",), NOT_FOUND, NO_REV),
    ("train eval init", "none", (), NOT_FOUND, NO_STORE),
    ("train eval baseline", "none", ("--yes",), NOT_FOUND, NO_STORE),
    ("release list", "none", (), NOT_FOUND, NO_STORE),
    ("release new", "store", ("BR-001", "--run", "nosuch"), NOT_FOUND, NO_RUNS),
    ("release show", "store", ("BR-009",), NOT_FOUND, NO_RELEASE),
    ("release check", "store", ("BR-009", "--yes"), NOT_FOUND, NO_RELEASE),
    ("release trial", "store", ("BR-009",), NOT_FOUND, NO_RELEASE),
    ("release activate", "store", ("BR-009",), NOT_FOUND, NO_RELEASE),
    ("release show", "store", ("BR-1",), USAGE, "bad release id 'BR-1'"),
    ("release signers add", "none", ("bob", "x"), NOT_FOUND, NO_STORE),
    ("release signers adopt", "none", (), NOT_FOUND, NO_STORE),
    ("labels show", "none", (), NOT_FOUND, NO_STORE),
    ("labels set", "none", ("missing.json",), USAGE, "cannot read missing.json"),
    ("labels apply", "none", (ROW, "quality=4"), NOT_FOUND, NO_STORE),
    ("models", "store", (), SERVICE, NO_KEY),
    ("ask", "store", ("hi",), SERVICE, NO_KEY),
    ("install", "none", ("nosuch",), USAGE, "Invalid value for"),
    ("uninstall", "none", ("nosuch",), USAGE, "Invalid value for"),
    ("import", "none", ("missing.jsonl",), USAGE, "cannot read missing.jsonl"),
]
# Commands whose common failures are none of the above, and where they are tested.
ELSEWHERE = {
    "auto": "a setting: creates the store (tests/cli/test_observe.py)",
    "data": "reports an empty project without failing (tests/cli/test_data.py)",
    "tagged": "reports an empty project without failing (tests/cli/test_data.py)",
    "observed": "reports an empty project without failing (tests/cli/test_observe.py)",
    "hooks install": "installs into a new store (tests/cli/test_hooks.py)",
    "remote add": "creates the store (tests/cli/test_sync.py)",
    "remote list": "reports no remotes without failing (tests/cli/test_sync.py)",
    "review": "serves a page (tests/review/)",
    "student": "reports the setting without failing (tests/cli/test_student.py)",
    "work": "an interactive session (tests/agents/)",
    "release signers key": "prints this machine's key, made if need be",
    "train models": "lists the models training accepts, offline",
}


def leaves(group: click.Group, prefix: str = "") -> list[str]:
    ctx = click.Context(group)
    found: list[str] = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        words = f"{prefix}{name}"
        if isinstance(command, click.Group):
            found += leaves(command, f"{words} ")
        else:
            found.append(words)
    return found


def test_the_walk_names_every_command() -> None:
    walked = {words for words, *_ in CASES} | set(ELSEWHERE)
    assert sorted(set(leaves(cli)) - walked) == []
    assert sorted(walked - set(leaves(cli))) == []


@pytest.fixture
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    monkeypatch.setenv("EDITOR", "false")  # never an editor in a test


@pytest.mark.parametrize(
    ("words", "setup", "args", "code", "line"),
    CASES,
    ids=[f"{w} {' '.join(a)} ({s})".strip() for w, s, a, _, _ in CASES],
)
def test_each_common_failure_exits_with_the_table_s_code(
    words: str,
    setup: str,
    args: tuple[str, ...],
    code: int,
    line: str,
    project: Path,
    run: Run,
    tmp_path: Path,
    no_key: None,
) -> None:
    if setup == "store":
        seed = tmp_path / "seed.jsonl"
        rows = helpers.valid_rows()[:4]  # no observed row: nothing to fork
        seed.write_bytes(b"".join(jsonio.line(r) for r in rows))
        assert run("import", str(seed), "--no-redact").exit_code == 0
    result = run(*words.split(), *args)
    assert result.exit_code == code, result.output
    assert result.stdout == ""
    [said] = result.stderr.splitlines()
    assert said.startswith(f"Error: {line}"), said
