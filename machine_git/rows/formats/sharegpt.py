"""ShareGPT-style conversations (import only): ``{"conversations": [{"from":
"human", "value": "..."}, {"from": "gpt", "value": "..."}]}``, as FastChat,
Axolotl and LLaMA-Factory keep chat data.

Speakers: ``human``/``user``, ``gpt``/``assistant``/``model``/``chatgpt``,
``system``, and LLaMA-Factory's ``function_call`` (a JSON ``{"name",
"arguments"}`` the assistant calls) and ``observation``/``tool`` (its
result). A top-level ``system`` and ``tools`` (a list, or LLaMA-Factory's
JSON string of one) give the row's context. A line carries no id, kind, note
or time: rows get an id from their content and are ``train``.
"""

from __future__ import annotations

from typing import Any

from machine_git.core import jsonio
from machine_git.rows.formats import chat
from machine_git.rows.formats.lines import Found
from machine_git.rows.formats.lines import Parsed
from machine_git.rows.formats.lines import carried
from machine_git.rows.formats.lines import text_of

OWN = ("conversations", "system", "tools")
BODY = "conversations"
ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "model": "assistant",
    "chatgpt": "assistant",
    "system": "system",
    "function_call": "call",
    "observation": "tool",
    "tool": "tool",
}


def read(value: dict[str, Any], found: Found) -> Parsed | None:
    """The messages of a ShareGPT conversation; problems name the turn."""
    turns = value.get(BODY)
    if not isinstance(turns, list) or not turns:
        found.append((f"$.{BODY}", "expected a non-empty list of turns"))
        return None
    messages = to_messages(turns, f"$.{BODY}", found)
    tools = _tools(value.get("tools"), found)
    if found:
        return None
    system = value.get("system")
    if isinstance(system, str) and system.strip():
        messages.insert(0, {"role": "system", "content": system})
    conv = chat.split(messages, tools)
    fields, ignored = carried(value, OWN)
    return Parsed("messages", conv.messages, conv.context, None, fields, ignored)


def to_messages(turns: list[Any], where: str, found: Found) -> list[dict[str, Any]]:
    """Chat messages from ShareGPT turns (``from``/``value``)."""
    out: list[dict[str, Any]] = []
    calls = 0
    for i, turn in enumerate(turns):
        at = f"{where}[{i}]"
        if not isinstance(turn, dict):
            found.append((at, "a turn must be an object with from and value"))
            continue
        speaker = turn.get("from")
        text = text_of(turn.get("value"))
        role = ROLES.get(str(speaker).lower()) if isinstance(speaker, str) else None
        if role is None:
            found.append(
                (f"{at}.from", f"unknown speaker {speaker!r} (expected {_speakers()})")
            )
            continue
        if not isinstance(text, str):
            found.append((f"{at}.value", "expected a string"))
            continue
        if role == "call":
            calls += 1
            call = _call(text, f"call_{calls}", f"{at}.value", found)
            if call is not None:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif role == "tool":
            out.append(
                {"role": "tool", "tool_call_id": f"call_{calls}", "content": text}
            )
        else:
            out.append({"role": role, "content": text})
    return out


def _call(text: str, call_id: str, at: str, found: Found) -> dict[str, Any] | None:
    try:
        value = jsonio.loads(text)
    except jsonio.JSONDecodeError:
        value = None
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        found.append((at, 'a function_call must be JSON {"name", "arguments"}'))
        return None
    return {
        "id": call_id,
        "type": "function",
        "function": {
            "name": value["name"],
            "arguments": chat.arguments_text(value.get("arguments", {})),
        },
    }


def _tools(value: Any, found: Found) -> Any:
    if isinstance(value, str) and value.strip():
        try:
            value = jsonio.loads(value)
        except jsonio.JSONDecodeError:
            found.append(("$.tools", "not valid JSON"))
            return None
    if value is None or value == "":
        return None
    if not isinstance(value, list):
        found.append(("$.tools", "expected a list of tools"))
        return None
    return value


def _speakers() -> str:
    return ", ".join(ROLES)
