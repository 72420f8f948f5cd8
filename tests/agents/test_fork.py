from __future__ import annotations

import pytest

from machine_git.agents import fork
from machine_git.errors import UsageError
from tests.helpers import traces_row
from tests.helpers import train_row


def test_the_prompt_restates_task_answer_and_correction() -> None:
    made = fork.make(traces_row(), "use git ls-files")
    assert made.prompt == (
        "Redo this task with a correction.\n"
        "\n"
        "Task:\n"
        "fix it\n"
        "\n"
        "Previous answer:\n"
        "Fixed.\n"
        "\n"
        "Correction:\n"
        "use git ls-files\n"
    )
    assert made.env == {"MACHINE_FORK": "1", "MACHINE_FORK_PARENT": "b1b2c3d4e5f6"}
    assert made.argv == ["pi", "-p", made.prompt]


def test_without_a_correction_the_run_is_simply_retried() -> None:
    assert fork.prompt(train_row(), "  ") == (
        "Redo this task; the previous answer needs improvement.\n"
        "\n"
        "Task:\n"
        "hi\n"
        "\n"
        "Previous answer:\n"
        "hello\n"
    )


def test_the_shell_command_is_quoted_for_pasting() -> None:
    made = fork.Fork("a1b2c3d4e5f6", "it's done\n")
    assert made.shell_command() == (
        "MACHINE_FORK=1 MACHINE_FORK_PARENT=a1b2c3d4e5f6 pi -p 'it'\"'\"'s done\n'"
    )


def test_a_row_without_a_user_message_cannot_be_forked() -> None:
    row = train_row(messages=[{"role": "assistant", "content": "x"}])
    with pytest.raises(UsageError, match="row a1b2c3d4e5f6 has no user message"):
        fork.prompt(row, "again")
