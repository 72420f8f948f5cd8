from __future__ import annotations

import builtins
import sys
from pathlib import Path
from typing import Any

import pytest

from machine_git import entry
from machine_git.core import errors
from machine_git.core.errors import INTERRUPTED
from machine_git.core.errors import USAGE
from tests.conftest import Run


def test_every_error_class_has_a_documented_exit_code() -> None:
    table = errors.exit_codes()
    assert table["MachineError"] == errors.FAILED
    assert table["UsageError"] == USAGE
    assert table["DamagedStoreError"] == errors.DAMAGED
    assert table["DiskFullError"] == errors.IO
    assert table["FileWriteError"] == errors.IO
    assert table["TinkerServiceError"] == errors.SERVICE
    # I/O is never a usage error, and a usage error is click's own 2.
    assert errors.DiskFullError.exit_code != USAGE
    reference = (Path(__file__).parents[2] / "docs" / "reference.md").read_text()
    for name, code in table.items():
        assert f"| {code} |" in reference, name


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["good", "--host", "nope"],
            "Error: Invalid value for '--host': 'nope' is not one of 'pi', "
            "'letta', 'claude', 'codex', 'gemini', 'opencode', 'auto'. "
            "(see 'cli good --help')\n",
        ),
        (
            ["tagged", "-n", "x"],
            "Error: Invalid value for '-n': 'x' is not a valid integer range. "
            "(see 'cli tagged --help')\n",
        ),
        (["nosuch"], "Error: No such command 'nosuch'. (see 'cli --help')\n"),
        (["--bogus"], "Error: No such option '--bogus'. (see 'cli --help')\n"),
    ],
)
def test_usage_errors_are_one_line_with_the_help_hint(
    project: Path, run: Run, args: list[str], line: str
) -> None:
    result = run(*args)
    assert (result.exit_code, result.stdout, result.stderr) == (USAGE, "", line)


def test_an_interrupt_while_loading_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real_import = builtins.__import__

    def interrupted(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "machine_git.cli":
            raise KeyboardInterrupt
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", interrupted)
    monkeypatch.setattr(sys, "argv", ["machine", "log"])
    with pytest.raises(SystemExit) as done:
        entry.main()
    assert done.value.code == INTERRUPTED
    assert capsys.readouterr() == ("", "Interrupted\n")
