"""Reading a Gemini CLI session: the messages left at the end, from the last prompt.

Lines are applied in order: a message line adds the message, or replaces the
one with its ``id``; a ``$set`` line replaces fields (``messages`` the whole
list). Tool calls and their results are kept on the model's message
(``toolCalls``: ``id``, ``name``, ``args``, ``result`` as function responses,
``status``); the user messages that carry the same function responses back to
the model are not the user speaking, nor is the ``<session_context>`` the CLI
writes first. Gemini CLI records neither system prompt nor tools.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from machine_git.core.errors import SessionError
from machine_git.core.errors import TurnError
from machine_git.sessions import ReadReport
from machine_git.sessions import Turn
from machine_git.sessions import files
from machine_git.sessions.gemini.find import project_root
from machine_git.sessions.records import Records
from machine_git.sessions.records import window
from machine_git.sessions.values import string

HOST = "gemini"
SOURCE = "gemini-cli"  # meta.source (agent-trajectory's name)
MESSAGE_TYPES = frozenset({"user", "gemini", "info", "error", "warning"})
_CONTEXT = "<session_context>"


def recognize(value: Any) -> str | None:
    """``gemini`` for a parsed Gemini CLI session line (SessionReader)."""
    if not isinstance(value, dict):
        return None
    header = isinstance(value.get("projectHash"), str) and "sessionId" in value
    patch = list(value) == ["$set"] and isinstance(value["$set"], dict)
    model = value.get("type") == "gemini" and "id" in value and "content" in value
    return HOST if header or patch or model else None


def read_turn(
    path: Path, entry: str | None = None, form: str | None = None
) -> tuple[Turn, ReadReport]:
    """The last turn of the Gemini CLI session at ``path`` (one format)."""
    report = ReadReport(str(path))
    session, messages = _replay(path, report)
    if not messages:
        raise TurnError(f"{path}: the session has no messages yet")
    ids = [string(m.get("id")) or f"M{i}" for i, m in enumerate(messages)]
    turn = window(messages, ids, entry, path, _user_text)
    builder = Records()
    entry_ids: list[str] = []
    model: str | None = None
    for index in range(turn.start, len(turn.items)):
        message = turn.items[index]
        stamp = builder.moment(message.get("timestamp"))
        kind = message.get("type")
        if index == turn.start:
            builder.user(turn.texts[index], stamp)
        elif kind == "gemini":
            _model_message(builder, message, stamp, f"message {turn.ids[index]}")
            model = string(message.get("model")) or model
        elif kind == "error":
            builder.stopped("error", _text(message.get("content")) or "error")
        else:
            continue  # function responses going back, info and warnings
        entry_ids.append(turn.ids[index])
    return builder.finish(
        report,
        host=HOST,
        source=SOURCE,
        path=path,
        session_id=string(session.get("sessionId")) or path.stem,
        entry_ids=entry_ids,
        leaf_id=turn.ids[-1],
        cwd=project_root(path.parent.parent),
        model=model,
    )


def _replay(
    path: Path, report: ReadReport
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The session's fields and its messages as they stand at the end of the file."""
    session: dict[str, Any] = {}
    messages: list[dict[str, Any]] = []
    where: dict[str, int] = {}
    found = False
    for number, line in files.load_jsonl(path, report):
        kind = line.get("type")
        message = isinstance(kind, str) and kind in MESSAGE_TYPES and "id" in line
        if recognize(line) is None and not message:
            report.unknown_types.append((number, str(kind)))
            continue
        found = True
        patch = line.get("$set")
        if isinstance(patch, dict):
            session.update({k: v for k, v in patch.items() if k != "messages"})
            if isinstance(patch.get("messages"), list):
                messages = [m for m in patch["messages"] if isinstance(m, dict)]
                where = {str(m.get("id")): i for i, m in enumerate(messages)}
        elif message:
            key = str(line["id"])
            if key in where:
                messages[where[key]] = line
            else:
                where[key] = len(messages)
                messages.append(line)
        else:
            session.update(line)  # a header: the first, or a resume's
    if not found:
        raise SessionError(f"{path}: not a Gemini CLI session")
    return session, messages


def _text(content: Any) -> str:
    """The words of a message's content: a string, or parts (thoughts left out)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(
        p["text"]
        for p in content
        if isinstance(p, dict)
        and isinstance(p.get("text"), str)
        and not p.get("thought")
    )


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _user_text(message: dict[str, Any]) -> str:
    """The message's text if it is the user speaking, else ""."""
    if message.get("type") != "user":
        return ""
    text = _text(message.get("content"))
    if not text.strip() or text.lstrip().startswith(_CONTEXT):
        return ""
    return text


def _model_message(
    builder: Records, message: dict[str, Any], stamp: str, where: str
) -> None:
    for thought in _list(message.get("thoughts")):
        if isinstance(thought, dict):
            subject = string(thought.get("subject"))
            description = string(thought.get("description")) or ""
            builder.reasoning(
                f"{subject}\n{description}" if subject else description, stamp
            )
    builder.say(_text(message.get("content")), stamp)
    calls = [c for c in _list(message.get("toolCalls")) if isinstance(c, dict)]
    for call in calls:
        builder.call(
            call.get("id"), call.get("name"), call.get("args") or {}, stamp, where
        )
    for call in calls:
        text, failed = _result(call)
        builder.result(call.get("id"), call.get("name"), text, failed, stamp, where)


def _result(call: dict[str, Any]) -> tuple[str, bool]:
    """What a call gave back to the model, and whether it failed."""
    texts: list[str] = []
    failed = call.get("status") not in (None, "success")
    for part in _list(call.get("result")):
        response = part.get("functionResponse") if isinstance(part, dict) else None
        value = response.get("response") if isinstance(response, dict) else None
        if not isinstance(value, dict):
            continue
        if "error" in value:
            failed = True
            texts.append(str(value["error"]))
        elif "output" in value:
            texts.append(str(value["output"]))
    return "\n".join(texts), failed
