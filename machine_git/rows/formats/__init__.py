"""The line formats machine writes and reads, one module per format.

Every format ``machine export`` writes, ``machine validate`` recognises (by
content, or by ``--format``) and ``machine import`` takes back; a few other
tools' formats are read too. Each module holds its format's writer and
reader side by side, and :data:`FORMATS` says what each line carries and
what it cannot: an export imported into an empty store gives the same rows
where the format carries them, and exports to the same bytes again.

========== ====== ==================================================================
format     export what a line carries
========== ====== ==================================================================
rows       yes    the whole row: id, kind, note, time, source, context, redactions
traces     yes    a trajectory, its id, tag (kind), time, context, note, original
                  answer, redactions, failure
tinker     yes    the conversation as messages, system prompt, tools
openai     yes    the same, in OpenAI's chat fine-tuning shape
dpo        yes    prompt, preferred rewrite, the agent's original answer, tools
openai-dpo yes    the same, in OpenAI's preference fine-tuning shape
sharegpt   no     a ShareGPT conversation (``from``/``value``), system, tools
hf         no     a Hugging Face ``datasets`` record (JSONL or Parquet) of chat
========== ====== ==================================================================

Version 1 of each is described by ``schemas/line-<format>.schema.json``
(``rows``: the row schemas); a line is checked against it before it is read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from typing import Any

from machine_git.rows import schemas
from machine_git.rows.formats import chat
from machine_git.rows.formats import dpo
from machine_git.rows.formats import hf
from machine_git.rows.formats import openai
from machine_git.rows.formats import openai_dpo
from machine_git.rows.formats import rows
from machine_git.rows.formats import sharegpt
from machine_git.rows.formats import tinker
from machine_git.rows.formats import traces
from machine_git.rows.formats.lines import Found
from machine_git.rows.formats.lines import Parsed

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Row

Writer = Callable[["Row"], dict[str, Any] | None]
Reader = Callable[[dict[str, Any], Found], Parsed | None]

VERSION = 1  # of every format below; a change to a line's shape is a new one


@dataclass(frozen=True)
class Format:
    """One line format: how to name a line, check it, write it and read it."""

    name: str
    noun: str  # one line of it, as a summary counts them
    schema: str | None  # the schema a line must pass; None: its reader checks
    write: Writer | None  # None: import only
    read: Reader | None  # None: rows, imported as they are
    kinds: tuple[str, ...] = ("train",)  # what export takes without --kind
    needs: str = "an answer"  # what a row needs to have a line
    # The row fields a line has no place for. None carries the row's source:
    # an imported row's source names the file and line it came from.
    lost: tuple[str, ...] = ()


# How a notice names a row field a format cannot carry.
FIELD_NAMES = {
    "id": "id",
    "kind": "kind",
    "note": "note",
    "created_at": "time",
    "original_answer": "original answer",
    "redactions": "redactions",
}


_CHAT_LOST = tuple(FIELD_NAMES)
_PAIR_LOST = ("id", "kind", "note", "created_at", "redactions")
_FOREIGN_LOST = ("id", "kind", "note", "created_at")

FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format(
            "tinker",
            "tinker chat line",
            "line-tinker",
            tinker.write,
            tinker.read,
            lost=_CHAT_LOST,
        ),
        Format(
            "openai",
            "openai chat line",
            "line-openai",
            openai.write,
            openai.read,
            lost=_CHAT_LOST,
        ),
        Format(
            "dpo",
            "dpo pair",
            "line-dpo",
            dpo.write,
            dpo.read,
            kinds=("rejected",),
            needs="a rewrite",
            lost=_PAIR_LOST,
        ),
        Format(
            "openai-dpo",
            "openai-dpo pair",
            "line-openai-dpo",
            openai_dpo.write,
            openai_dpo.read,
            kinds=("rejected",),
            needs="a rewrite",
            lost=_PAIR_LOST,
        ),
        Format(
            "traces",
            "trajectory line",
            "line-trajectory",
            traces.write,
            traces.read,
            kinds=("traces",),
            needs="a trajectory",
        ),
        Format(
            "rows",
            "row",
            None,
            rows.write,
            None,
            kinds=("train", "traces", "rejected"),
            needs="",
        ),
        Format(
            "sharegpt",
            "sharegpt conversation",
            None,
            None,
            sharegpt.read,
            lost=_FOREIGN_LOST,
        ),
        Format("hf", "hf record", None, None, hf.read, lost=_FOREIGN_LOST),
    )
}
EXPORTS = tuple(name for name, f in FORMATS.items() if f.write is not None)
PAIRS = ("dpo", "openai-dpo")
CHAT = ("tinker", "openai")  # a chat line is one or the other by its content


def detect(value: Any) -> str | None:
    """The format of one line by its keys, or None if it has no known shape.

    Chat lines are ``tinker`` unless :func:`chat_flavor` says ``openai``.
    ``hf`` records look like chat or ShareGPT lines and are named only by
    ``--format hf``.
    """
    if not isinstance(value, dict):
        return None
    if "kind" in value and "id" in value:
        return "rows"
    if "comparison" in value:
        return "dpo"
    if "preferred_output" in value or "non_preferred_output" in value:
        return "openai-dpo"
    bodies = [b for b in ("messages", "trajectory", "conversations") if b in value]
    if len(bodies) != 1:
        return None
    return {"messages": "tinker", "trajectory": "traces"}.get(bodies[0], "sharegpt")


def chat_flavor(value: dict[str, Any]) -> str | None:
    """``openai`` for a chat line only OpenAI's shape allows (a null content,
    tools as functions), ``tinker`` for one only tinker's does (tools as
    ToolSpecs), None for one both read the same way."""
    tools = value.get("tools")
    if isinstance(tools, list) and tools and isinstance(tools[0], dict):
        return "openai" if "function" in tools[0] else "tinker"
    messages = value.get("messages")
    if isinstance(messages, list) and any(
        isinstance(m, dict) and m.get("content", "") is None for m in messages
    ):
        return "openai"
    return None


def names() -> str:
    """``rows, tinker, ...`` for messages that list the formats."""
    return ", ".join(FORMATS)


def missing(fmt: str, parsed: Parsed) -> set[str]:
    """The row fields of :data:`FIELD_NAMES` a line of ``fmt`` did not carry."""
    have = set(parsed.fields)
    if "tag" in have:
        have.add("kind")
    return set(FORMATS[fmt].lost) - have


def describe_missing(fields: set[str]) -> str:
    """``id, note or time``, in the order of FIELD_NAMES."""
    named = [FIELD_NAMES[f] for f in FIELD_NAMES if f in fields]
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " or " + named[-1]


def read_line(
    fmt: str, value: dict[str, Any], found: Found, *, strict: bool = True
) -> Parsed | None:
    """A line of ``fmt`` (not rows) checked against its schema, then read.

    Unless ``strict`` (the user named the format), a chat line is checked as
    the flavour its content shows (a null content or OpenAI functions:
    openai), else as tinker's.
    """
    spec = FORMATS[fmt]
    schema = spec.schema
    dropped: list[str] = []
    if fmt in CHAT:
        value, dropped = chat.normalized(value)
        if not strict:
            schema = f"line-{chat_flavor(value) or fmt}"
    if schema is not None:
        problems = schemas.check(schemas.validator(schema), value)
        if problems:
            found.extend((p.path, p.message) for p in problems)
            return None
    assert spec.read is not None
    parsed = spec.read(value, found)
    if parsed is not None:
        parsed.ignored.extend(dropped)
    return parsed
