"""Where Letta Code keeps a project's sessions, and the newest of them.

- The local backend (``letta --backend local``): ``$LETTA_LOCAL_BACKEND_DIR``
  or ``~/.letta/lc-local-backend``, one folder per conversation under
  ``conversations/`` holding ``messages.jsonl``.
- Client-side transcripts: ``$LETTA_TRANSCRIPT_ROOT`` or
  ``~/.letta/transcripts``, ``<agent>/<conversation>/transcript.jsonl``.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

from machine_git.core import jsonio
from machine_git.core.errors import NoSessionError
from machine_git.sessions import files
from machine_git.sessions.letta.common import cwd_of
from machine_git.sessions.values import string
from machine_git.sessions.values import text_of


def backend_dir() -> Path:
    """``$LETTA_LOCAL_BACKEND_DIR`` or ``~/.letta/lc-local-backend``."""
    env = os.environ.get("LETTA_LOCAL_BACKEND_DIR")
    return (
        Path(env).expanduser() if env else Path.home() / ".letta" / "lc-local-backend"
    )


def transcript_root() -> Path:
    """``$LETTA_TRANSCRIPT_ROOT`` or ``~/.letta/transcripts``."""
    env = os.environ.get("LETTA_TRANSCRIPT_ROOT")
    return Path(env).expanduser() if env else Path.home() / ".letta" / "transcripts"


def conversation_folder(conversation_id: str | None, agent_id: str | None) -> str:
    """The local backend's folder name: base64url of ``conversation:<id>``.

    An agent's default conversation is ``default:<agentId>``.
    """
    if conversation_id and conversation_id != "default":
        key = f"conversation:{conversation_id}"
    else:
        key = f"default:{agent_id}"
    return base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")


def find_session(project: Path) -> Path:
    """The newest Letta Code session of ``project``.

    Candidates: the conversation the project's ``.letta/settings.local.json``
    names as ``lastSession`` (its transcript and its local-backend folder), and
    every local-backend conversation whose recorded working directory is in the
    project.
    """
    backend = backend_dir() / "conversations"
    candidates: list[Path] = []
    agent, conversation = _last_session(project)
    if agent:
        if conversation:
            candidates.append(
                transcript_root() / agent / conversation / "transcript.jsonl"
            )
        candidates.append(
            backend / conversation_folder(conversation, agent) / "messages.jsonl"
        )
    try:
        folders = [p for p in backend.iterdir() if p.is_dir()]
    except OSError:
        folders = []
    for folder in folders:
        path = folder / "messages.jsonl"
        if path not in candidates and files.inside(_head_cwd(path), project):
            candidates.append(path)
    found = files.newest(p for p in candidates if p.is_file())
    if found is None:
        raise NoSessionError(
            f"no Letta Code session for {project} in {backend} or "
            f"{transcript_root()} (run letta in the project first, set "
            "LETTA_LOCAL_BACKEND_DIR or LETTA_TRANSCRIPT_ROOT, or pass --session PATH)"
        )
    return found


def _last_session(project: Path) -> tuple[str | None, str | None]:
    try:
        data = jsonio.loads((project / ".letta" / "settings.local.json").read_bytes())
    except (OSError, ValueError):
        return None, None
    last = data.get("lastSession") if isinstance(data, dict) else None
    if not isinstance(last, dict):
        return None, None
    agent, conversation = (
        string(last.get("agentId")),
        string(last.get("conversationId")),
    )
    if not _safe(agent) or not _safe(conversation):
        return None, None  # not an id: never let it walk out of the folder
    return agent, conversation


def _safe(name: str | None) -> bool:
    return name is None or not (set(name) & {"/", "\\"} or name in {".", ".."})


def _head_cwd(path: Path) -> str | None:
    """The working directory written in the first user messages of a file."""
    for row in files.head_objects(path):
        if row.get("role") == "user":
            cwd = cwd_of(text_of(row.get("content")))
            if cwd:
                return cwd
    return None
