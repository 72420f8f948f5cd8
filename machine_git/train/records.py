"""The training records machine writes and reads back, as pydantic models.

People edit ``tinker.yaml`` and can damage a run record or an export
manifest (a merge, a hand edit, a half-copied folder); each is validated when
it is read, and a bad one stops the command with one line naming the field.
Only the train commands, ``machine runs`` and the review pages load this
module: pydantic stays off the ``good``/``bad`` path.
"""

from __future__ import annotations

from typing import Annotated
from typing import Any
from typing import Literal
from typing import TypeVar

from pydantic import BaseModel
from pydantic import ConfigDict
from pydantic import Field
from pydantic import StringConstraints
from pydantic import field_validator
from pydantic import model_validator

from machine_git.core import models
from machine_git.core.errors import TrainingError

NonEmpty = Annotated[str, StringConstraints(min_length=1)]
Positive = Annotated[int, Field(ge=1)]
Count = Annotated[int, Field(ge=0)]
M = TypeVar("M", bound=BaseModel)

METHODS = ("sft", "dpo")
KINDS = {"sft": ("train", "traces"), "dpo": ("rejected",)}


def parse(model: type[M], data: Any, where: str) -> M:
    """``data`` as ``model``, or a TrainingError naming the first bad field."""
    return models.load(model, data, where, TrainingError)


class _Record(BaseModel):
    # Unknown keys are kept: a record written by a newer machine still reads.
    model_config = ConfigDict(extra="allow")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- tinker.yaml -------------------------------------------------------------------


class DatasetSection(_Strict):
    commit: NonEmpty
    revision: NonEmpty
    kind: Literal["train", "traces", "rejected"]
    file: NonEmpty
    sha256: NonEmpty
    rows: Count
    held_out_eval: str | None = None
    context: bool = True  # the turns' system prompts and tools are in the export

    @field_validator("file")
    @classmethod
    def _in_the_run_folder(cls, value: str) -> str:
        if "/" in value or "\\" in value or value.startswith("."):
            raise ValueError("must be a file name in the run folder")
        return value


class ModelSection(_Strict):
    base_model: NonEmpty
    renderer: NonEmpty
    train_on_what: NonEmpty


class HyperSection(_Strict):
    learning_rate: Annotated[float, Field(gt=0)] = 2e-4
    batch_size: Positive = 8
    num_epochs: Positive = 1
    lora_rank: Positive = 32
    max_length: Positive = 32768
    save_every: Count = 20
    ttl_seconds: Count = 604800
    seed: int = 0
    dpo_beta: Annotated[float, Field(gt=0)] = 0.1  # DPO runs only


class TinkerFile(_Strict):
    """``tinker.yaml``: what a run trains, pinned to its data."""

    run_id: NonEmpty
    method: Literal["sft", "dpo"] = "sft"
    dataset: DatasetSection
    model: ModelSection
    hyperparameters: HyperSection = HyperSection()

    @model_validator(mode="after")
    def _kind_fits_the_method(self) -> TinkerFile:
        allowed = KINDS[self.method]
        if self.dataset.kind not in allowed:
            raise ValueError(
                f"$.dataset.kind: must be one of {', '.join(allowed)} for a "
                f"{self.method} run"
            )
        return self


# -- run records (runs/<id>.json) -----------------------------------------------------


class DatasetRecord(_Record):
    commit: NonEmpty
    revision: NonEmpty
    kind: NonEmpty
    file: NonEmpty
    sha256: NonEmpty
    rows: Count
    sequences: Count | None = None
    held_out_eval: str | None = None
    held_out_rows: Count = 0
    context: bool = True
    where: list[NonEmpty] = []  # the labels its rows had to meet (--where)
    images: bool = True  # False: trained on the [image] placeholders (--no-images)


class StepRecord(_Record):
    # Only what every machine wrote is required; later fields are checked
    # when they are there.
    step: Count
    loss: float
    epoch: Positive | None = None
    learning_rate: float | None = None
    sequences: Count | None = None
    tokens: Count | None = None
    trained_tokens: Count | None = None


class CheckpointRecord(_Record):
    name: NonEmpty
    step: Count
    final: bool
    state_path: str | None = None
    sampler_path: str | None = None


class EpochRecord(_Record):
    epoch: Positive
    seed: int
    steps: Count
    rows: Count
    tokens: Count


class Trained(_Record):
    rows: list[str] = []
    epochs: list[EpochRecord] = []


class SmokeRecord(_Record):
    status: NonEmpty
    steps: list[StepRecord] = []
    checkpoint: str | None = None
    error: str | None = None
    trained: Trained | None = None


class AttemptRecord(_Record):
    attempt: Positive
    from_step: Count = 0
    from_checkpoint: str | None = None
    status: NonEmpty
    steps: Count | None = None


class RunRecord(_Record):
    """A training run's record, rewritten by one commit per event."""

    id: NonEmpty
    method: Literal["sft", "dpo"] = "sft"
    status: Literal["prepared", "running", "done", "failed", "interrupted"]
    created_at: NonEmpty
    dataset: DatasetRecord
    base_model: NonEmpty
    renderer: NonEmpty
    train_on_what: NonEmpty
    hyperparameters: dict[str, float | int]
    steps_planned: Count
    attempts: Count = 0
    attempt_log: list[AttemptRecord] = []  # each attempt, resumed ones too
    steps: list[StepRecord] = []
    checkpoints: list[CheckpointRecord] = []
    smoke: SmokeRecord | None = None
    error: str | None = None
    trained: Trained | None = None
    final_loss: float | None = None
    pid: int | None = None
    host: str | None = None


def run_record(data: Any, where: str) -> dict[str, Any]:
    """A run record checked field by field; the dict as stored."""
    parse(RunRecord, data, where)
    if not isinstance(data, dict):  # parse() refused anything else
        raise TrainingError(f"{where}: not a run record")
    return data


# -- export manifests (FILE.manifest.json) ---------------------------------------------


class HeldOut(_Record):
    eval: str | None = None
    rows: Count = 0


class Manifest(_Record):
    """What an export file holds (``machine export -o`` and run exports)."""

    file: NonEmpty
    revision: NonEmpty
    commit: NonEmpty
    format: NonEmpty
    kinds: list[NonEmpty]
    rows: Count
    skipped: Count
    sha256: NonEmpty
    redacted: bool = True
    context: bool = True
    machine_version: str | None = None
    held_out: HeldOut | None = None
    row_ids: list[NonEmpty] | None = None  # line n is row row_ids[n - 1]
    where: list[NonEmpty] = []  # the labels its rows had to meet (--where)
    images: bool = True  # False: the [image] placeholders only (--no-images)
