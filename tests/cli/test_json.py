"""Every command that reports something takes --json, in one time format.

The ``run`` fixture (tests/conftest.py) checks the times of every --json run
in the suite; here every reporting command is run once on one store.
"""

from __future__ import annotations

from pathlib import Path

import click
import orjson
import pytest

from machine_git.cli import cli
from machine_git.core import paths
from tests import helpers
from tests.cli.test_help import COMMANDS
from tests.conftest import Run
from tests.conftest import git
from tests.conftest import install_session

# Commands that print no report, each with why.
NO_REPORT = {
    # Serves the review page until Ctrl-C; what it prints is the address to
    # open (stderr), and the page itself is the report.
    ("review",),
}


def _command(path: tuple[str, ...]) -> click.Command:
    command: click.Command = cli
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    return command


LEAVES = [p for p in COMMANDS if not isinstance(_command(p), click.Group)]


@pytest.mark.parametrize("path", LEAVES, ids=" ".join)
def test_every_reporting_command_takes_json(path: tuple[str, ...]) -> None:
    options = {o for p in _command(path).params for o in getattr(p, "opts", [])}
    assert ("--json" in options) != (path in NO_REPORT), (
        f"machine {' '.join(path)}: --json is for every command that reports"
    )


def test_the_allow_list_names_real_commands() -> None:
    assert set(LEAVES) >= NO_REPORT


def test_times_are_iso_8601_with_offset(
    project: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_session(project, "basic")
    run("good", "--json")
    monkeypatch.setenv("TZ", "UTC")  # git's iso-strict-local below: machine's UTC
    store = paths.store_path(project)
    committed = git(store, "log", "-1", "--date=iso-strict-local", "--format=%cd")
    info = orjson.loads(run("data", "--json").stdout)
    assert info["head"]["time"] == committed.strip()
    assert info["head"]["time"].endswith("+00:00")
    entry = orjson.loads(run("log", "-n", "1", "--json").stdout)[0]
    assert entry["time"] == committed.strip()


def test_the_time_check_finds_other_shapes() -> None:
    assert helpers.odd_times(
        {
            "head": {"time": "2026-12-01 04:09 UTC"},
            "rows": [{"created_at": "2026-12-01T04:09:00.123Z", "when": 1764562140}],
            "ok": "2026-12-01T04:09:00+00:00",
            "naive": "2026-12-01T04:09:00",
            "prose": "2026-12-01 was the day the store was made, by hand",
        }
    ) == [
        "$.head.time: '2026-12-01 04:09 UTC'",
        "$.rows[0].when: 1764562140",
        "$.naive: '2026-12-01T04:09:00'",
    ]


def _one_document(run: Run, *args: str, input: str | None = None) -> object:
    result = run(*args, "--json", input=input)
    assert result.exit_code == 0, (args, result.stderr)
    document = orjson.loads(result.stdout)  # one document, nothing else
    assert result.stdout.count("\n") == 1
    assert helpers.odd_times(document) == []
    return document


def test_the_store_commands_print_one_json_document(
    project: Path, run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_session(project, "basic")
    row_id = str(_one_document(run, "good", "kept")["id"])  # type: ignore[index]
    install_session(project, "multi-turn")
    _one_document(run, "bad", "terse")
    current = run("show", row_id).stdout
    for args in (
        ("data",),
        ("tagged",),
        ("log",),
        ("show", row_id),
        ("show", "HEAD"),
        ("diff",),
        ("version", "v1"),
        ("versions",),
        ("rewrite", row_id, "--as", "Short."),
        ("move", row_id, "--to", "bad"),
        ("undo",),
        ("redo",),
        ("rm", row_id),
        ("undo",),
        ("validate", "--store"),
        ("export", "-o", str(tmp_path / "out.jsonl")),
        ("remote", "add", "hub", str(tmp_path / "hub.git")),
        ("remote", "list"),
        ("gc",),
        ("recover",),
        ("hooks", "install"),
        ("auto", "on"),
        ("observed",),
        ("runs",),
        ("release", "list"),
    ):
        _one_document(run, *args)
    monkeypatch.setenv("EDITOR", "false")  # --from opens no editor
    _one_document(run, "edit", row_id, "--from", "-", input=current)
