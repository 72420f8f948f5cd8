"""Rows to what Tinker trains on: token ids and per-token loss weights.

A row becomes chat messages exactly as ``machine export --format tinker``
writes them (``export.to_tinker``, which turns a trace into messages with
``trajectory_to_messages``), then the base model's renderer turns them into
supervised examples. We do not use the cookbook's FromConversationFileBuilder:
it breaks on tool calls read from JSON and silently yields zero batches for a
small file (tinker.md §0.4); :class:`ExportBuilder` reads our export instead.
Heavy: imports tinker-cookbook (torch). Import after ``stack.require()``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import chz
import tinker
import torch
from tinker_cookbook import renderers
from tinker_cookbook.supervised.common import datum_from_model_input_weights
from tinker_cookbook.supervised.types import ChatDatasetBuilder
from tinker_cookbook.supervised.types import ChatDatasetBuilderCommonConfig
from tinker_cookbook.supervised.types import SupervisedDataset

from machine_git import export
from machine_git import jsonio
from machine_git.errors import TrainingError
from machine_git.train import config
from machine_git.train import rendering

Example = tuple[tinker.ModelInput, torch.Tensor]

# Traces learn every assistant message of the turn (its tool calls too) with
# tool results in context at weight 0; an answer row learns its answer.
TRAIN_ON = {
    "traces": renderers.TrainOnWhat.ALL_ASSISTANT_MESSAGES,
    "train": renderers.TrainOnWhat.LAST_ASSISTANT_MESSAGE,
}


def train_on_what(kind: str) -> renderers.TrainOnWhat:
    """Which tokens of a ``kind`` row carry loss."""
    if kind not in TRAIN_ON:
        raise TrainingError(f"rows of kind {kind!r} are not trained on")
    return TRAIN_ON[kind]


def row_messages(row: dict[str, Any]) -> list[dict[str, Any]]:
    """A row's conversation in the tinker export's message shape."""
    messages: list[dict[str, Any]] = export.to_tinker(row)["messages"]
    return messages


def cookbook_messages(messages: Iterable[dict[str, Any]]) -> list[renderers.Message]:
    """Messages as the cookbook's renderers take them.

    JSON gives tool calls as dicts and may carry ``None`` fields; renderers
    need ``ToolCall`` objects and absent keys. Empty arguments mean "no
    arguments": the Qwen renderers parse them as JSON, so they become ``{}``.
    """
    out: list[renderers.Message] = []
    for message in messages:
        m = {k: v for k, v in message.items() if v is not None}
        calls = m.pop("tool_calls", None)
        if calls:
            m["tool_calls"] = [
                renderers.ToolCall.model_validate(_call(c)) for c in calls
            ]
        out.append(m)  # type: ignore[arg-type]  # a Message is a TypedDict
    return out


def _call(call: dict[str, Any]) -> dict[str, Any]:
    function = dict(call.get("function") or {})
    if not str(function.get("arguments") or "").strip():
        function["arguments"] = "{}"
    return {**call, "function": function}


def examples(
    messages: list[renderers.Message],
    renderer: renderers.Renderer,
    train_on: renderers.TrainOnWhat,
) -> list[Example]:
    """The supervised examples of one conversation (one or more sequences).

    The plural ``build_supervised_examples`` splits a trace into one sequence
    per assistant turn when the renderer cannot extend one (thinking
    renderers), so no turn trains on a prefix it never saw.
    """
    return list(renderer.build_supervised_examples(messages, train_on_what=train_on))


def datum(example: Example, max_length: int | None) -> tinker.Datum:
    """One training datum: inputs, next-token targets, mean-normalized weights."""
    model_input, weights = example
    return datum_from_model_input_weights(
        model_input, weights, max_length, reduction="mean"
    )


class ListDataset(SupervisedDataset):
    """Datums in export order, cut into whole batches.

    The order is the export's (rows sorted by id at the pinned commit) and is
    the same every epoch, so a run is reproducible from its dataset commit.
    """

    def __init__(self, datums: list[tinker.Datum], batch_size: int) -> None:
        self.datums = datums
        self.batch_size = batch_size

    def get_batch(self, index: int) -> list[tinker.Datum]:
        start = index * self.batch_size
        return self.datums[start : start + self.batch_size]

    def __len__(self) -> int:
        return len(self.datums) // self.batch_size

    def set_epoch(self, seed: int = 0) -> None:
        """No shuffling: the order is pinned by the dataset commit."""


@chz.chz
class ExportBuilder(ChatDatasetBuilder):
    """Reads a ``machine export --format tinker`` file (a run's data.jsonl)."""

    file_path: str

    def __call__(self) -> tuple[SupervisedDataset, SupervisedDataset | None]:
        cc = self.common_config
        seen = rendering.rendering(cc.model_name_for_tokenizer, cc.renderer_name)
        train_on = renderers.TrainOnWhat(
            cc.train_on_what or renderers.TrainOnWhat.ALL_ASSISTANT_MESSAGES
        )
        datums: list[tinker.Datum] = []
        rows = 0
        with open(self.file_path, "rb") as f:
            for number, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                rows += 1
                try:
                    conversation = cookbook_messages(jsonio.loads(line)["messages"])
                    for example in examples(conversation, seen.renderer, train_on):
                        datums.append(datum(example, cc.max_length))
                except (ValueError, KeyError, TypeError) as e:
                    raise TrainingError(
                        f"{self.file_path}:{number}: cannot render: {e}"
                    ) from None
        dataset = ListDataset(datums, cc.batch_size)
        if len(dataset) == 0:
            raise TrainingError(too_few(rows, len(datums), cc.batch_size))
        return dataset, None


def too_few(rows: int, sequences: int, batch_size: int) -> str:
    """Why a dataset gives zero steps, in one line."""
    return (
        f"{_count(sequences, 'sequence')} from {_count(rows, 'row')}: fewer than "
        f"one batch of {batch_size}, so 0 training steps (tag more rows or lower "
        "--batch-size)"
    )


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def builder(cfg: config.RunConfig, folder: Path) -> ExportBuilder:
    """The dataset builder of a run, over its checked export."""
    path = config.check_export(cfg, folder)
    common = ChatDatasetBuilderCommonConfig(
        model_name_for_tokenizer=cfg.base_model,
        renderer_name=cfg.renderer,
        max_length=cfg.hyper.max_length,
        batch_size=cfg.hyper.batch_size,
        train_on_what=renderers.TrainOnWhat(cfg.train_on_what),
    )
    return ExportBuilder(common_config=common, file_path=str(path))


def build(cfg: config.RunConfig, folder: Path) -> ListDataset:
    """A run's training data, rendered offline; refuses zero steps."""
    dataset, _ = builder(cfg, folder)()
    assert isinstance(dataset, ListDataset)
    return dataset
