"""Reading a Codex rollout's last turn, line by line.

Messages are read from ``response_item`` lines only; reasoning from the
``agent_reasoning`` events (the ``response_item`` copy is encrypted),
falling back to its summary when a file has no such events. Injected context
(AGENTS.md, the environment) is not the user speaking. A line's id is
``L<line number>``, stable because the file only grows.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import NamedTuple

from machine_git.core import jsonio
from machine_git.core.errors import TurnError
from machine_git.rows import context
from machine_git.sessions import ReadReport
from machine_git.sessions import Turn
from machine_git.sessions import files
from machine_git.sessions.records import Records
from machine_git.sessions.records import window
from machine_git.sessions.values import images_of
from machine_git.sessions.values import string
from machine_git.sessions.values import text_of

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Image

HOST = "codex"
SOURCE = "codex"
KNOWN_TYPES = frozenset(
    {"session_meta", "turn_context", "response_item", "event_msg", "compacted"}
)
# Lines of newer versions (0.17x) that hold no part of a turn: the state the
# prompt was built from, and token accounting.
_SILENT = frozenset({"world_state", "token_usage_record"})
# agent-trajectory's list, plus the AGENTS.md header newer versions write.
INJECTED_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "<permissions instructions>",
    "<turn_context>",
    "# AGENTS.md instructions for ",
    # 0.17x tells the model, as a user message, that the last turn was interrupted.
    "<turn_aborted>",
    # and hands a compaction's summary on to the model as a user message.
    "Another language model started to solve this problem",
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


def recognize(value: Any) -> str | None:
    """``codex`` for a parsed rollout line (SessionReader)."""
    is_rollout = (
        isinstance(value, dict)
        and isinstance(value.get("type"), str)
        and value["type"] in KNOWN_TYPES
        and isinstance(value.get("payload"), dict)
    )
    return HOST if is_rollout else None


# -- reading ---------------------------------------------------------------------------


def read_turn(
    path: Path, entry: str | None = None, form: str | None = None
) -> tuple[Turn, ReadReport]:
    """The last turn of the Codex rollout at ``path`` (one format: ``form`` unused)."""
    report = ReadReport(str(path))
    rows = _rows(path, report)
    if not rows and entry is None:
        raise TurnError(f"{path}: the session has no entries yet")
    # Some versions write the prompt only as an ``event_msg`` ``user_message``:
    # then those events are where the user speaks.
    spoken = _user if any(_user(row) for row in rows) else _user_event
    turn = window(rows, [f"L{row.line}" for row in rows], entry, path, spoken)
    rows, ids, start = turn.items, turn.ids, turn.start
    files.check_whole(path, report, rows[start].line, rows[-1].line)
    setting = _Setting(rows[: start + 1])
    # Reasoning comes from the agent_reasoning events when the file has them.
    events = any(
        row.kind == "event_msg" and row.payload.get("type") == "agent_reasoning"
        for row in rows
    )
    builder = Records()
    entry_ids: list[str] = []
    summaries = _summaries(rows, start)
    for index in range(start, len(rows)):
        row = rows[index]
        stamp = builder.moment(row.timestamp)
        if index == start:
            builder.user(turn.texts[index], stamp, _user_images(row))
        elif index in summaries:
            continue  # a compaction's summary: Codex's, not an answer
        elif row.kind == "turn_context":
            setting.model = string(row.payload.get("model")) or setting.model
            continue
        elif row.kind == "event_msg":
            if not _event(builder, row.payload, stamp):
                continue  # the UI's copies of messages, token counts
        elif row.kind != "response_item" or not _item(
            builder, row, stamp, ids[index], events
        ):
            continue
        entry_ids.append(ids[index])
    return builder.finish(
        report,
        host=HOST,
        source=SOURCE,
        path=path,
        session_id=setting.session or path.stem,
        entry_ids=entry_ids,
        leaf_id=ids[len(rows) - 1],
        cwd=setting.cwd,
        model=setting.model,
        branch=setting.branch,
        provider=setting.provider,
        # Rollouts keep the instructions (system prompt), not the tools.
        context=context.make(setting.instructions, None),
    )


class _Row(NamedTuple):
    line: int
    kind: str
    payload: dict[str, Any]
    timestamp: Any


def _rows(path: Path, report: ReadReport) -> list[_Row]:
    rows: list[_Row] = []
    for number, row in files.load_jsonl(path, report):
        kind, payload = row.get("type"), row.get("payload")
        if not isinstance(kind, str) or not isinstance(payload, dict):
            report.corrupt_lines.append(number)
        elif kind in _SILENT:
            continue
        elif kind not in KNOWN_TYPES:
            report.unknown_types.append((number, kind))
        else:
            rows.append(_Row(number, kind, payload, row.get("timestamp")))
    return rows


def _summaries(rows: list[_Row], start: int) -> set[int]:
    """The assistant messages that are a compaction's summary, by index.

    An automatic compaction in the middle of a turn asks the model for a
    summary; its answer is written as an assistant message, then the
    ``compacted`` line whose hand-off message quotes it.
    """
    found: set[int] = set()
    for index in range(start, len(rows)):
        row = rows[index]
        handoff = row.payload.get("message") if row.kind == "compacted" else None
        if not isinstance(handoff, str):
            continue
        for back in range(index - 1, start, -1):
            item = rows[back].payload
            if rows[back].kind != "response_item" or item.get("type") != "message":
                continue
            if item.get("role") == "assistant":
                said = text_of(item.get("content"))
                if said.strip() and said.strip() in handoff:
                    found.add(back)
            break
    return found


def _user(row: _Row) -> str:
    return _user_text(row.payload) if row.kind == "response_item" else ""


def _user_images(row: _Row) -> list[Image]:
    """The images pasted or attached (``-i``) with the prompt, inline.

    Codex writes each as an ``input_image`` part with a data URL, between
    ``<image>`` text parts. A prompt read from an ``event_msg`` keeps its
    text alone: the event has no placeholder to put an image at.
    """
    if row.kind != "response_item":
        return []
    return images_of(row.payload.get("content"))


def _user_event(row: _Row) -> str:
    if row.kind != "event_msg" or row.payload.get("type") != "user_message":
        return ""
    text = string(row.payload.get("message")) or ""
    return "" if text.lstrip().startswith(INJECTED_PREFIXES) else text


class _Setting:
    """Where and with what the turn ran, from the lines up to its start."""

    def __init__(self, rows: list[_Row]) -> None:
        self.cwd = self.branch = self.session = self.provider = self.model = None
        self.instructions: str | None = None
        for row in rows:
            payload = row.payload
            if row.kind == "session_meta" and self.session is None:
                self.session = string(payload.get("id"))
                self.instructions = _instructions(payload)
                self.cwd = string(payload.get("cwd"))
                self.provider = string(payload.get("model_provider"))
                git = payload.get("git")
                self.branch = (
                    string(git.get("branch")) if isinstance(git, dict) else None
                )
            elif row.kind == "turn_context":
                self.model = string(payload.get("model")) or self.model
                self.cwd = self.cwd or string(payload.get("cwd"))


def _event(builder: Records, payload: dict[str, Any], stamp: str) -> bool:
    """Add an ``event_msg`` line's part of the turn; False if it has none."""
    item = payload.get("type")
    if item == "agent_reasoning" and isinstance(payload.get("text"), str):
        builder.reasoning(payload["text"], stamp)
    elif item == "turn_aborted":
        builder.stopped("aborted", string(payload.get("reason")) or "aborted")
    elif item == "error":
        builder.stopped("error", string(payload.get("message")))
    elif item == "task_complete" and isinstance(payload.get("error"), dict):
        # 0.17x ends a failed turn so (the request or the stream failed).
        builder.stopped("error", string(payload["error"].get("message")) or "error")
    else:
        return False
    return True


def _item(builder: Records, row: _Row, stamp: str, line_id: str, events: bool) -> bool:
    """Add a ``response_item`` line's part of the turn; False if it has none."""
    payload, where = row.payload, f"line {row.line}"
    item = string(payload.get("type"))
    if item == "message":
        if payload.get("role") != "assistant":
            return False  # injected context, developer and system messages
        builder.say(text_of(payload.get("content")), stamp)
    elif item == "reasoning":
        if events:
            return False  # the same thoughts already came as agent_reasoning
        builder.reasoning(_summary(payload.get("summary")), stamp)
    elif item in _CALLS:
        name, args = _call(item, payload)
        call_id = string(payload.get("call_id")) or string(payload.get("id"))
        if item == "web_search_call" and call_id is None:
            call_id = f"web_search-{line_id}"  # never answered: just unique
        builder.call(call_id, name, args, stamp, where)
    elif item == "tool_search_call":
        args = payload.get("arguments")
        builder.call(payload.get("call_id"), "tool_search", args, stamp, where)
    elif item in _OUTPUTS:
        if item == "tool_search_output":
            text, failed = jsonio.compact(payload.get("tools") or []), None
        else:
            text, failed = _output(payload.get("output"))
        # view_image answers with the picture itself: input_image parts.
        shown = images_of(payload.get("output"))
        builder.result(payload.get("call_id"), None, text, failed, stamp, where, shown)
    else:
        return False
    return True


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
