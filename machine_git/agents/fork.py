"""Forks: rerun a recorded run in Pi with a correction.

A fork is a new headless run (``pi -p``) whose prompt restates the recorded
run's task and answer plus what to do differently. It runs with
``MACHINE_FORK=1`` and ``MACHINE_FORK_PARENT=<row id>``; when auto-capture
records it, ``machine observe`` reads the parent from the environment, so the
new observed row points back at the row it corrects (``source.parent_row``).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

from machine_git.agents.observe import PARENT_ENV
from machine_git.errors import UsageError

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


def prompt(row: dict[str, Any], correction: str | None) -> str:
    """The follow-up prompt: the task, the previous answer, the correction."""
    user, answer = task_and_answer(row)
    if not user.strip():
        raise UsageError(f"row {row.get('id')} has no user message to fork from")
    correction = (correction or "").strip() or None
    lines = [
        "Redo this task with a correction."
        if correction
        else "Redo this task; the previous answer needs improvement.",
        "",
        "Task:",
        user.strip(),
    ]
    if answer:
        lines += ["", "Previous answer:", answer.strip()]
    if correction:
        lines += ["", "Correction:", correction]
    return "\n".join(lines) + "\n"


def make(row: dict[str, Any], correction: str | None) -> Fork:
    """A fork of ``row`` with ``correction``."""
    return Fork(str(row["id"]), prompt(row, correction))


def pi_path() -> str | None:
    """The ``pi`` on PATH, if there is one."""
    return shutil.which("pi")


def run(fork: Fork, pi: str) -> int:
    """Run the fork with ``pi`` in this terminal; returns pi's exit status."""
    try:
        done = subprocess.run(
            [pi, *fork.argv[1:]], env={**os.environ, **fork.env}, check=False
        )
    except OSError as e:
        raise UsageError(f"cannot run {pi}: {e.strerror}") from None
    return done.returncode
