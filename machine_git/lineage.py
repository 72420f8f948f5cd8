"""Lineage: from a running model back to the rows it learned from.

release -> run -> checkpoint -> dataset commit -> rows (counts by kind, and
the tags, rewrites and other changes that made them) -> eval set and results.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pygit2 import Commit

from machine_git import history
from machine_git import releases
from machine_git import rows
from machine_git import stats
from machine_git.errors import ReleaseError
from machine_git.store import Store
from machine_git.store import parse_row


def trace(store: Store, what: str, with_rows: bool = False) -> dict[str, Any]:
    """The lineage of a release id, a run id or a ``tinker://`` checkpoint."""
    from machine_git.train import evals
    from machine_git.train import runs

    release: dict[str, Any] | None = None
    checkpoint: str | None = None
    if what.startswith("BR-"):
        release = releases.read(store, releases.check_id(what))
        run = runs.find(store, str(release["candidate"]["run"]))
        checkpoint = str(release["candidate"]["checkpoint"])
    elif what.startswith("tinker://"):
        run = _run_of_checkpoint(runs.all_runs(store), what)
        checkpoint = what
    else:
        run = runs.find(store, what)
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
            "rows_trained": dataset.get("rows"),
            "held_out_eval": dataset.get("held_out_eval"),
            "held_out_rows": dataset.get("held_out_rows"),
            "counts": stats.counts(store, commit),
            "history": _actions(store, commit),
        },
        "eval": None,
    }
    if release is not None:
        state = releases.state(store, what)
        out["release"] = {
            "id": release["id"],
            "title": release.get("title"),
            "status": state.get("status"),
            "checks": [
                {"number": c["number"], "passed": c["passed"]}
                for c in releases.checks(store, what)
            ],
        }
    eval_id = dataset.get("held_out_eval")
    if eval_id:
        out["eval"] = _eval(store, evals, str(eval_id))
    if with_rows:
        out["dataset"]["rows"] = _row_ids(
            store, commit, dataset.get("kind"), evals, eval_id
        )
    return out


def _run_of_checkpoint(all_runs: list[dict[str, Any]], path: str) -> dict[str, Any]:
    for record in all_runs[::-1]:
        made = [
            (c.get("sampler_path"), c.get("state_path"))
            for c in record.get("checkpoints") or []
        ]
        smoke = (record.get("smoke") or {}).get("checkpoint")
        if path == smoke or any(path in pair for pair in made):
            return record
    raise ReleaseError(f"no run made checkpoint {path}")


def _last_sampler(run: dict[str, Any]) -> str | None:
    paths = [c.get("sampler_path") for c in run.get("checkpoints") or []]
    found = [p for p in paths if p]
    return str(found[-1]) if found else None


def _actions(store: Store, commit: Commit) -> dict[str, int]:
    """How many tags, moves, rewrites, removals... led to this dataset commit."""
    counted: Counter[str] = Counter()
    for entry in history.log(store, commit):
        if entry.action not in ("init", "setting") and not entry.action.startswith(
            ("train-", "eval-", "release-")
        ):
            counted[entry.action] += 1
    return dict(sorted(counted.items()))


def _eval(store: Store, evals: Any, eval_id: str) -> dict[str, Any]:
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


def _row_ids(
    store: Store, commit: Commit, kind: Any, evals: Any, eval_id: Any
) -> list[dict[str, str]]:
    held = None
    if eval_id:
        at = evals.commit_of(store, str(eval_id))
        data = store.snapshot(at).read(evals.path_of(str(eval_id)))
        held = parse_row(data, evals.path_of(str(eval_id))) if data else None
    sessions = frozenset((held or {}).get("sessions") or [])
    ids = frozenset((held or {}).get("rows") or [])
    out = []
    for path, data in store.iter_row_blobs(commit):
        row_id = rows.id_of_path(path)
        if row_id is None:
            continue
        row = parse_row(data, path)
        if row.get("kind") != kind:
            continue
        out_of_training = row_id in ids or evals.session_hash(row) in sessions
        out.append({"id": row_id, "role": "eval" if out_of_training else "trained"})
    return out
