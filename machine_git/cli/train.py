"""``machine train`` (validate, sft, smoke, run, eval) and ``machine runs``.

The training stack (tinker, tinker-cookbook, torch) is optional and heavy:
nothing here imports it at module level, so ``machine --help`` and every other
command start without it; each subcommand imports it inside, after a check
that says in one line how to install it.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

import click

from machine_git.cli.common import emit_json
from machine_git.cli.common import json_option
from machine_git.cli.common import open_store
from machine_git.cli.common import project_option
from machine_git.cli.common import warn
from machine_git.core import table
from machine_git.core.errors import TrainingError
from machine_git.core.errors import UsageError
from machine_git.train.config import DEFAULT_BASE_MODEL
from machine_git.train.config import DPO_BETA
from machine_git.train.config import KINDS
from machine_git.train.config import Hyper

if TYPE_CHECKING:  # the training stack loads only inside the commands
    from machine_git.store.store import Store
    from machine_git.train.validate import Report

_DEFAULTS = Hyper()

_yes = click.option(
    "--yes", is_flag=True, help="Confirm: this calls the Tinker API (billed)."
)
_no_context = click.option(
    "--no-context",
    "no_context",
    is_flag=True,
    help="Leave the turns' system prompts and tools out of the training data.",
)
_no_images = click.option(
    "--no-images",
    "no_images",
    is_flag=True,
    help="Train on the [image] placeholder instead of the turns' images "
    "(a model that takes no images refuses rows with images without it).",
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

    Needs the training extra: pip install torch==2.13.0 '.[train]' in a
    machine checkout (or the wheel with [train]).

    \b
    Example usage:
        machine train validate --kind traces
        machine train sft --kind traces
        machine train dpo
        machine train smoke --yes
        machine train run --yes
        machine train models
    """


# -- validate ------------------------------------------------------------------


@train.command()
@click.argument("target", required=False)
@_base_model
@click.option("--kind", type=click.Choice(KINDS), help="Rows of this kind.")
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
    help="Write each datum a run sends (tokens, weights, marked text) as JSONL.",
)
@_no_context
@_no_images
@project_option
@json_option
def validate(
    target: str | None,
    base_model: str,
    kind: str | None,
    max_length: int,
    batch_size: int,
    dump: Path | None,
    no_context: bool,
    no_images: bool,
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
    from machine_git.cli.progress import bars
    from machine_git.train import sources
    from machine_git.train import validate as checking

    src = sources.of_target(target, kind, lambda: open_store(project))
    with checking.dump_file(dump) as out, bars(as_json) as shown:
        report = checking.check_source(
            src,
            base_model=base_model,
            max_length=max_length,
            batch_size=batch_size,
            dump=out,
            progress=shown,
            with_context=not no_context,
            with_images=not no_images,
        )
    if as_json:
        emit_json(report.to_json())
    else:
        _print_report(report)
    if report.blocking:
        n = len(report.blocking)
        raise TrainingError(f"{n} blocking problem{'' if n == 1 else 's'}")


def _print_report(report: Report) -> None:
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


def _hyper_options(
    learning_rate: float, batch_size: int, batch_help: str | None = None
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """The hyperparameter options of ``train sft`` and ``dpo``, handed to the
    command as one ``hyper`` (a Hyper)."""
    options = [
        click.option(
            "--learning-rate",
            type=click.FloatRange(min=0, min_open=True),
            default=learning_rate,
            show_default=True,
        ),
        click.option(
            "--batch-size",
            type=click.IntRange(min=1),
            default=batch_size,
            show_default=True,
            help=batch_help,
        ),
        click.option(
            "--epochs",
            type=click.IntRange(min=1),
            default=_DEFAULTS.num_epochs,
            show_default=True,
        ),
        click.option(
            "--lora-rank",
            type=click.IntRange(min=1),
            default=_DEFAULTS.lora_rank,
            show_default=True,
        ),
        click.option(
            "--max-length",
            type=click.IntRange(min=1),
            default=_DEFAULTS.max_length,
            show_default=True,
        ),
        click.option(
            "--save-every",
            type=click.IntRange(min=0),
            default=_DEFAULTS.save_every,
            show_default=True,
            help="Steps between checkpoints (0: final only).",
        ),
    ]

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(command)
        def with_hyper(**given: Any) -> None:
            hyper = Hyper(
                learning_rate=given.pop("learning_rate"),
                batch_size=given.pop("batch_size"),
                num_epochs=given.pop("epochs"),
                lora_rank=given.pop("lora_rank"),
                max_length=given.pop("max_length"),
                save_every=given.pop("save_every"),
            )
            command(hyper=hyper, **given)

        for option in reversed(options):
            with_hyper = option(with_hyper)
        return with_hyper

    return decorate


def _where(f: Callable[..., None]) -> Callable[..., None]:
    return click.option(
        "--where",
        "where",
        multiple=True,
        metavar="FIELD OP VALUE",
        help="Only rows whose labels meet this (quality>=4, topic=bugfix; "
        "repeatable; machine labels). The run records it.",
    )(f)


@train.command()
@click.option("--rev", help="Revision to train on (default: the newest).")
@click.option("--kind", type=click.Choice(KINDS), default="train", show_default=True)
@_base_model
@click.option("--force", is_flag=True, help="Prepare the same run again.")
@_hyper_options(_DEFAULTS.learning_rate, _DEFAULTS.batch_size)
@_no_context
@_no_images
@_where
@project_option
@json_option
def sft(
    rev: str | None,
    kind: str,
    base_model: str,
    force: bool,
    hyper: Hyper,
    no_context: bool,
    no_images: bool,
    where: tuple[str, ...],
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
        machine train sft --where 'quality>=4'
        machine train sft --base-model Qwen/Qwen3-VL-30B-A3B-Instruct
    """
    _prepare(
        project,
        as_json,
        revision=rev,
        kind=kind,
        base_model=base_model,
        force=force,
        hyper=hyper,
        context=not no_context,
        where=_conditions(where),
        images=not no_images,
    )


def _conditions(where: tuple[str, ...]) -> tuple[str, ...]:
    from machine_git.rows.labels import Where

    return tuple(Where.parse(where).words())


@train.command()
@click.option("--rev", help="Revision to train on (default: the newest).")
@_base_model
@click.option("--force", is_flag=True, help="Prepare the same run again.")
@_hyper_options(1e-5, 4, batch_help="Pairs per step.")
@click.option(
    "--beta",
    type=click.FloatRange(min=0, min_open=True),
    default=DPO_BETA,
    show_default=True,
    help="How strongly the policy stays near the base model (DPO's KL weight).",
)
@_no_context
@_where
@project_option
@json_option
def dpo(
    rev: str | None,
    base_model: str,
    force: bool,
    hyper: Hyper,
    beta: float,
    no_context: bool,
    where: tuple[str, ...],
    project: Path | None,
    as_json: bool,
) -> None:
    """Prepare a DPO run from bad rows rewritten with --as (offline; no API call).

    Each such row is a preference pair: the rewrite is preferred over the
    agent's original answer. The pairs (machine export --format dpo) are
    pinned to a dataset commit like an SFT run's data; machine train smoke
    and run train it with tinker-cookbook's DPO recipe.

    \b
    Example usage:
        machine bad --as "The answer it should have given."
        machine train dpo
        machine train smoke --yes
    """
    _prepare(
        project,
        as_json,
        revision=rev,
        kind="rejected",
        base_model=base_model,
        force=force,
        hyper=hyper,
        method="dpo",
        dpo_beta=beta,
        context=not no_context,
        where=_conditions(where),
    )


def _prepare(project: Path | None, as_json: bool, **options: Any) -> None:
    _stack()
    from machine_git.train import prepare
    from machine_git.train import runs

    store = open_store(project)
    record = prepare.run(store, prepare.Options(**options))
    if as_json:
        emit_json(record)
        return
    data = record["dataset"]
    hyper = record["hyperparameters"]
    held = (
        f", {data['held_out_rows']} held out for eval {data['held_out_eval']}"
        if data["held_out_eval"]
        else ""
    )
    unit = "pairs" if record["method"] == "dpo" else "sequences"
    epochs = hyper["num_epochs"]
    click.echo(f"prepared run {record['id']}")
    click.echo(
        f"  data    {data['rows']} {data['kind']} "
        f"{'pairs' if unit == 'pairs' else 'rows'} at {data['commit'][:12]} "
        f"({data['revision']}){held}"
    )
    click.echo(f"  export  {data['file']} sha256 {data['sha256']}")
    click.echo(
        f"  model   {record['base_model']}, renderer {record['renderer']}, "
        f"loss on {record['train_on_what']}"
        + (f", DPO beta {hyper['dpo_beta']}" if unit == "pairs" else "")
    )
    click.echo(
        f"  steps   {record['steps_planned']} ({data['sequences']} {unit}, "
        f"batch size {hyper['batch_size']}, {epochs} epoch{'' if epochs == 1 else 's'})"
    )
    click.echo(f"  folder  {runs.folder(store, record['id'])}")
    click.echo("next: machine train smoke --yes  (two steps on Tinker)")


# -- smoke and run -------------------------------------------------------------


@train.command()
@click.argument("run_id", metavar="[RUN]", required=False)
@_yes
@project_option
@json_option
def smoke(run_id: str | None, yes: bool, project: Path | None, as_json: bool) -> None:
    """Take two training steps on Tinker to prove the run works (default: newest run).

    \b
    Example usage:
        machine train smoke --yes
    """
    _train(run_id, yes, project, smoke=True, as_json=as_json)


@train.command(name="run")
@click.argument("run_id", metavar="[RUN]", required=False)
@click.option(
    "--resume",
    "resume",
    metavar="RUN",
    help="Continue a failed or interrupted run from its last saved checkpoint.",
)
@_yes
@project_option
@json_option
def run_command(
    run_id: str | None,
    resume: str | None,
    yes: bool,
    project: Path | None,
    as_json: bool,
) -> None:
    """Train the whole run on Tinker, committing every step and checkpoint.

    \b
    Example usage:
        machine train run --yes
        machine train run traces-1a2b3c4d-0f9e8d --yes --json
        machine train run --resume traces-1a2b3c4d-0f9e8d --yes
    """
    if resume is not None and run_id is not None and run_id != resume:
        raise UsageError(f"name one run: {run_id} or --resume {resume}")
    _train(
        resume or run_id,
        yes,
        project,
        smoke=False,
        as_json=as_json,
        resume=resume is not None,
    )


def _train(
    run_id: str | None,
    yes: bool,
    project: Path | None,
    smoke: bool,
    as_json: bool,
    resume: bool = False,
) -> None:
    what = "machine train smoke" if smoke else "machine train run"
    _confirm(yes, what)
    _stack()
    from machine_git.train import runs
    from machine_git.train import trainer

    store = open_store(project)
    plan = trainer.plan(store, run_id, smoke, resume)
    cfg = plan.cfg
    start = (
        f"steps {plan.resume.step + 1}-{plan.steps} of {plan.steps} (resumed from "
        f"{plan.resume.state_path})"
        if plan.resume is not None
        else f"{plan.steps} steps"
    )
    click.echo(
        f"{'smoke' if smoke else 'run'} {cfg.run_id}: {start} on "
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
        _smoke_done(record, as_json)
        return
    if as_json:  # no progress with --json
        record = trainer.execute(store, plan, report=retried)
    else:
        done = plan.resume.step if plan.resume is not None else 0
        with click.progressbar(
            length=plan.steps - done, label="training", file=sys.stderr, show_pos=True
        ) as bar:
            record = trainer.execute(
                store, plan, progress=lambda step: bar.update(1), report=retried
            )
    final = record["checkpoints"][-1] if record["checkpoints"] else {}
    if as_json:
        emit_json(
            {
                **runs.summary(record),
                "final_state": final.get("state_path"),
                "final_sampler": final.get("sampler_path"),
            }
        )
        return
    click.echo(
        f"done: {len(record['steps'])} steps, final loss "
        f"{_loss(record.get('final_loss'))}"
    )
    click.echo(f"sampler {final.get('sampler_path')}")
    click.echo(f"state   {final.get('state_path')}")


def _smoke_done(record: dict[str, Any], as_json: bool) -> None:
    result = record["smoke"]
    if as_json:
        emit_json(
            {
                "run": record["id"],
                "status": result["status"],
                "steps": len(result["steps"]),
                "final_loss": result.get("final_loss"),
                "checkpoint": result["checkpoint"],
            }
        )
        return
    click.echo(
        f"smoke passed: {len(result['steps'])} steps, loss "
        f"{_loss(result.get('final_loss'))}, checkpoint {result['checkpoint']}"
    )
    click.echo("next: machine train run --yes")


def _loss(value: Any) -> str:
    return "-" if value is None else f"{value:.4f}"


# -- eval ----------------------------------------------------------------------


@train.command(name="models")
@json_option
def models_command(as_json: bool) -> None:
    """List the base models Tinker serves: which machine trains, and why not.

    A model is accepted when its chat template is a fixture of machine's
    tests and machine's rendering equals it token for token; every other
    one is refused with the reason. Offline (the pinned tinker-cookbook's
    model table).

    \b
    Example usage:
        machine train models
        machine train models --json
    """
    from machine_git.train import families
    from machine_git.train import stack

    try:
        verdicts = families.models()
    except ImportError:
        stack.require()  # says in one line how to install the stack
        raise
    if as_json:
        emit_json([v.to_json() for v in verdicts])
        return
    # Grouped by reason: the reasons are sentences, the names are short.
    groups: dict[tuple[bool, str], list[str]] = {}
    for v in verdicts:
        shown = f"{v.model}  (renderer {v.renderer})" if v.accepted else v.model
        groups.setdefault((v.accepted, v.why), []).append(shown)
    for (accepted, why), names in groups.items():
        click.echo(f"{'accepted' if accepted else 'refused'}: {why}")
        for name in names:
            click.echo(f"  {name}")


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
    from machine_git.train import sampling

    store = open_store(project)

    def ready(base_url: str, seconds: float) -> None:
        click.echo(f"tinker ok: {base_url} ({seconds:.1f} s)", err=True)

    done = sampling.baseline(
        store, model, base_model, max_tokens=max_tokens, on_ready=ready
    )
    results = done.results
    if as_json:
        emit_json(done.to_json())
        return
    scores = results["scores"]
    skipped = results["skipped"]
    eval_id, name = results["eval_id"], results["model"]
    click.echo(
        f"{name} on {eval_id}: exact {_pct(scores['exact'])}, normalized "
        f"{_pct(scores['normalized'])} of {scores['cases']} cases"
        + (f" ({len(skipped)} skipped: no text answer)" if skipped else "")
    )
    click.echo(f"recorded {evals.results_path(eval_id, name)} in {done.commit[:12]}")


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
        record = runs.find(store, run_id, on_bad=_skipped)
        if as_json:
            emit_json(record)
            return
        _print_run(store, record)
        return
    records = runs.all_runs(store, on_bad=_skipped)
    if as_json:
        emit_json([runs.summary(r) for r in records])
        return
    if not records:
        click.echo("no training runs yet (prepare one with 'machine train sft')")
        return
    # CKPT, not CHECKPOINTS: the fixed columns fit 80 characters and TRAINED,
    # the free text, gets what is left.
    listing = [("RUN", "STATUS", "DATA", "STEPS", "LOSS", "CKPT", "SMOKE", "TRAINED")]
    for r in records:
        s = runs.summary(r)
        listing.append(
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
    for line in table.rows(listing, free=7, columns=table.width()):
        click.echo(line)


def _skipped(line: str) -> None:
    warn(f"{line} (record skipped)")


def _epochs(epochs: list[dict[str, Any]]) -> str:
    """``e1 8 rows 1234 tok, e2 ...``: what each epoch's completed steps saw."""
    if not epochs:
        return "-"
    return ", ".join(
        f"e{e['epoch']} {e['rows']} rows {e['tokens']} tok" for e in epochs
    )


def _print_run(store: Store, record: dict[str, Any]) -> None:
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
    smoke_status = runs.summary(record)["smoke"] or "not run"
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
    for a in record.get("attempt_log") or []:
        start = (
            f"resumed at step {a['from_step'] + 1} from {a['from_checkpoint']}"
            if a.get("from_checkpoint")
            else "from the start"
        )
        done = f", {a['steps']} steps" if a.get("steps") is not None else ""
        click.echo(f"attempt  {a['attempt']} {start}: {a['status']}{done}")
    if record.get("error"):
        click.echo(f"error    {record['error']}")
    if record.get("last_checkpoint"):
        click.echo(f"last     {record['last_checkpoint']}")
    click.echo(f"folder   {runs.folder(store, record['id'])}")
    click.echo("")
    found = [(e.short, e.when, e.summary) for e in runs.commits(store, record["id"])]
    for line in table.rows(found, free=2, columns=table.width()):
        click.echo(line)
