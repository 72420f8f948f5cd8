from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from machine_git.agents import fork
from machine_git.core import jsonio
from machine_git.core.errors import UsageError
from machine_git.rows import rows
from machine_git.store.store import Change
from machine_git.store.store import Store
from tests.helpers import source
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


def add(store: Store, row: dict[str, Any]) -> None:
    """Commit ``row`` as it is (a real commit in a real store)."""
    change = Change(
        summary=f"add {row['id']}",
        files={rows.row_path(row["id"]): jsonio.canonical(row)},
    )
    store.write(lambda snap: change)


def fork_of(parent: Any, row_id: str, answer: str) -> Any:
    """The observed row of a fork of ``parent``: its prompt and a new answer."""
    made = fork.make(parent, f"correction for {row_id}")
    return train_row(
        row_id,
        source=source(parent_row=parent["id"]),
        messages=[
            {"role": "user", "content": made.prompt},
            {"role": "assistant", "content": answer},
        ],
    )


def test_a_fork_of_a_fork_quotes_the_original_task(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "store", tmp_path)
    first = fork_of(traces_row(), "c1b2c3d4e5f6", "Fixed again.")
    second = fork_of(first, "d1b2c3d4e5f6", "Fixed a third time.")
    for row in (traces_row(), first, second):
        add(store, row)
    assert fork.original_task(store, second) == "fix it"
    assert fork.make(second, "use ls", store).prompt == (
        "Redo this task with a correction.\n\n"
        "Task:\nfix it\n\n"
        "Previous answer:\nFixed a third time.\n\n"
        "Correction:\nuse ls\n"
    )
    # the parents removed: the task is read back from the fork's own prompt
    empty = Store.create(tmp_path / "empty", tmp_path)
    assert fork.original_task(empty, second) == "fix it"
    assert fork.original_task(None, second) == "fix it"
    # a row that is no fork is its own task, even if its parent link is bad
    assert fork.original_task(empty, train_row(source=source(parent_row="x"))) == "hi"


def test_a_parent_chain_that_loops_ends(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "store", tmp_path)
    a = train_row("a1b2c3d4e5f6", source=source(parent_row="b1b2c3d4e5f6"))
    b = train_row("b1b2c3d4e5f6", source=source(parent_row="a1b2c3d4e5f6"))
    for row in (a, b):
        add(store, row)
    assert fork.original_task(store, a) == "hi"
