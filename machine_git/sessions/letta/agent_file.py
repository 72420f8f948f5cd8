"""A Letta Agent File (``.af``): an exported agent with its messages (hosts.md §3.6).

Agents of the MemGPT types answer through a ``send_message`` tool and think
in their content text: the message they send is the answer, and the call is
not a tool call of the run.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from machine_git.core import jsonio
from machine_git.core.errors import SessionError
from machine_git.rows import context
from machine_git.sessions import ReadReport
from machine_git.sessions import Turn
from machine_git.sessions import files
from machine_git.sessions.letta.common import AGENT_FILE
from machine_git.sessions.letta.common import HOST
from machine_git.sessions.letta.common import Message
from machine_git.sessions.letta.common import Return
from machine_git.sessions.letta.common import failed_status
from machine_git.sessions.letta.common import message_ids
from machine_git.sessions.letta.common import messages
from machine_git.sessions.letta.common import return_text
from machine_git.sessions.letta.common import system_before
from machine_git.sessions.letta.common import typed
from machine_git.sessions.letta.common import utc
from machine_git.sessions.records import Records
from machine_git.sessions.records import window
from machine_git.sessions.values import args_text
from machine_git.sessions.values import string
from machine_git.sessions.values import text_of

_SEND_MESSAGE = "send_message"
_MEMGPT_TYPES = frozenset({"memgpt_agent", "memgpt_v2_agent"})


def looks_like_agent_file(value: Any) -> bool:
    """A Letta Agent File: an object with an ``agents`` list of agents."""
    if not isinstance(value, dict) or not isinstance(value.get("agents"), list):
        return False
    agents = value["agents"]
    return bool(agents) and isinstance(agents[0], dict) and "messages" in agents[0]


def read_agent_file(path: Path, entry: str | None = None) -> tuple[Turn, ReadReport]:
    """The last turn of the (first) agent in a Letta Agent File."""
    report = ReadReport(str(path))
    value = files.load_json(path)
    if not looks_like_agent_file(value):
        raise SessionError(f"{path}: not a Letta Agent File (no agents with messages)")
    agents = value["agents"]
    if len(agents) > 1:
        report.dropped.append(f"{len(agents) - 1} more agent(s) in the file not read")
    agent: dict[str, Any] = agents[0]
    listed = agent.get("messages")
    if not isinstance(listed, list):
        raise SessionError(f"{path}: the agent's messages are not a list")
    found = messages(listed, "role", "message", report, "the agent has no messages")
    turn = window(found, message_ids(found), entry, path, _user)
    found, start = turn.items, turn.start
    # Agents that answer through send_message think in their content text.
    thoughts = string(agent.get("agent_type")) in _MEMGPT_TYPES or any(
        call[1] == _SEND_MESSAGE for m in found for call in _calls(m)
    )
    builder = Records()
    hidden: set[str] = set()  # send_message calls: their "result" is not a tool's
    config = agent.get("llm_config")
    model = string(config.get("model")) if isinstance(config, dict) else None
    for index in range(start, len(found)):
        message = found[index]
        role = message["role"]
        stamp = builder.moment(utc(message.get("created_at")))
        where = f"message {turn.ids[index]}"
        model = string(message.get("model")) or model
        if index == start:
            builder.user(turn.texts[index], stamp)
        elif role in ("assistant", "approval"):
            _assistant(builder, message, stamp, where, thoughts, hidden)
        elif role == "tool":
            for call_id, text, failed in _returns(message):
                if call_id not in hidden:
                    name = message.get("name")
                    builder.result(call_id, name, text, failed, stamp, where)
    return builder.finish(
        report,
        host=HOST,
        source=AGENT_FILE,
        path=path,
        session_id=_session(agent, found),
        entry_ids=turn.ids[start:],
        leaf_id=turn.ids[-1],
        model=model,
        context=context.make(
            system_before(found, start, "system"), _af_tools(value, agent)
        ),
    )


def _af_tools(value: dict[str, Any], agent: dict[str, Any]) -> list[Any] | None:
    """The agent's tools as its file declares them (``json_schema``), or None.

    An Agent File lists every tool once (``tools``, each with the OpenAI
    function schema the model is sent) and each agent names its own by
    ``tool_ids``. If any of them has no schema the declaration is unknown: a
    partial list would teach the model a different set of tools.
    """
    ids = agent.get("tool_ids")
    listed = value.get("tools")
    if not isinstance(ids, list) or not isinstance(listed, list):
        return None
    by_id = {t.get("id"): t for t in listed if isinstance(t, dict)}
    schemas = [(by_id.get(i) or {}).get("json_schema") for i in ids]
    if not all(isinstance(s, dict) and s.get("name") for s in schemas):
        return None
    return schemas


def _user(message: Message) -> str:
    return typed(message.get("content")) if message["role"] == "user" else ""


def _calls(message: Message) -> list[tuple[Any, Any, Any]]:
    calls = message.get("tool_calls")
    out: list[tuple[Any, Any, Any]] = []
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, dict):
            continue
        function = call.get("function")
        function = function if isinstance(function, dict) else {}
        out.append((call.get("id"), function.get("name"), function.get("arguments")))
    return out


def _assistant(
    builder: Records,
    message: Message,
    stamp: str,
    where: str,
    thoughts: bool,
    hidden: set[str],
) -> None:
    content = message.get("content")
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, dict) and block.get("type") == "reasoning":
            reasoning = block.get("reasoning")
            builder.reasoning(reasoning if isinstance(reasoning, str) else "", stamp)
            continue
        text = text_of([block])
        if thoughts:
            builder.reasoning(text, stamp)
        else:
            builder.say(text, stamp)
    for call_id, name, arguments in _calls(message):
        said = _sent_message(name, arguments) if thoughts else None
        if said is not None:
            builder.say(said, stamp)
            if isinstance(call_id, str):
                hidden.add(call_id)
            continue
        builder.call(call_id, name, arguments, stamp, where)
    builder.end_calls()


def _sent_message(name: Any, arguments: Any) -> str | None:
    if name != _SEND_MESSAGE:
        return None
    try:
        value = jsonio.loads(args_text(arguments))
    except ValueError:
        return None
    message = value.get("message") if isinstance(value, dict) else None
    return message if isinstance(message, str) else None


def _returns(message: Message) -> list[Return]:
    returns = message.get("tool_returns")
    items = (
        [r for r in returns if isinstance(r, dict)] if isinstance(returns, list) else []
    )
    text = text_of(message.get("content"))
    if not items:
        return [(string(message.get("tool_call_id")), text, None)]
    out: list[Return] = []
    for item in items:
        # One return: the message text is what the model saw; several: each
        # return's own response.
        own = item.get("func_response")
        body = text if len(items) == 1 and text else return_text(own)
        call_id = string(item.get("tool_call_id")) or string(
            message.get("tool_call_id")
        )
        out.append((call_id, body, failed_status(item.get("status"))))
    return out


def _session(agent: dict[str, Any], listed: list[Message]) -> str:
    agent_id = string(agent.get("id")) or "agent"
    if not re.fullmatch(r"agent-\d+", agent_id):
        return agent_id
    # Exports renumber ids (agent-0, message-N): add what tells agents apart
    # and stays put when the same agent is exported again later.
    first = listed[0].get("created_at")
    key = jsonio.compact([agent.get("name"), first if isinstance(first, str) else None])
    return f"{agent_id}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"
