"""``machine train validate``: will these rows train, and what will they cost?

Offline, with the base model's own renderer and tokenizer: the schema check,
then every row rendered into the sequences Tinker would train on. Blocking
problems (exit non-zero): schema errors, rows that do not render, empty
answers, tool calls the renderer drops, nothing to learn in a row, fewer
sequences than one batch. Warnings: rows longer than --max-length (they are
truncated), duplicate prompts.
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
from machine_git.rows import schemas
from machine_git.train import config
from machine_git.train import datasets
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
) -> Report:
    """Check and render every item; ``rows_are_conversations`` for export files."""
    seen = rendering.rendering(base_model, renderer)
    report = Report(
        source, kind, base_model, seen.renderer_name, max_length, batch_size
    )
    one = _Pass(report, seen, datasets.train_on_what(kind), rows_are_conversations)
    found: dict[str, list[str]] = {}
    for label, item in items:
        report.rows += 1
        for what in one.problems(label, item, dump):
            found.setdefault(what, []).append(label)
    for what, labels in found.items():
        report.problems.append(Problem(_is_blocking(what), what, labels))
    _whole_set_problems(report, one.prompts)
    report.problems.sort(key=lambda p: not p.blocking)  # blocking first, stable
    return report


@dataclass
class _Pass:
    """One pass of :func:`check`: renders each item, collects its problems."""

    report: Report
    seen: rendering.Rendering
    train_on: Any
    conversations: bool
    prompts: dict[str, list[str]] = field(default_factory=dict)

    def problems(
        self, label: str, item: Row | dict[str, Any], dump: IO[bytes] | None
    ) -> list[str]:
        """What is wrong with one item (its counts go to the report)."""
        convo, why = _conversation(item, self.conversations)
        if convo is None:
            return [why]
        messages, tools = convo
        self.prompts.setdefault(_prompt_key(messages), []).append(label)
        if _empty_answer(messages):
            return ["empty answer (an assistant message with no text or tool call)"]
        seen, max_length = self.seen, self.report.max_length
        try:
            conversation = datasets.cookbook_messages(messages)
            sequences = datasets.examples(
                conversation, seen.renderer, self.train_on, tools
            )
        except Exception as e:  # noqa: BLE001 - any renderer failure is this row's problem
            return [f"does not render ({type(e).__name__}: {_first_line(e)})"]
        if dump is not None:
            for number, (mi, w) in enumerate(sequences, start=1):
                dump.write(jsonio.line(dumped(label, number, mi, w, seen)))
        lengths = [mi.length for mi, _ in sequences]
        self.report.tokens.append(sum(lengths))
        self.report.sequences += len(sequences)
        self.report.trainable += 1 if sequences else 0
        found = []
        if any(n > max_length for n in lengths):
            found.append(f"longer than --max-length {max_length} (truncated)")
        if not any(_trained_within(mi.length, w, max_length) for mi, w in sequences):
            found.append("nothing to learn (no trained token within --max-length)")
        if _drops_tool_calls(conversation, seen, self.train_on, lengths, tools):
            found.append(f"tool calls dropped by the {seen.renderer_name} renderer")
        return found


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


def dumped(
    label: str, number: int, model_input: Any, weights: Any, seen: Any
) -> dict[str, Any]:
    """One rendered example as ``--dump`` writes it.

    ``tokens`` and ``weights`` are exactly what Tinker trains on (weights 0/1
    before the per-sequence mean); ``text`` is the decoded sequence with each
    trained span between ⟦ and ⟧.
    """
    ids = model_input.to_ints()
    marks = [1 if float(w) > 0 else 0 for w in weights]
    pieces: list[str] = []
    start = 0
    for i in range(1, len(ids) + 1):
        if i == len(ids) or marks[i] != marks[start]:
            text = seen.tokenizer.decode(ids[start:i])
            pieces.append(
                f"{TRAINED_OPEN}{text}{TRAINED_CLOSE}" if marks[start] else text
            )
            start = i
    return {
        "row": label,
        "example": number,
        "tokens": ids,
        "weights": marks,
        "text": "".join(pieces),
    }


def check_source(
    src: sources.Source,
    *,
    base_model: str,
    max_length: int,
    batch_size: int,
    renderer: str | None = None,
    dump: IO[bytes] | None = None,
    progress: Progress = QUIET,
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
    return not what.startswith("longer than")


def _conversation(
    item: Row | dict[str, Any], is_conversation: bool
) -> tuple[datasets.Conversation | None, str]:
    """What ``item`` (a row, or an exported line) renders; or why it cannot."""
    if is_conversation:
        shape = _conversation_problem(item)
        if shape:
            return None, f"not a conversation ({shape})"
        return datasets.conversation_of(cast("dict[str, Any]", item)), ""
    errors = schemas.row_problems(item)
    if errors:
        return None, f"schema: {errors[0]}"
    return datasets.row_conversation(cast("Row", item)), ""  # schema-checked


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


def _trained_within(length: int, weights: Any, max_length: int) -> bool:
    return bool(float(weights[: min(length, max_length)].sum()) > 0)


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
