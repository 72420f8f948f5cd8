"""``machine train smoke`` and ``run``: check, train, and commit what happens.

The order keeps money and time safe: the run's config and data are checked
and rendered offline first (refusing zero steps), then the preflight proves in
seconds that a key is set and Tinker answers, and only then does the loop
start. Every step and checkpoint becomes a commit of the run's record; a
failure marks the run failed with its reason. Only ``runs/<id>.json`` is ever
written: no dataset row changes.
Heavy: imports the loop (tinker). Import after ``stack.require()``.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from machine_git.core.errors import MachineError
from machine_git.core.errors import TinkerServiceError
from machine_git.core.errors import TrainingError
from machine_git.rows import rows
from machine_git.store.store import Store
from machine_git.train import datasets
from machine_git.train import loop
from machine_git.train import preference
from machine_git.train import preflight
from machine_git.train import runs
from machine_git.train import service
from machine_git.train.config import RunConfig

Progress = Callable[[loop.Step], None]


@dataclass
class Plan:
    """What a smoke test or a run is about to do (shown before it starts)."""

    record: dict[str, Any]
    cfg: RunConfig
    dataset: datasets.ListDataset
    steps: int
    smoke: bool
    resume: loop.Resume | None = None


RESUMABLE = ("failed", "interrupted", "stale")


def plan(store: Store, run_id: str | None, smoke: bool, resume: bool = False) -> Plan:
    """Load a run and render its data offline; refuses what cannot run.

    ``resume``: continue a failed or interrupted run from its last saved
    state (refused when it saved none).
    """
    record = runs.find(store, run_id)
    status = record.get("status")
    if not smoke and status == "done":
        raise TrainingError(
            f"run {record['id']} is done; prepare a new one with 'machine train sft'"
        )
    point = resume_point(record) if resume else None
    cfg, where = runs.run_config(store, record)
    _refuse_blocking(cfg, where)
    dataset = preference.for_run(cfg, where)
    steps = loop.total_steps(cfg, dataset, loop.SMOKE_STEPS if smoke else None)
    return Plan(record, cfg, dataset, steps, smoke, point)


def resume_point(record: dict[str, Any]) -> loop.Resume:
    """The saved state a failed or interrupted run continues from."""
    status = runs.shown_status(record)
    if status not in RESUMABLE:
        raise TrainingError(
            f"run {record['id']} is {status}: only a failed or interrupted run resumes"
        )
    saved = [
        c
        for c in record.get("checkpoints") or []
        if c.get("state_path") and not c.get("final")
    ]
    if not saved:
        raise TrainingError(
            f"run {record['id']} saved no checkpoint to resume from (--save-every); "
            f"'machine train run {record['id']} --yes' trains it again from the start"
        )
    last = max(saved, key=lambda c: int(c["step"]))
    return loop.Resume(str(last["state_path"]), int(last["step"]))


def _refuse_blocking(cfg: RunConfig, where: Any) -> None:
    # The same checks as `machine train validate`, on the exact export.
    from machine_git.train import validate

    validate.refuse_blocking(validate.check_export(cfg, where))


def check_service(p: Plan) -> preflight.ServiceInfo:
    """The preflight for this run's base model."""
    return preflight.check(p.cfg.base_model, "train")


def execute(
    store: Store,
    p: Plan,
    progress: Progress | None = None,
    report: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Train, committing the record at every event; returns the final record.

    ``report`` gets one line per retried call. SIGTERM is handled like Ctrl-C:
    the record says ``interrupted``, where, and the last checkpoint saved.
    """
    with _terminate_as_interrupt():
        return _execute(store, p, progress, report)


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    # `kill PID` should leave an honest record, as Ctrl-C does.
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _execute(
    store: Store,
    p: Plan,
    progress: Progress | None,
    report: Callable[[str], None] | None,
) -> dict[str, Any]:
    run_id = p.cfg.run_id
    where = runs.folder(store, run_id)
    event = "smoke" if p.smoke else "run"
    with runs.lock(where):
        seen = _begin(store, p)  # epoch -> rows of its completed steps
        done = p.resume.step if p.resume is not None else 0
        last: dict[str, Any] = {
            "step": done - 1,
            "ready": False,
            "total": p.steps,
            "checkpoint": p.resume.state_path if p.resume is not None else None,
        }
        retries = service.Retries(report)

        def on_ready() -> None:
            last["ready"] = True

        def on_step(step: loop.Step) -> None:
            last["step"] = step.step
            runs.update(
                store,
                run_id,
                f"{event}-step" if p.smoke else "step",
                f"train {event} {run_id}: step {step.step + 1}/{step.total} "
                f"loss {step.loss:.4f}",
                lambda r: _add_step(r, step, p.smoke, seen),
            )
            if progress is not None:
                progress(step)

        def on_checkpoint(saved: loop.Saved) -> None:
            path = saved.sampler_path or saved.state_path
            last["checkpoint"] = path
            runs.update(
                store,
                run_id,
                f"{event}-checkpoint" if p.smoke else "checkpoint",
                f"train {event} {run_id}: checkpoint {saved.name} {path}",
                lambda r: _add_checkpoint(r, saved, p.smoke),
            )

        log_dir = where / "smoke" if p.smoke else where
        try:
            outcome = loop.train(
                p.cfg,
                p.dataset,
                log_dir,
                smoke=p.smoke,
                on_step=on_step,
                on_checkpoint=on_checkpoint,
                on_ready=on_ready,
                retries=retries,
                resume=p.resume,
            )
        except KeyboardInterrupt:
            _fail(store, run_id, p.smoke, last, "interrupted", retries.count)
            raise
        except TinkerServiceError as e:
            _fail(store, run_id, p.smoke, last, str(e), retries.count)
            raise TinkerServiceError(
                f"{event} of {run_id} failed at {_where(last)}: {e}"
            ) from None
        except MachineError as e:
            _fail(store, run_id, p.smoke, last, str(e), retries.count)
            raise
        except Exception as e:  # noqa: BLE001 - any failure must mark the run failed
            reason = service.describe(e)
            _fail(store, run_id, p.smoke, last, reason, retries.count)
            raise TinkerServiceError(
                f"{event} of {run_id} failed at {_where(last)}: {reason}"
            ) from None
        loss = outcome.final_loss
        shown = "-" if loss is None else f"{loss:.4f}"
        return runs.update(
            store,
            run_id,
            f"{event}-done" if p.smoke else "done",
            f"train {event} {run_id}: done, {len(outcome.steps)} steps, loss {shown}",
            lambda r: _finish(r, loss, p.smoke, retries.count),
        )


def _begin(store: Store, p: Plan) -> dict[int, set[str]]:
    """Commit the start of a run's attempt; the rows each epoch has trained.

    A resumed attempt keeps the steps and checkpoints up to its saved state
    and drops the rest (their updates were lost with the failed attempt);
    what the kept steps trained is counted again from the data, batch by
    batch in the run's order.
    """
    run_id = p.cfg.run_id
    if p.smoke:
        runs.update(
            store,
            run_id,
            "smoke-start",
            f"train smoke {run_id}: {p.steps} steps",
            _smoke_start,
        )
        return {}
    if p.resume is None:
        runs.update(
            store, run_id, "start", f"train start {run_id}: {p.steps} steps", _start
        )
        return {}
    point = p.resume
    replay: dict[str, Any] = {"trained": {"rows": [], "epochs": []}}
    seen: dict[int, set[str]] = {}
    for step in _replayed(p.dataset, point.step):
        add_trained(replay, step, seen)
    trained = replay["trained"]

    def resumed(record: dict[str, Any]) -> None:
        record.update(runs.process_stamp())
        record["status"] = "running"
        record["attempts"] = int(record.get("attempts") or 0) + 1
        record["started_at"] = rows.now()
        record["finished_at"] = None
        record["steps"] = [s for s in record["steps"] if s["step"] < point.step]
        record["checkpoints"] = [
            c for c in record["checkpoints"] if c["step"] <= point.step
        ]
        record["final_loss"] = None
        record["error"] = None
        record["trained"] = trained
        _open_attempt(record, point)

    runs.update(
        store,
        run_id,
        "resume",
        f"train resume {run_id}: steps {point.step + 1}-{p.steps} from "
        f"{point.state_path}",
        resumed,
    )
    return seen


def _replayed(dataset: datasets.ListDataset, steps: int) -> Iterator[loop.Step]:
    # The first ``steps`` steps of the run, as the loop took them.
    batches = len(dataset)
    for step in range(steps):
        epoch, index = divmod(step, batches)
        dataset.set_epoch(epoch)
        batch = dataset.get_batch(index)
        yield loop.Step(
            step=step,
            total=steps,
            epoch=epoch,
            batch=index,
            loss=0.0,
            learning_rate=0.0,
            sequences=len(batch),
            tokens=sum(d.model_input.length for d in batch),
            loss_tokens=sum(datasets.trained_tokens(d) for d in batch),
            seconds=0.0,
            rows=dataset.batch_rows(index),
            seed=dataset.epoch_seed,
        )


def _open_attempt(record: dict[str, Any], point: loop.Resume | None) -> None:
    # ``attempt_log``: one entry per attempt, where it started and how it ended.
    record.setdefault("attempt_log", []).append(
        {
            "attempt": record["attempts"],
            "started_at": record["started_at"],
            "from_step": point.step if point is not None else 0,
            "from_checkpoint": point.state_path if point is not None else None,
            "status": "running",
        }
    )


def _close_attempt(record: dict[str, Any], status: str) -> None:
    log = record.get("attempt_log") or []
    if log and log[-1].get("status") == "running":
        log[-1].update(
            status=status,
            finished_at=record.get("finished_at"),
            steps=len(record.get("steps") or []),
            error=record.get("error"),
        )


def _smoke_start(record: dict[str, Any]) -> None:
    record["smoke"] = {
        **runs.process_stamp(),
        "status": "running",
        "started_at": rows.now(),
        "steps": [],
        "checkpoint": None,
        "error": None,
        "trained": {"rows": [], "epochs": []},
    }


def _start(record: dict[str, Any]) -> None:
    record.update(runs.process_stamp())
    record["status"] = "running"
    record["attempts"] = int(record.get("attempts") or 0) + 1
    record["started_at"] = rows.now()
    record["finished_at"] = None
    record["steps"] = []
    record["checkpoints"] = []
    record["final_loss"] = None
    record["error"] = None
    record["trained"] = {"rows": [], "epochs": []}
    _open_attempt(record, None)


def _add_step(
    record: dict[str, Any], step: loop.Step, smoke: bool, seen: dict[int, set[str]]
) -> None:
    entry = {
        "step": step.step,
        "epoch": step.epoch + 1,
        "loss": round(step.loss, 6),
        "learning_rate": step.learning_rate,
        "sequences": step.sequences,
        "tokens": step.tokens,
        "trained_tokens": step.loss_tokens,
    }
    target = record["smoke"] if smoke else record
    target["steps"].append(entry)
    add_trained(target, step, seen)


def add_trained(
    target: dict[str, Any], step: loop.Step, seen: dict[int, set[str]]
) -> None:
    """Count a completed step in ``trained``: its rows, and its epoch's tally.

    ``trained.rows`` holds every row id whose tokens were in a completed
    optimizer step; ``trained.epochs`` the steps, distinct rows and trained
    tokens (weight above 0) of each epoch, with the epoch's shuffle seed. It
    is rewritten after every step, so a run that fails names exactly what it
    learned from.
    """
    trained = target.setdefault("trained", {"rows": [], "epochs": []})
    rows_seen = set(trained["rows"]) | set(step.rows)
    trained["rows"] = sorted(rows_seen)
    epochs = trained["epochs"]
    number = step.epoch + 1
    if not epochs or epochs[-1]["epoch"] != number:
        epochs.append(
            {"epoch": number, "seed": step.seed, "steps": 0, "rows": 0, "tokens": 0}
        )
    current = epochs[-1]
    current["steps"] += 1
    current["tokens"] += step.loss_tokens
    rows_of_epoch = seen.setdefault(number, set())
    rows_of_epoch.update(step.rows)
    current["rows"] = len(rows_of_epoch)


def _add_checkpoint(record: dict[str, Any], saved: loop.Saved, smoke: bool) -> None:
    if smoke:
        record["smoke"]["checkpoint"] = saved.sampler_path
        return
    record["checkpoints"].append({**saved.as_dict(), "at": rows.now()})


def _finish(
    record: dict[str, Any], loss: float | None, smoke: bool, retried: int
) -> None:
    final = None if loss is None else round(loss, 6)
    if smoke:
        record["smoke"].update(
            status="passed", finished_at=rows.now(), final_loss=final, retries=retried
        )
        return
    record["retries"] = retried
    record["status"] = "done"
    record["finished_at"] = rows.now()
    record["final_loss"] = final
    _close_attempt(record, "done")


def _where(last: dict[str, Any]) -> str:
    # Where it broke, 1-based: creating the training client, or a step.
    if not last["ready"]:
        return "start (creating the training client)"
    if int(last["step"]) + 1 >= int(last["total"]):
        return "the final checkpoint"
    return f"step {int(last['step']) + 2}"


def _fail(
    store: Store,
    run_id: str,
    smoke: bool,
    last: dict[str, Any],
    reason: str,
    retried: int,
) -> None:
    where = _where(last)
    status = "interrupted" if reason == "interrupted" else "failed"

    def mark(record: dict[str, Any]) -> None:
        target = record["smoke"] if smoke else record
        target.update(
            status=status,
            finished_at=rows.now(),
            retries=retried,
            last_checkpoint=last["checkpoint"],
        )
        if smoke:
            target["error"] = reason
        else:
            target["error"] = f"{where}: {reason}"
            _close_attempt(target, status)

    event = ("smoke-" if smoke else "") + status
    runs.update(
        store, run_id, event, f"train {event} {run_id} at {where}: {reason}", mark
    )
