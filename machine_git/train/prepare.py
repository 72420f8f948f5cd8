"""``machine train sft`` and ``machine train dpo``: a run prepared, nothing spent.

Both pin a dataset commit, refuse what ``train validate`` blocks, export the
data into a new run folder (tinker conversations for SFT, tinker-cookbook
comparisons for DPO), render it offline to count the steps, and commit the
run's record. ``machine train smoke`` and ``run`` then train either kind.
Heavy: imports the training stack. Import after ``stack.require()``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pygit2 import Commit

from machine_git.core.errors import TrainingError
from machine_git.history import revs
from machine_git.store.store import Store
from machine_git.train import config
from machine_git.train import datasets
from machine_git.train import preference
from machine_git.train import rendering
from machine_git.train import runs
from machine_git.train import sources
from machine_git.train import validate
from machine_git.train.config import Hyper

DPO_KIND = "rejected"  # bad rows; those rewritten with --as are the pairs


@dataclass(frozen=True)
class Options:
    """What ``train sft`` / ``train dpo`` was asked for."""

    revision: str | None
    kind: str
    base_model: str
    hyper: Hyper
    force: bool = False
    method: str = "sft"
    dpo_beta: float = config.DPO_BETA
    context: bool = True
    where: tuple[str, ...] = ()  # labels the rows must meet (tagging.labels.Where)
    images: bool = True  # False: --no-images, the [image] placeholders only


def run(store: Store, options: Options) -> dict[str, Any]:
    """Prepare the run ``options`` describe; returns its committed record."""
    commit = revs.resolve(store, options.revision)
    seen = rendering.rendering(options.base_model)
    if options.method == "sft":
        _refuse_what_validate_blocks(store, commit, options)
    return runs.prepare(
        store,
        commit=commit,
        revision=options.revision or "HEAD",
        kind=options.kind,
        base_model=options.base_model,
        renderer=seen.renderer_name,
        train_on_what=_train_on(options).value,
        hyper=options.hyper,
        force=options.force,
        count_sequences=_count,
        method=options.method,
        dpo_beta=options.dpo_beta,
        context=options.context,
        where=options.where,
        images=options.images,
    )


def _train_on(options: Options) -> Any:
    if options.method == "dpo":
        return preference.TRAIN_ON
    return datasets.train_on_what(options.kind)


def _refuse_what_validate_blocks(
    store: Store, commit: Commit, options: Options
) -> None:
    src = sources.of_store(store, commit, options.revision, options.kind)
    if options.images:
        validate.refuse_images(src.items, options.base_model)
    report = validate.check_source(
        src,
        base_model=options.base_model,
        max_length=options.hyper.max_length,
        batch_size=options.hyper.batch_size,
        with_context=options.context,
        with_images=options.images,
    )
    validate.refuse_blocking(report)


def _count(cfg: config.RunConfig, where: Path) -> int:
    # What one batch holds batch_size of, rendered from the exact export;
    # a DPO export is checked here (it exists only now) as validate would.
    if cfg.method == "dpo":
        validate.refuse_blocking(validate.check_export(cfg, where))
    dataset = preference.for_run(cfg, where)
    if dataset.units == 0:
        raise TrainingError("the dataset is empty: 0 training steps")
    return dataset.units
