from __future__ import annotations

from typing import Any

import pydantic
import pytest

from machine_git import models
from machine_git import schemas
from tests import helpers


def pydantic_accepts(row: Any) -> bool:
    try:
        models.parse_row(row)
    except pydantic.ValidationError:
        return False
    return True


CORPUS = [(r["id"], r, True) for r in helpers.valid_rows()] + [
    (name, row, False) for name, row in helpers.invalid_rows()
]


@pytest.mark.parametrize(("name", "row", "valid"), CORPUS, ids=[c[0] for c in CORPUS])
def test_models_and_schemas_agree(name: str, row: Any, valid: bool) -> None:
    assert pydantic_accepts(row) is valid
    assert (schemas.row_problems(row) == []) is valid


def test_models_round_trip_a_row_unchanged() -> None:
    row = helpers.traces_row()
    parsed = models.parse_row(row)
    assert parsed.model_dump(mode="json", exclude_unset=True) == row


def test_assistant_record_rules() -> None:
    with pytest.raises(pydantic.ValidationError, match="content must be null"):
        models.AssistantRecord.model_validate(
            {
                "role": "assistant",
                "content": "x",
                "timestamp": helpers.STAMP,
                "tool_calls": [{"id": "1", "name": "n", "args": "{}"}],
            }
        )
