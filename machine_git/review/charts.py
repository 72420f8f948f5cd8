"""The numbers behind the charts: training metrics per step, rows per kind per version.

A chart is plain data (:class:`Chart`); the page embeds it as a JSON data
block (never executed) and the shipped uPlot draws it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any
from typing import TypedDict

from machine_git.core import jsonio
from machine_git.history import versions
from machine_git.rows.schemas import KINDS
from machine_git.store import stats
from machine_git.store.store import Store

METRICS_FILE = "metrics.jsonl"  # what machine_git/train/loop.py appends to
_NOT_METRICS = frozenset({"step", "epoch", "batch"})
_FIRST = ("train_mean_nll", "loss", "learning_rate")
_MAX_BYTES = 64 * 1024 * 1024  # a metrics file larger than this is read in part
_LOSS: dict[str, str] = {
    "loss": "train_mean_nll"
}  # a run record's name -> metrics.jsonl's
KIND_COLORS = {  # as the pages colour each kind
    "train": "#1f7a3f",
    "traces": "#49a86b",
    "rejected": "#b3261e",
    "observed": "#5b3aa6",
}


class Series(TypedDict):
    label: str
    values: list[float | None]
    color: str  # empty: the page's palette


class Chart(TypedDict):
    id: str
    title: str
    x: list[float]
    xlabel: str
    xnames: list[str]  # names of categorical x values (empty: numeric x)
    series: list[Series]


def metrics_lines(folder: Path) -> list[dict[str, Any]]:
    """The records of a run folder's ``metrics.jsonl`` (bad lines skipped)."""
    path = folder / METRICS_FILE
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_BYTES)
    except OSError:
        return []
    found = []
    for line in data.splitlines():
        try:
            value = jsonio.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict) and _number(value.get("step")) is not None:
            found.append(value)
    return found


def metric_charts(lines: list[dict[str, Any]]) -> list[Chart]:
    """One chart per numeric metric against step, the loss first."""
    names: list[str] = []
    for line in lines:
        for key, value in line.items():
            if (
                key not in _NOT_METRICS
                and key not in names
                and _number(value) is not None
            ):
                names.append(key)
    names.sort(key=lambda n: (_FIRST.index(n) if n in _FIRST else len(_FIRST), n))
    x = [float(line["step"]) for line in lines]
    return [
        Chart(
            id=f"metric-{index}",
            title=name,
            x=x,
            xlabel="step",
            xnames=[],
            series=[
                Series(
                    label=name,
                    values=[_number(line.get(name)) for line in lines],
                    color="",
                )
            ],
        )
        for index, name in enumerate(names)
    ]


def steps_as_lines(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The steps a run's record keeps, shaped like ``metrics.jsonl`` lines.

    Used when the run folder is not on this machine (a cloned store).
    """
    out = []
    for step in record.get("steps") or []:
        if isinstance(step, dict) and _number(step.get("step")) is not None:
            out.append({_LOSS.get(str(k), str(k)): v for k, v in step.items()})
    return out


def composition(store: Store) -> tuple[Chart, list[dict[str, Any]]]:
    """Rows per kind at every named version and now; the chart and its table."""
    points: list[tuple[str, dict[str, int]]] = [
        (v.name, stats.counts(store, v.commit)) for v in versions.listing(store)
    ]
    points.append(("now", stats.counts(store)))
    kinds = [k for k in KINDS if any(c.get(k) for _, c in points)] or list(KINDS)
    chart = Chart(
        id="composition",
        title="rows per kind",
        x=[float(i) for i in range(len(points))],
        xlabel="version",
        xnames=[name for name, _ in points],
        series=[
            Series(
                label=k,
                values=[float(c.get(k, 0)) for _, c in points],
                color=KIND_COLORS.get(k, ""),
            )
            for k in kinds
        ],
    )
    table = [{"name": name, "counts": counts} for name, counts in points]
    return chart, table


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None
