from __future__ import annotations

from typing import Any

import jsonschema
import pytest
import referencing

from machine_git import bundled
from machine_git.rows import schemas
from tests import helpers

LINE_FORMATS = ("tinker", "openai", "dpo", "openai-dpo", "trajectory")


def reference_validator(kind: str) -> jsonschema.Draft202012Validator:
    """The same schemas through the reference implementation (a cross-check)."""
    shared = [
        schemas.load_schema(n)
        for n in ("trajectory-v1", "common", "context", "line-openai")
    ]
    registry: referencing.Registry[Any] = referencing.Registry().with_resources(
        (s["$id"], referencing.Resource.from_contents(s)) for s in shared
    )
    return jsonschema.Draft202012Validator(schemas.load_schema(kind), registry=registry)


def test_every_schema_ships_as_package_data() -> None:
    names = sorted(p.name for p in bundled.folder("schemas").iterdir())
    assert [n for n in names if n.endswith(".json")] == [
        "common.schema.json",
        "context.schema.json",
        "line-dpo.schema.json",
        "line-openai-dpo.schema.json",
        "line-openai.schema.json",
        "line-tinker.schema.json",
        "line-trajectory.schema.json",
        "observed.schema.json",
        "rejected.schema.json",
        "traces.schema.json",
        "train.schema.json",
        "trajectory-v1.schema.json",
    ]


@pytest.mark.parametrize("kind", schemas.KINDS)
def test_each_kind_schema_is_a_valid_2020_12_schema(kind: str) -> None:
    jsonschema.Draft202012Validator.check_schema(schemas.load_schema(kind))


@pytest.mark.parametrize("fmt", LINE_FORMATS)
def test_each_line_schema_is_a_valid_2020_12_schema(fmt: str) -> None:
    jsonschema.Draft202012Validator.check_schema(schemas.load_schema(f"line-{fmt}"))


@pytest.mark.parametrize("row", helpers.valid_rows(), ids=lambda r: r["id"])
def test_valid_rows_pass(row: dict[str, Any]) -> None:
    assert schemas.row_problems(row) == []
    assert reference_validator(row["kind"]).is_valid(row)


@pytest.mark.parametrize(
    ("name", "row"), helpers.invalid_rows(), ids=[n for n, _ in helpers.invalid_rows()]
)
def test_invalid_rows_fail_in_both_implementations(name: str, row: Any) -> None:
    assert schemas.row_problems(row) != []
    kind = row.get("kind") if isinstance(row, dict) else None
    if kind in schemas.KINDS:
        assert not reference_validator(kind).is_valid(row)


def test_problems_name_the_json_path_of_the_field() -> None:
    row = helpers.mutate(helpers.traces_row(), ["trajectory", 5, "content"], None)
    assert [str(p) for p in schemas.row_problems(row)] == [
        '$.trajectory[5].content: null is not of type "string"'
    ]


def test_a_row_that_is_not_an_object_gets_one_problem() -> None:
    assert [str(p) for p in schemas.row_problems([1])] == [
        "$: a row must be a JSON object, not an array"
    ]


def test_unknown_kind_lists_the_kinds() -> None:
    assert [str(p) for p in schemas.row_problems({"kind": "x"})] == [
        "$.kind: unknown kind 'x' (expected one of train, traces, rejected, observed)"
    ]


def test_an_enum_problem_names_every_allowed_value() -> None:
    row = {"kind": "train", "messages": [{"role": "robot", "content": "hi"}]}
    problems = [str(p) for p in schemas.row_problems(row)]
    assert problems[0] == (
        '$.messages[0].role: "robot" is not one of '
        '"system", "user", "assistant", "tool"'
    )
