"""Lineage: from a running model back to the rows it learned from.

release -> run -> checkpoint -> dataset commit -> rows (counts by kind, and
the tags, rewrites and other changes that made them) -> eval set and the
baseline the release was gated on.

What was trained is what the training loop says it consumed: the run
record's ``trained`` field (rows whose tokens were in a completed optimizer
step; rows and tokens per epoch). A run recorded before that field existed
is shown as unknown, never as every row it was handed.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING
from typing import Any

import pygit2
from pygit2 import Commit

from machine_git import releases
from machine_git.core import jsonio
from machine_git.core.errors import ReleaseError
from machine_git.core.errors import RunNotFoundError
from machine_git.history import history
from machine_git.releases.claims import held_out_by
from machine_git.releases.claims import require_true_claims
from machine_git.rows import rows
from machine_git.store import stats
from machine_git.store.store import Store
from machine_git.store.store import parse_row

if TYPE_CHECKING:
    pass

UNKNOWN = "trained rows unknown (run predates per-step records)"


def trace(store: Store, what: str, with_rows: bool = False) -> dict[str, Any]:
    """The lineage of a release id, a run id or a ``tinker://`` checkpoint."""
    from machine_git.train import runs

    release: releases.Release | None = None
    checkpoint: str | None = None
    if what.startswith("BR-"):
        release = releases.show(store, releases.check_id(what))
        # An edited preregistration would trace an edited baseline: refuse,
        # as every release command does.
        releases.audit_store(store).require_clean(what)
        if release.prereg is None:
            raise ReleaseError(f"{what} has no preregistration")  # show found one
        run = runs.find(store, release.prereg.candidate.run)
        checkpoint = release.prereg.candidate.checkpoint
    elif what.startswith("tinker://"):
        run = _run_of_checkpoint(runs.all_runs(store), what)
        checkpoint = what
    else:
        run = runs.find(store, what)
    # A run record no allowed signer wrote claims nothing (releases/trust.py).
    releases.audit_store(store).require_run_clean(
        what if release is not None else None, str(run["id"])
    )
    require_true_claims(store, run)
    dataset = run.get("dataset") or {}
    commit = store.repo.revparse_single(str(dataset["commit"])).peel(Commit)
    out: dict[str, Any] = {
        "release": None,
        "run": {
            "id": run["id"],
            "status": run.get("status"),
            "base_model": run.get("base_model"),
            "renderer": run.get("renderer"),
            "train_on_what": run.get("train_on_what"),
            "hyperparameters": run.get("hyperparameters"),
            "steps": len(run.get("steps") or []),
            "checkpoints": run.get("checkpoints") or [],
        },
        "checkpoint": checkpoint or _last_sampler(run),
        "dataset": {
            "commit": str(commit.id),
            "kind": dataset.get("kind"),
            "export_sha256": dataset.get("sha256"),
            "exported_rows": dataset.get("rows"),
            "held_out_eval": dataset.get("held_out_eval"),
            "held_out_rows": dataset.get("held_out_rows"),
            "trained": trained(run),
            "counts": stats.counts(store, commit),
            "history": _actions(store, commit),
        },
        "eval": None,
    }
    if release is not None:
        out["release"] = {
            "id": release.id,
            "title": release.prereg.title if release.prereg else None,
            "status": release.status,
            "checks": release.checks,
            "tampered": release.tampered,
        }
    if release is not None and release.prereg is not None:
        out["eval"] = _frozen_eval(store, release)
    elif dataset.get("held_out_eval"):
        out["eval"] = _eval_now(store, str(dataset["held_out_eval"]))
    if with_rows:
        out["dataset"]["rows"] = _roles(store, run)
    return out


def trained(run: dict[str, Any]) -> dict[str, Any] | None:
    """Rows and tokens the loop consumed, from the run's record; None if unknown.

    A run only prepared has trained nothing yet: no rows, which is known.
    """
    record = _trained_record(run)
    if record is None:
        return None
    epochs = [e for e in record.get("epochs") or [] if isinstance(e, dict)]
    return {
        "rows": len(record["rows"]),
        "tokens": sum(int(e.get("tokens") or 0) for e in epochs),
        "epochs": epochs,
    }


def _run_of_checkpoint(all_runs: list[dict[str, Any]], path: str) -> dict[str, Any]:
    for record in all_runs[::-1]:
        made = [
            (c.get("sampler_path"), c.get("state_path"))
            for c in record.get("checkpoints") or []
        ]
        smoke = (record.get("smoke") or {}).get("checkpoint")
        if path == smoke or any(path in pair for pair in made):
            return record
    raise RunNotFoundError(f"no run made checkpoint {path}")


def _last_sampler(run: dict[str, Any]) -> str | None:
    paths = [c.get("sampler_path") for c in run.get("checkpoints") or []]
    found = [p for p in paths if p]
    return str(found[-1]) if found else None


def _actions(store: Store, commit: Commit) -> dict[str, int]:
    """How many tags, moves, rewrites, removals... changed the rows up to here."""
    counted: Counter[str] = Counter()
    for entry in history.log(store, commit):
        before = entry.commit.parents[0] if entry.commit.parents else None
        if _rows_of(entry.commit) != (_rows_of(before) if before else None):
            counted[entry.action] += 1
    return dict(sorted(counted.items()))


def _rows_of(commit: Commit) -> pygit2.Oid | None:
    try:
        return commit.tree[rows.ROWS_DIR].id
    except KeyError:
        return None


def _frozen_eval(store: Store, release: releases.Release) -> dict[str, Any]:
    """The eval set and the exact baseline blob the release's gates were frozen on."""
    assert release.prereg is not None
    pin = release.prereg.gates.eval
    try:
        blob = store.repo[pin.baseline.blob].peel(pygit2.Blob).data
        scores = jsonio.load_object(blob, pin.baseline.path, ReleaseError).get("scores")
    except (KeyError, ValueError, pygit2.GitError):
        raise ReleaseError(
            f"the baseline {release.id} was gated on ({pin.baseline.blob[:12]}) is "
            "missing from the store"
        ) from None
    return {
        "id": pin.id,
        "commit": pin.commit,
        "baseline": {
            "model": pin.baseline.model,
            "blob": pin.baseline.blob,
            "scores": scores,
            "frozen_in": release.id,
        },
    }


def _eval_now(store: Store, eval_id: str) -> dict[str, Any]:
    """The eval set a run held out, with the results recorded on it today."""
    from machine_git.train import evals

    commit = evals.commit_of(store, eval_id)
    results: list[dict[str, Any]] = []
    snap = store.snapshot()
    folder = f"{evals.EVALS_DIR}/{eval_id}/results"
    if snap.tree is not None and folder in snap.tree:
        for entry in store.repo[snap.tree[folder].id].peel(type(snap.tree)):
            data = snap.read(f"{folder}/{entry.name}")
            if data is not None:
                value = parse_row(data, f"{folder}/{entry.name}")
                results.append(
                    {"model": value.get("model"), "scores": value.get("scores")}
                )
    return {"id": eval_id, "commit": str(commit.id), "results": results}


def _trained_record(run: dict[str, Any]) -> dict[str, Any] | None:
    """The run's per-step record of what it trained, or None if it has none."""
    record = run.get("trained")
    if isinstance(record, dict) and isinstance(record.get("rows"), list):
        return record
    if run.get("status") == "prepared" and not run.get("steps"):
        return {"rows": [], "epochs": []}  # not started: nothing trained yet
    return None


def _roles(store: Store, run: dict[str, Any]) -> list[dict[str, str]]:
    """Each row of the run's kind: trained, not trained, eval, or unknown."""
    given, held = training_rows(store, run)
    record = _trained_record(run)
    done = frozenset(record["rows"]) if record is not None else None
    out = [{"id": row_id, "role": "eval"} for row_id in held]
    for row_id in given:
        role = "unknown" if done is None else "trained" if row_id in done else None
        out.append({"id": row_id, "role": role or "not trained"})
    return sorted(out, key=lambda r: r["id"])


def training_rows(store: Store, run: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(rows the run was given, rows held out for its eval set), by id.

    Training's own rule (``train.selection``) at the run's dataset commit,
    with the eval set the run held out: not today's, which a later draw may
    have replaced.
    """
    from machine_git.train import selection

    dataset = run.get("dataset") or {}
    commit = store.repo.revparse_single(str(dataset["commit"])).peel(Commit)
    given: list[str] = []
    held: list[str] = []
    for chosen in selection.training_rows(
        store,
        commit,
        str(dataset.get("kind")),
        keep_held_out=True,
        held_out=held_out_by(store, dataset.get("held_out_eval")),
        where=tuple(str(w) for w in dataset.get("where") or ()),
    ):
        (held if chosen.held_out else given).append(chosen.row_id)
    return given, held


def run_rows(store: Store, name: str) -> frozenset[str] | None:
    """The rows the run ``name`` learned from, or None if it has no record.

    ``machine diff RUN`` compares these (history.diff.compare takes this
    function, so the history layer never imports training).
    """
    from machine_git.train import runs

    record = runs.read(store, name)
    if record is None:
        return None
    return frozenset(learned_rows(store, record))


def learned_rows(store: Store, run: dict[str, Any]) -> list[str]:
    """The rows a run learned from: its ``trained`` record's, else all it was given.

    A run that failed mid-way learned only from the rows of its completed
    steps; a run recorded before per-step records is taken at its export.
    """
    given, _ = training_rows(store, run)
    record = run.get("trained")
    if isinstance(record, dict) and isinstance(record.get("rows"), list):
        done = set(record["rows"])
        return [row_id for row_id in given if row_id in done]
    return given
