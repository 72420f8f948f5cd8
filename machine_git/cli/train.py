"""``machine train`` (validate, sft, smoke, run, eval) and ``machine runs``.

The training stack (tinker, tinker-cookbook, torch) is optional and heavy:
nothing here imports it at module level, so ``machine --help`` and every other
command start without it; each subcommand imports it inside, after a check
that says in one line how to install it.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

import click

from machine_git.cli.common import emit_json
from machine_git.cli.common import json_option
from machine_git.cli.common import open_store
from machine_git.cli.common import project_option
from machine_git.errors import TrainingError
from machine_git.errors import UsageError
from machine_git.train.config import DEFAULT_BASE_MODEL
from machine_git.train.config import Hyper

TRAIN_KINDS = ("train", "traces")
_DEFAULTS = Hyper()

_yes = click.option(
    "--yes", is_flag=True, help="Confirm: this calls the Tinker API (billed)."
)
_base_model = click.option(
    "--base-model",
    default=DEFAULT_BASE_MODEL,
    show_default=True,
    help="Base model (its renderer and tokenizer are used offline).",
)


def _confirm(yes: bool, what: str) -> None:
    if not yes:
        raise UsageError(f"{what} calls the Tinker API, which is billed: add --yes")


def _stack() -> None:
    from machine_git.train import stack

    stack.require()


@click.group()
def train() -> None:
    """Fine-tune on Tinker from a pinned version of the dataset.

    Needs the training extra: pip install 'machine-git[train]'.

    \b
    Example usage:
        machine train validate --kind traces
        machine train sft --kind traces
        machine train smoke --yes
        machine train run --yes
    """


# -- validate ------------------------------------------------------------------


@train.command()
@click.argument("target", required=False)
@_base_model
@click.option("--kind", type=click.Choice(TRAIN_KINDS), help="Rows of this kind.")
@click.option(
    "--max-length",
    type=click.IntRange(min=1),
    default=_DEFAULTS.max_length,
    show_default=True,
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=_DEFAULTS.batch_size,
    show_default=True,
)
@click.option(
    "--dump",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write each rendered example (tokens, weights, marked text) as JSONL.",
)
@project_option
@json_option
def validate(
    target: str | None,
    base_model: str,
    kind: str | None,
    max_length: int,
    batch_size: int,
    dump: Path | None,
    project: Path | None,
    as_json: bool,
) -> None:
    """Check that rows will train: schema, then each rendered with the base model.

    TARGET is a revision (default: the newest) or a JSONL file of rows or of
    exported conversations. Offline. Exits 1 on a blocking problem.

    \b
    Example usage:
        machine train validate --kind traces
        machine train validate v1 --base-model Qwen/Qwen3-8B
        machine train validate data.jsonl
    """
    _stack()
    from machine_git.train import validate as checking

    if target is not None and Path(target).is_file():
        items, chosen, conversations, held, label = _file_items(Path(target), kind)
    else:
        items, chosen, conversations, held, label = _store_items(project, target, kind)
    from machine_git import paths

    with contextlib.ExitStack() as stack:
        out = None
        if dump is not None:
            target_path = paths.check_out_path(str(dump))
            try:
                out = stack.enter_context(open(target_path, "wb"))
            except OSError as e:
                raise UsageError(f"cannot write {dump}: {e.strerror or e}") from None
        from machine_git.cli.progress import bars
        from machine_git.cli.progress import track

        shown = stack.enter_context(bars(as_json))
        report = checking.check(
            track(items, shown, "rendering rows", len(items)),
            source=label,
            kind=chosen,
            base_model=base_model,
            max_length=max_length,
            batch_size=batch_size,
            rows_are_conversations=conversations,
            dump=out,
        )
    report.held_out = held
    if as_json:
        emit_json(report.to_json())
    else:
        _print_report(report)
    if report.blocking:
        n = len(report.blocking)
        raise TrainingError(f"{n} blocking problem{'' if n == 1 else 's'}")


def _store_items(
    project: Path | None, revision: str | None, kind: str | None
) -> tuple[list[tuple[str, dict[str, Any]]], str, bool, int, str]:
    from machine_git import revs
    from machine_git.train import selection

    store = open_store(project)
    commit = revs.resolve(store, revision)
    chosen = kind or "train"
    picked = selection.select(store, commit, chosen)
    label = f"{revision or 'HEAD'} ({str(commit.id)[:12]})"
    return picked.items, chosen, False, picked.held_out, label


def _file_items(
    path: Path, kind: str | None
) -> tuple[list[tuple[str, dict[str, Any]]], str, bool, int, str]:
    from machine_git import jsonio

    items: list[tuple[str, dict[str, Any]]] = []
    conversations = False
    try:
        lines = path.read_bytes().split(b"\n")
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from None
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            value = jsonio.loads(text)
        except jsonio.JSONDecodeError as e:
            raise UsageError(f"{path}:{number}: not valid JSON ({e})") from None
        if not isinstance(value, dict):
            raise UsageError(f"{path}:{number}: not a JSON object")
        if "kind" not in value and "messages" in value:
            conversations = True
        items.append((f"{path.name}:{number}", value))
    if conversations:
        return items, kind or "train", True, 0, str(path)
    kinds = [str(v.get("kind")) for _, v in items if v.get("kind") in TRAIN_KINDS]
    chosen = kind or (kinds[0] if kinds else "train")
    wanted = [(label, v) for label, v in items if v.get("kind") == chosen]
    return wanted, chosen, False, 0, str(path)


def _print_report(report: Any) -> None:
    held = f", {report.held_out} held out for eval" if report.held_out else ""
    click.echo(f"validate {report.source}: {report.rows} {report.kind} rows{held}")
    from machine_git.train import datasets

    train_on = datasets.train_on_what(report.kind).value
    click.echo(
        f"model    {report.base_model} (renderer {report.renderer}, loss on {train_on})"
    )
    t = report.token_stats()
    click.echo(
        f"tokens   min {t['min']}, median {t['median']}, max {t['max']}, "
        f"total {t['total']} (per row)"
    )
    click.echo(
        f"batches  {report.sequences} sequences / batch size {report.batch_size} = "
        f"{report.steps} step{'' if report.steps == 1 else 's'} per epoch"
    )
    if not report.problems:
        click.echo("ok: no problems")
    for problem in report.problems:
        click.echo(problem.line())


# -- sft -----------------------------------------------------------------------


@train.command()
@click.option("--rev", help="Revision to train on (default: the newest).")
@click.option(
    "--kind", type=click.Choice(TRAIN_KINDS), default="train", show_default=True
)
@_base_model
@click.option("--force", is_flag=True, help="Prepare the same run again.")
@click.option(
    "--learning-rate",
    type=click.FloatRange(min=0, min_open=True),
    default=_DEFAULTS.learning_rate,
    show_default=True,
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=_DEFAULTS.batch_size,
    show_default=True,
)
@click.option(
    "--epochs",
    type=click.IntRange(min=1),
    default=_DEFAULTS.num_epochs,
    show_default=True,
)
@click.option(
    "--lora-rank",
    type=click.IntRange(min=1),
    default=_DEFAULTS.lora_rank,
    show_default=True,
)
@click.option(
    "--max-length",
    type=click.IntRange(min=1),
    default=_DEFAULTS.max_length,
    show_default=True,
)
@click.option(
    "--save-every",
    type=click.IntRange(min=0),
    default=_DEFAULTS.save_every,
    show_default=True,
    help="Steps between checkpoints (0: final only).",
)
@project_option
@json_option
def sft(
    rev: str | None,
    kind: str,
    base_model: str,
    force: bool,
    learning_rate: float,
    batch_size: int,
    epochs: int,
    lora_rank: int,
    max_length: int,
    save_every: int,
    project: Path | None,
    as_json: bool,
) -> None:
    """Prepare an SFT run pinned to a dataset commit (offline; no API call).

    Exports the revision into a new run folder, writes train_sft.py and
    tinker.yaml there, and commits the run's record.

    \b
    Example usage:
        machine train sft --kind traces
        machine train sft --rev v1 --epochs 3
    """
    _stack()
    from machine_git import revs
    from machine_git.train import datasets
    from machine_git.train import rendering
    from machine_git.train import runs
    from machine_git.train.config import Hyper

    store = open_store(project)
    commit = revs.resolve(store, rev)
    seen = rendering.rendering(base_model)
    _refuse_what_validate_blocks(
        store, commit, kind, base_model, max_length, batch_size
    )
    hyper = Hyper(
        learning_rate=learning_rate,
        batch_size=batch_size,
        num_epochs=epochs,
        lora_rank=lora_rank,
        max_length=max_length,
        save_every=save_every,
    )

    def count(cfg: Any, where: Path) -> int:
        return len(datasets.build(cfg, where).datums)

    record = runs.prepare(
        store,
        commit=commit,
        revision=rev or "HEAD",
        kind=kind,
        base_model=base_model,
        renderer=seen.renderer_name,
        train_on_what=datasets.train_on_what(kind).value,
        hyper=hyper,
        force=force,
        count_sequences=count,
    )
    if as_json:
        emit_json(record)
        return
    data = record["dataset"]
    held = (
        f", {data['held_out_rows']} held out for eval {data['held_out_eval']}"
        if data["held_out_eval"]
        else ""
    )
    click.echo(f"prepared run {record['id']}")
    click.echo(
        f"  data    {data['rows']} {kind} rows at {data['commit'][:12]} "
        f"({data['revision']}){held}"
    )
    click.echo(f"  export  {data['file']} sha256 {data['sha256']}")
    click.echo(
        f"  model   {base_model}, renderer {record['renderer']}, "
        f"loss on {record['train_on_what']}"
    )
    click.echo(
        f"  steps   {record['steps_planned']} ({data['sequences']} sequences, "
        f"batch size {batch_size}, {epochs} epoch{'' if epochs == 1 else 's'})"
    )
    click.echo(f"  folder  {runs.folder(store, record['id'])}")
    click.echo("next: machine train smoke --yes  (two steps on Tinker)")


def _refuse_what_validate_blocks(
    store: Any,
    commit: Any,
    kind: str,
    base_model: str,
    max_length: int,
    batch_size: int,
) -> None:
    from machine_git.train import pins
    from machine_git.train import selection
    from machine_git.train import validate as checking

    chosen = selection.select(store, pins.data_commit(commit), kind)
    report = checking.check(
        chosen.items,
        source=str(commit.id),
        kind=kind,
        base_model=base_model,
        max_length=max_length,
        batch_size=batch_size,
    )
    checking.refuse_blocking(report)


# -- smoke and run -------------------------------------------------------------


@train.command()
@click.argument("run_id", metavar="[RUN]", required=False)
@_yes
@project_option
def smoke(run_id: str | None, yes: bool, project: Path | None) -> None:
    """Take two training steps on Tinker to prove the run works (default: newest run).

    \b
    Example usage:
        machine train smoke --yes
    """
    _train(run_id, yes, project, smoke=True)


@train.command(name="run")
@click.argument("run_id", metavar="[RUN]", required=False)
@_yes
@project_option
def run_command(run_id: str | None, yes: bool, project: Path | None) -> None:
    """Train the whole run on Tinker, committing every step and checkpoint.

    \b
    Example usage:
        machine train run --yes
        machine train run traces-1a2b3c4d-0f9e8d --yes
    """
    _train(run_id, yes, project, smoke=False)


def _train(run_id: str | None, yes: bool, project: Path | None, smoke: bool) -> None:
    what = "machine train smoke" if smoke else "machine train run"
    _confirm(yes, what)
    _stack()
    from machine_git.train import trainer

    store = open_store(project)
    plan = trainer.plan(store, run_id, smoke)
    cfg = plan.cfg
    click.echo(
        f"{'smoke' if smoke else 'run'} {cfg.run_id}: {plan.steps} steps on "
        f"{cfg.base_model} (data {cfg.dataset_commit[:12]}, sha256 "
        f"{cfg.export_sha256[:12]})",
        err=True,
    )
    info = trainer.check_service(plan)
    click.echo(f"tinker ok: {info.base_url} ({info.seconds:.1f} s)", err=True)

    def retried(line: str) -> None:
        click.echo(f"retry: {line}", err=True)

    if smoke:
        record = trainer.execute(store, plan, report=retried)
        result = record["smoke"]
        click.echo(
            f"smoke passed: {len(result['steps'])} steps, loss "
            f"{_loss(result.get('final_loss'))}, checkpoint {result['checkpoint']}"
        )
        click.echo("next: machine train run --yes")
        return
    with click.progressbar(
        length=plan.steps, label="training", file=sys.stderr, show_pos=True
    ) as bar:
        record = trainer.execute(
            store, plan, progress=lambda step: bar.update(1), report=retried
        )
    final = record["checkpoints"][-1] if record["checkpoints"] else {}
    click.echo(
        f"done: {len(record['steps'])} steps, final loss "
        f"{_loss(record.get('final_loss'))}"
    )
    click.echo(f"sampler {final.get('sampler_path')}")
    click.echo(f"state   {final.get('state_path')}")


def _loss(value: Any) -> str:
    return "-" if value is None else f"{value:.4f}"


# -- eval ----------------------------------------------------------------------


@train.group(name="eval")
def eval_group() -> None:
    """A frozen eval set held out of training, and scores on it.

    \b
    Example usage:
        machine train eval init --size 20
        machine train eval baseline --yes
        machine train eval baseline --model RUN --yes
    """


@eval_group.command(name="init")
@click.option(
    "--size",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="Rows (whole sessions).",
)
@click.option("--force", is_flag=True, help="Replace the eval set in force.")
@project_option
@json_option
def eval_init(size: int, force: bool, project: Path | None, as_json: bool) -> None:
    """Draw and commit the eval set; training exports leave it out from now on.

    \b
    Example usage:
        machine train eval init --size 30
    """
    from machine_git.train import evals

    store = open_store(project)
    record, made = evals.init(store, size, force)
    if as_json:
        emit_json({**record, "committed": made})
        return
    counts = record["counts"]
    verb = "drew" if made else "unchanged:"
    click.echo(
        f"{verb} eval set {record['id']}: {len(record['rows'])} rows "
        f"(train {counts['train']}, traces {counts['traces']}) from "
        f"{len(record['sessions'])} sessions at {str(record['dataset_commit'])[:12]}"
    )
    click.echo("training exports leave out every row of these sessions from now on")


@eval_group.command(name="baseline")
@click.option(
    "--model",
    help="Base model, tinker:// sampler path, or run id (default: the base model).",
)
@_base_model
@click.option(
    "--max-tokens", type=click.IntRange(min=1), default=1024, show_default=True
)
@_yes
@project_option
@json_option
def eval_baseline(
    model: str | None,
    base_model: str,
    max_tokens: int,
    yes: bool,
    project: Path | None,
    as_json: bool,
) -> None:
    """Sample a model on the eval set through Tinker and commit its scores.

    \b
    Example usage:
        machine train eval baseline --yes
        machine train eval baseline --model traces-1a2b3c4d-0f9e8d --yes
    """
    _confirm(yes, "machine train eval baseline")
    _stack()
    from machine_git.train import evals
    from machine_git.train import preflight
    from machine_git.train import rendering
    from machine_git.train import runs
    from machine_git.train import sampling

    store = open_store(project)
    eval_set = evals.active(store)
    if eval_set is None:
        raise TrainingError("no eval set yet (draw one with 'machine train eval init')")
    name, base, path, renderer = _model_of(store, runs, model, base_model)
    seen = rendering.rendering(base, renderer)
    cases, skipped = evals.cases(store, eval_set)
    if not cases:
        raise TrainingError(f"eval set {eval_set['id']} has no case with a text answer")
    info = preflight.check(base, "sample")
    click.echo(f"tinker ok: {info.base_url} ({info.seconds:.1f} s)", err=True)
    outputs = sampling.sample(
        cases, seen, base_model=base, model_path=path, max_tokens=max_tokens
    )
    details = {
        "base_model": base,
        "model_path": path,
        "renderer": seen.renderer_name,
        "sampling": {"temperature": 0.0, "max_tokens": max_tokens},
    }
    results, commit = evals.record_results(
        store, eval_set, name, details, outputs, skipped
    )
    if as_json:
        emit_json({**results, "commit": commit})
        return
    scores = results["scores"]
    click.echo(
        f"{name} on {eval_set['id']}: exact {_pct(scores['exact'])}, normalized "
        f"{_pct(scores['normalized'])} of {scores['cases']} cases"
        + (f" ({len(skipped)} skipped: no text answer)" if skipped else "")
    )
    click.echo(f"recorded {evals.results_path(eval_set['id'], name)} in {commit[:12]}")


def _model_of(
    store: Any, runs: Any, model: str | None, base_model: str
) -> tuple[str, str, str | None, str | None]:
    """(name recorded, base model, sampler path or None, renderer or None)."""
    if model is None or model == base_model:
        return base_model, base_model, None, None
    if model.startswith("tinker://"):
        return model, base_model, model, None
    known = {r["id"]: r for r in runs.all_runs(store)}
    if model in known:
        record = known[model]
        samplers = [
            c["sampler_path"] for c in record["checkpoints"] if c.get("sampler_path")
        ]
        if not samplers:
            raise TrainingError(
                f"run {model} has no sampler checkpoint yet (status {record['status']})"
            )
        return (
            samplers[-1],
            str(record["base_model"]),
            samplers[-1],
            str(record["renderer"]),
        )
    return model, model, None, None


def _pct(value: Any) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


# -- runs ----------------------------------------------------------------------


@click.command(name="runs")
@click.argument("run_id", metavar="[RUN]", required=False)
@project_option
@json_option
def runs_command(run_id: str | None, project: Path | None, as_json: bool) -> None:
    """List training runs, or show one run's record and history.

    A run id also works as a revision: machine diff RUN1 RUN2 compares the
    data two runs learned from.

    \b
    Example usage:
        machine runs
        machine runs traces-1a2b3c4d-0f9e8d
    """
    from machine_git.train import runs

    store = open_store(project)
    if run_id is not None:
        record = runs.find(store, run_id)
        if as_json:
            emit_json(record)
            return
        _print_run(store, record)
        return
    records = runs.all_runs(store)
    if as_json:
        emit_json([_summary(r) for r in records])
        return
    if not records:
        click.echo("no training runs yet (prepare one with 'machine train sft')")
        return
    table = [
        ("RUN", "STATUS", "DATA", "STEPS", "LOSS", "CHECKPOINTS", "SMOKE", "TRAINED")
    ]
    for r in records:
        s = _summary(r)
        table.append(
            (
                s["id"],
                str(s["status"]),
                s["dataset_commit"][:12],
                f"{s['steps']}/{s['steps_planned']}",
                _loss(s["final_loss"]),
                str(s["checkpoints"]),
                s["smoke"] or "-",
                _epochs(s["epochs"]),
            )
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=True)]
        click.echo("  ".join(cells).rstrip())


def _summary(record: dict[str, Any]) -> dict[str, Any]:
    from machine_git.train import runs

    checkpoints = record.get("checkpoints") or []
    finals = [c for c in checkpoints if c.get("final")]
    return {
        "id": record["id"],
        "status": runs.shown_status(record),
        "dataset_commit": record["dataset"]["commit"],
        "export_sha256": record["dataset"]["sha256"],
        "kind": record["dataset"]["kind"],
        "base_model": record.get("base_model"),
        "steps": len(record.get("steps") or []),
        "steps_planned": record.get("steps_planned"),
        "final_loss": record.get("final_loss"),
        "checkpoints": len(checkpoints),
        "final_sampler": finals[-1].get("sampler_path") if finals else None,
        "smoke": (record.get("smoke") or {}).get("status"),
        "epochs": (record.get("trained") or {}).get("epochs") or [],
    }


def _epochs(epochs: list[dict[str, Any]]) -> str:
    """``e1 8 rows 1234 tok, e2 ...``: what each epoch's completed steps saw."""
    if not epochs:
        return "-"
    return ", ".join(
        f"e{e['epoch']} {e['rows']} rows {e['tokens']} tok" for e in epochs
    )


def _print_run(store: Any, record: dict[str, Any]) -> None:
    from machine_git import history
    from machine_git.train import runs

    data = record["dataset"]
    hyper = record["hyperparameters"]
    click.echo(f"run      {record['id']}  ({runs.shown_status(record)})")
    click.echo(f"data     {data['rows']} {data['kind']} rows at {data['commit']}")
    click.echo(f"export   {data['file']} sha256 {data['sha256']}")
    click.echo(
        f"model    {record['base_model']}, renderer {record['renderer']}, "
        f"loss on {record['train_on_what']}"
    )
    click.echo("hyper    " + ", ".join(f"{k} {v}" for k, v in sorted(hyper.items())))
    smoke_status = (record.get("smoke") or {}).get("status") or "not run"
    click.echo(f"smoke    {smoke_status}")
    steps = record.get("steps") or []
    click.echo(
        f"steps    {len(steps)}/{record.get('steps_planned')}, final loss "
        f"{_loss(record.get('final_loss'))}"
    )
    for e in (record.get("trained") or {}).get("epochs") or []:
        click.echo(
            f"epoch {e['epoch']}  seed {e['seed']}: {e['steps']} steps, "
            f"{e['rows']} rows, {e['tokens']} trained tokens"
        )
    for c in record.get("checkpoints") or []:
        click.echo(
            f"ckpt     {c['name']} step {c['step']}: "
            f"{c.get('sampler_path') or c.get('state_path')}"
        )
    if record.get("error"):
        click.echo(f"error    {record['error']}")
    if record.get("last_checkpoint"):
        click.echo(f"last     {record['last_checkpoint']}")
    click.echo(f"folder   {runs.folder(store, record['id'])}")
    click.echo("")
    head = store.head
    for commit in history.walk(store, head):
        entry = history.entry(commit)
        if entry.trailers.get("Run") == record["id"]:
            click.echo(f"{entry.short}  {entry.when}  {entry.summary}")
