"""Pydantic models of machine's rows: the in-code types of everything that
reads, edits or imports rows.

They mirror ``schemas/*.schema.json`` exactly; a test feeds both the same
corpus and requires the same verdicts. The tag hot path validates with the
JSON Schemas (jsonschema-rs) instead, because importing pydantic costs ~130 ms
(perf.md §1) and ``machine good`` must start fast.
"""

from __future__ import annotations

from typing import Annotated
from typing import Any
from typing import Literal

from pydantic import BaseModel
from pydantic import ConfigDict
from pydantic import Field
from pydantic import StringConstraints
from pydantic import TypeAdapter
from pydantic import model_validator

Timestamp = Annotated[
    str,
    StringConstraints(
        pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})$"
    ),
]
RowId = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{12}$")]
NonEmpty = Annotated[str, StringConstraints(min_length=1)]
RedactionKind = Annotated[str, StringConstraints(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")]

# Optional keys that may be absent but never null (``"type": "string"`` in
# the schema) default to None here; strict typing rejects an explicit null.
_ABSENT: Any = Field(default=None)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


# -- trajectory-v1 records ----------------------------------------------------


class MetaRecord(_Strict):
    role: Literal["meta"]
    source: NonEmpty
    cwd: str = _ABSENT
    git_branch: str = _ABSENT
    model: str = _ABSENT
    kind: Literal["subagent"] = _ABSENT
    parent_id: NonEmpty = _ABSENT


class SystemRecord(_Strict):
    role: Literal["system"]
    content: str
    timestamp: Timestamp


class ObservationRecord(_Strict):
    role: Literal["observation"]
    content: str
    timestamp: Timestamp


class UserRecord(_Strict):
    role: Literal["user"]
    content: str
    timestamp: Timestamp


class ReasoningRecord(_Strict):
    role: Literal["reasoning"]
    content: str
    timestamp: Timestamp


class RecordToolCall(_Strict):
    id: NonEmpty
    name: NonEmpty
    args: str


class AssistantRecord(_Strict):
    role: Literal["assistant"]
    content: str | None
    timestamp: Timestamp
    tool_calls: Annotated[list[RecordToolCall], Field(min_length=1)] = _ABSENT

    @model_validator(mode="after")
    def _content_or_calls(self) -> AssistantRecord:
        if "tool_calls" in self.model_fields_set:
            if self.content is not None:
                raise ValueError("content must be null when tool_calls are present")
        elif not self.content:
            raise ValueError("content must be a non-empty string without tool_calls")
        return self


class ToolRecord(_Strict):
    role: Literal["tool"]
    tool_call_id: NonEmpty
    content: str
    ok: bool = _ABSENT
    timestamp: Timestamp


Record = Annotated[
    MetaRecord
    | SystemRecord
    | ObservationRecord
    | UserRecord
    | ReasoningRecord
    | AssistantRecord
    | ToolRecord,
    Field(discriminator="role"),
]
Trajectory = Annotated[list[Record], Field(min_length=1)]
trajectory_adapter: TypeAdapter[list[Record]] = TypeAdapter(Trajectory)


# -- chat messages (tinker-cookbook / OpenAI shape) ---------------------------


class FunctionCall(_Strict):
    name: NonEmpty
    arguments: str


class MessageToolCall(_Strict):
    id: NonEmpty
    type: Literal["function"]
    function: FunctionCall


class Message(_Strict):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None
    tool_calls: Annotated[list[MessageToolCall], Field(min_length=1)] = _ABSENT
    tool_call_id: NonEmpty = _ABSENT
    name: NonEmpty = _ABSENT


def _has_answer(messages: list[Message]) -> bool:
    return any(m.role == "assistant" and m.content for m in messages)


# -- contexts (schemas/context.schema.json) ------------------------------------


class ContextTool(_Strict):
    name: NonEmpty
    description: str
    parameters: dict[str, Any]


class Context(_Strict):
    """A turn's system prompt and tools (``context/<sha256>.json``)."""

    system: str | None
    tools: list[ContextTool] | None


ContextId = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


# -- rows ------------------------------------------------------------------------


class Source(_Strict):
    host: Literal["pi", "letta", "claude", "codex", "import"]
    session_id: NonEmpty
    session_file: str | None = None
    entry_ids: Annotated[list[NonEmpty], Field(min_length=1)]
    leaf_id: str | None = None
    model: str | None = None
    provider: str | None = None
    cwd: str | None = None
    git_branch: str | None = None
    parent_row: RowId = _ABSENT


class _Row(_Strict):
    id: RowId
    created_at: Timestamp
    note: Annotated[str, StringConstraints(max_length=4000)] | None
    source: Source
    original_answer: str = _ABSENT
    redactions: dict[RedactionKind, Annotated[int, Field(ge=1)]] = _ABSENT
    # By hash in the store, inline in a JSONL file, null when unknown.
    context: ContextId | Context | None = None


class Failure(_Strict):
    """How a turn tagged bad failed: aborted, or ended with an error."""

    stop_reason: Literal["aborted", "error"]
    error: str | None


class _WithMessages(_Row):
    @model_validator(mode="after")
    def _messages_ok(self) -> _WithMessages:
        messages: list[Message] | None = getattr(self, "messages", None)
        if messages is not None and getattr(self, "failure", None) is not None:
            # a failed turn's answer may be missing: what was said is kept
            if not any(m.role == "user" for m in messages):
                raise ValueError("messages of a failed turn need the user message")
        elif messages is not None:
            if len(messages) < 2:
                raise ValueError("messages needs at least a prompt and an answer")
            if not _has_answer(messages):
                raise ValueError("messages needs an assistant message with content")
        trajectory: list[Any] | None = getattr(self, "trajectory", None)
        if trajectory is not None and not any(r.role == "user" for r in trajectory):
            raise ValueError("trajectory needs a user record")
        return self


class TrainRow(_WithMessages):
    kind: Literal["train"]
    tag: Literal["good"]
    messages: list[Message]


class TracesRow(_WithMessages):
    kind: Literal["traces"]
    tag: Literal["good"]
    trajectory: Trajectory


class ObservedRow(_WithMessages):
    kind: Literal["observed"]
    tag: Literal["observed"]
    trajectory: Trajectory


class RejectedRow(_WithMessages):
    kind: Literal["rejected"]
    tag: Literal["bad"]
    messages: list[Message] = _ABSENT
    trajectory: Trajectory = _ABSENT
    failure: Failure = _ABSENT

    @model_validator(mode="after")
    def _one_body(self) -> RejectedRow:
        bodies = {"messages", "trajectory"} & self.model_fields_set
        if len(bodies) != 1:
            raise ValueError("a rejected row has either messages or a trajectory")
        return self


Row = Annotated[
    TrainRow | TracesRow | ObservedRow | RejectedRow, Field(discriminator="kind")
]
row_adapter: TypeAdapter[TrainRow | TracesRow | ObservedRow | RejectedRow] = (
    TypeAdapter(Row)
)


def parse_row(value: Any) -> TrainRow | TracesRow | ObservedRow | RejectedRow:
    """Validate a row dict into its model (raises pydantic.ValidationError)."""
    return row_adapter.validate_python(value)
