"""Preference training (DPO) from bad rows rewritten with ``--as``.

A bad row whose answer was rewritten is a preference pair: the rewrite is
preferred over what the agent said. ``machine train dpo`` exports the pairs
(``machine export --format dpo``: tinker-cookbook's comparison lines) into a
run folder; here each line is read with the cookbook's own
``ComparisonBuilderFromJsonl.example_to_labeled_comparison`` and rendered,
as the cookbook's ``DPODatasetBuilderFromComparisons`` does, into two
sequences, chosen then rejected, each training the last assistant message
with token-sum loss (``reduction="none"``). The turn's tools lead both as the
model family's declaration. We do not call that builder itself: it passes
the lines through Arrow, which breaks tool calls (tinker.md §0.4).

A step is the cookbook's recipe (``preference/train_dpo.py``): the
reference model's log-probabilities of both sequences, from a sampling
client of the weights training started from, then ``forward_backward_custom``
with the cookbook's ``compute_dpo_loss``, then ``optim_step``.
Heavy: imports tinker-cookbook (torch). Import after ``stack.require()``.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any
from typing import cast

import chz
import tinker
import torch
from tinker_cookbook import renderers
from tinker_cookbook.preference.preference_datasets import ComparisonBuilderFromJsonl
from tinker_cookbook.preference.train_dpo import compute_dpo_loss
from tinker_cookbook.preference.types import LabeledComparison
from tinker_cookbook.renderers.base import ToolSpec
from tinker_cookbook.supervised.common import datum_from_model_input_weights
from tinker_cookbook.supervised.types import ChatDatasetBuilder
from tinker_cookbook.supervised.types import ChatDatasetBuilderCommonConfig
from tinker_cookbook.supervised.types import SupervisedDataset

from machine_git.core import jsonio
from machine_git.core.errors import TrainingError
from machine_git.train import config
from machine_git.train import datasets
from machine_git.train import rendering
from machine_git.train import runs
from machine_git.train import service

TRAIN_ON = renderers.TrainOnWhat.LAST_ASSISTANT_MESSAGE
Pair = tuple[datasets.Example, datasets.Example]


def labeled(line: dict[str, Any]) -> LabeledComparison | None:
    """A ``--format dpo`` line as the cookbook's comparison loader reads it."""
    return ComparisonBuilderFromJsonl(train_path="").example_to_labeled_comparison(line)


def conversations(
    line: dict[str, Any],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]] | None]:
    """(chosen conversation, rejected conversation, tools) of one pair line."""
    found = labeled(line)
    if found is None:
        raise ValueError("not a comparison (no 'comparison' and 'label')")
    comparison = found.comparison
    a, b = comparison.completion_A, comparison.completion_B
    chosen, rejected = (a, b) if found.label == "A" else (b, a)
    prompt = list(comparison.prompt_conversation)
    tools = datasets.conversation_of({"messages": [], **line}).tools
    return (
        cast(list[dict[str, Any]], [*prompt, *chosen]),
        cast(list[dict[str, Any]], [*prompt, *rejected]),
        tools,
    )


def pair_examples(line: dict[str, Any], renderer: renderers.Renderer) -> Pair:
    """The chosen and rejected sequences of one pair (tools declared first)."""
    chosen, rejected, tools = conversations(line)
    specs = cast(list[ToolSpec], tools) if tools else None

    def example(messages: list[dict[str, Any]]) -> datasets.Example:
        full = rendering.with_tools(
            renderer, datasets.cookbook_messages(messages), specs
        )
        return renderer.build_supervised_example(full, train_on_what=TRAIN_ON)

    return example(chosen), example(rejected)


def datum(example: datasets.Example, max_length: int | None) -> tinker.Datum:
    """A DPO datum: token-sum loss (no per-sequence mean), as the cookbook."""
    model_input, weights = example
    return datum_from_model_input_weights(
        model_input, weights, max_length, reduction="none"
    )


@chz.chz
class PairBuilder(ChatDatasetBuilder):
    """Reads a ``machine export --format dpo`` file (a DPO run's data.jsonl)."""

    file_path: str
    seed: int = 0

    def __call__(self) -> tuple[SupervisedDataset, SupervisedDataset | None]:
        cc = self.common_config
        seen = rendering.rendering(cc.model_name_for_tokenizer, cc.renderer_name)
        ids = runs.row_ids(Path(self.file_path)) or []
        datums: list[tinker.Datum] = []
        labels: list[str] = []
        lines = datasets.read_lines(Path(self.file_path))
        for pairs, (number, text) in enumerate(lines):
            try:
                chosen, rejected = pair_examples(jsonio.loads(text), seen.renderer)
            except (ValueError, KeyError, TypeError) as e:
                raise TrainingError(
                    f"{self.file_path}:{number}: cannot render: {e}"
                ) from None
            datums += [datum(chosen, cc.max_length), datum(rejected, cc.max_length)]
            labels.append(ids[pairs] if pairs < len(ids) else f"line {number}")
        if len(labels) < cc.batch_size:
            too_few = datasets.too_few(len(labels), cc.batch_size)
            raise TrainingError(too_few.replace(" row", " pair"))
        dataset = datasets.ListDataset(
            datums, cc.batch_size, labels, self.seed, group=2
        )
        return dataset, None


def validation_items(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """Both conversations of every pair, as ``train validate`` checks them:
    ``(file:line:chosen, {"messages", "tools"})`` then ``...:rejected``."""
    items: list[tuple[str, dict[str, Any]]] = []
    for number, text in datasets.read_lines(path):
        label = f"{path.name}:{number}"
        try:
            chosen, rejected, tools = conversations(jsonio.loads(text))
        except (ValueError, KeyError, TypeError) as e:
            raise TrainingError(f"{label}: not a preference pair ({e})") from None
        extra = {"tools": tools} if tools else {}
        items.append((f"{label}:chosen", {"messages": chosen, **extra}))
        items.append((f"{label}:rejected", {"messages": rejected, **extra}))
    return items


def build(cfg: config.RunConfig, folder: Path) -> datasets.ListDataset:
    """A DPO run's pairs, rendered offline; refuses fewer pairs than a batch."""
    path = config.check_export(cfg, folder)
    common = ChatDatasetBuilderCommonConfig(
        model_name_for_tokenizer=cfg.base_model,
        renderer_name=cfg.renderer,
        max_length=cfg.hyper.max_length,
        batch_size=cfg.hyper.batch_size,
        train_on_what=TRAIN_ON,
    )
    dataset, _ = PairBuilder(
        common_config=common, file_path=str(path), seed=cfg.hyper.seed
    )()
    assert isinstance(dataset, datasets.ListDataset)
    return dataset


# -- a training step -------------------------------------------------------------------


class DPO:
    """The DPO step of the training loop (machine_git/train/loop.py)."""

    def __init__(self, beta: float) -> None:
        self.beta = beta
        self.reference: Any = None

    def start(self, training: Any, retries: service.Retries | None) -> None:
        """The reference model: the weights training starts from, frozen."""
        self.reference = service.bounded(
            "saving the reference weights",
            lambda: training.save_weights_and_get_sampling_client().result(),
            tries=3,
            retries=retries,
        )

    def step(
        self, training: Any, batch: list[tinker.Datum], adam: tinker.AdamParams
    ) -> tuple[float, dict[str, float]]:
        """One optimizer step on a batch of (chosen, rejected) pairs."""
        reference = [
            torch.tensor(logprobs[1:])
            for logprobs in (
                self.reference.compute_logprobs(_full(d)).result() for d in batch
            )
        ]
        loss = functools.partial(_dpo_loss, reference=reference, beta=self.beta)
        backward = training.forward_backward_custom(batch, loss)
        optimize = training.optim_step(adam)
        result = backward.result()
        optimize.result()
        metrics = {k: float(v) for k, v in (result.metrics or {}).items()}
        return metrics.get("dpo_loss", float("nan")), metrics


def _full(d: tinker.Datum) -> tinker.ModelInput:
    # The whole sequence: the inputs and the last target (train_dpo.py).
    targets = d.loss_fn_inputs["target_tokens"].data
    return d.model_input.append_int(int(targets[-1])) if targets else d.model_input


def _dpo_loss(
    data: list[tinker.Datum],
    logprobs: list[torch.Tensor],
    *,
    reference: list[torch.Tensor],
    beta: float,
) -> tuple[torch.Tensor, dict[str, float]]:
    # Sequence log-probabilities over the trained tokens, chosen at even
    # indices and rejected at odd ones, then the cookbook's DPO loss.
    sums, ref_sums = [], []
    for d, lp, ref in zip(data, logprobs, reference, strict=True):
        weights = torch.tensor(d.loss_fn_inputs["weights"].data).float()
        sums.append(torch.dot(lp.float(), weights))
        ref_sums.append(torch.dot(ref.float(), weights))
    return compute_dpo_loss(
        chosen_logprobs=sums[0::2],
        rejected_logprobs=sums[1::2],
        chosen_ref_logprobs=ref_sums[0::2],
        rejected_ref_logprobs=ref_sums[1::2],
        dpo_beta=beta,
    )


def for_run(cfg: config.RunConfig, folder: Path) -> datasets.ListDataset:
    """A run's training data, rendered offline: DPO pairs, or the SFT export.

    The one place that chooses, above both builders (datasets.build for SFT
    knows nothing of preference pairs).
    """
    if cfg.method == "dpo":
        return build(cfg, folder)
    return datasets.build(cfg, folder)
