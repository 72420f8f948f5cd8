"""The row schemas in ``schemas/`` and the validators built from them.

jsonschema-rs does the validating: ~6 µs for a 48 KB trace row against ~2 ms
for the reference ``jsonschema`` package (perf.md section 5), and 40 ms less
import time on the path of every ``machine good``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any
from typing import NamedTuple

import jsonschema_rs

from machine_git import bundled
from machine_git.core import jsonio
from machine_git.core.errors import RowValidationError
from machine_git.core.errors import SchemaError

KINDS = ("train", "traces", "rejected", "observed")
# Schemas others refer to by $id (a dpo pair's messages are OpenAI's).
_SHARED = ("trajectory-v1", "common", "context", "line-openai")


class Problem(NamedTuple):
    """One reason a row is invalid, at a JSON path such as ``$.messages[1].role``."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def schema_text(name: str) -> bytes:
    """The bytes of ``schemas/<name>.schema.json``."""
    try:
        return bundled.read_bytes("schemas", f"{name}.schema.json")
    except (OSError, ModuleNotFoundError) as e:
        raise SchemaError(f"schema {name!r} is missing from the install: {e}") from e


@functools.cache
def load_schema(name: str) -> dict[str, Any]:
    """``schemas/<name>.schema.json`` parsed."""
    try:
        value = jsonio.loads(schema_text(name))
    except jsonio.JSONDecodeError as e:
        raise SchemaError(f"schema {name!r} is not valid JSON: {e}") from e
    if not isinstance(value, dict):
        raise SchemaError(f"schema {name!r} is not a JSON object")
    return value


@functools.cache
def _registry() -> jsonschema_rs.Registry:
    resources = [(load_schema(n)["$id"], load_schema(n)) for n in _SHARED]
    return jsonschema_rs.Registry(resources)


@functools.cache
def validator(name: str) -> jsonschema_rs.Draft202012Validator:
    """A validator for one schema (a row kind, ``context`` or ``trajectory-v1``)."""
    try:
        return jsonschema_rs.Draft202012Validator(
            load_schema(name), registry=_registry(), validate_formats=False
        )
    except (ValueError, jsonschema_rs.ReferencingError) as e:
        raise SchemaError(f"schema {name!r} does not compile: {e}") from e


def json_path(parts: Iterable[str | int]) -> str:
    """``["messages", 1, "role"]`` -> ``$.messages[1].role``."""
    out = ["$"]
    for part in parts:
        out.append(f"[{part}]" if isinstance(part, int) else f".{part}")
    return "".join(out)


def row_problems(row: Any) -> list[Problem]:
    """Every reason ``row`` is not a valid row of its kind; empty if valid."""
    if not isinstance(row, dict):
        return [Problem("$", f"a row must be a JSON object, not {_type_name(row)}")]
    kind = row.get("kind")
    if kind not in KINDS:
        expected = ", ".join(KINDS)
        return [
            Problem("$.kind", f"unknown kind {kind!r} (expected one of {expected})")
        ]
    return check(validator(kind), row)


def check_row(row: Any, where: str) -> None:
    """RowValidationError ``<where>: <json path>: <problem>`` if ``row`` is invalid.

    The one check a row gets before it is written: by the store for every row
    of a commit (``where`` is its path), and for a row appended to a file.
    """
    problems = row_problems(row)
    if problems:
        raise RowValidationError(f"{where}: {problems[0]}")


def check(v: jsonschema_rs.Draft202012Validator, value: Any) -> list[Problem]:
    """Problems of ``value`` against validator ``v``, most specific first."""
    if v.is_valid(value):
        return []
    problems: list[Problem] = []
    for e in v.iter_errors(value):
        where = list(e.instance_path)
        instance: Any = e.instance
        if e.kind.__class__.__name__.endswith("OneOfNotValid") and _is_record(instance):
            # "not valid under any of the schemas listed in oneOf" says nothing
            # useful: check the record against the one its role selects.
            record_v = _record_validator(str(instance["role"]))
            problems.extend(
                Problem(json_path([*where, *sub.path_parts]), sub.message)
                for sub in _with_parts(record_v, instance)
            )
            continue
        problems.append(Problem(json_path(where), _message(e)))
    # Deeper paths name the field to fix; list them before the whole-row ones.
    problems.sort(key=lambda p: (-p.path.count(".") - p.path.count("["), p.path))
    return problems


_ROLES = ("meta", "system", "observation", "user", "reasoning", "assistant", "tool")


class _Sub(NamedTuple):
    path_parts: list[str | int]
    message: str


def _is_record(value: Any) -> bool:
    return isinstance(value, dict) and value.get("role") in _ROLES


@functools.cache
def _record_validator(role: str) -> jsonschema_rs.Draft202012Validator:
    ref = {"$ref": f"urn:machine:schema:trajectory-v1#/$defs/{role}"}
    return jsonschema_rs.Draft202012Validator(ref, registry=_registry())


def _with_parts(v: jsonschema_rs.Draft202012Validator, value: Any) -> list[_Sub]:
    return [_Sub(list(e.instance_path), _message(e)) for e in v.iter_errors(value)]


def _message(e: jsonschema_rs.ValidationError) -> str:
    if isinstance(e.kind, jsonschema_rs.ValidationErrorKind.Enum):
        # jsonschema-rs names two values and "N other candidates": a user
        # fixing a row needs every value it may take.
        allowed = ", ".join(jsonio.compact(o) for o in e.kind.options)
        return _shorten(f"{jsonio.compact(e.instance)} is not one of {allowed}")
    return _shorten(e.message)


def _shorten(message: str, limit: int = 200) -> str:
    message = " ".join(message.split())
    return message if len(message) <= limit else message[: limit - 3] + "..."


def _type_name(value: Any) -> str:
    names = {list: "an array", str: "a string", int: "a number", float: "a number"}
    names.update({bool: "a boolean", type(None): "null"})
    return names.get(type(value), type(value).__name__)
