"""The records of a behavior release, as pydantic models validated on load.

A release lives in ``releases/BR-NNN/``, one file per step, each written once:

- ``prereg.json`` (+ ``holdouts.jsonl``): the preregistration (release-new);
- ``checks/NNN.json``: each check, numbered from 001 (release-check);
- ``trial.json``: the trial (release-trial);
- ``activation.json``: the activation (release-activate).

Nothing in the folder is ever changed or removed: the status of a release is
read from which of these files exist, never stored. Each later record names
the sha256 of the ones it relies on (the preregistration, the previous check,
the passing check, the trial), a digest chain that binds a release's records
together outside git too. A record that does not match its model is one line
naming the file and the field.
"""

from __future__ import annotations

import re
from typing import Annotated
from typing import Any
from typing import Literal
from typing import TypeVar

from pydantic import BaseModel
from pydantic import ConfigDict
from pydantic import StringConstraints

from machine_git.core import jsonio
from machine_git.core import models
from machine_git.core.errors import ReleaseRecordError
from machine_git.core.errors import UsageError

RELEASES = "releases"
# One id per number: BR-005, never also BR-0005 (a reused id in disguise).
ID_PATTERN = r"^BR-(?:\d{3}|[1-9]\d{3,5})$"
_ID = re.compile(ID_PATTERN)
_CHECK = re.compile(r"^checks/(\d{3}|[1-9]\d{3,5})\.json$")

ReleaseId = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
GitId = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{40}$")]
Metric = Literal["exact", "normalized"]
METRICS = ("exact", "normalized")


def check_id(release_id: str) -> str:
    """``BR-`` and three to six digits, or a one-line error."""
    if not _ID.match(release_id):
        raise UsageError(
            f"bad release id {release_id!r}: expected BR-NNN (e.g. BR-001)"
        )
    return release_id


def folder_of(release_id: str) -> str:
    return f"{RELEASES}/{check_id(release_id)}"


def prereg_path(release_id: str) -> str:
    return f"{folder_of(release_id)}/prereg.json"


def holdouts_path(release_id: str) -> str:
    return f"{folder_of(release_id)}/holdouts.jsonl"


def check_path(release_id: str, number: int) -> str:
    return f"{folder_of(release_id)}/checks/{number:03d}.json"


def trial_path(release_id: str) -> str:
    return f"{folder_of(release_id)}/trial.json"


def activation_path(release_id: str) -> str:
    return f"{folder_of(release_id)}/activation.json"


def split(path: str) -> tuple[str | None, str]:
    """``releases/BR-001/checks/001.json`` -> ("BR-001", "checks/001.json")."""
    parts = path.split("/", 2)
    if len(parts) < 3 or parts[0] != RELEASES or not _ID.match(parts[1]):
        return None, path
    return parts[1], parts[2]


def check_number(name: str) -> int | None:
    """The number of ``checks/NNN.json`` (a name inside a release folder)."""
    found = _CHECK.match(name)
    return int(found.group(1)) if found else None


# -- the models ------------------------------------------------------------------------


class Record(BaseModel):
    """A record machine writes and reads back: exact fields, exact types."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    def dump(self) -> bytes:
        """The canonical bytes machine stores (sorted keys, every field)."""
        return jsonio.canonical(self.model_dump(mode="json"))


class MetricGate(Record):
    metric: Metric
    min_delta: float = 0.0  # eval gates: candidate >= baseline + min_delta
    min: float | None = None  # and at least this (eval and holdout gates)


class NoRegress(Record):
    metric: Metric
    cases: Literal["all"] | list[str] = "all"


class HoldoutSpec(Record):
    file: str
    metrics: list[MetricGate] = []


class GateSpec(Record):
    """The gates a person writes down before any result exists."""

    metrics: list[MetricGate] = []
    no_regress: NoRegress | None = None
    holdouts: HoldoutSpec | None = None


# No gates given: the candidate must not score below the baseline, nor lose
# any case the baseline got right.
DEFAULT_GATES = GateSpec(
    metrics=[MetricGate(metric="normalized")],
    no_regress=NoRegress(metric="normalized"),
)


class Limits(Record):
    min: float | None = None
    max: float | None = None


class Bounds(Record):
    """What the training run must lie within (a template's training bounds)."""

    kinds: list[str] | None = None
    train_on_what: str | None = None
    max_steps: int | None = None
    learning_rate: Limits | None = None
    lora_rank: Limits | None = None
    min_rows: int | None = None


class TrialSpec(Record):
    required: bool = True
    steps: list[str] = []


class Spec(Record):
    """A gates file (``--gates``) or a shipped template (``--template``)."""

    id: ReleaseId | None = None
    title: str | None = None
    purpose: str | None = None
    training_bounds: Bounds | None = None
    gates: GateSpec = DEFAULT_GATES
    trial: TrialSpec = TrialSpec()


class Baseline(Record):
    model: str
    path: str
    blob: GitId
    scores: dict[str, float | int | None]


class EvalPin(Record):
    id: str
    commit: GitId
    baseline: Baseline


class FrozenHoldouts(HoldoutSpec):
    sha256: Sha256
    cases: int


class Gates(Record):
    """The gates as frozen: the spec plus the eval set, baseline and holdouts."""

    metrics: list[MetricGate]
    no_regress: NoRegress | None
    holdouts: FrozenHoldouts | None
    eval: EvalPin


class Candidate(Record):
    run: str
    checkpoint: str
    base_model: str
    renderer: str | None


class Training(Record):
    dataset_commit: str | None
    export_sha256: str | None
    kind: str | None
    rows: int | None
    steps: int | None
    train_on_what: str | None
    hyperparameters: dict[str, Any] | None
    bounds: Bounds | None


class Prereg(Record):
    """``prereg.json``: written once by release-new."""

    id: ReleaseId
    title: str
    template: str | None
    purpose: str | None
    created_at: str
    candidate: Candidate
    training: Training
    gates: Gates
    trial: TrialSpec


class Sample(Record):
    """What the Tinker service answered for one case: a check's only input."""

    output: str
    tool_calls: list[dict[str, Any]]
    stop_reason: str | None
    tokens: int | None

    @classmethod
    def of(cls, answer: dict[str, Any]) -> Sample:
        """The sampled part of one ``train.sampling.sample`` answer."""
        return cls(
            output=str(answer.get("output") or ""),
            tool_calls=list(answer.get("tool_calls") or []),
            stop_reason=answer.get("stop_reason"),
            tokens=answer.get("tokens"),
        )


class CaseResult(Sample):
    row: str
    kind: str
    reference: str
    exact: bool
    normalized: bool

    def sample(self) -> Sample:
        return Sample(
            output=self.output,
            tool_calls=self.tool_calls,
            stop_reason=self.stop_reason,
            tokens=self.tokens,
        )


class Regressed(Record):
    row: str
    reference: str
    baseline: str | None
    candidate: str | None


class GateResult(Record):
    name: str
    passed: bool
    detail: str
    regressed: list[Regressed]


class EvalUsed(Record):
    id: str
    commit: GitId
    skipped: list[str]


class Sampling(Record):
    max_tokens: int
    temperature: float = 0.0


class Check(Record):
    """``checks/NNN.json``: written once by release-check."""

    release: ReleaseId
    number: int
    created_at: str
    checkpoint: str
    prereg_sha256: Sha256
    previous_sha256: Sha256 | None
    sampling: Sampling
    eval: EvalUsed
    passed: bool
    gates: list[GateResult]
    cases: list[CaseResult]
    holdouts: list[CaseResult]

    def samples(self) -> list[Sample]:
        """The Tinker answers, in the order the cases were sampled."""
        return [c.sample() for c in [*self.cases, *self.holdouts]]


class CheckRef(Record):
    number: int
    sha256: Sha256


class Trial(Record):
    """``trial.json``: written once by release-trial."""

    release: ReleaseId
    at: str
    checkpoint: str
    prereg_sha256: Sha256
    last_check: CheckRef | None


class Activation(Record):
    """``activation.json``: written once by release-activate."""

    release: ReleaseId
    at: str
    checkpoint: str
    prereg_sha256: Sha256
    check: CheckRef
    trial_sha256: Sha256


# -- loading ---------------------------------------------------------------------------

M = TypeVar("M", bound=BaseModel)


def load(model: type[M], data: bytes, where: str) -> M:
    """Parse ``data`` as ``model``, or one line naming ``where`` and the field."""
    try:
        value = jsonio.loads(data)
    except jsonio.JSONDecodeError as e:
        raise ReleaseRecordError(f"{where}: not valid JSON ({e})") from None
    return parse(model, value, where)


def parse(model: type[M], value: Any, where: str) -> M:
    """Validate a JSON value as ``model``; one line naming the field if it fails."""
    return models.load(model, value, where, ReleaseRecordError)
