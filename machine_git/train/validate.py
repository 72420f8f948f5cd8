"""``machine train validate``: will these rows train, and what will they cost?

Offline, with the base model's own renderer and tokenizer: the schema check,
then every row rendered into the datums Tinker would be sent, from the bytes
its run's export holds. Blocking problems (exit non-zero): schema errors,
rows that do not render, empty answers, tool calls the renderer drops, an
example with nothing to learn, an example ``--max-length`` cuts before its
end-of-message token (named with its row and number), fewer sequences than
one batch. Warnings: rows the export leaves out, duplicate prompts.
Heavy: imports tinker-cookbook (torch). Import after ``stack.require()``.
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Iterable
from collections.abc import Iterator
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import IO
from typing import TYPE_CHECKING
from typing import Any
from typing import cast

from machine_git.core import jsonio
from machine_git.core.errors import TrainingError
from machine_git.core.errors import UsageError
from machine_git.core.progress import QUIET
from machine_git.core.progress import Progress
from machine_git.core.progress import track
from machine_git.rows import images
from machine_git.rows import schemas
from machine_git.train import config
from machine_git.train import datasets
from machine_git.train import families
from machine_git.train import rendering
from machine_git.train import sources

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Row


@dataclass
class Problem:
    """One kind of problem and the rows that have it."""

    blocking: bool
    what: str
    ids: list[str] = field(default_factory=list)

    def line(self) -> str:
        level = "blocking" if self.blocking else "warning"
        shown = ", ".join(self.ids[:5]) + (", ..." if len(self.ids) > 5 else "")
        return f"{level}  {self.what}" + (f": {shown}" if shown else "")

    def to_json(self) -> dict[str, Any]:
        return {"blocking": self.blocking, "what": self.what, "ids": self.ids}


@dataclass
class Report:
    """What validation found."""

    source: str
    kind: str
    base_model: str
    renderer: str
    max_length: int
    batch_size: int
    rows: int = 0
    sequences: int = 0
    tokens: list[int] = field(default_factory=list)  # per row, all its sequences
    problems: list[Problem] = field(default_factory=list)
    held_out: int = 0
    trainable: int = 0  # rows that render into at least one sequence

    @property
    def steps(self) -> int:
        return -(-self.sequences // self.batch_size)  # the last batch may be short

    @property
    def blocking(self) -> list[Problem]:
        return [p for p in self.problems if p.blocking]

    def token_stats(self) -> dict[str, int]:
        if not self.tokens:
            return {"min": 0, "median": 0, "max": 0, "total": 0}
        return {
            "min": min(self.tokens),
            "median": int(statistics.median(self.tokens)),
            "max": max(self.tokens),
            "total": sum(self.tokens),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "kind": self.kind,
            "base_model": self.base_model,
            "renderer": self.renderer,
            "rows": self.rows,
            "held_out": self.held_out,
            "sequences": self.sequences,
            "batch_size": self.batch_size,
            "steps_per_epoch": self.steps,
            "max_length": self.max_length,
            "tokens": self.token_stats(),
            "problems": [p.to_json() for p in self.problems],
            "ok": not self.blocking,
        }


Item = sources.Item


def check(
    items: Iterable[Item],
    *,
    source: str,
    kind: str,
    base_model: str,
    max_length: int,
    batch_size: int,
    rows_are_conversations: bool = False,
    renderer: str | None = None,
    dump: IO[bytes] | None = None,
    with_context: bool = True,
    with_images: bool = True,
    read: images.Reader | None = None,
) -> Report:
    """Check and render every item; ``rows_are_conversations`` for export files.

    Rows are rendered from their export line (``with_context=False``: as
    ``--no-context`` exports them), their images read with ``read``;
    ``with_images=False`` (``--no-images``) leaves the ``[image]``
    placeholders instead. Any other model than a vision one blocks a row that
    holds some."""
    seen = rendering.rendering(base_model, renderer)
    report = Report(
        source, kind, base_model, seen.renderer_name, max_length, batch_size
    )
    one = _Pass(
        report,
        seen,
        datasets.train_on_what(kind),
        rows_are_conversations,
        with_context,
        with_images,
        read,
    )
    found: dict[str, list[str]] = {}
    for label, item in items:
        report.rows += 1
        for what in one.problems(label, item, dump):
            found.setdefault(what, []).append(label)
    for what, labels in found.items():
        report.problems.append(Problem(_is_blocking(what), what, labels))
    report.problems.extend(one.cut_problems())
    _whole_set_problems(report, one.prompts)
    report.problems.sort(key=lambda p: not p.blocking)  # blocking first, stable
    return report


@dataclass
class _Pass:
    """One pass of :func:`check`: renders each item, collects its problems.

    A row is rendered from the very bytes a run's export holds for it
    (``export.row_line``), through the function the run's dataset uses
    (``datasets.render_line``); ``--dump`` writes the datums it returns.
    """

    report: Report
    seen: rendering.Rendering
    train_on: Any
    conversations: bool
    with_context: bool = True
    with_images: bool = True
    read: images.Reader | None = None
    prompts: dict[str, list[str]] = field(default_factory=dict)
    cut: dict[str, list[tuple[str, int]]] = field(default_factory=dict)

    def problems(
        self, label: str, item: Row | dict[str, Any], dump: IO[bytes] | None
    ) -> list[str]:
        """What is wrong with one item (its counts go to the report)."""
        value, why = _line(
            item, self.conversations, self.with_context, self.with_images, self.read
        )
        if value is None:
            return [why]
        model = self.report.base_model
        if datasets.holds_images(value) and not families.takes_images(model):
            return [no_images(model)]
        messages, tools = datasets.conversation_of(value)
        self.prompts.setdefault(_prompt_key(messages), []).append(label)
        if _empty_answer(messages):
            return ["empty answer (an assistant message with no text or tool call)"]
        seen, max_length = self.seen, self.report.max_length
        try:
            rendered = datasets.render_line(
                value, seen.renderer, self.train_on, max_length
            )
        except Exception as e:  # noqa: BLE001 - any renderer failure is this row's problem
            return [f"does not render ({type(e).__name__}: {_first_line(e)})"]
        if dump is not None:
            for number, one in enumerate(rendered, start=1):
                dump.write(jsonio.line(dumped(label, number, one.datum, seen)))
        lengths = [one.example[0].length for one in rendered]
        self.report.tokens.append(sum(lengths))
        self.report.sequences += len(rendered)
        self.report.trainable += 1 if rendered else 0
        out = []
        if not any(float(one.example[1].sum()) > 0 for one in rendered):
            out.append("nothing to learn (no trained token)")
        elif self._cut(label, rendered, max_length):
            pass  # named per example, after every row is seen
        elif any(n > max_length for n in lengths):
            out.append(f"longer than --max-length {max_length} (truncated)")
        conversation = datasets.cookbook_messages(messages)
        if _drops_tool_calls(conversation, seen, self.train_on, lengths, tools):
            out.append(f"tool calls dropped by the {seen.renderer_name} renderer")
        return out

    def _cut(
        self, label: str, rendered: list[datasets.Rendered], max_length: int
    ) -> bool:
        """Note each example ``--max-length`` cuts before its end token."""
        found = False
        for number, one in enumerate(rendered, start=1):
            weights = one.example[1]
            trained = [i for i, w in enumerate(weights.tolist()) if w > 0]
            if not trained or trained[-1] < max_length:
                continue  # its last trained token (the end token) is kept
            reason = "nothing" if trained[0] >= max_length else "end"
            self.cut.setdefault(reason, []).append(
                (f"{label} example {number}", trained[-1] + 1)
            )
            found = True
        return found

    def cut_problems(self) -> list[Problem]:
        """The examples --max-length cuts, one blocking problem per reason."""
        what = {
            "nothing": "nothing to learn: --max-length {n} cuts away every trained "
            "token",
            "end": "cut before its end-of-message token by --max-length {n}",
        }
        out = []
        for reason in ("nothing", "end"):
            examples = self.cut.get(reason)
            if not examples:
                continue
            needed = max(length for _, length in examples)
            text = what[reason].format(n=self.report.max_length)
            out.append(
                Problem(
                    True,
                    f"{text} (raise --max-length to at least {needed}, or drop "
                    "the row)",
                    [label for label, _ in examples],
                )
            )
        return out


def _whole_set_problems(report: Report, prompts: dict[str, list[str]]) -> None:
    """Problems of the rows together: duplicate prompts, too few for a batch."""
    duplicates = [labels for labels in prompts.values() if len(labels) > 1]
    if duplicates:
        ids = [" = ".join(group) for group in duplicates]
        report.problems.append(
            Problem(False, f"{len(duplicates)} duplicate prompts", ids)
        )
    if report.rows and report.trainable < report.batch_size:
        report.problems.append(
            Problem(True, datasets.too_few(report.trainable, report.batch_size))
        )
    if report.rows == 0:
        report.problems.append(Problem(True, f"no {report.kind} rows to train on"))


TRAINED_OPEN, TRAINED_CLOSE = "\u27e6", "\u27e7"  # ⟦ trained text ⟧


def dumped(label: str, number: int, datum: Any, seen: Any) -> dict[str, Any]:
    """One datum as ``--dump`` writes it: exactly what Tinker is sent.

    ``tokens`` is the sequence (the datum's inputs and its last target, so
    cut to ``--max-length``), ``weights`` 1 where the token carries loss
    (before the per-sequence mean; the first token is never a target);
    ``text`` the decoded sequence with each trained span between ⟦ and ⟧.
    A sequence with images (a vision model) also has ``chunks``, the
    datum's chunks in order: ``{"type": "text", "tokens": n}`` or ``{"type":
    "image", "tokens": n, "format", "bytes", "sha256"}`` with the token count
    the renderer computed (``expected_tokens``); in ``tokens`` each position
    of an image is ``null``, and ``text`` shows it as ``⟨image n tokens⟩``.
    """
    ids, chunks = _positions(datum.model_input.chunks)
    targets = [int(t) for t in datum.loss_fn_inputs["target_tokens"].data]
    ids = ids + targets[-1:]
    sent = datum.loss_fn_inputs["weights"].data
    marks = [0] + [1 if float(w) > 0 else 0 for w in sent]
    pieces: list[str] = []
    start = 0
    for i in range(1, len(ids) + 1):
        same = i < len(ids) and marks[i] == marks[start]
        if same and (ids[i] is None) == (ids[start] is None):
            continue  # the span goes on: same weight, text (or image) still
        if ids[start] is None:
            pieces.append(f"\u27e8image {i - start} tokens\u27e9")
        else:
            text = seen.tokenizer.decode(ids[start:i])
            pieces.append(
                f"{TRAINED_OPEN}{text}{TRAINED_CLOSE}" if marks[start] else text
            )
        start = i
    out: dict[str, Any] = {
        "row": label,
        "example": number,
        "tokens": ids,
        "weights": marks,
        "text": "".join(pieces),
    }
    if any(chunk["type"] == "image" for chunk in chunks):
        out["chunks"] = chunks
    return out


def _positions(chunks: Iterable[Any]) -> tuple[list[Any], list[dict[str, Any]]]:
    """Token ids position by position (None where an image stands) and what
    each chunk is."""
    import hashlib

    ids: list[Any] = []
    shown: list[dict[str, Any]] = []
    for chunk in chunks:
        if chunk.type == "encoded_text":
            ids.extend(int(t) for t in chunk.tokens)
            shown.append({"type": "text", "tokens": len(chunk.tokens)})
            continue
        ids.extend([None] * chunk.length)
        shown.append(
            {
                "type": "image",
                "tokens": chunk.length,
                "format": chunk.format,
                "bytes": len(chunk.data),
                "sha256": hashlib.sha256(chunk.data).hexdigest(),
            }
        )
    return ids, shown


def check_source(
    src: sources.Source,
    *,
    base_model: str,
    max_length: int,
    batch_size: int,
    renderer: str | None = None,
    dump: IO[bytes] | None = None,
    progress: Progress = QUIET,
    with_context: bool = True,
    with_images: bool = True,
) -> Report:
    """Check what ``src`` holds; rows that share a session or a prompt and
    answer with the eval set in force are blocking (they would train on it).
    ``progress`` counts the rows as they are rendered."""
    report = check(
        track(src.items, progress, "rendering rows", len(src.items)),
        source=src.label,
        kind=src.kind,
        base_model=base_model,
        max_length=max_length,
        batch_size=batch_size,
        rows_are_conversations=src.conversations,
        renderer=renderer,
        dump=dump,
        with_context=with_context,
        with_images=with_images,
        read=src.read,
    )
    report.held_out = src.held_out
    if src.overlap:
        what = (
            "a session or the same prompt and answer as a row of eval set "
            f"{src.eval_id} (drawn before content was held out: draw it again "
            "with 'machine train eval init --force')"
        )
        report.problems.insert(0, Problem(True, f"shares {what}", list(src.overlap)))
    return report


def check_export(cfg: config.RunConfig, folder: Path) -> Report:
    """The checks of ``train validate`` on a run's exact export.

    A DPO run's pairs are checked as two conversations each (chosen and
    rejected, their last answer trained); a batch is ``batch_size`` pairs.
    """
    path = config.check_export(cfg, folder)
    options: dict[str, Any] = {
        "source": str(path),
        "base_model": cfg.base_model,
        "max_length": cfg.hyper.max_length,
        "rows_are_conversations": True,
        "renderer": cfg.renderer,
    }
    if cfg.method != "dpo":
        items = [
            (f"{cfg.data_file}:{n}", jsonio.loads(line))
            for n, line in datasets.read_lines(path)
        ]
        return check(items, kind=cfg.kind, batch_size=cfg.hyper.batch_size, **options)
    from machine_git.train import preference

    items = preference.validation_items(path)
    report = check(items, kind="train", batch_size=1, **options)
    pairs = len(items) // 2
    if pairs < cfg.hyper.batch_size:
        too_few = datasets.too_few(pairs, cfg.hyper.batch_size)
        report.problems.insert(0, Problem(True, too_few.replace(" row", " pair")))
    return report


@contextlib.contextmanager
def dump_file(dump: Path | None) -> Iterator[IO[bytes] | None]:
    """The ``--dump`` file opened for writing (None without one)."""
    if dump is None:
        yield None
        return
    from machine_git.core import paths

    target = paths.check_out_path(str(dump))
    try:
        out = open(target, "wb")  # noqa: SIM115 - closed below
    except OSError as e:
        raise UsageError(f"cannot write {dump}: {e.strerror or e}") from None
    with out:
        yield out


def refuse_blocking(report: Report) -> None:
    """Stop before anything is spent if validation found a blocking problem.

    ``train sft``, ``smoke`` and ``run`` call this with the same checks as
    ``train validate``; the error names the first problem and how many more.
    """
    blocking = report.blocking
    if not blocking:
        return
    more = f" (and {len(blocking) - 1} more)" if len(blocking) > 1 else ""
    raise TrainingError(
        f"refused, nothing was spent: {blocking[0].line().removeprefix('blocking  ')}"
        f"{more}; see 'machine train validate'"
    )


def _is_blocking(what: str) -> bool:
    return not (what.startswith("longer than") or what == LEFT_OUT)


def _line(
    item: Row | dict[str, Any],
    is_conversation: bool,
    with_context: bool,
    with_images: bool = True,
    read: images.Reader | None = None,
) -> tuple[dict[str, Any] | None, str]:
    """The exported line ``item`` renders from (a row's: the bytes its run
    export holds, read back), or None and why it cannot."""
    if is_conversation:
        shape = _conversation_problem(item)
        if shape:
            return None, f"not a conversation ({shape})"
        value = cast("dict[str, Any]", item)
        return (value if with_images else datasets.without_images(value)), ""
    errors = schemas.row_problems(item)
    if errors:
        return None, f"schema: {errors[0]}"
    line = datasets.row_line(  # schema-checked
        cast("Row", item), with_context, with_images, read
    )
    if line is None:
        return None, LEFT_OUT
    return cast("dict[str, Any]", jsonio.loads(line)), ""


LEFT_OUT = "left out of the export (no assistant answer)"


def no_images(base_model: str) -> str:
    """Why a row with images is blocked for a model that takes none."""
    return (
        "holds images, which machine renders only for Qwen3-VL Instruct, not "
        f"{base_model} (--no-images trains on the [image] placeholder instead)"
    )


def refuse_images(items: Iterable[Item], base_model: str, shown: int = 3) -> None:
    """Refuse rows with images for a model that takes none, in one line that
    names them (a few, then how many more)."""
    if families.takes_images(base_model):
        return
    found = datasets.image_rows(items)
    if not found:
        return
    names = ", ".join(found[:shown])
    more = f" and {len(found) - shown} more" if len(found) > shown else ""
    rows = "row holds" if len(found) == 1 else "rows hold"
    raise TrainingError(
        f"{base_model}: machine renders images only for Qwen3-VL Instruct, and "
        f"{len(found)} {rows} them: {names}{more} (--no-images trains on the "
        "[image] placeholder instead)"
    )


def _conversation_problem(item: Row | dict[str, Any]) -> str | None:
    messages = item.get("messages")
    if not isinstance(messages, list) or not messages:
        return "no messages list"
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            return "a message without a role"
    return None


def _prompt_key(messages: list[dict[str, Any]]) -> str:
    last = max(
        (i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=0
    )
    return jsonio.compact(messages[:last])


def _empty_answer(messages: list[dict[str, Any]]) -> bool:
    return any(
        m.get("role") == "assistant"
        and not m.get("tool_calls")
        and not str(m.get("content") or "").strip()
        for m in messages
    )


def _drops_tool_calls(
    conversation: list[Any],
    seen: rendering.Rendering,
    train_on: Any,
    lengths: list[int],
    tools: list[dict[str, Any]] | None,
) -> bool:
    # A renderer that ignores tool calls renders the conversation to the same
    # tokens with and without them (role_colon does, tinker.md §0.5).
    if not any(m.get("tool_calls") for m in conversation):
        return False
    bare = [{k: v for k, v in m.items() if k != "tool_calls"} for m in conversation]
    plain = datasets.examples(bare, seen.renderer, train_on, tools)  # type: ignore[arg-type]
    return sum(mi.length for mi, _ in plain) == sum(lengths)


def _first_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text[:200]
