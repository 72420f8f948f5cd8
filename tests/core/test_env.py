from __future__ import annotations

import pytest

from machine_git.core import env
from machine_git.core.errors import UsageError


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
