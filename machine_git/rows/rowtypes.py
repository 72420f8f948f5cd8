"""The shapes of machine's rows and trajectory records, as types.

One ``TypedDict`` per row kind (``train``, ``traces``, ``rejected``,
``observed``), the row's ``source``, its chat messages, and each role of a
trajectory-v1 record. They say in code what ``schemas/*.schema.json`` say to
the validator, key for key (tests/rows/test_rowtypes.py holds the two together);
the schemas still decide what is valid (patterns, lengths, "an answer that
says something"), and the store checks every row against them before writing.

Types only: modules import this under ``TYPE_CHECKING``, so it costs nothing
at run time (``machine good`` starts without it). A row's context is
``context.Context``, kept with the code that stores it. Every class is ``@final``,
so ``"trajectory" in row`` tells mypy which kinds a row can be.

Which keys are required: read it with ``typing.get_type_hints(T,
include_extras=True)`` (``NotRequired[...]``), not ``__required_keys__``,
which Python 3.11 gets wrong for string annotations.
"""

from __future__ import annotations

from typing import Literal
from typing import NotRequired
from typing import TypedDict
from typing import final

from machine_git.rows.context import Context

Kind = Literal["train", "traces", "rejected", "observed"]
Tag = Literal["good", "bad", "observed"]
Host = Literal["pi", "letta", "claude", "codex", "gemini", "opencode", "import"]
Redactions = dict[str, int]


class Span(TypedDict):
    """A stretch of the answer a label points at (character offsets)."""

    start: int
    end: int
    text: str  # the characters it covers, as they were labeled
    label: NotRequired[str]


Labels = dict[str, int | str | list[Span]]
"""The values of the project's label schema (settings.json ``labels``)."""
"""How many secrets of each kind were replaced (``{"github-token": 2}``)."""


@final
class Source(TypedDict):
    """Where a row came from: enough to find its turn again."""

    host: Host
    session_id: str
    entry_ids: list[str]
    session_file: NotRequired[str | None]
    leaf_id: NotRequired[str | None]
    model: NotRequired[str | None]
    provider: NotRequired[str | None]
    cwd: NotRequired[str | None]
    git_branch: NotRequired[str | None]
    parent_row: NotRequired[str]
    """The row a forked run corrects (observed rows of ``machine fork``)."""


# -- trajectory-v1 records (schemas/trajectory-v1.schema.json) -----------------------


@final
class MetaRecord(TypedDict):
    role: Literal["meta"]
    source: str
    cwd: NotRequired[str]
    git_branch: NotRequired[str]
    model: NotRequired[str]
    kind: NotRequired[Literal["subagent"]]
    parent_id: NotRequired[str]


@final
class SystemRecord(TypedDict):
    role: Literal["system"]
    content: str
    timestamp: str


@final
class ObservationRecord(TypedDict):
    role: Literal["observation"]
    content: str
    timestamp: str


@final
class ImageRef(TypedDict):
    """A stored image (rows/images.py): ``images/<sha[0:2]>/<sha256>``."""

    sha256: str
    media_type: Literal["image/png", "image/jpeg"]
    size: int


@final
class InlineImage(TypedDict):
    """An image in memory or in a JSONL file: its bytes as base64."""

    media_type: Literal["image/png", "image/jpeg"]
    base64: str


Image = ImageRef | InlineImage


@final
class UserRecord(TypedDict):
    role: Literal["user"]
    content: str
    timestamp: str
    images: NotRequired[list[Image]]


@final
class ReasoningRecord(TypedDict):
    role: Literal["reasoning"]
    content: str
    timestamp: str


@final
class RecordToolCall(TypedDict):
    id: str
    name: str
    args: str
    """The call's arguments as a JSON string."""


@final
class AssistantRecord(TypedDict):
    """Words (``content``), or tool calls with ``content`` null."""

    role: Literal["assistant"]
    content: str | None
    timestamp: str
    tool_calls: NotRequired[list[RecordToolCall]]


@final
class ToolRecord(TypedDict):
    role: Literal["tool"]
    tool_call_id: str
    content: str
    timestamp: str
    ok: NotRequired[bool]
    """Present only when the source states whether the call failed."""
    images: NotRequired[list[Image]]


Record = (
    MetaRecord
    | SystemRecord
    | ObservationRecord
    | UserRecord
    | ReasoningRecord
    | AssistantRecord
    | ToolRecord
)
"""One trajectory-v1 record, by its role."""


# -- chat messages (tinker-cookbook and OpenAI's shape) ------------------------------


@final
class Function(TypedDict):
    name: str
    arguments: str


@final
class MessageToolCall(TypedDict):
    id: str
    type: Literal["function"]
    function: Function


@final
class Message(TypedDict):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None
    tool_calls: NotRequired[list[MessageToolCall]]
    tool_call_id: NotRequired[str]
    name: NotRequired[str]
    images: NotRequired[list[Image]]


@final
class Failure(TypedDict):
    """How a turn tagged bad failed, as the agent recorded it."""

    stop_reason: Literal["aborted", "error"]
    error: str | None


# -- rows, one per kind (schemas/<kind>.schema.json) ---------------------------------


@final
class TrainRow(TypedDict):
    """A good answer: the user's message and the answer, for SFT."""

    id: str
    kind: Literal["train"]
    tag: Literal["good"]
    created_at: str
    note: str | None
    source: Source
    messages: list[Message]
    original_answer: NotRequired[str]
    labels: NotRequired[Labels]
    redactions: NotRequired[Redactions]
    context: NotRequired[str | Context | None]


@final
class TracesRow(TypedDict):
    """A good whole turn: user, tool calls, results, answer."""

    id: str
    kind: Literal["traces"]
    tag: Literal["good"]
    created_at: str
    note: str | None
    source: Source
    trajectory: list[Record]
    original_answer: NotRequired[str]
    labels: NotRequired[Labels]
    redactions: NotRequired[Redactions]
    context: NotRequired[str | Context | None]


@final
class RejectedRow(TypedDict):
    """A bad answer or trajectory (exactly one of the two), kept out of training."""

    id: str
    kind: Literal["rejected"]
    tag: Literal["bad"]
    created_at: str
    note: str | None
    source: Source
    messages: NotRequired[list[Message]]
    trajectory: NotRequired[list[Record]]
    failure: NotRequired[Failure]
    original_answer: NotRequired[str]
    labels: NotRequired[Labels]
    redactions: NotRequired[Redactions]
    context: NotRequired[str | Context | None]


@final
class ObservedRow(TypedDict):
    """An unlabeled run recorded by auto-capture; never trained on until labeled."""

    id: str
    kind: Literal["observed"]
    tag: Literal["observed"]
    created_at: str
    note: str | None
    source: Source
    trajectory: list[Record]
    original_answer: NotRequired[str]
    labels: NotRequired[Labels]
    redactions: NotRequired[Redactions]
    context: NotRequired[str | Context | None]


Row = TrainRow | TracesRow | RejectedRow | ObservedRow
"""A row of any kind; ``row["kind"]`` (or ``"trajectory" in row``) narrows it.

``context``: the system prompt and tools the turn ran with, by its sha256 in
the store, inline in a JSONL file (``--out``), None when unknown or left out
(machine_git/rows/context.py holds the Context type and stores it once).
"""
