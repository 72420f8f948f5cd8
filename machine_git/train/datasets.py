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

import random
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import NamedTuple
from typing import cast

import chz
import tinker
import torch
from tinker_cookbook import renderers
from tinker_cookbook.renderers.base import ToolSpec
from tinker_cookbook.supervised.common import datum_from_model_input_weights
from tinker_cookbook.supervised.types import ChatDatasetBuilder
from tinker_cookbook.supervised.types import ChatDatasetBuilderCommonConfig
from tinker_cookbook.supervised.types import SupervisedDataset

from machine_git.core import inputs
from machine_git.core import jsonio
from machine_git.core.errors import TrainingError
from machine_git.export import export
from machine_git.rows import images
from machine_git.train import config
from machine_git.train import rendering
from machine_git.train import runs

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Row

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


class Conversation(NamedTuple):
    """What one example renders: the messages, and the tools offered (or None)."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None


def conversation_of(line: dict[str, Any]) -> Conversation:
    """The conversation of an exported line, in either chat format.

    ``tools`` are the cookbook's ``ToolSpec`` dicts (the tinker format) or
    OpenAI functions (``{"type": "function", "function": ...}``, the openai
    format); both give ToolSpecs here.
    """
    tools = line.get("tools")
    specs = None
    if isinstance(tools, list) and tools:
        specs = [
            dict(t["function"])
            if isinstance(t, dict) and isinstance(t.get("function"), dict)
            else dict(t)
            for t in tools
        ]
    return Conversation(list(line["messages"]), specs)


def row_line(
    row: Row,
    with_context: bool = True,
    with_images: bool = True,
    read: images.Reader | None = None,
) -> bytes | None:
    """The line a run's export holds for ``row`` (None: the export skips it).

    Its images are read with ``read`` (the store at the run's commit) and
    carried as the cookbook's image parts; ``with_images=False``
    (``--no-images``) leaves the ``[image]`` placeholders instead.
    """
    if with_images and read is not None and images.has_images(row):
        row = images.inline(row, read)
    return export.row_line(
        row, "tinker", with_context=with_context, with_images=with_images
    )


def image_rows(items: Iterable[tuple[str, Any]]) -> list[str]:
    """The labels of the items (rows or exported lines) that hold images."""
    return [label for label, item in items if holds_images(item)]


def holds_images(item: Any) -> bool:
    """True if a row, or an exported line, carries an image."""
    if not isinstance(item, dict):
        return False
    if images.has_images(item):
        return True
    for message in item.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(
            isinstance(p, dict) and p.get("type") in ("image", "image_url")
            for p in content
        ):
            return True
    return False


def without_images(value: dict[str, Any]) -> dict[str, Any]:
    """An exported line with each image part as the ``[image]`` placeholder
    (``--no-images`` on a file of conversations)."""
    messages = []
    for message in value.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            text = "".join(
                images.PLACEHOLDER
                if isinstance(p, dict) and p.get("type") in ("image", "image_url")
                else str(p.get("text") or "")
                if isinstance(p, dict)
                else ""
                for p in content
            )
            message = {**message, "content": text}
        messages.append(message)
    return {**value, "messages": messages}


def row_conversation(row: Row, with_context: bool = True) -> Conversation:
    """A row's conversation read back from its exported line (context inline)."""
    line = row_line(row, with_context)
    if line is None:
        raise TrainingError("not exported: no assistant answer")
    return conversation_of(jsonio.loads(line))


def row_messages(row: Row) -> list[dict[str, Any]]:
    """A row's conversation in the tinker export's message shape."""
    return row_conversation(row).messages


def cookbook_messages(messages: Iterable[dict[str, Any]]) -> list[renderers.Message]:
    """Messages as the cookbook's renderers take them.

    JSON gives tool calls as dicts and may carry ``None`` fields; renderers
    need ``ToolCall`` objects, absent keys, and string content (the openai
    format writes ``null`` for a message that only calls tools). Empty
    arguments mean "no arguments": the Qwen renderers parse them as JSON,
    so they become ``{}``.
    """
    out: list[renderers.Message] = []
    for message in messages:
        m = {k: v for k, v in message.items() if v is not None}
        m.setdefault("content", "")
        if isinstance(m["content"], list):
            m["content"] = [_part(p) for p in m["content"]]
        calls = m.pop("tool_calls", None)
        if calls:
            m["tool_calls"] = [
                renderers.ToolCall.model_validate(_call(c)) for c in calls
            ]
        out.append(m)  # type: ignore[arg-type]  # a Message is a TypedDict
    return out


def _part(part: Any) -> Any:
    """A content part as the cookbook's renderers take it: an image part's
    data URI opened here as a PIL image, so the renderer never opens a URL
    (``image_to_chunk`` would fetch one with urllib)."""
    if not isinstance(part, dict) or part.get("type") not in ("image", "image_url"):
        return part
    url = part.get("image")
    if part.get("type") == "image_url":
        url = (part.get("image_url") or {}).get("url")
    return {"type": "image", "image": picture(url)}


def picture(url: Any) -> Any:
    """The PIL image of a ``data:image/png|jpeg;base64,`` URI; ValueError for
    anything else (a URL or a path is never opened)."""
    import base64
    import binascii
    import io

    from PIL import Image

    head, _, data = str(url).partition(",")
    if head not in ("data:image/png;base64", "data:image/jpeg;base64"):
        shown = str(url)[:40]
        raise ValueError(f"an image part is not a PNG or JPEG data URI ({shown!r})")
    try:
        raw = base64.b64decode(data, validate=True)
        with Image.open(io.BytesIO(raw)) as opened:
            opened.load()
            return opened.copy()
    except (binascii.Error, OSError, SyntaxError, Image.DecompressionBombError) as e:
        # (a bomb: more pixels than Pillow opens, whatever its size in bytes)
        raise ValueError(f"an image part does not decode: {e}") from None


def _call(call: dict[str, Any]) -> dict[str, Any]:
    function = dict(call.get("function") or {})
    if not str(function.get("arguments") or "").strip():
        function["arguments"] = "{}"
    return {**call, "function": function}


def examples(
    messages: list[renderers.Message],
    renderer: renderers.Renderer,
    train_on: renderers.TrainOnWhat,
    tools: list[dict[str, Any]] | None = None,
) -> list[Example]:
    """The supervised examples of one conversation (one or more sequences).

    ``tools`` lead the conversation as the model family's tool declaration
    (a system message, weight 0). The plural ``build_supervised_examples``
    splits a trace into one sequence per assistant turn when the renderer
    cannot extend one (thinking renderers), so no turn trains on a prefix it
    never saw.
    """
    specs = cast(list[ToolSpec], tools) if tools else None
    full = rendering.with_tools(renderer, messages, specs)
    return list(renderer.build_supervised_examples(full, train_on_what=train_on))


class Rendered(NamedTuple):
    """One example of a line: as rendered, and the datum Tinker is sent."""

    example: Example  # the whole sequence, before --max-length
    datum: tinker.Datum


def render_line(
    value: dict[str, Any],
    renderer: renderers.Renderer,
    train_on: renderers.TrainOnWhat,
    max_length: int | None,
) -> list[Rendered]:
    """The examples and datums of one exported line (parsed JSON).

    The one path from data to datums: a run's dataset, ``train validate``
    and its ``--dump`` all call this on the bytes of the same export line.
    """
    found = conversation_of(value)
    conversation = cookbook_messages(found.messages)
    return [
        Rendered(example, datum(example, max_length))
        for example in examples(conversation, renderer, train_on, found.tools)
    ]


def datum(example: Example, max_length: int | None) -> tinker.Datum:
    """One training datum: inputs, next-token targets, mean-normalized weights."""
    model_input, weights = example
    return datum_from_model_input_weights(
        model_input, weights, max_length, reduction="mean"
    )


def epoch_seed(seed: int, epoch: int) -> int:
    """The shuffle seed of ``epoch`` (0-based) of a run seeded ``seed``."""
    return seed * 1000 + epoch


def trained_tokens(d: tinker.Datum) -> int:
    """Tokens of a datum that carry loss (weight above 0)."""
    return sum(1 for w in d.loss_fn_inputs["weights"].data if w > 0)


class ListDataset(SupervisedDataset):
    """Datums cut into batches, shuffled every epoch, the last batch partial.

    Every unit (a sequence; for DPO a pair, ``group=2`` consecutive datums,
    chosen then rejected) is in exactly one batch of every epoch: the order
    is a permutation drawn from the epoch's seed (:func:`epoch_seed`,
    recorded in the run), and a last batch smaller than ``batch_size`` is
    trained too. ``rows[i]`` names the row unit ``i`` came from.
    """

    def __init__(
        self,
        datums: list[tinker.Datum],
        batch_size: int,
        rows: list[str] | None = None,
        seed: int = 0,
        group: int = 1,
    ) -> None:
        self.datums = datums
        self.batch_size = batch_size
        self.group = group
        self.units = len(datums) // group
        self.rows = rows if rows is not None else [""] * self.units
        self.seed = seed
        self.epoch_seed = epoch_seed(seed, 0)
        self.order = list(range(self.units))
        self.set_epoch(0)

    def set_epoch(self, seed: int = 0) -> None:
        """Shuffle for epoch ``seed`` (0-based), from the run's seed."""
        self.epoch_seed = epoch_seed(self.seed, seed)
        self.order = list(range(self.units))
        random.Random(self.epoch_seed).shuffle(self.order)

    def _indices(self, index: int) -> list[int]:
        start = index * self.batch_size
        return self.order[start : start + self.batch_size]

    def get_batch(self, index: int) -> list[tinker.Datum]:
        g = self.group
        return [self.datums[u * g + k] for u in self._indices(index) for k in range(g)]

    def batch_rows(self, index: int) -> list[str]:
        """The row ids in batch ``index`` of the current epoch."""
        return [self.rows[i] for i in self._indices(index)]

    def __len__(self) -> int:
        return -(-self.units // self.batch_size)  # the last batch may be short

    @property
    def row_count(self) -> int:
        return len(set(self.rows))


@chz.chz
class ExportBuilder(ChatDatasetBuilder):
    """Reads a ``machine export --format tinker`` file (a run's data.jsonl)."""

    file_path: str
    seed: int = 0

    def __call__(self) -> tuple[SupervisedDataset, SupervisedDataset | None]:
        cc = self.common_config
        seen = rendering.rendering(cc.model_name_for_tokenizer, cc.renderer_name)
        train_on = renderers.TrainOnWhat(
            cc.train_on_what or renderers.TrainOnWhat.ALL_ASSISTANT_MESSAGES
        )
        datums: list[tinker.Datum] = []
        labels: list[str] = []
        rows = 0
        ids = runs.row_ids(Path(self.file_path))
        for number, line in read_lines(Path(self.file_path)):
            label = ids[rows] if ids and rows < len(ids) else f"line {number}"
            rows += 1
            try:
                for one in render_line(
                    jsonio.loads(line), seen.renderer, train_on, cc.max_length
                ):
                    datums.append(one.datum)
                    labels.append(label)
            except (ValueError, KeyError, TypeError) as e:
                raise TrainingError(
                    f"{self.file_path}:{number}: cannot render: {e}"
                ) from None
        if rows < cc.batch_size:
            raise TrainingError(too_few(rows, cc.batch_size))
        return ListDataset(datums, cc.batch_size, labels, self.seed), None


def read_lines(path: Path) -> list[tuple[int, bytes]]:
    """The numbered lines of a run's export (inputs.numbered_lines), or one
    line saying why it cannot be read."""
    try:
        data = inputs.read(path, inputs.JSONL_LIMIT)
    except inputs.Unreadable as e:
        raise TrainingError(f"cannot read {path}: {e}") from None
    return list(inputs.numbered_lines(data))


def too_few(rows: int, batch_size: int) -> str:
    """Why a dataset is refused: fewer rows than one batch, in one line."""
    return (
        f"{_count(rows, 'row')} to train: fewer than one batch of {batch_size} "
        "(tag more rows or lower --batch-size)"
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
    return ExportBuilder(common_config=common, file_path=str(path), seed=cfg.hyper.seed)


def build(cfg: config.RunConfig, folder: Path) -> ListDataset:
    """An SFT run's training data, rendered offline from its export.

    DPO runs read pairs (preference.build; preference.for_run picks).
    """
    assert cfg.method != "dpo", "a DPO run's data is preference.build's"
    dataset, _ = builder(cfg, folder)()
    assert isinstance(dataset, ListDataset)
    return dataset
