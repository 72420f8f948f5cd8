"""Row builders shared by the tests.

The builders return ``Any``: tests build rows valid and deliberately not, and
edit any key, so they are JSON data here, not ``rowtypes.Row``.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import orjson

STAMP = "2026-11-29T10:00:00.000Z"


def loose(value: object) -> Any:
    """A row or record as plain JSON data, for a test that reads any key of it."""
    return value


def source(**extra: Any) -> dict[str, Any]:
    return {"host": "pi", "session_id": "s1", "entry_ids": ["e1", "e2"], **extra}


def trajectory() -> list[Any]:
    return [
        {"role": "meta", "source": "pi", "cwd": "/p", "model": "fake-1"},
        {"role": "user", "content": "fix it", "timestamp": STAMP},
        {"role": "reasoning", "content": "look first", "timestamp": STAMP},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "name": "bash", "args": '{"command":"ls"}'}],
            "timestamp": STAMP,
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": "a.py",
            "ok": True,
            "timestamp": STAMP,
        },
        {"role": "assistant", "content": "Fixed.", "timestamp": STAMP},
    ]


def train_row(row_id: str = "a1b2c3d4e5f6", **extra: Any) -> Any:
    return {
        "id": row_id,
        "kind": "train",
        "tag": "good",
        "created_at": STAMP,
        "note": None,
        "source": source(),
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
        ],
        **extra,
    }


def traces_row(row_id: str = "b1b2c3d4e5f6", **extra: Any) -> Any:
    row = train_row(row_id, **{"kind": "traces", **extra})
    del row["messages"]
    row["trajectory"] = trajectory()
    return row


def valid_rows() -> list[Any]:
    rejected_messages = train_row("c1b2c3d4e5f6", kind="rejected", tag="bad")
    rejected_trace = traces_row("d1b2c3d4e5f6", kind="rejected", tag="bad")
    observed = traces_row("e1b2c3d4e5f6", kind="observed", tag="observed")
    tool_messages = train_row(
        "f1b2c3d4e5f6",
        messages=[
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "ls"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "bash", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "content": "a.py", "tool_call_id": "c1", "name": "bash"},
            {"role": "assistant", "content": "One file."},
        ],
    )
    rich = train_row(
        "0123456789ab",
        note="terse",
        original_answer="long answer",
        redactions={"aws-access-key": 2},
        source=source(parent_row="a1b2c3d4e5f6", model=None, cwd="/p"),
    )
    with_context_id = traces_row("1a2b3c4d5e6f", context="ab" * 32)
    with_context = traces_row("2a2b3c4d5e6f", context=CONTEXT)
    unknown_context = train_row("3a2b3c4d5e6f", context=None)
    return [
        train_row(),
        traces_row(),
        rejected_messages,
        rejected_trace,
        observed,
        tool_messages,
        rich,
        with_context_id,
        with_context,
        unknown_context,
        *failed_rows(),
    ]


# A context as a JSONL row carries it inline (the store keeps it by hash).
CONTEXT: dict[str, Any] = {
    "system": "You are a coding agent.",
    "tools": [
        {
            "name": "bash",
            "description": "Run a command.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        }
    ],
}


def _tool(**changes: Any) -> dict[str, Any]:
    """CONTEXT with its one tool changed (a key set to DELETE is removed)."""
    tool = {**CONTEXT["tools"][0], **changes}
    return {"system": CONTEXT["system"], "tools": [tool]}


FAILURE = {"stop_reason": "aborted", "error": "Request was aborted"}


def failed_rows() -> list[Any]:
    """Rejected rows of turns that failed: a partial answer, none, a trace."""
    partial = train_row(
        "9a9b9c9d9e9f",
        kind="rejected",
        tag="bad",
        failure=FAILURE,
        messages=[
            {"role": "user", "content": "write an essay"},
            {"role": "assistant", "content": "Starting a very "},
        ],
    )
    nothing = train_row(
        "8a8b8c8d8e8f",
        kind="rejected",
        tag="bad",
        failure={"stop_reason": "error", "error": None},
        messages=[{"role": "user", "content": "fail please"}],
    )
    trace = traces_row(
        "7a7b7c7d7e7f",
        kind="rejected",
        tag="bad",
        failure={"stop_reason": "error", "error": "HTTP 500"},
    )
    trace["trajectory"] = trace["trajectory"][:2]  # meta and the user: no answer
    return [partial, nothing, trace]


def mutate(row: dict[str, Any], path: list[Any], value: Any) -> Any:
    """A deep copy of ``row`` with the value at ``path`` replaced (DELETE removes)."""
    out = copy.deepcopy(row)
    target: Any = out
    for key in path[:-1]:
        target = target[key]
    if value is DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return out


DELETE = object()


def invalid_rows() -> list[tuple[str, dict[str, Any]]]:
    t, r = train_row(), traces_row()
    f = failed_rows()[1]  # a failed turn that said nothing
    return [
        ("id too short", mutate(t, ["id"], "abc")),
        ("context id short", mutate(t, ["context"], "abc")),
        ("context id upper case", mutate(t, ["context"], "AB" * 32)),
        ("context a number", mutate(t, ["context"], 7)),
        ("context extra key", mutate(t, ["context"], {**CONTEXT, "x": 1})),
        ("context no tools key", mutate(t, ["context"], {"system": "s"})),
        ("context tool no name", mutate(t, ["context"], _tool(name=""))),
        ("context tool extra", mutate(t, ["context"], _tool(x=1))),
        ("context tool params list", mutate(t, ["context"], _tool(parameters=[]))),
        ("context system number", mutate(t, ["context"], {**CONTEXT, "system": 1})),
        ("id upper case", mutate(t, ["id"], "A1B2C3D4E5F6")),
        ("unknown kind", mutate(t, ["kind"], "bogus")),
        ("kind/tag mismatch", mutate(t, ["tag"], "bad")),
        ("no created_at", mutate(t, ["created_at"], DELETE)),
        ("bad timestamp", mutate(t, ["created_at"], "yesterday")),
        ("note missing", mutate(t, ["note"], DELETE)),
        ("note a number", mutate(t, ["note"], 3)),
        ("note too long", mutate(t, ["note"], "x" * 4001)),
        ("extra field", mutate(t, ["surprise"], 1)),
        ("source host", mutate(t, ["source", "host"], "vim")),
        ("source no entries", mutate(t, ["source", "entry_ids"], [])),
        ("source extra", mutate(t, ["source", "x"], 1)),
        ("parent_row null", mutate(t, ["source", "parent_row"], None)),
        ("one message", mutate(t, ["messages"], [t["messages"][0]])),
        ("no answer", mutate(t, ["messages", 1, "content"], "")),
        ("bad role", mutate(t, ["messages", 0, "role"], "robot")),
        ("content missing", mutate(t, ["messages", 0, "content"], DELETE)),
        ("message extra", mutate(t, ["messages", 0, "x"], 1)),
        ("train with trajectory", mutate(t, ["trajectory"], r["trajectory"])),
        ("traces with messages", mutate(r, ["messages"], t["messages"])),
        ("traces without trajectory", mutate(r, ["trajectory"], DELETE)),
        ("empty trajectory", mutate(r, ["trajectory"], [])),
        ("trajectory without user", mutate(r, ["trajectory"], r["trajectory"][:1])),
        ("record unknown role", mutate(r, ["trajectory", 2, "role"], "robot")),
        ("meta extra key", mutate(r, ["trajectory", 0, "x"], 1)),
        ("meta cwd null", mutate(r, ["trajectory", 0, "cwd"], None)),
        ("user content list", mutate(r, ["trajectory", 1, "content"], ["a"])),
        ("record no timestamp", mutate(r, ["trajectory", 1, "timestamp"], DELETE)),
        ("calls with content", mutate(r, ["trajectory", 3, "content"], "x")),
        ("empty calls", mutate(r, ["trajectory", 3, "tool_calls"], [])),
        ("call args object", mutate(r, ["trajectory", 3, "tool_calls", 0, "args"], {})),
        ("answer empty", mutate(r, ["trajectory", 5, "content"], "")),
        ("answer null", mutate(r, ["trajectory", 5, "content"], None)),
        ("tool ok string", mutate(r, ["trajectory", 4, "ok"], "yes")),
        ("tool no call id", mutate(r, ["trajectory", 4, "tool_call_id"], DELETE)),
        ("redaction zero", mutate(t, ["redactions"], {"aws-access-key": 0})),
        ("redaction kind", mutate(t, ["redactions"], {"AWS Key": 1})),
        ("original null", mutate(t, ["original_answer"], None)),
        (
            "rejected with both",
            mutate(
                mutate(t, ["kind"], "rejected") | {"tag": "bad"},
                ["trajectory"],
                r["trajectory"],
            ),
        ),
        (
            "rejected with neither",
            mutate(
                mutate(t, ["kind"], "rejected") | {"tag": "bad"}, ["messages"], DELETE
            ),
        ),
        ("not an object", []),
        ("failure on a train row", mutate(t, ["failure"], FAILURE)),
        ("failure null", mutate(f, ["failure"], None)),
        ("failure unknown reason", mutate(f, ["failure", "stop_reason"], "stop")),
        ("failure without error", mutate(f, ["failure", "error"], DELETE)),
        ("failure extra key", mutate(f, ["failure", "x"], 1)),
        ("failed without user", mutate(f, ["messages"], f["messages"][1:])),
        ("failed empty messages", mutate(f, ["messages"], [])),
        (
            "rejected without answer nor failure",
            mutate(f, ["failure"], DELETE),
        ),
    ]


def commit_row(store: Any, row: dict[str, Any]) -> None:
    """Commit ``row`` straight through the store API (no session needed)."""
    from machine_git.core import jsonio
    from machine_git.rows import rows
    from machine_git.store.store import Change

    change = Change(
        f"add {row['id']}", {rows.row_path(row["id"]): jsonio.canonical(row)}
    )

    def plan(snap: Any) -> Change:
        return change

    store.write(plan)


# -- one time format in JSON -------------------------------------------------------

# Anything that reads as a date or a time...
_TIMELIKE = re.compile(r"^\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}.*)?$")
# ...must be ISO 8601 with its offset: machine's reports give +00:00
# (jsonio.timestamp); rows and records keep their stored RFC 3339 "Z".
_ISO = re.compile(
    r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})$"
)
# A number under a time's name would be a second format (epoch seconds).
_TIME_KEY = re.compile(r"(?:^|_)(?:time|at|date|when|timestamp)$")


def odd_times(value: Any, path: str = "$") -> list[str]:
    """Every time-like value of a JSON document not in the one format."""
    if isinstance(value, dict):
        found = []
        for key, item in value.items():
            where = f"{path}.{key}"
            if _TIME_KEY.search(str(key)) and type(item) in (int, float):
                found.append(f"{where}: {item!r}")
            found += odd_times(item, where)
        return found
    if isinstance(value, list):
        return [
            odd
            for i, item in enumerate(value)
            for odd in odd_times(item, f"{path}[{i}]")
        ]
    if isinstance(value, str) and len(value) <= 40 and _TIMELIKE.match(value):
        return [] if _ISO.match(value) else [f"{path}: {value!r}"]
    return []


def json_output(stdout: str) -> list[Any]:
    """The documents a --json run printed: one JSON document, or JSON lines."""
    try:
        return [orjson.loads(stdout)]
    except orjson.JSONDecodeError:
        return [orjson.loads(line) for line in stdout.splitlines() if line.strip()]


def preregistered_release(store: Any, release_id: str, checkpoint: str) -> str:
    """A real preregistration of ``checkpoint``, made by machine's own steps.

    Two rows from two sessions (of different content), an eval set of one,
    a run prepared on the other (no Tinker: its checkpoint is recorded as a
    finished run records it), the base model's baseline, then
    ``releases.new``. A preregistration written by hand would be reported as
    tampered. Returns the run id.
    """
    from machine_git import releases
    from machine_git.train import config
    from machine_git.train import evals
    from machine_git.train import runs

    for n, session_id in enumerate(("s1", "s2")):
        # Different sessions and content: eval sets hold out both alike.
        said = [
            {"role": "user", "content": f"hi {n}"},
            {"role": "assistant", "content": f"hello {n}"},
        ]
        row = train_row(
            f"{n}a0000000000", source=source(session_id=session_id), messages=said
        )
        commit_row(store, row)
    eval_set, _ = evals.init(store, size=1, force=False)
    made = runs.prepare(
        store,
        commit=store.head,
        revision="HEAD",
        kind="train",
        base_model=config.DEFAULT_BASE_MODEL,
        renderer="qwen3",
        train_on_what="last_assistant_message",
        hyper=config.Hyper(batch_size=1),
        force=False,
        count_sequences=lambda cfg, where: 1,
    )
    final = {"name": "final", "step": 1, "final": True, "sampler_path": checkpoint}
    runs.update(
        store,
        made["id"],
        "done",
        "done",
        lambda r: r.update(status="done", checkpoints=[final]),
    )
    cases, skipped = evals.cases(store, eval_set)
    answers = [
        {"row": c.row_id, "kind": c.kind, "reference": c.reference, "output": ""}
        for c in cases
    ]
    evals.record_results(
        store, eval_set, config.DEFAULT_BASE_MODEL, {}, answers, skipped
    )
    releases.new(
        store, release_id, made["id"], title="a test", gates_file=None, template=None
    )
    return str(made["id"])
