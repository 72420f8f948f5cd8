"""Codex CLI sessions: ``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``.

``$CODEX_HOME`` replaces ``~/.codex``. Every line is
``{"timestamp", "type", "payload"}``: ``session_meta`` (id, cwd, git), one
``turn_context`` per turn (model), ``response_item`` (what the model saw and
said: messages, reasoning, tool calls and their outputs) and ``event_msg``
(the UI's stream, which repeats the messages). Messages are read from
``response_item`` only; reasoning from the ``agent_reasoning`` events (the
``response_item`` copy is encrypted), falling back to its summary when a file
has no such events. Codex injects context (AGENTS.md, the environment) as user
messages; those are not the user speaking. Lines have no ids: a line's id is
``L<line number>``, stable because the file only grows.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from machine_git import context
from machine_git import jsonio
from machine_git.errors import NoSessionError
from machine_git.errors import TurnError
from machine_git.sessions import ReadReport
from machine_git.sessions import Turn
from machine_git.sessions import files
from machine_git.sessions.records import Records
from machine_git.sessions.records import meta
from machine_git.sessions.records import string
from machine_git.sessions.records import text_of

HOST = "codex"
SOURCE = "codex"
KNOWN_TYPES = frozenset(
    {"session_meta", "turn_context", "response_item", "event_msg", "compacted"}
)
# agent-trajectory's list, plus the AGENTS.md header newer versions write.
INJECTED_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "<permissions instructions>",
    "<turn_context>",
    "# AGENTS.md instructions for ",
)
_CALLS = frozenset(
    {"function_call", "custom_tool_call", "local_shell_call", "web_search_call"}
)
_OUTPUTS = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "local_shell_call_output",
        "tool_search_output",
    }
)
# The exit code Codex writes into an exec's output: the freeform header of
# apply_patch/shell ("Exit code: 1") or of unified exec ("Process exited with
# code 1"), in the lines before "Output:".
_EXIT_LINE = re.compile(r"^(?:Exit code:|Process exited with code)\s*(-?\d+)\s*$")


def home() -> Path:
    """``$CODEX_HOME`` or ``~/.codex``."""
    env = os.environ.get("CODEX_HOME")
    return Path(env).expanduser() if env else Path.home() / ".codex"


def find_session(project: Path) -> Path:
    """The newest Codex rollout whose session started in ``project`` (or inside)."""
    root = home() / "sessions"
    rollouts: list[tuple[float, Path]] = []
    for path in _rollouts(root):
        stamp = files.mtime(path)
        if stamp is not None:
            rollouts.append((stamp, path))
    # Newest first, so the usual case reads one first line, not all of them.
    for _, path in sorted(rollouts, reverse=True):
        first = files.first_object(path)
        payload = first.get("payload") if first else None
        if isinstance(payload, dict) and files.inside(payload.get("cwd"), project):
            return path
    raise NoSessionError(
        f"no Codex session for {project} in {root} (run codex in the project "
        "first, set CODEX_HOME, or pass --session PATH)"
    )


def _rollouts(root: Path) -> list[Path]:
    found: list[Path] = []
    try:
        for dirpath, _, names in os.walk(root):
            found += [
                Path(dirpath) / n
                for n in names
                if n.startswith("rollout-") and n.endswith(".jsonl")
            ]
    except OSError:
        return found
    return found


def looks_like(row: Any) -> bool:
    """True if a parsed line is a Codex rollout line."""
    return (
        isinstance(row, dict)
        and isinstance(row.get("type"), str)
        and row["type"] in KNOWN_TYPES
        and isinstance(row.get("payload"), dict)
    )


# -- reading ---------------------------------------------------------------------------


def read_turn(path: Path, entry: str | None = None) -> tuple[Turn, ReadReport]:
    """The last turn of the Codex rollout at ``path``."""
    report = ReadReport(str(path))
    rows: list[tuple[int, str, dict[str, Any], Any]] = []
    for number, row in files.load_jsonl(path, report):
        kind, payload = row.get("type"), row.get("payload")
        if not isinstance(kind, str) or not isinstance(payload, dict):
            report.corrupt_lines.append(number)
        elif kind not in KNOWN_TYPES:
            report.unknown_types.append((number, kind))
        else:
            rows.append((number, kind, payload, row.get("timestamp")))
    ids = [f"L{n}" for n, _, _, _ in rows]
    rows = rows[: files.entries_until(ids, entry, path)]
    if not rows:
        raise TurnError(f"{path}: the session has no entries yet")
    start = None
    for index in range(len(rows) - 1, -1, -1):
        _, kind, payload, _ = rows[index]
        if kind == "response_item" and _user_text(payload):
            start = index
            break
    if start is None:
        raise TurnError(f"{path}: no user message in this session")
    cwd = branch = session = provider = model = instructions = None
    for _, kind, payload, _ in rows[: start + 1]:
        if kind == "session_meta" and session is None:
            session = string(payload.get("id"))
            instructions = _instructions(payload)
            cwd = string(payload.get("cwd"))
            provider = string(payload.get("model_provider"))
            git = payload.get("git")
            branch = string(git.get("branch")) if isinstance(git, dict) else None
        elif kind == "turn_context":
            model = string(payload.get("model")) or model
            cwd = cwd or string(payload.get("cwd"))
    events = any(
        kind == "event_msg" and payload.get("type") == "agent_reasoning"
        for _, kind, payload, _ in rows
    )
    builder = Records()
    entry_ids: list[str] = []
    ending: tuple[str, str | None] | None = None
    for index in range(start, len(rows)):
        number, kind, payload, timestamp = rows[index]
        stamp = builder.stamp(timestamp)
        builder.fallback = stamp
        where = f"line {number}"
        item = string(payload.get("type"))
        if index == start:
            builder.user(_user_text(payload), stamp)
        elif kind == "turn_context":
            model = string(payload.get("model")) or model
            continue
        elif kind == "event_msg":
            if item == "agent_reasoning" and isinstance(payload.get("text"), str):
                builder.reasoning(payload["text"], stamp)
            elif item == "turn_aborted":
                ending = ("aborted", string(payload.get("reason")) or "aborted")
            elif item == "error":
                ending = ("error", string(payload.get("message")))
            else:
                continue  # the UI's copies of messages, token counts
        elif kind != "response_item":
            continue
        elif item == "message":
            if payload.get("role") != "assistant":
                continue  # injected context, developer and system messages
            text = text_of(payload.get("content"))
            builder.say(text, stamp)
            if text.strip():
                ending = None
        elif item == "reasoning":
            if events:
                continue  # the same thoughts already came as agent_reasoning
            builder.reasoning(_summary(payload.get("summary")), stamp)
        elif item in _CALLS:
            name, args = _call(item, payload)
            call_id = string(payload.get("call_id")) or string(payload.get("id"))
            if item == "web_search_call" and call_id is None:
                call_id = f"web_search-{ids[index]}"  # never answered: just unique
            builder.call(call_id, name, args, stamp, where)
        elif item == "tool_search_call":
            builder.call(
                payload.get("call_id"),
                "tool_search",
                payload.get("arguments"),
                stamp,
                where,
            )
        elif item in _OUTPUTS:
            if item == "tool_search_output":
                text, failed = jsonio.compact(payload.get("tools") or []), None
            else:
                text, failed = _output(payload.get("output"))
            builder.result(payload.get("call_id"), None, text, failed, stamp, where)
        else:
            continue
        entry_ids.append(ids[index])
    builder.end_calls()
    report.dropped.extend(builder.dropped)
    return (
        Turn(
            # Rollouts keep the instructions (system prompt), not the tools.
            context=context.make(instructions, None),
            host=HOST,
            session_id=session or path.stem,
            session_file=str(path),
            records=[meta(SOURCE, cwd, model, branch), *builder.records],
            entry_ids=entry_ids,
            leaf_id=ids[len(rows) - 1],
            model=model,
            provider=provider,
            cwd=cwd,
            git_branch=branch,
            stop_reason=ending[0] if ending else None,
            error=ending[1] if ending else None,
            dropped=builder.dropped,
        ),
        report,
    )


def _user_text(payload: dict[str, Any]) -> str:
    """A response item's text if it is a real user message, else ""."""
    if payload.get("type") != "message" or payload.get("role") != "user":
        return ""
    text = text_of(payload.get("content"))
    if not text.strip() or text.lstrip().startswith(INJECTED_PREFIXES):
        return ""
    return text


def _call(item: str, payload: dict[str, Any]) -> tuple[Any, Any]:
    if item == "function_call":
        arguments = payload.get("arguments")
        return payload.get("name"), arguments if arguments not in ("", None) else "{}"
    if item == "custom_tool_call":
        # A freeform tool (apply_patch) takes raw text: wrap it like agent-trajectory.
        raw = payload.get("input")
        return payload.get("name"), {"input": raw if raw is not None else ""}
    if item == "local_shell_call":
        return "local_shell", payload.get("action") or {}
    args = {
        k: v for k, v in payload.items() if k not in ("type", "call_id", "status", "id")
    }
    return "web_search", args


def _summary(summary: Any) -> str:
    if not isinstance(summary, list):
        return ""
    parts = [
        s["text"]
        for s in summary
        if isinstance(s, dict) and isinstance(s.get("text"), str)
    ]
    return "\n".join(parts)


def _output(output: Any) -> tuple[str, bool | None]:
    """An output's text as the model saw it, and whether it failed (None: unknown)."""
    if isinstance(output, dict):
        success = output.get("success")
        content = output.get("content")
        text = (
            content if isinstance(content, str) and content else jsonio.compact(output)
        )
        return text, (not success) if isinstance(success, bool) else _exit_failed(text)
    if isinstance(output, list):
        return (text_of(output) or jsonio.compact(output)), None
    if output is None:
        return "", None
    text = output if isinstance(output, str) else str(output)
    return text, _exit_failed(text)


def _exit_failed(text: str) -> bool | None:
    """Codex has no status field, but every exec output states its exit code."""
    try:
        value = jsonio.loads(text) if text.startswith("{") else None
    except ValueError:
        value = None
    if isinstance(value, dict):
        metadata = value.get("metadata")
        code = metadata.get("exit_code") if isinstance(metadata, dict) else None
        if isinstance(code, int) and not isinstance(code, bool):
            return code != 0
        return None
    for line in text.split("\n", 8)[:8]:
        if line.startswith("Output:"):
            break
        found = _EXIT_LINE.match(line)
        if found:
            return int(found.group(1)) != 0
    return None


def _instructions(meta_payload: dict[str, Any]) -> str | None:
    """The system prompt a rollout records: ``instructions`` (older Codex) or
    ``base_instructions.text`` (newer); None when it records neither."""
    base = meta_payload.get("base_instructions")
    if isinstance(base, dict) and string(base.get("text")):
        return string(base.get("text"))
    return string(meta_payload.get("instructions"))
