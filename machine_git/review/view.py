"""A row as the pages show it: the conversation as a list of display items.

Trajectory rows (trajectory-v1 records) and message rows (chat messages) give
the same items: the user's message, assistant text, each tool call with its
arguments and, beneath it, its result (paired by call id, errors marked),
reasoning (hidden until asked for) and the final answer. Every value stays a
string here; the templates print them as text, autoescaped.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Mapping
from typing import TYPE_CHECKING
from typing import Any
from typing import TypedDict
from typing import cast

from machine_git.core import jsonio
from machine_git.review.index import is_error
from machine_git.review.pictures import Picture
from machine_git.review.pictures import Pictures
from machine_git.rows import context
from machine_git.rows import rows
from machine_git.tagging import labels as labeling

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Row

MAX_TEXT = 100_000  # characters of one text shown; the rest is a note


class Result(TypedDict):
    text: str
    error: bool
    lines: int
    images: list[Picture]


class Call(TypedDict):
    id: str
    name: str
    args: str
    result: Result | None


class Item(TypedDict):
    role: str  # meta user system observation reasoning assistant calls tool
    text: str
    final: bool
    calls: list[Call]
    error: bool
    images: list[Picture]


class ShownTool(TypedDict):
    name: str
    description: str
    parameters: str  # JSON, indented


class ShownContext(TypedDict):
    id: str
    system: str | None
    tools: list[ShownTool] | None
    missing: bool


def context_of(
    row: Row | None, read: Callable[[str], bytes | None]
) -> ShownContext | None:
    """The system prompt and tools a row's turn ran with, or None if unknown."""
    value = row.get("context") if row is not None else None
    if not isinstance(value, str):
        return None
    found = context.load(value, read)
    if found is None:
        return ShownContext(id=value, system=None, tools=None, missing=True)
    tools, system = found.get("tools"), found.get("system")
    return ShownContext(
        id=value,
        system=clip(system) if system else None,
        tools=None
        if tools is None
        else [
            ShownTool(
                name=t["name"],
                description=clip(t["description"]),
                parameters=pretty(t["parameters"]),
            )
            for t in tools
        ],
        missing=False,
    )


def _none(record: Mapping[str, Any]) -> list[Picture]:
    return []


def items(row: Row, pictures: Pictures = _none) -> list[Item]:
    """The display items of a row's trajectory or messages, in order.

    ``pictures`` gives the ``<img>`` of a message's or result's images
    (review.pictures.pictures, which knows the row and the revision shown).
    """
    records: list[Mapping[str, Any]] = [
        r for r in rows.body(row) if isinstance(r, dict)
    ]
    results = {
        str(r.get("tool_call_id")): r
        for r in records
        if r.get("role") == "tool" and r.get("tool_call_id")
    }
    paired: set[str] = set()
    final = _final_index(records)
    out: list[Item] = []
    for index, record in enumerate(records):
        role = str(record.get("role"))
        if role == "meta":
            out.append(_item("meta", _meta(record)))
        elif role == "tool":
            if str(record.get("tool_call_id")) not in paired:
                result = _result(record, pictures)
                out.append(_item("tool", result["text"], error=result["error"]))
                out[-1]["images"] = result["images"]
        elif record.get("tool_calls"):
            calls = [_call(c, results, paired, pictures) for c in record["tool_calls"]]
            item = _item("calls", clip(record.get("content") or ""))
            item["calls"] = calls
            item["error"] = any(c["result"] and c["result"]["error"] for c in calls)
            item["images"] = pictures(record)
            out.append(item)
        else:
            out.append(_item(role, clip(str(record.get("content") or ""))))
            out[-1]["final"] = index == final
            out[-1]["images"] = pictures(record)
    return out


def call_of(call: Mapping[str, Any]) -> Call:
    """One tool call as shown: its name and arguments (no result)."""
    return _call(call, {}, set())


def result_of(record: Mapping[str, Any]) -> Result:
    """A tool result record as shown: its text, whether it failed, its lines."""
    return _result(record)


def meta_text(record: Mapping[str, Any]) -> str:
    """A meta record on one line (source, model, folder, branch)."""
    return _meta(record)


def _item(role: str, text: str, error: bool = False) -> Item:
    return Item(role=role, text=text, final=False, calls=[], error=error, images=[])


def _final_index(records: list[Mapping[str, Any]]) -> int:
    # The answer rows.final_answer reads (and rewrite replaces).
    for index in range(len(records) - 1, -1, -1):
        record = records[index]
        content = record.get("content")
        if record.get("role") == "assistant" and isinstance(content, str) and content:
            return index
    return -1


def _meta(record: Mapping[str, Any]) -> str:
    keys = ("source", "model", "cwd", "git_branch")
    return " · ".join(f"{k}: {record[k]}" for k in keys if record.get(k))


def _call(
    call: Mapping[str, Any],
    results: dict[str, Mapping[str, Any]],
    paired: set[str],
    pictures: Pictures = _none,
) -> Call:
    function = call.get("function")
    function = function if isinstance(function, dict) else {}
    name = call.get("name") or function.get("name") or "?"
    args = call.get("args") if "args" in call else function.get("arguments")
    call_id = str(call.get("id"))
    result = results.get(call_id)
    if result is not None:
        paired.add(call_id)
    return Call(
        id=call_id,
        name=str(name),
        args=pretty_args(args),
        result=_result(result, pictures) if result is not None else None,
    )


def _result(record: Mapping[str, Any], pictures: Pictures = _none) -> Result:
    text = str(record.get("content") or "")
    return Result(
        text=clip(text),
        error=is_error(record),
        lines=line_count(text),
        images=pictures(record),
    )


def line_count(text: str) -> int:
    """Lines as a reader counts them: a final newline ends a line, starts none."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def pretty_args(args: Any) -> str:
    """Tool-call arguments (a JSON string) indented for reading; else as given."""
    if not isinstance(args, str):
        return clip(jsonio.compact(args))
    try:
        value = jsonio.loads(args)
    except ValueError:
        return clip(args)
    return clip(pretty(value))


def pretty(value: Any) -> str:
    """A JSON value as readable text: strings as they are, the rest indented."""
    if isinstance(value, str):
        return value
    return jsonio.canonical(value).decode().rstrip("\n")


def clip(text: str, limit: int = MAX_TEXT) -> str:
    """``text``, cut at ``limit`` characters with a note of what was left out."""
    if len(text) <= limit:
        return text
    rest = len(text) - limit
    return f"{text[:limit]}\n… {rest:,} more characters (machine show has them all)"


class Mark(TypedDict):
    label: str | None  # None: text no span covers; "" a span without a label
    text: str


def marked(row: Mapping[str, Any]) -> list[Mark] | None:
    """The final answer as runs of text, the spans labeled on it marked; None
    if no span is (the answer is then shown as it is)."""
    labels = row.get("labels")
    spans = [
        s
        for value in (labels.values() if isinstance(labels, dict) else [])
        if isinstance(value, list)
        for s in value
        if isinstance(s, dict)
    ]
    if not spans:
        return None
    text = clip(labeling.answer_text(row))
    out: list[Mark] = []
    at = 0
    for span in sorted(spans, key=lambda s: (s["start"], s["end"])):
        start, end = max(span["start"], at), min(span["end"], len(text))
        if start >= end:
            continue  # inside one shown already, or past the part shown
        if start > at:
            out.append(Mark(label=None, text=text[at:start]))
        out.append(Mark(label=str(span.get("label") or ""), text=text[start:end]))
        at = end
    if at < len(text):
        out.append(Mark(label=None, text=text[at:]))
    return out


def answer(row: Mapping[str, Any]) -> str:
    """The row's final answer (what ``r`` rewrites), or empty.

    ``row``: a stored row, or a side of a diff (which may be a stand-in for a
    blob that does not read, with no conversation: no answer).
    """
    return rows.final_answer(cast("Row", row)) or ""
