"""Runs (data commit, configuration, curves, checkpoints, evals) and releases."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from machine_git import releases
from machine_git.core import jsonio
from machine_git.core import paths
from machine_git.core.errors import NotFoundError
from machine_git.review import charts
from machine_git.review.web import Site
from machine_git.store.store import Store
from machine_git.train import evals
from machine_git.train import runs


def runs_page(site: Site, request: Request) -> Response:
    store = site.store()
    listed = [runs.summary(r) for r in reversed(runs.all_runs(store))]
    return site.render(
        request, "runs.html", {"page": "runs", "runs": listed}, store=store
    )


def run_page(site: Site, request: Request) -> Response:
    store = site.store()
    run_id = paths.check_name(str(request.path_params["run"]), "run id")
    record = runs.read(store, run_id)
    if record is None or record.get("id") != run_id:
        raise NotFoundError(f"no run {run_id!r} (see the Runs page)")
    lines = charts.metrics_lines(runs.folder(store, run_id))
    source = "metrics.jsonl"
    if not lines:
        lines, source = charts.steps_as_lines(record), "the run's record"
    return site.render(
        request,
        "run.html",
        {
            "page": "runs",
            "run": record,
            "summary": runs.summary(record),
            "hyper": sorted((record.get("hyperparameters") or {}).items()),
            "dataset": record.get("dataset") or {},
            "charts": charts.metric_charts(lines),
            "metrics_source": source,
            "steps_shown": len(lines),
            "checkpoints": record.get("checkpoints") or [],
            "smoke": record.get("smoke"),
            "scores": eval_scores(store, record),
            "record_json": jsonio.canonical(record).decode(),
            "releases": [
                r.id
                for r in releases.listing(store)
                if r.prereg is not None and r.prereg.candidate.run == run_id
            ],
        },
        store=store,
    )


def eval_scores(store: Store, record: dict[str, Any]) -> list[dict[str, Any]]:
    """The recorded eval results of the base model and of the run's checkpoints."""
    eval_id = (record.get("dataset") or {}).get("held_out_eval")
    if not eval_id:
        current = evals.active(store)
        eval_id = current.get("id") if current else None
    if not eval_id:
        return []
    base = str(record.get("base_model") or "")
    models = [("baseline", base)] + [
        (f"checkpoint {c.get('name')}", str(c["sampler_path"]))
        for c in record.get("checkpoints") or []
        if c.get("sampler_path")
    ]
    found: list[dict[str, Any]] = []
    baseline: dict[str, Any] | None = None
    for role, model in models:
        data = store.snapshot().read(evals.results_path(str(eval_id), model))
        if data is None:
            continue
        scores = (jsonio.loads(data).get("scores")) or {}
        entry = {"role": role, "model": model, "eval": eval_id, **_scores(scores)}
        if role == "baseline":
            baseline = entry
        elif baseline is not None:
            entry["delta"] = {
                k: _delta(entry[k], baseline[k]) for k in ("exact", "normalized")
            }
        found.append(entry)
    return found


def _scores(scores: dict[str, Any]) -> dict[str, Any]:
    return {
        "cases": scores.get("cases"),
        "exact": scores.get("exact"),
        "normalized": scores.get("normalized"),
        "delta": None,
    }


def _delta(value: Any, base: Any) -> float | None:
    if isinstance(value, int | float) and isinstance(base, int | float):
        return float(value) - float(base)
    return None


# -- releases --------------------------------------------------------------------


def releases_page(site: Site, request: Request) -> Response:
    store = site.store()
    return site.render(
        request,
        "releases.html",
        {
            "page": "releases",
            "releases": [
                r.to_json() for r in releases.listing(store) if r.prereg is not None
            ],
        },
        store=store,
    )


def release_page(site: Site, request: Request) -> Response:
    store = site.store()
    release_id = releases.check_id(str(request.path_params["release"]))
    found = releases.detail(store, release_id)
    if found["prereg"] is None:
        raise NotFoundError(f"no release {release_id} (see the Releases page)")
    record = found["prereg"]
    return site.render(
        request,
        "release.html",
        {
            "page": "releases",
            "release": record,
            "state": found["state"],
            "gates": record.get("gates") or {},
            "checks": list(reversed(found["checks"])),
            "record_json": jsonio.canonical(record).decode(),
        },
        store=store,
    )
