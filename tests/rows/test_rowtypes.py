"""The TypedDicts of machine_git/rows/rowtypes.py and schemas/*.schema.json agree.

Both directions, key by key: every property a schema allows is a key of its
TypedDict and every key is a property; every required property is a required
key and every required key is required. A property the schema lists only to
forbid it (``"not": {"required": [...]}``: a train row's ``trajectory``) is
no key. Where the TypedDict pins a key to values (a ``Literal``), the schema's
``const``/``enum`` allows exactly those.
"""

from __future__ import annotations

import typing
from typing import Any
from typing import NotRequired

import pytest

from machine_git.rows import context
from machine_git.rows import rowtypes
from machine_git.rows import schemas


def _hints(cls: type) -> dict[str, Any]:
    names = {**vars(context), **vars(rowtypes)}
    return typing.get_type_hints(cls, names, include_extras=True)


def keys(cls: type) -> tuple[set[str], set[str]]:
    """(every key, the required keys) of a TypedDict."""
    hints = _hints(cls)
    optional = {k for k, v in hints.items() if typing.get_origin(v) is NotRequired}
    return set(hints), set(hints) - optional


def resolve(schema: dict[str, Any], document: str) -> dict[str, Any]:
    """A ``$ref`` followed (``document``: the schema file it is written in)."""
    ref = schema.get("$ref")
    if ref is None:
        return schema
    urn, _, pointer = ref.partition("#")
    if urn:
        document = urn.removeprefix("urn:machine:schema:")
    found: Any = schemas.load_schema(document)
    for part in pointer.strip("/").split("/"):
        found = found[part]
    return resolve(found, document)


def schema_keys(schema: dict[str, Any]) -> tuple[set[str], set[str]]:
    """(the properties an instance may have, the required ones)."""
    forbidden = set(schema.get("not", {}).get("required", []))
    return set(schema["properties"]) - forbidden, set(schema.get("required", []))


def row_schema(kind: str) -> dict[str, Any]:
    return schemas.load_schema(kind)


COMMON = schemas.load_schema("common")["$defs"]
RECORDS = schemas.load_schema("trajectory-v1")["$defs"]
CONTEXT = schemas.load_schema("context")

# (what, its TypedDict, its schema, the schema file that holds it)
PAIRS: list[tuple[str, type, dict[str, Any], str]] = [
    ("train", rowtypes.TrainRow, row_schema("train"), "train"),
    ("traces", rowtypes.TracesRow, row_schema("traces"), "traces"),
    ("rejected", rowtypes.RejectedRow, row_schema("rejected"), "rejected"),
    ("observed", rowtypes.ObservedRow, row_schema("observed"), "observed"),
    ("source", rowtypes.Source, COMMON["source"], "common"),
    ("message", rowtypes.Message, COMMON["message"], "common"),
    ("image ref", rowtypes.ImageRef, RECORDS["image_ref"], "trajectory-v1"),
    ("inline image", rowtypes.InlineImage, RECORDS["image_inline"], "trajectory-v1"),
    ("message tool call", rowtypes.MessageToolCall, COMMON["tool_call"], "common"),
    (
        "message function",
        rowtypes.Function,
        COMMON["tool_call"]["properties"]["function"],
        "common",
    ),
    (
        "failure",
        rowtypes.Failure,
        row_schema("rejected")["properties"]["failure"],
        "rejected",
    ),
    ("meta record", rowtypes.MetaRecord, RECORDS["meta"], "trajectory-v1"),
    ("system record", rowtypes.SystemRecord, RECORDS["system"], "trajectory-v1"),
    (
        "observation record",
        rowtypes.ObservationRecord,
        RECORDS["observation"],
        "trajectory-v1",
    ),
    ("user record", rowtypes.UserRecord, RECORDS["user"], "trajectory-v1"),
    (
        "reasoning record",
        rowtypes.ReasoningRecord,
        RECORDS["reasoning"],
        "trajectory-v1",
    ),
    (
        "assistant record",
        rowtypes.AssistantRecord,
        RECORDS["assistant"],
        "trajectory-v1",
    ),
    (
        "record tool call",
        rowtypes.RecordToolCall,
        RECORDS["tool_call"],
        "trajectory-v1",
    ),
    ("tool record", rowtypes.ToolRecord, RECORDS["tool"], "trajectory-v1"),
    ("context", context.Context, CONTEXT, "context"),
    ("context tool", context.Tool, CONTEXT["$defs"]["tool"], "context"),
]
IDS = [p[0] for p in PAIRS]


@pytest.mark.parametrize(("name", "cls", "schema", "document"), PAIRS, ids=IDS)
def test_every_key_is_a_property_and_every_property_a_key(
    name: str, cls: type, schema: dict[str, Any], document: str
) -> None:
    assert keys(cls)[0] == schema_keys(schema)[0]


@pytest.mark.parametrize(("name", "cls", "schema", "document"), PAIRS, ids=IDS)
def test_required_keys_are_the_required_properties(
    name: str, cls: type, schema: dict[str, Any], document: str
) -> None:
    assert keys(cls)[1] == schema_keys(schema)[1]


def _allowed(schema: dict[str, Any], document: str) -> set[Any] | None:
    schema = resolve(schema, document)
    if "const" in schema:
        return {schema["const"]}
    if "enum" in schema:
        return set(schema["enum"])
    return None


def _literal_values(hint: Any) -> set[Any] | None:
    if typing.get_origin(hint) is NotRequired:
        hint = typing.get_args(hint)[0]
    if typing.get_origin(hint) is typing.Literal:
        return set(typing.get_args(hint))
    return None


@pytest.mark.parametrize(("name", "cls", "schema", "document"), PAIRS, ids=IDS)
def test_pinned_values_are_the_values_the_schema_allows(
    name: str, cls: type, schema: dict[str, Any], document: str
) -> None:
    for key, hint in _hints(cls).items():
        allowed = _allowed(schema["properties"][key], document)
        assert _literal_values(hint) == allowed, key


def test_the_unions_hold_every_kind_and_every_role() -> None:
    kinds = {
        typing.get_args(_hints(cls)["kind"])[0] for cls in typing.get_args(rowtypes.Row)
    }
    assert kinds == set(schemas.KINDS) == set(typing.get_args(rowtypes.Kind))
    roles = {
        typing.get_args(_hints(cls)["role"])[0]
        for cls in typing.get_args(rowtypes.Record)
    }
    listed = {ref["$ref"].rsplit("/", 1)[1] for ref in RECORDS["record"]["oneOf"]}
    assert roles == listed


def test_every_row_schema_and_record_role_has_a_type() -> None:
    # A new schema file or record role without a TypedDict fails here.
    checked = {id(schema) for _, _, schema, _ in PAIRS}
    for kind in schemas.KINDS:
        assert id(row_schema(kind)) in checked
    for role in typing.get_args(rowtypes.Record):
        assert role in [cls for _, cls, _, _ in PAIRS]
