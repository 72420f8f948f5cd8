"""Forks: rerun a recorded run in Pi with a correction.

A fork is a new headless run (``pi -p``) whose prompt restates the recorded
run's task and answer plus what to do differently. It runs with
``MACHINE_FORK=1`` and ``MACHINE_FORK_PARENT=<row id>``. ``machine fork``
records the new run itself once pi is done (whether or not auto-capture is
on), so the new observed row always points back at the row it corrects
(``source.parent_row``); when auto-capture recorded it already, the Pi
extension's ``machine observe`` read the parent from the environment, and
the second recording finds the same row.

A fork of a fork restates the original task: the task of the first row of
the chain of parents, not the previous fork's whole prompt.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from machine_git.agents.observe import PARENT_ENV
from machine_git.errors import UsageError
from machine_git.sessions import pi as pi_sessions
from machine_git.store import Store

# Our own prompt's layout: a fork's user message starts with one of these and
# quotes the task under "Task:" (prompt() below writes it).
_HEADS = (
    "Redo this task with a correction.\n\nTask:\n",
    "Redo this task; the previous answer needs improvement.\n\nTask:\n",
)
_AFTER_TASK = ("\n\nPrevious answer:\n", "\n\nCorrection:\n")
_MAX_CHAIN = 1000  # parents followed at most (a cycle cannot loop forever)
FORK_ENV = "MACHINE_FORK"


@dataclass
class Fork:
    """A fork ready to run: the parent row, the prompt and the pi command."""

    parent_id: str
    prompt: str

    @property
    def env(self) -> dict[str, str]:
        """What the forked run gets in its environment."""
        return {FORK_ENV: "1", PARENT_ENV: self.parent_id}

    @property
    def argv(self) -> list[str]:
        """The pi command (argv, no shell)."""
        return ["pi", "-p", self.prompt]

    def shell_command(self) -> str:
        """The same command as one line to paste into a shell."""
        assignments = [f"{k}={shlex.quote(v)}" for k, v in self.env.items()]
        return " ".join([*assignments, *(shlex.quote(a) for a in self.argv)])


def task_and_answer(row: dict[str, Any]) -> tuple[str, str | None]:
    """The user's message and the final answer of a row (messages or trajectory)."""
    from machine_git import edits

    user = ""
    for item in row.get("messages") or row.get("trajectory") or []:
        if isinstance(item, dict) and item.get("role") == "user":
            user = str(item.get("content") or "")
            break
    return user, edits.final_answer(row)


def original_task(store: Store | None, row: dict[str, Any]) -> str:
    """The task a chain of forks started from: the first row's user message.

    Follows ``source.parent_row`` through the store; where a parent is gone,
    the task is read back from the fork prompt's own "Task:" section.
    """
    seen: set[str] = set()
    current = row
    while len(seen) < _MAX_CHAIN:
        seen.add(str(current.get("id")))
        parent_id = (current.get("source") or {}).get("parent_row")
        parent = None
        if store is not None and isinstance(parent_id, str) and parent_id not in seen:
            with contextlib.suppress(UsageError):  # not a row id: no parent
                parent = store.read_row(parent_id)
        if parent is None:
            break
        current = parent
    user, _ = task_and_answer(current)
    return _quoted_task(user) or user


def _quoted_task(text: str) -> str:
    """The task a fork prompt quotes, or "" if ``text`` is not a fork prompt."""
    for head in _HEADS:
        if text.startswith(head):
            rest = text[len(head) :]
            ends = [rest.find(mark) for mark in _AFTER_TASK if mark in rest]
            return rest[: min(ends)] if ends else rest.rstrip("\n")
    return ""


def prompt(row: dict[str, Any], correction: str | None, task: str | None = None) -> str:
    """The follow-up prompt: the task, the previous answer, the correction.

    ``task`` is the original task (original_task); default: the row's own.
    """
    user, answer = task_and_answer(row)
    task = task if task and task.strip() else user
    if not task.strip():
        raise UsageError(f"row {row.get('id')} has no user message to fork from")
    correction = (correction or "").strip() or None
    lines = [
        "Redo this task with a correction."
        if correction
        else "Redo this task; the previous answer needs improvement.",
        "",
        "Task:",
        task.strip(),
    ]
    if answer:
        lines += ["", "Previous answer:", answer.strip()]
    if correction:
        lines += ["", "Correction:", correction]
    return "\n".join(lines) + "\n"


def make(
    row: dict[str, Any], correction: str | None, store: Store | None = None
) -> Fork:
    """A fork of ``row`` with ``correction``, quoting the chain's original task."""
    return Fork(str(row["id"]), prompt(row, correction, original_task(store, row)))


def pi_path() -> str | None:
    """The ``pi`` on PATH, if there is one."""
    return shutil.which("pi")


@dataclass
class Ran:
    """A finished fork: pi's exit status and the session file it wrote."""

    status: int
    session: Path | None


def run(fork: Fork, pi: str, project: Path) -> Ran:
    """Run the fork with ``pi`` in this terminal; pi's status and new session."""
    before = set(pi_sessions.session_files(project))
    try:
        done = subprocess.run(
            [pi, *fork.argv[1:]], env={**os.environ, **fork.env}, check=False
        )
    except OSError as e:
        raise UsageError(f"cannot run {pi}: {e.strerror}") from None
    new = [p for p in pi_sessions.session_files(project) if p not in before]
    return Ran(done.returncode, new[-1] if new else None)
