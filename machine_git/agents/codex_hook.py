"""What Codex runs after ``machine install codex``: a prompt hook and ``notify``.

``python -m machine_git.agents.codex_hook prompt`` is a ``UserPromptSubmit``
hook: Codex runs it before each prompt reaches the model, with the prompt,
the rollout (``transcript_path``) and the working folder as JSON on stdin. A
prompt that starts with ``/good``, ``/bad`` or ``/machine`` runs this machine
(``good|bad --host codex --session <rollout> ...``, or the machine command
typed) and blocks the prompt with machine's output as the reason: the model
is never asked, nothing is added to the rollout, and the turn before is still
the last one. Any other prompt passes untouched (no output, exit 0).

``python -m machine_git.agents.codex_hook notify JSON`` is Codex's ``notify``
program, run after every finished turn with the turn as its last argument
(``agent-turn-complete``: thread id, turn id, cwd). With ``machine auto on``
it records that turn's rollout as an observed row (``machine observe
--if-auto``); with auto off it does nothing more. Codex does not wait for it.

Both start often, so this module imports nothing of machine's for an
ordinary prompt: it runs machine as a child process, with a time limit and no
terminal.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

VERBS = ("good", "bad", "machine")
_COMMAND = re.compile(r"/(good|bad|machine)(?=\s|$)(.*)", re.S)
TIMEOUT = 120.0  # seconds; Codex's own limit for the hook is set at install
_SETTLE = 5.0  # seconds to wait for the finished turn to reach the rollout


def machine_argv() -> list[str]:
    """This Python's machine (the hook runs with the Python that installed it)."""
    return [sys.executable, "-m", "machine_git"]


def command_for(prompt: str, rollout: str | None) -> list[str] | None:
    """The machine command a prompt asks for, or None for an ordinary prompt.

    Raises ValueError for arguments shlex cannot split (an open quote).
    """
    found = _COMMAND.fullmatch(prompt.strip())
    if found is None:
        return None
    verb, rest = found.group(1), shlex.split(found.group(2))
    if verb == "machine":
        return [*machine_argv(), *rest]
    where = ["--session", rollout] if rollout else []
    return [*machine_argv(), verb, "--host", "codex", *where, *rest]


def _run(argv: list[str], cwd: str | None) -> tuple[int, str]:
    """Run machine with no terminal; past the limit, stop it and all it started."""
    env = {**os.environ, "PAGER": "cat", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0"}
    try:
        process = subprocess.Popen(
            argv,
            cwd=cwd if cwd and os.path.isdir(cwd) else None,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    except OSError as e:
        return 1, f"cannot run machine: {e.strerror}"
    try:
        out, _ = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return 1, f"machine did not finish within {TIMEOUT:.0f} s; stopped"
    return process.returncode, out.strip()


def on_prompt(payload: dict[str, Any]) -> dict[str, str] | None:
    """The hook's answer to one prompt: a block with machine's output, or None."""
    prompt = payload.get("prompt")
    if not isinstance(prompt, str):
        return None
    rollout = payload.get("transcript_path")
    asked = _COMMAND.fullmatch(prompt.strip())
    if isinstance(rollout, str) and asked and asked.group(1) != "machine":
        rollout = _turns_in(Path(rollout))
    try:
        argv = command_for(prompt, rollout if isinstance(rollout, str) else None)
    except ValueError as e:
        return {"decision": "block", "reason": f"machine: {e}; nothing ran"}
    if argv is None:
        return None
    cwd = payload.get("cwd")
    _, said = _run(argv, cwd if isinstance(cwd, str) else None)
    # Codex refuses a block without a reason, and shows the reason to the user.
    return {"decision": "block", "reason": said or "machine: done"}


def _first_cwd(rollout: Path) -> str | None:
    try:
        with rollout.open("rb") as f:
            first = json.loads(f.readline(1 << 20) or b"{}")
    except (OSError, ValueError):
        return None
    payload = first.get("payload") if isinstance(first, dict) else None
    cwd = payload.get("cwd") if isinstance(payload, dict) else None
    return cwd if isinstance(cwd, str) else None


def _turns_in(rollout: Path) -> str | None:
    """The rollout ``/good`` means: this session's, or, in a session with no
    prompt yet (``codex exec "/good"`` starts one), the newest earlier session
    started in the same folder. None: let machine choose."""
    from machine_git.sessions.codex.find import has_prompt

    if has_prompt(rollout):
        return str(rollout)
    cwd = _first_cwd(rollout)
    root = _codex_home() / "sessions"
    others: list[tuple[float, Path]] = []
    for path in root.rglob("rollout-*.jsonl"):
        if path != rollout and _first_cwd(path) == cwd:
            with contextlib.suppress(OSError):
                others.append((path.stat().st_mtime, path))
    for _, path in sorted(others, reverse=True):
        if has_prompt(path):
            return str(path)
    return None


def rollout_of(thread_id: str, codex_home: Path) -> Path | None:
    """The rollout file of a Codex thread (its id ends the file name)."""
    if not re.fullmatch(r"[0-9A-Za-z-]+", thread_id):
        return None  # an id is never a path
    found = sorted((codex_home / "sessions").rglob(f"rollout-*-{thread_id}.jsonl"))
    return found[-1] if found else None


def _turn_written(rollout: Path, turn_id: str) -> bool:
    try:
        text = rollout.read_text(errors="replace")
    except OSError:
        return False
    return any(
        '"task_complete"' in line and turn_id in line for line in text.splitlines()
    )


def on_notify(payload: dict[str, Any], codex_home: Path) -> int:
    """Record the finished turn as an observed row when auto-capture is on."""
    if payload.get("type") != "agent-turn-complete":
        return 0
    thread, turn = payload.get("thread-id"), payload.get("turn-id")
    if not isinstance(thread, str) or not isinstance(turn, str):
        return 0
    rollout = rollout_of(thread, codex_home)
    if rollout is None:
        return 0
    # Codex may call notify before the turn's last lines are on disk.
    deadline = time.monotonic() + _SETTLE
    while not _turn_written(rollout, turn) and time.monotonic() < deadline:
        time.sleep(0.1)
    argv = [*machine_argv(), "observe", "--if-auto", "--host", "codex"]
    cwd = payload.get("cwd")
    code, _ = _run(
        [*argv, "--session", str(rollout)], cwd if isinstance(cwd, str) else None
    )
    return code


def _codex_home() -> Path:
    env = os.environ.get("CODEX_HOME")
    return Path(env).expanduser() if env else Path.home() / ".codex"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["prompt"]:
        try:
            payload = json.loads(sys.stdin.read() or "{}")
        except ValueError:
            return 0  # not ours to judge: let the prompt through
        answer = on_prompt(payload) if isinstance(payload, dict) else None
        if answer is not None:
            print(json.dumps(answer))
        return 0
    if args[:1] == ["notify"] and len(args) >= 2:
        try:
            payload = json.loads(args[-1])
        except ValueError:
            return 0
        return on_notify(payload, _codex_home()) if isinstance(payload, dict) else 0
    print(
        "usage: python -m machine_git.agents.codex_hook prompt|notify JSON",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
