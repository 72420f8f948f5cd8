"""The one loader of machine's pydantic records: one line naming the field."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel
from pydantic import model_validator

from machine_git.core import models
from machine_git.core.errors import RecordError
from machine_git.core.errors import ReleaseRecordError
from machine_git.core.errors import TrainingError


class Step(BaseModel):
    loss: float


class Run(BaseModel):
    steps: list[Step]
    every: int | Literal["all"] = "all"
    low: int = 0
    high: int = 1

    @model_validator(mode="after")
    def _ordered(self) -> Run:
        if self.low > self.high:
            raise ValueError("$.low: must not be above high")
        return self


def _line(value: object, error: type[Exception] = RecordError) -> str:
    with pytest.raises(error) as caught:
        models.load(Run, value, "runs/r.json", error)  # type: ignore[arg-type]
    return str(caught.value)


def test_a_valid_record_loads() -> None:
    run = models.load(Run, {"steps": [{"loss": 0.5}], "every": 3}, "r.json")
    assert (run.steps[0].loss, run.every) == (0.5, 3)


def test_the_line_names_the_json_path_of_the_field() -> None:
    line = _line({"steps": [{"loss": 1}, {"loss": "low"}]})
    assert line == (
        "runs/r.json: $.steps[1].loss: Input should be a valid number, "
        "unable to parse string as a number"
    )


def test_a_missing_field_and_a_whole_record_of_the_wrong_type() -> None:
    assert _line({}) == "runs/r.json: $.steps: Field required"
    assert _line([1]) == (
        "runs/r.json: $: Input should be a valid dictionary or instance of Run"
    )


def test_a_union_branch_is_not_a_key_of_the_path() -> None:
    assert _line({"steps": [], "every": "some"}).startswith("runs/r.json: $.every: ")


def test_a_record_check_names_its_own_field_without_pydantic_prefix() -> None:
    line = _line({"steps": [], "low": 2, "high": 1})
    assert line == "runs/r.json: $.low: must not be above high"


@pytest.mark.parametrize("error", [RecordError, TrainingError, ReleaseRecordError])
def test_the_command_chooses_the_error_class(error: type[Exception]) -> None:
    assert _line({}, error) == "runs/r.json: $.steps: Field required"
