"""The training loop: a flat LoRA loop on Tinker, like the cookbook's sl_loop.

Per step (SFT): ``forward_backward`` (cross-entropy on the batch's datums) and
``optim_step`` (Adam, linear learning-rate decay), both submitted before either
is awaited. A DPO run's step is the cookbook's preference recipe
(:class:`machine_git.train.preference.DPO`); the loop around it, its
checkpoints and records are the same. Checkpoints every ``save_every`` steps
and a final one. Each step and checkpoint is appended to ``metrics.jsonl`` /
``checkpoints.jsonl`` (the cookbook's formats, plus the run id, dataset commit
and export sha256) and
handed to the caller's callbacks, which ``machine train`` turns into commits.
The same ids go to Tinker as user metadata, so its own records name the data.
Heavy: imports tinker and tinker-cookbook. Import after ``stack.require()``.
"""

from __future__ import annotations

import functools
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any
from typing import Protocol

import tinker
from tinker_cookbook.checkpoint_utils import CheckpointRecord
from tinker_cookbook.supervised.common import compute_mean_nll

from machine_git.core import jsonio
from machine_git.core.errors import TrainingError
from machine_git.train import service
from machine_git.train.config import RunConfig
from machine_git.train.datasets import ListDataset

METRICS_FILE = "metrics.jsonl"
CHECKPOINTS_FILE = "checkpoints.jsonl"
SMOKE_STEPS = 2
SMOKE_TTL = 86400  # a smoke test's checkpoint proves saving works; keep it a day


@dataclass
class Step:
    """One finished optimizer step."""

    step: int  # 0-based
    total: int
    epoch: int
    batch: int
    loss: float  # mean NLL per trained token
    learning_rate: float
    sequences: int
    tokens: int
    loss_tokens: int
    seconds: float
    rows: list[str] = field(default_factory=list)  # row ids in the batch
    seed: int = 0  # the shuffle seed of this step's epoch
    metrics: dict[str, float] = field(default_factory=dict)  # DPO: accuracy...

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.metrics,
            "step": self.step,
            "epoch": self.epoch,
            "batch": self.batch,
            "learning_rate": self.learning_rate,
            "num_sequences": self.sequences,
            "num_tokens": self.tokens,
            "num_loss_tokens": self.loss_tokens,
            "train_mean_nll": self.loss,
            "time/step": round(self.seconds, 3),
        }


@dataclass
class Saved:
    """One checkpoint Tinker saved (tinker:// paths)."""

    name: str
    step: int  # steps done when it was saved
    epoch: int
    final: bool
    state_path: str | None
    sampler_path: str | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "step": self.step,
            "final": self.final,
            "state_path": self.state_path,
            "sampler_path": self.sampler_path,
        }


@dataclass
class Outcome:
    """What a finished loop did."""

    steps: list[Step] = field(default_factory=list)
    checkpoints: list[Saved] = field(default_factory=list)

    @property
    def final_loss(self) -> float | None:
        return self.steps[-1].loss if self.steps else None


@dataclass(frozen=True)
class Resume:
    """Where a resumed run starts: a saved state and the steps it holds."""

    state_path: str  # tinker://.../weights/<name>, saved with the optimizer
    step: int  # steps done when it was saved


class Method(Protocol):
    """What one optimizer step does (SFT or DPO)."""

    def start(self, training: Any, retries: service.Retries | None) -> None: ...

    def step(
        self, training: Any, batch: list[tinker.Datum], adam: tinker.AdamParams
    ) -> tuple[float, dict[str, float]]: ...


class SFT:
    """Cross-entropy on the batch; the loss is the mean NLL per trained token."""

    def start(self, training: Any, retries: service.Retries | None) -> None:
        return None

    def step(
        self, training: Any, batch: list[tinker.Datum], adam: tinker.AdamParams
    ) -> tuple[float, dict[str, float]]:
        result = _step(training, batch, adam)
        weights = [d.loss_fn_inputs["weights"] for d in batch]
        logprobs = [out["logprobs"] for out in result.loss_fn_outputs]
        return float(compute_mean_nll(logprobs, weights)), {}


def method_of(cfg: RunConfig) -> Method:
    """The step of a run's method."""
    if cfg.method == "dpo":
        from machine_git.train import preference

        return preference.DPO(cfg.dpo_beta)
    return SFT()


def total_steps(cfg: RunConfig, dataset: ListDataset, max_steps: int | None) -> int:
    """Steps the loop will take: every batch of every epoch, or ``max_steps``."""
    planned = len(dataset) * cfg.hyper.num_epochs
    return planned if max_steps is None else max_steps


def metadata(cfg: RunConfig) -> dict[str, str]:
    """What Tinker's own records get to know about the run's data."""
    return {
        "machine_run": cfg.run_id,
        "dataset_commit": cfg.dataset_commit,
        "export_sha256": cfg.export_sha256,
    }


def train(
    cfg: RunConfig,
    dataset: ListDataset,
    log_dir: Path,
    *,
    max_steps: int | None = None,
    smoke: bool = False,
    on_step: Callable[[Step], None] | None = None,
    on_checkpoint: Callable[[Saved], None] | None = None,
    on_ready: Callable[[], None] | None = None,
    retries: service.Retries | None = None,
    method: Method | None = None,
    resume: Resume | None = None,
) -> Outcome:
    """Train ``cfg`` on ``dataset``; ``smoke`` takes two steps and saves one
    short-lived sampler checkpoint instead of the run's checkpoints.

    ``resume`` continues from a saved state (weights and optimizer, Tinker's
    ``create_training_client_from_state_with_optimizer``) at the step after
    it, on the same batches in the same order: each epoch's order comes from
    the run's seed, the learning rate from the step.
    """
    if len(dataset) == 0:
        raise TrainingError("the dataset is empty: 0 training steps")
    total = total_steps(cfg, dataset, SMOKE_STEPS if smoke else max_steps)
    first = resume.step if resume is not None else 0
    hyper = cfg.hyper
    log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    metrics_path = log_dir / METRICS_FILE
    checkpoints_path = log_dir / CHECKPOINTS_FILE
    if resume is None:
        for path in (metrics_path, checkpoints_path):
            _truncate(path)  # a new attempt starts its own logs; git keeps the old
    else:
        # The logs go on from the saved state: what came after it was lost.
        _keep(metrics_path, lambda r: int(r.get("step", 0)) < resume.step)
        _keep(checkpoints_path, lambda r: int(r.get("batch", 0)) <= resume.step)
    stamp = {**metadata(cfg), "run_id": cfg.run_id}
    del stamp["machine_run"]
    outcome = Outcome()

    def saved(checkpoint: Saved) -> None:
        record = CheckpointRecord(
            name=checkpoint.name,
            batch=checkpoint.step,
            epoch=checkpoint.epoch,
            final=checkpoint.final,
            state_path=checkpoint.state_path,
            sampler_path=checkpoint.sampler_path,
            extra=stamp,
        )
        _append(checkpoints_path, record.to_dict())
        outcome.checkpoints.append(checkpoint)
        if on_checkpoint is not None:
            on_checkpoint(checkpoint)

    # Every call is bounded by MACHINE_TINKER_TIMEOUT (service.bounded).
    # Creating the client and saving a named checkpoint are safe to repeat;
    # a training step is not (it may have been applied), so it is tried once.
    client = service.service_client(user_metadata=metadata(cfg))
    if resume is not None:
        state = resume.state_path
        training = service.bounded(
            f"loading the checkpoint {state}",
            lambda: client.create_training_client_from_state_with_optimizer(
                state, user_metadata=metadata(cfg)
            ).result(),
            tries=3,
            retries=retries,
        )
    else:
        training = service.bounded(
            "creating the training client",
            lambda: client.create_lora_training_client(
                base_model=cfg.base_model,
                rank=hyper.lora_rank,
                seed=hyper.seed,
                user_metadata=metadata(cfg),
            ).result(),
            tries=3,
            retries=retries,
        )
    method = method if method is not None else method_of(cfg)
    method.start(training, retries)
    if on_ready is not None:
        on_ready()
    batches = len(dataset)
    for step in range(first, total):
        started = time.monotonic()
        epoch, index = divmod(step, batches)
        if index == 0 or step == first:
            dataset.set_epoch(epoch)  # a new order every epoch, from the run's seed
        batch = dataset.get_batch(index)
        rate = hyper.learning_rate * max(0.0, 1.0 - step / total)
        adam = tinker.AdamParams(learning_rate=rate, beta1=0.9, beta2=0.95, eps=1e-8)
        loss, extra = service.bounded(
            f"step {step + 1}",
            functools.partial(method.step, training, batch, adam),
        )
        if not math.isfinite(loss):
            # A NaN would be written as null and poison the run's record;
            # the weights are no better for it either. Stop here, failed.
            raise TrainingError(
                f"the loss is {loss} (not a finite number); the run stops "
                "(check the data with 'machine train validate')"
            )
        weights = [d.loss_fn_inputs["weights"] for d in batch]
        done = Step(
            step=step,
            total=total,
            epoch=epoch,
            batch=index,
            loss=loss,
            learning_rate=rate,
            sequences=len(batch),
            tokens=sum(d.model_input.length for d in batch),
            loss_tokens=sum(sum(1 for w in t.data if w > 0) for t in weights),
            seconds=time.monotonic() - started,
            rows=dataset.batch_rows(index),
            seed=dataset.epoch_seed,
            metrics=extra,
        )
        _append(metrics_path, {**done.as_dict(), **stamp})
        outcome.steps.append(done)
        if on_step is not None:
            on_step(done)
        finished = step + 1
        periodic = hyper.save_every > 0 and finished % hyper.save_every == 0
        if not smoke and periodic and finished < total:
            name = f"{finished:06d}"
            state = service.bounded(
                f"saving checkpoint {name}",
                functools.partial(
                    _save_state, training, name, hyper.ttl_seconds, metadata(cfg)
                ),
                tries=3,
                retries=retries,
            )
            saved(Saved(name, finished, epoch, False, state.path, None))
    last_epoch = (total - 1) // batches
    if smoke:
        sampler = service.bounded(
            "saving the smoke checkpoint",
            lambda: training.save_weights_for_sampler(
                "smoke", ttl_seconds=SMOKE_TTL, user_metadata=metadata(cfg)
            ).result(),
            tries=3,
            retries=retries,
        )
        saved(Saved("smoke", total, last_epoch, True, None, sampler.path))
        return outcome
    state = service.bounded(
        "saving the final checkpoint",
        lambda: training.save_state("final", user_metadata=metadata(cfg)).result(),
        tries=3,
        retries=retries,
    )
    sampler = service.bounded(
        "saving the final sampler weights",
        lambda: training.save_weights_for_sampler(
            "final", user_metadata=metadata(cfg)
        ).result(),
        tries=3,
        retries=retries,
    )
    saved(Saved("final", total, last_epoch, True, state.path, sampler.path))
    return outcome


def _step(training: Any, batch: list[tinker.Datum], adam: tinker.AdamParams) -> Any:
    # Both requests are submitted before either is awaited (one round trip).
    backward = training.forward_backward(batch, loss_fn="cross_entropy")
    optimize = training.optim_step(adam)
    result = backward.result()
    optimize.result()
    return result


def _save_state(
    training: Any, name: str, ttl: int | None, user_metadata: dict[str, str]
) -> Any:
    return training.save_state(
        name, ttl_seconds=ttl, user_metadata=user_metadata
    ).result()


def _keep(path: Path, wanted: Callable[[dict[str, Any]], bool]) -> None:
    """Rewrite a JSONL log keeping the records ``wanted`` says (0600)."""
    try:
        lines = path.read_bytes().splitlines()
    except FileNotFoundError:
        lines = []
    kept = []
    for line in lines:
        try:
            record = jsonio.loads(line)
        except jsonio.JSONDecodeError:
            continue  # a line cut by the crash that ended the attempt
        if isinstance(record, dict) and wanted(record):
            kept.append(line + b"\n")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, b"".join(kept))
    finally:
        os.close(fd)


def _truncate(path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.close(fd)


def _append(path: Path, record: dict[str, Any]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, jsonio.line(record))
    finally:
        os.close(fd)
