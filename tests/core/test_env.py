from __future__ import annotations

from pathlib import Path

import pytest

from machine_git.core import env
from machine_git.core import paths
from machine_git.core.errors import USAGE
from machine_git.core.errors import UsageError
from tests.conftest import Run


def test_unset_or_empty_means_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MACHINE_X", raising=False)
    assert (env.seconds("MACHINE_X", 5.0), env.count("MACHINE_X", 3)) == (5.0, 3)
    monkeypatch.setenv("MACHINE_X", "  ")
    assert (env.seconds("MACHINE_X", 5.0), env.count("MACHINE_X", 3)) == (5.0, 3)


def test_values_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MACHINE_X", "2.5")
    assert env.seconds("MACHINE_X", 1.0) == 2.5
    monkeypatch.setenv("MACHINE_X", " 4 ")
    assert env.count("MACHINE_X", 1) == 4


@pytest.mark.parametrize("value", ["abc", "0", "-1", "inf", "nan"])
def test_bad_seconds_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("MACHINE_LOCK_TIMEOUT", value)
    with pytest.raises(UsageError) as caught:
        env.seconds("MACHINE_LOCK_TIMEOUT", 60.0)
    assert str(caught.value) == (
        f"MACHINE_LOCK_TIMEOUT={value!r}: expected a number of seconds above 0"
    )


@pytest.mark.parametrize("value", ["x", "1.5", "0"])
def test_bad_counts_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("MACHINE_JOBS", value)
    with pytest.raises(UsageError) as caught:
        env.count("MACHINE_JOBS", 1)
    assert str(caught.value) == f"MACHINE_JOBS={value!r}: expected a whole number >= 1"


def test_a_bad_lock_timeout_is_one_line_from_the_cli(
    project: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from machine_git.cli import cli
    from tests.conftest import PI_SESSIONS

    monkeypatch.setenv("MACHINE_LOCK_TIMEOUT", "abc")
    result = CliRunner().invoke(
        cli, ["good", "--session", str(PI_SESSIONS / "basic.jsonl")]
    )
    assert (result.exit_code, result.stderr) == (
        2,
        "Error: MACHINE_LOCK_TIMEOUT='abc': expected a number of seconds above 0\n",
    )


# -- MACHINE_DATA_DIR (issue 25) ---------------------------------------------------


def test_a_relative_or_empty_data_dir_is_one_line_and_touches_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, project: Path, run: Run
) -> None:
    monkeypatch.chdir(project)
    monkeypatch.setenv("MACHINE_DATA_DIR", "data")
    done = run("tagged")
    assert (done.exit_code, done.stderr) == (
        USAGE,
        "Error: MACHINE_DATA_DIR='data' is a relative path; give an absolute "
        f"folder (e.g. {project / 'data'})\n",
    )
    monkeypatch.setenv("MACHINE_DATA_DIR", "")
    done = run("tagged")
    assert (done.exit_code, done.stderr) == (
        USAGE,
        "Error: MACHINE_DATA_DIR is set but empty; unset it (stores then live "
        "in ~/.machine) or give an absolute folder\n",
    )
    assert not (project / "data").exists()
    monkeypatch.setenv("MACHINE_DATA_DIR", "~/stores")
    assert paths.data_dir() == tmp_path / "home" / "stores"
