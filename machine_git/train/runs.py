"""Training runs: their records in the store and their folders beside it.

A run's record is ``runs/<run-id>.json`` in the store, rewritten by one commit
per event (``Machine-Action: train-<event>``, ``Machine-Run``,
``Machine-Dataset``, ``Machine-Export``), so ``machine log`` tells a run's
story and git keeps every attempt. ``refs/runs/<run-id>`` points at the
dataset commit the run learned from, so a run id works as a revision.
The run's folder (export, tinker.yaml, train_sft.py, logs) lives outside git
in ``<store>/machine/runs/<run-id>/``, private (0700, files 0600).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import hashlib
import os
import shutil
import socket
import string
from collections.abc import Callable
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from typing import NamedTuple
from typing import TypedDict

import pygit2
from pygit2 import Commit
from pygit2 import Tree
from pygit2.enums import FileMode

from machine_git import __version__
from machine_git import bundled
from machine_git.core import jsonio
from machine_git.core.errors import AmbiguousRunError
from machine_git.core.errors import RunNotFoundError
from machine_git.core.errors import TrainingError
from machine_git.export import export
from machine_git.history import history
from machine_git.history.revs import RUN_REFS
from machine_git.rows import images
from machine_git.rows import rows
from machine_git.store.store import WORK
from machine_git.store.store import Change
from machine_git.store.store import Snapshot
from machine_git.store.store import Store
from machine_git.store.store import private_objects
from machine_git.train import config
from machine_git.train import evals
from machine_git.train import pins
from machine_git.train import selection
from machine_git.train.config import Hyper
from machine_git.train.config import RunConfig

RUNS_DIR = "runs"
LOCK_FILE = ".lock"


def record_path(run_id: str) -> str:
    """Where a run's record lives in the store's tree."""
    return f"{RUNS_DIR}/{run_id}.json"


def folder(store: Store, run_id: str) -> Path:
    """A run's folder: outside git, beside the store's own files."""
    return store.path / WORK / RUNS_DIR / run_id


def make_id(
    kind: str,
    commit: str,
    base_model: str,
    hyper: Hyper,
    eval_id: str | None,
    extra: dict[str, Any] | None = None,
) -> str:
    """``<kind>-<commit8>-<config6>``: the same data and config, the same run.

    ``extra`` holds settings beyond the SFT defaults (a DPO run's method and
    beta, an export without context); an SFT run with defaults keeps the id
    it always had. A DPO run is named ``dpo-...``.
    """
    config: dict[str, Any] = {
        "model": base_model,
        "hyper": hyper.as_dict(),
        "eval": eval_id,
        "kind": kind,
    }
    if extra:
        config["extra"] = extra
    key = jsonio.compact(config)
    prefix = "dpo" if (extra or {}).get("method") == "dpo" else kind
    return f"{prefix}-{commit[:8]}-{hashlib.sha256(key.encode()).hexdigest()[:6]}"


# -- reading -------------------------------------------------------------------


def read(
    store: Store, run_id: str, commit: Commit | None = None
) -> dict[str, Any] | None:
    """A run's record, or None."""
    data = store.snapshot(commit).read(record_path(run_id))
    return None if data is None else _parse(data, record_path(run_id))


def _parse(data: bytes, where: str) -> dict[str, Any]:
    from machine_git.train import records

    value = jsonio.load_object(data, where, TrainingError, "a run record")
    return records.run_record(value, where)


BadRecord = Callable[[str], None]  # told one line per record that cannot be read


def all_runs(store: Store, on_bad: BadRecord | None = None) -> list[dict[str, Any]]:
    """Every run that reads, oldest first.

    A damaged record (a hand edit, a merge, an older machine's bug) does not
    hide the others: it is left out, and ``on_bad`` gets one line naming it
    and its first bad field.
    """
    snap = store.snapshot()
    if snap.tree is None or RUNS_DIR not in snap.tree:
        return []
    entry = snap.tree[RUNS_DIR]
    if entry.filemode != FileMode.TREE:
        return []
    found = []
    for item in store.repo[entry.id].peel(Tree):
        name = item.name or ""
        if item.filemode == FileMode.BLOB and name.endswith(".json"):
            data = store.repo[item.id].peel(pygit2.Blob).data
            try:
                found.append(_parse(data, f"{RUNS_DIR}/{name}"))
            except TrainingError as e:
                if on_bad is not None:
                    on_bad(str(e))
    return sorted(found, key=lambda r: (str(r.get("created_at")), str(r["id"])))


def bad_records(store: Store) -> list[str]:
    """One line for each run record that does not read."""
    out: list[str] = []
    all_runs(store, out.append)
    return out


def record_problems(store: Store) -> list[tuple[str, str, str]]:
    """``(file, json path, problem)`` for each training record (runs, eval
    sets, eval results) at the newest commit that does not read."""
    out = []
    for line in [*bad_records(store), *evals.bad_records(store)]:
        where, _, rest = line.partition(": ")
        path, found, problem = rest.partition(": ")
        if found and path.startswith("$"):
            out.append((where, path, problem))
        else:
            out.append((where, "$", rest))
    return out


def find(
    store: Store, text: str | None, on_bad: BadRecord | None = None
) -> dict[str, Any]:
    """The run ``text`` names (an id or unique prefix); default: the newest.

    A run named by its exact id is read on its own: its record's damage is
    the error; other damaged records are skipped (``on_bad`` is told).
    """
    if text is not None and _is_id(text):
        exact = read(store, text)
        if exact is not None:
            return exact
    runs = all_runs(store, on_bad)
    if not runs:
        raise RunNotFoundError(
            "no training runs yet (prepare one with 'machine train sft')"
        )
    if text is None:
        return runs[-1]
    matches = [r for r in runs if str(r["id"]).startswith(text)]
    if not matches:
        raise RunNotFoundError(f"no run {text!r} (see 'machine runs')")
    if len(matches) > 1:
        shown = ", ".join(str(r["id"]) for r in matches[:5])
        raise AmbiguousRunError(f"run {text!r} is ambiguous ({shown})")
    return matches[0]


def _is_id(text: str) -> bool:
    # A name that can be a record's file (no path, no dot files).
    return bool(text) and "/" not in text and "\\" not in text and text[0] != "."


def commits(store: Store, run_id: str) -> list[history.Entry]:
    """The commits of the run ``run_id`` (its ``Run`` trailer), newest first."""
    head = store.head
    if head is None:
        return []
    found = (history.entry(commit) for commit in history.walk(store, head))
    return [entry for entry in found if entry.trailers.get("Run") == run_id]


def run_config(store: Store, record: dict[str, Any]) -> tuple[RunConfig, Path]:
    """The run's tinker.yaml (what trains), checked against its record."""
    where = folder(store, str(record["id"]))
    if not (where / config.CONFIG_FILE).is_file():
        raise TrainingError(
            f"run {record['id']} has no folder here ({where}): the store was cloned "
            "or the folder removed; prepare it again with 'machine train sft "
            "--force' and the same options"
        )
    cfg = config.load(where / config.CONFIG_FILE)
    dataset = record["dataset"]
    if (
        cfg.run_id != record["id"]
        or cfg.dataset_commit != dataset["commit"]
        or cfg.export_sha256 != dataset["sha256"]
    ):
        raise TrainingError(
            f"{where / config.CONFIG_FILE} no longer names the data run "
            f"{record['id']} was prepared from; prepare a new run with "
            "'machine train sft'"
        )
    return cfg, where


# -- preparing a run (machine train sft) ---------------------------------------


@dataclass
class Exported:
    """What a run's export holds."""

    rows: int
    held_out: int
    sha256: str


def write_export(
    store: Store,
    commit: Commit,
    revision: str,
    kind: str,
    target: Path,
    fmt: str = "tinker",
    with_context: bool = True,
    where: tuple[str, ...] = (),
    with_images: bool = True,
) -> Exported:
    """The run's data: ``machine export --format tinker`` (``dpo`` for pairs)
    minus the eval set; ``with_context=False`` is ``--no-context``.

    Same bytes as the plain export when no eval set is in force; the manifest
    beside it says what was left out and why, and which row each line is.
    """
    digest = hashlib.sha256()
    count = 0
    ids: list[str] = []
    chosen = selection.select(store, commit, kind, where)
    with open(target, "wb") as out:
        for row_id, line in export_lines(
            store, commit, chosen, fmt, with_context, with_images
        ):
            out.write(line)
            digest.update(line)
            ids.append(row_id)
            count += 1
        out.flush()
        os.fsync(out.fileno())
    manifest = export.Manifest(
        file=target.name,
        revision=revision,
        commit=str(commit.id),
        format=fmt,
        kinds=(kind,),
        rows=count,
        skipped=len(chosen.items) - count,
        sha256=digest.hexdigest(),
        context=with_context,
    ).as_dict()
    if where:
        manifest["where"] = list(where)
    if not with_images:
        manifest["images"] = False
    manifest["held_out"] = {"eval": chosen.eval_id, "rows": chosen.held_out}
    manifest["row_ids"] = ids  # line n of the export is row row_ids[n - 1]
    export.manifest_path(target).write_bytes(jsonio.canonical(manifest))
    return Exported(count, chosen.held_out, digest.hexdigest())


def export_lines(
    store: Store,
    commit: Commit,
    chosen: selection.Selection,
    fmt: str,
    with_context: bool,
    with_images: bool = True,
) -> Iterator[tuple[str, bytes]]:
    """Each row's line, then (pairs) the pairs of rows rated differently, each
    with the row it comes from (the preferred one, for a pair of two).

    A run's ``data.jsonl`` is these lines, and its record's claims are checked
    by rebuilding them (releases/claims.py): one function, the same bytes.
    Images are read from the store at ``commit`` (a format that carries them:
    tinker's image parts), or left as ``[image]`` (``with_images=False``).
    """
    # Many rows often share one screenshot: keep the last few images read.
    read = functools.lru_cache(maxsize=16)(store.snapshot(commit).read)
    for row_id, row in chosen.items:
        if with_images and images.has_images(row):
            row = images.inline(row, read)
        found = export.row_line(
            row, fmt, with_context=with_context, with_images=with_images
        )
        if found is not None:
            yield row_id, found
    if fmt not in export.PAIR_FORMATS:
        return
    from machine_git.rows import labels
    from machine_git.store import settings

    field = labels.rating_field(settings.label_schema(store.snapshot(commit)))
    if field is None:
        return
    rated = [
        (row_id, export.prepared(row, with_context))
        for row_id, row in chosen.items
        if export.rated(row, field) is not None
    ]
    for row_id, pair in export.sibling_pairs(fmt, rated, field):
        yield row_id, export.line(pair)


def row_ids(data_file: Path) -> list[str] | None:
    """The row id of each line of a run's export, from its manifest.

    None when there is no manifest; a manifest that is there but damaged is
    one line naming its bad field.
    """
    from machine_git.train import records

    path = export.manifest_path(data_file)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise TrainingError(f"cannot read {path}: {e.strerror or e}") from None
    value = jsonio.load_object(data, str(path), TrainingError, "an export manifest")
    return records.parse(records.Manifest, value, str(path)).row_ids


def prepare(
    store: Store,
    *,
    commit: Commit,
    revision: str,
    kind: str,
    base_model: str,
    renderer: str,
    train_on_what: str,
    hyper: Hyper,
    force: bool,
    count_sequences: Callable[[RunConfig, Path], int],
    method: str = "sft",
    dpo_beta: float = config.DPO_BETA,
    context: bool = True,
    where: tuple[str, ...] = (),
    images: bool = True,
) -> dict[str, Any]:
    """Export the pinned revision into a new run folder, write the files, commit.

    ``count_sequences`` renders the export (heavy; the caller passes it in)
    and raises if it gives no whole batch, before anything is committed; it
    counts what one batch holds ``batch_size`` of (sequences; pairs for DPO).
    A DPO run (``method="dpo"``) exports the pairs of ``kind`` rows rewritten
    with ``--as`` (``machine export --format dpo``) and of rows rated
    differently. ``where`` keeps only rows whose labels meet it; the record
    keeps it, so lineage selects the same rows.
    """
    commit = pins.data_commit(commit)
    keep_out = evals.held_out(store)
    extra: dict[str, Any] = {}
    if method != "sft":
        extra.update(method=method, dpo_beta=dpo_beta)
    if not context:
        extra["context"] = False
    if where:
        extra["where"] = list(where)
    if not images:
        extra["images"] = False
    run_id = make_id(kind, str(commit.id), base_model, hyper, keep_out.eval_id, extra)
    existing = read(store, run_id)
    if existing is not None and not force:
        raise TrainingError(
            f"run {run_id} already exists for this data and config (status "
            f"{existing.get('status')}); --force prepares it again"
        )
    run_folder = folder(store, run_id)
    with _private(), lock(run_folder):
        _clear(run_folder)
        fmt = "dpo" if method == "dpo" else "tinker"
        target = run_folder / config.DATA_FILE
        exported = write_export(
            store, commit, revision, kind, target, fmt, context, where, images
        )
        if exported.rows == 0:
            shutil.rmtree(run_folder, ignore_errors=True)
            held = (
                f" ({exported.held_out} held out for eval)" if exported.held_out else ""
            )
            what = "pairs (rows rewritten with --as)" if method == "dpo" else "rows"
            raise TrainingError(f"no {kind} {what} to train on at {revision}{held}")
        cfg = RunConfig(
            run_id=run_id,
            dataset_commit=str(commit.id),
            revision=revision,
            kind=kind,
            export_sha256=exported.sha256,
            rows=exported.rows,
            base_model=base_model,
            renderer=renderer,
            train_on_what=train_on_what,
            held_out_eval=keep_out.eval_id,
            hyper=hyper,
            method=method,
            dpo_beta=dpo_beta,
            context=context,
        )
        (run_folder / config.CONFIG_FILE).write_text(config.render(cfg))
        script = run_folder / config.SCRIPT_FILE
        script.write_text(render_script(cfg))
        script.chmod(0o700)
        try:
            sequences = count_sequences(cfg, run_folder)
        except TrainingError:
            shutil.rmtree(run_folder, ignore_errors=True)
            raise
    record: dict[str, Any] = {
        "id": run_id,
        "method": method,
        "status": "prepared",
        "created_at": rows.now(),
        "dataset": {
            "commit": str(commit.id),
            "revision": revision,
            "kind": kind,
            "file": config.DATA_FILE,
            "sha256": exported.sha256,
            "rows": exported.rows,
            "sequences": sequences,
            "held_out_eval": keep_out.eval_id,
            "held_out_rows": exported.held_out,
            "context": context,
            **({"where": list(where)} if where else {}),
            **({"images": False} if not images else {}),
        },
        "base_model": base_model,
        "renderer": renderer,
        "train_on_what": train_on_what,
        "hyperparameters": {
            **hyper.as_dict(),
            **({"dpo_beta": dpo_beta} if method == "dpo" else {}),
        },
        "steps_planned": -(-sequences // hyper.batch_size) * hyper.num_epochs,
        "folder": f"{WORK}/{RUNS_DIR}/{run_id}",
        "versions": {"machine-git": __version__, **_stack_versions()},
        "attempts": 0,
        "steps": [],
        "checkpoints": [],
        "smoke": None,
        "error": None,
    }
    what = "pairs" if method == "dpo" else "rows"
    _commit(
        store,
        record,
        method,
        f"train {method} {run_id}: {exported.rows} {kind} {what} at "
        f"{str(commit.id)[:12]}",
    )
    with private_objects(store):
        store.repo.references.create(f"{RUN_REFS}{run_id}", commit.id, force=True)
    return record


def _stack_versions() -> dict[str, str]:
    from machine_git.train import stack

    return stack.versions()


def render_script(cfg: RunConfig) -> str:
    """train_sft.py from its template, headed by what pins the run."""
    text = bundled.read_bytes("templates", "train_sft.py.tmpl").decode()
    return string.Template(text).substitute(
        run_id=cfg.run_id,
        dataset_commit=cfg.dataset_commit,
        export_sha256=cfg.export_sha256,
        rows=cfg.rows,
        kind=cfg.kind,
        base_model=cfg.base_model,
        renderer=cfg.renderer,
        train_on_what=cfg.train_on_what,
    )


def _clear(where: Path) -> None:
    for item in where.iterdir():
        if item.name == LOCK_FILE:
            continue
        if item.is_dir() and not item.is_symlink():
            shutil.rmtree(item)
        else:
            item.unlink()


# -- a run's process -------------------------------------------------------------


def process_stamp() -> dict[str, Any]:
    """Which process is training (so a record whose process died shows stale)."""
    return {"pid": os.getpid(), "host": socket.gethostname()}


def shown_status(record: dict[str, Any]) -> str:
    """The status to show: ``stale`` when a running record's process is gone.

    A process killed without a chance to write (SIGKILL, power loss) leaves
    ``running`` behind; on the host that ran it we can tell it is gone.
    ``record`` is a run's record, or its ``smoke`` part (stamped the same way).
    """
    status = str(record.get("status"))
    if status != "running":
        return status
    pid, host = record.get("pid"), record.get("host")
    if not isinstance(pid, int) or host != socket.gethostname():
        return status
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "stale"
    except PermissionError:
        return status  # alive, someone else's
    return status


class Summary(TypedDict):
    """One line of ``machine runs`` (and its ``--json``, and the Runs page)."""

    id: str
    method: str
    status: str
    created_at: str
    dataset_commit: str
    export_sha256: str
    kind: str
    rows: int
    base_model: str
    steps: int
    steps_planned: int
    final_loss: float | None
    checkpoints: int
    final_sampler: str | None
    smoke: str | None
    epochs: list[dict[str, Any]]


def summary(record: dict[str, Any]) -> Summary:
    """What a run is and how far it got, in one flat mapping."""
    checkpoints = record.get("checkpoints") or []
    finals = [c for c in checkpoints if c.get("final")]
    dataset = record["dataset"]
    return Summary(
        id=str(record["id"]),
        method=str(record.get("method") or "sft"),
        status=shown_status(record),
        created_at=str(record.get("created_at") or ""),
        dataset_commit=str(dataset["commit"]),
        export_sha256=str(dataset["sha256"]),
        kind=str(dataset["kind"]),
        rows=int(dataset["rows"]),
        base_model=str(record.get("base_model")),
        steps=len(record.get("steps") or []),
        steps_planned=int(record.get("steps_planned") or 0),
        final_loss=record.get("final_loss"),
        checkpoints=len(checkpoints),
        final_sampler=finals[-1].get("sampler_path") if finals else None,
        smoke=shown_status(record["smoke"]) if record.get("smoke") else None,
        epochs=list((record.get("trained") or {}).get("epochs") or []),
    )


class Model(NamedTuple):
    """A model to sample: the name results record, and how Tinker finds it."""

    name: str
    base_model: str
    sampler_path: str | None
    renderer: str | None


def model_of(store: Store, model: str | None, base_model: str) -> Model:
    """What ``--model`` names: the base model, a tinker:// path or a run id.

    A run gives its newest sampler checkpoint, base model and renderer.
    """
    if model is None or model == base_model:
        return Model(base_model, base_model, None, None)
    if model.startswith("tinker://"):
        return Model(model, base_model, model, None)
    known = {r["id"]: r for r in all_runs(store)}
    if model not in known:
        return Model(model, model, None, None)
    record = known[model]
    samplers = [
        c["sampler_path"] for c in record["checkpoints"] if c.get("sampler_path")
    ]
    if not samplers:
        raise TrainingError(
            f"run {model} has no sampler checkpoint yet (status {record['status']})"
        )
    return Model(
        samplers[-1], str(record["base_model"]), samplers[-1], str(record["renderer"])
    )


# -- updating a run ------------------------------------------------------------


def update(
    store: Store,
    run_id: str,
    event: str,
    summary: str,
    change: Callable[[dict[str, Any]], None],
) -> dict[str, Any]:
    """Apply ``change`` to the newest record and commit it as ``train-<event>``."""
    result: dict[str, Any] = {}

    def plan(snap: Snapshot) -> Change:
        data = snap.read(record_path(run_id))
        if data is None:
            raise RunNotFoundError(f"no run {run_id!r} in the store")
        record = _parse(data, record_path(run_id))
        change(record)
        record["updated_at"] = rows.now()
        result.clear()
        result.update(record)
        return _change(record, event, summary)

    store.write(plan)
    return result


def _commit(store: Store, record: dict[str, Any], event: str, summary: str) -> None:
    store.write(lambda snap: _change(record, event, summary))


def _change(record: dict[str, Any], event: str, summary: str) -> Change:
    dataset = record["dataset"]
    return Change(
        summary=summary,
        files={record_path(str(record["id"])): jsonio.canonical(record)},
        trailers={
            "Action": f"train-{event}",
            "Run": str(record["id"]),
            "Dataset": str(dataset["commit"]),
            "Export": str(dataset["sha256"]),
        },
    )


# -- the run folder ------------------------------------------------------------


@contextlib.contextmanager
def _private() -> Iterator[None]:
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


@contextlib.contextmanager
def lock(where: Path) -> Iterator[None]:
    """Hold a run's folder lock: one process trains or rewrites a run at a time."""
    with _private():
        where.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(where / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise TrainingError(
                    f"run {where.name} is in use by another machine process"
                ) from None
            raise
        with _private():
            yield
    finally:
        os.close(fd)
