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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from typing import NamedTuple

from machine_git.agents.observe import PARENT_ENV
from machine_git.core.errors import MachineError
from machine_git.core.errors import NotFoundError
from machine_git.core.errors import RowNotFoundError
from machine_git.core.errors import UsageError
from machine_git.core.paths import Project
from machine_git.rows import rows
from machine_git.sessions import pi as pi_sessions
from machine_git.store.store import Store
from machine_git.tagging import tagging
from machine_git.tagging.tagging import Tagged
from machine_git.tagging.tagging import TagOptions

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Row

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


def task_and_answer(row: Row) -> tuple[str, str | None]:
    """The user's message and the final answer of a row (messages or trajectory)."""
    user = next(
        (str(i["content"] or "") for i in rows.body(row) if i["role"] == "user"), ""
    )
    return user, rows.final_answer(row)


def original_task(store: Store | None, row: Row) -> str:
    """The task a chain of forks started from: the first row's user message.

    Follows ``source.parent_row`` through the store; where a parent is gone,
    the task is read back from the fork prompt's own "Task:" section.
    """
    seen: set[str] = set()
    current = row
    while len(seen) < _MAX_CHAIN:
        seen.add(current["id"])
        parent_id = current["source"].get("parent_row")
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


def prompt(row: Row, correction: str | None, task: str | None = None) -> str:
    """The follow-up prompt: the task, the previous answer, the correction.

    ``task`` is the original task (original_task); default: the row's own.
    """
    user, answer = task_and_answer(row)
    task = task if task and task.strip() else user
    if not task.strip():
        raise UsageError(f"row {row['id']} has no user message to fork from")
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


def make(row: Row, correction: str | None, store: Store | None = None) -> Fork:
    """A fork of ``row`` with ``correction``, quoting the chain's original task."""
    return Fork(row["id"], prompt(row, correction, original_task(store, row)))


def pi_path() -> str | None:
    """The ``pi`` on PATH, if there is one."""
    return shutil.which("pi")


@dataclass
class Ran:
    """A finished fork: pi's exit status and the session file it wrote."""

    status: int
    session: Path | None


def run(fork: Fork, pi: str, project: Path, stdout: int | None = None) -> Ran:
    """Run the fork with ``pi`` in this terminal; pi's status and new session.

    ``stdout``: a file descriptor for pi's output instead of ours (2: stderr).
    """
    before = set(pi_sessions.session_files(project))
    try:
        done = subprocess.run(
            [pi, *fork.argv[1:]],
            env={**os.environ, **fork.env},
            check=False,
            stdout=stdout,
        )
    except OSError as e:
        raise UsageError(f"cannot run {pi}: {e.strerror}") from None
    new = [p for p in pi_sessions.session_files(project) if p not in before]
    return Ran(done.returncode, new[-1] if new else None)


# -- a fork, start to end ----------------------------------------------------------


class Forked(NamedTuple):
    """What ``machine fork`` (or ``correction``) did.

    ``ran``: pi ran (not with ``dry_run``, nor without pi on PATH), with
    exit ``status``; ``recorded``: its run as observed (None if it was not,
    ``warnings`` say why); ``pi_missing``: the command is the user's to run.
    """

    fork: Fork
    ran: bool
    status: int
    recorded: Tagged | None
    pi_missing: bool
    warnings: list[str]


def fork(
    project: Project,
    correction: str,
    *,
    row_id: str | None = None,
    dry_run: bool = False,
    notify: Callable[[str], None] | None = None,
    stdout: int | None = None,
) -> Forked:
    """Rerun row ``row_id`` (default: the latest observed run) in ``pi -p`` with
    ``correction``, and record the new run as an observed row pointing back at it.

    ``notify`` hears, before pi starts, that it is starting (pi takes the
    terminal for minutes). ``stdout``: where pi's output goes (run()).
    """
    store, row = _to_fork(project, row_id)
    made = make(row, correction, store)
    pi_bin = None if dry_run else pi_path()
    if pi_bin is None:
        return Forked(made, False, 0, None, not dry_run, [])
    if notify is not None:
        notify(f"fork of {made.parent_id}: running pi -p")
    ran = run(made, pi_bin, project.root, stdout)
    recorded, why = _record(project, made.parent_id, ran.session)
    return Forked(made, True, ran.status, recorded, False, [why] if why else [])


def _to_fork(project: Project, row_id: str | None) -> tuple[Store, Row]:
    from machine_git.agents import observe
    from machine_git.history import lookup
    from machine_git.store.store import exists

    if row_id is not None:
        store = Store.open(project.store_path)
        found = store.read_row(lookup.resolve_id(store, row_id))
        if found is None:  # resolve_id found it a moment ago
            raise RowNotFoundError(f"row {row_id} was removed meanwhile")
        return store, found
    where = project.store_path
    existing = Store.open(where) if exists(where) else None
    latest = [] if existing is None else observe.recent(existing, 1)
    if existing is None or not latest:
        raise NotFoundError(
            "no observed run to fork (machine auto on, then run pi -p; "
            "or machine correction --id ID)"
        )
    return existing, latest[0]


def _record(
    project: Project, parent: str, session: Path | None
) -> tuple[Tagged | None, str | None]:
    """Observe the run a fork made, linked to its parent, whatever auto says."""
    if session is None:
        return None, f"the fork of {parent} left no Pi session; nothing recorded"
    options = TagOptions(label="observed", host="pi", session=session, parent=parent)
    try:
        return tagging.tag(project, options), None
    except MachineError as e:
        return None, f"the fork of {parent} was not recorded: {e}"
