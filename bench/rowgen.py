"""Benchmark rows built the way ``machine good`` builds them.

A :class:`Spec` is one agent turn: a request, tool calls with their outputs,
an answer. It becomes a :class:`~machine_git.sessions.Turn` (for rows written
straight into a store) or a Pi session file (for ``machine good --session``),
and both give the same records: :func:`check_reader_agrees` proves it with
the real Pi reader. Rows then come from :func:`machine_git.rows.rows.build`, so
their shape is machine's own.

The mix: 75% train rows (request and answer), 20% trace rows (20 trajectory
records: meta, request, a preface, 8 tool calls with their outputs, the
answer), 5% rejected rows with a note.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC
from datetime import datetime
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.corpus import Corpus
from bench.corpus import output_size
from machine_git.core import jsonio
from machine_git.rows import rows
from machine_git.rows.rowtypes import Record
from machine_git.rows.rowtypes import Row
from machine_git.secrets import redaction
from machine_git.sessions import Turn
from machine_git.sessions import pi
from machine_git.store.store import Change
from machine_git.store.store import Redaction
from machine_git.tagging import turns

TOOL_CALLS = 8  # 1 meta + 1 user + 1 preface + 8 x (call, result) + 1 answer = 20
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
CWD = "/home/dev/proj"
MODEL = ("anthropic", "claude-sonnet-4-5")
NOTES = ["too terse", "wrong file", "ignored the failing test", "made up an API"]


@dataclass
class Step:
    """One tool call and what it returned."""

    call_id: str
    tool: str
    args: dict[str, Any]
    output: str


@dataclass
class Spec:
    """One agent turn, enough to write a Pi session or build a Turn."""

    session_id: str
    moment: datetime
    user: str
    preface: str
    steps: list[Step]
    answer: str
    ids: list[str]  # entry ids: user, (call, result) per step, answer

    def stamp(self, index: int) -> str:
        when = self.moment + timedelta(seconds=index)
        return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


@dataclass(frozen=True)
class Made:
    """A built row: its id, kind, bytes, and the change ``machine good`` commits."""

    id: str
    kind: str
    data: bytes  # canonical JSON, as stored
    line: bytes  # one JSONL line, as a dataset file would hold it
    change: Change
    when: datetime


def spec(corpus: Corpus, rng: random.Random, n: int, with_tools: bool) -> Spec:
    """Turn number ``n``; tool outputs are drawn only when they will be kept."""
    steps: list[Step] = []
    for _ in range(TOOL_CALLS):
        call_id = f"toolu_{rng.getrandbits(64):016x}"
        steps.append(
            _tool(corpus, rng, call_id)
            if with_tools
            else Step(call_id, "read", {}, "")  # a train row keeps no tool output
        )
    ids = [f"{rng.getrandbits(32):08x}" for _ in range(2 + 2 * TOOL_CALLS)]
    return Spec(
        session_id=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        moment=START + timedelta(minutes=7 * n),
        user=corpus.request(rng),
        preface=corpus.prose(rng, 1) if with_tools else "",
        steps=steps,
        answer=corpus.answer(rng),
        ids=ids,
    )


def _tool(corpus: Corpus, rng: random.Random, call_id: str) -> Step:
    size = output_size(rng)
    pick = rng.random()
    if pick < 0.40:
        path, text = corpus.read(rng, size)
        return Step(call_id, "read", {"path": path}, text)
    if pick < 0.55:
        return Step(call_id, "bash", {"command": "git diff"}, corpus.diff(rng, size))
    if pick < 0.70:
        return Step(
            call_id,
            "bash",
            {"command": "python -m pytest -q"},
            corpus.test_run(rng, size),
        )
    if pick < 0.85:
        pattern, text = corpus.grep(rng, size)
        return Step(call_id, "grep", {"pattern": pattern, "path": "src"}, text)
    if pick < 0.93:
        folder, text = corpus.listing(rng)
        return Step(call_id, "ls", {"path": folder}, text)
    path, _ = corpus.read(rng, 200)
    old = corpus.code(rng, 3)
    return Step(
        call_id,
        "edit",
        {"path": path, "edits": [{"oldText": old, "newText": old + "\n"}]},
        f"Successfully replaced 1 block(s) in {path}.",
    )


# -- a spec as a Turn, and as a Pi session ------------------------------------------


def turn(s: Spec, session_file: str | None = None) -> Turn:
    """The Turn the Pi reader makes of this spec's session file."""
    records: list[Record] = [
        {"role": "meta", "source": "pi", "cwd": CWD, "model": MODEL[1]},
        {"role": "user", "content": s.user, "timestamp": s.stamp(1)},
    ]
    if s.preface:
        records.append(
            {"role": "assistant", "content": s.preface, "timestamp": s.stamp(2)}
        )
    # A train row keeps only the request and the answer: skip the rest.
    for i, step in enumerate(s.steps if s.preface else []):
        records.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": step.call_id,
                        "name": step.tool,
                        "args": jsonio.compact(step.args),
                    }
                ],
                "timestamp": s.stamp(2 + 2 * i),
            }
        )
        records.append(
            {
                "role": "tool",
                "tool_call_id": step.call_id,
                "content": step.output,
                "timestamp": s.stamp(3 + 2 * i),
                "ok": True,
            }
        )
    records.append({"role": "assistant", "content": s.answer, "timestamp": s.stamp(99)})
    return Turn(
        host="pi",
        session_id=s.session_id,
        session_file=session_file or default_session_file(s),
        records=records,
        entry_ids=list(s.ids),
        leaf_id=s.ids[-1],
        model=MODEL[1],
        provider=MODEL[0],
        cwd=CWD,
        stop_reason="stop",
    )


def default_session_file(s: Spec) -> str:
    stamp = s.stamp(0).replace(":", "-").replace(".", "-")
    return (
        f"/home/dev/.pi/agent/sessions/--home-dev-proj--/{stamp}_{s.session_id}.jsonl"
    )


def pi_session(s: Spec) -> bytes:
    """The spec as a Pi session file (version 3), as pi writes one."""
    model = {"api": "anthropic-messages", "provider": MODEL[0], "model": MODEL[1]}
    lines: list[dict[str, Any]] = [
        {
            "type": "session",
            "version": 3,
            "id": s.session_id,
            "timestamp": s.stamp(0),
            "cwd": CWD,
        },
        {
            "type": "model_change",
            "id": "m0000000",
            "parentId": None,
            "timestamp": s.stamp(0),
            "provider": MODEL[0],
            "modelId": MODEL[1],
        },
    ]
    parent = "m0000000"

    def entry(entry_id: str, index: int, message: dict[str, Any]) -> None:
        nonlocal parent
        lines.append(
            {
                "type": "message",
                "id": entry_id,
                "parentId": parent,
                "timestamp": s.stamp(index),
                "message": message,
            }
        )
        parent = entry_id

    entry(s.ids[0], 1, {"role": "user", "content": [{"type": "text", "text": s.user}]})
    for i, step in enumerate(s.steps):
        blocks: list[dict[str, Any]] = []
        if i == 0 and s.preface:
            blocks.append({"type": "text", "text": s.preface})
        blocks.append(
            {
                "type": "toolCall",
                "id": step.call_id,
                "name": step.tool,
                "arguments": step.args,
            }
        )
        entry(
            s.ids[1 + 2 * i],
            2 + 2 * i,
            {"role": "assistant", "content": blocks, **model, "stopReason": "toolUse"},
        )
        entry(
            s.ids[2 + 2 * i],
            3 + 2 * i,
            {
                "role": "toolResult",
                "toolCallId": step.call_id,
                "toolName": step.tool,
                "content": [{"type": "text", "text": step.output}],
                "isError": False,
            },
        )
    entry(
        s.ids[-1],
        99,
        {
            "role": "assistant",
            "content": [{"type": "text", "text": s.answer}],
            **model,
            "stopReason": "stop",
        },
    )
    return b"".join(jsonio.compact(line).encode() + b"\n" for line in lines)


def check_reader_agrees(corpus: Corpus, folder: Path) -> None:
    """The Pi reader turns :func:`pi_session` into exactly :func:`turn`."""
    s = spec(corpus, random.Random(7), 0, with_tools=True)
    path = folder / "check.jsonl"
    path.write_bytes(pi_session(s))
    read, report = pi.read_turn(path)
    expected = turn(s, str(path))
    if report.warning() is not None or read != expected:
        raise AssertionError("bench rows differ from what the Pi reader makes")


# -- rows ---------------------------------------------------------------------------


def kind_of(rng: random.Random) -> tuple[str, bool]:
    """(label, trace) for the next row: the 75/20/5 mix."""
    pick = rng.random()
    if pick < 0.75:
        return "good", False
    if pick < 0.95:
        return "good", True
    return "bad", False


def make_rows(corpus: Corpus, count: int, seed: int, first: int = 0) -> Iterator[Made]:
    """``count`` rows in tagging order, each with the commit ``machine good`` makes."""
    rng = random.Random(seed)
    for n in range(first, first + count):
        label, trace = kind_of(rng)
        s = spec(corpus, rng, n, with_tools=trace)
        note = rng.choice(NOTES) if label == "bad" else None
        row = rows.build(
            turn(s),
            label=label,
            trace=trace,
            note=note,
            created_at=s.stamp(120),
        )
        # As `machine good` does: scanned for secrets, and marked as scanned.
        row, _ = redaction.redact_row(row)
        change = tag_change(row)
        yield Made(
            id=row["id"],
            kind=row["kind"],
            data=change.files[rows.row_path(row["id"])] or b"",
            line=jsonio.line(row),
            change=change,
            when=s.moment + timedelta(seconds=120),
        )


def tag_change(row: Row) -> Change:
    """The change ``turns.commit`` commits for a new row (same message)."""
    summary = " ".join(f"{row['tag']} {row['id']}: {rows.first_words(row)}".split())
    if len(summary) > 72:
        summary = summary[:71] + "…"
    return Change(
        summary=summary,
        files={rows.row_path(row["id"]): jsonio.canonical(row)},
        trailers={
            "Action": "tag",
            "Row": row["id"],
            "Kind": row["kind"],
            "Tag": row["tag"],
            "Source": turns.source_trailer(row),
        },
        body=row.get("note") or "",
        redaction=Redaction.SCANNED,
    )
