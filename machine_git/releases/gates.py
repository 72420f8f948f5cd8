"""Judging a check: the candidate's answers against the frozen gates.

Pure: the same answers, preregistration and baseline give the same verdict,
so anyone can recompute a recorded check offline from its own outputs. Every
gate is judged against what was preregistered, never against anything chosen
after the fact: the eval set at its commit, the baseline results blob named in
the preregistration, and the holdouts stored with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from machine_git.releases.records import CaseResult
from machine_git.releases.records import GateResult
from machine_git.releases.records import MetricGate
from machine_git.releases.records import NoRegress
from machine_git.releases.records import Prereg
from machine_git.releases.records import Regressed
from machine_git.releases.records import Sample
from machine_git.train.evals import Case
from machine_git.train.evals import score


@dataclass(frozen=True)
class Verdict:
    gates: list[GateResult]
    cases: list[CaseResult]
    holdouts: list[CaseResult]

    @property
    def passed(self) -> bool:
        return all(g.passed for g in self.gates)


def judge(
    prereg: Prereg,
    on_eval: list[Case],
    on_holdouts: list[Case],
    samples: list[Sample],
    baseline: dict[str, Any],
) -> Verdict:
    """Score each sample against its case, then every frozen gate."""
    scored = [
        _scored(case, sample)
        for case, sample in zip([*on_eval, *on_holdouts], samples, strict=True)
    ]
    cases, holdouts = scored[: len(on_eval)], scored[len(on_eval) :]
    gates = prereg.gates
    base_cases = [c for c in baseline.get("cases") or [] if isinstance(c, dict)]
    results = [_metric(g, base_cases, cases) for g in gates.metrics]
    if gates.no_regress is not None:
        results.append(_no_regress(gates.no_regress, base_cases, cases))
    if gates.holdouts is not None:
        results.extend(_holdout(g, holdouts) for g in gates.holdouts.metrics)
    return Verdict(results, cases, holdouts)


def _scored(case: Case, sample: Sample) -> CaseResult:
    scores = score(sample.output, case.reference)
    return CaseResult(
        row=case.row_id,
        kind=case.kind,
        reference=case.reference,
        output=sample.output,
        tool_calls=sample.tool_calls,
        stop_reason=sample.stop_reason,
        tokens=sample.tokens,
        exact=scores["exact"],
        normalized=scores["normalized"],
    )


def _metric(
    gate: MetricGate, baseline: list[dict[str, Any]], cases: list[CaseResult]
) -> GateResult:
    base = _mean([c.get(gate.metric) for c in baseline])
    cand = _mean([getattr(c, gate.metric) for c in cases])
    least = gate.min if gate.min is not None else 0.0
    ok = cand >= base + gate.min_delta and cand >= least
    need = [f"delta >= {gate.min_delta * 100:+.1f} pts"]
    if gate.min is not None:
        need.append(f"min {_pct(gate.min)}")
    detail = f"baseline {_pct(base)} -> candidate {_pct(cand)} ({', '.join(need)})"
    return GateResult(
        name=f"eval {gate.metric}", passed=ok, detail=detail, regressed=[]
    )


def _no_regress(
    gate: NoRegress, baseline: list[dict[str, Any]], cases: list[CaseResult]
) -> GateResult:
    by_row = {str(c.get("row")): c for c in baseline}
    wanted = gate.cases
    lost = [
        Regressed(
            row=c.row,
            reference=c.reference,
            baseline=_text(by_row[c.row].get("output")),
            candidate=c.output,
        )
        for c in cases
        if c.row in by_row
        and (wanted == "all" or c.row in wanted)
        and by_row[c.row].get(gate.metric)
        and not getattr(c, gate.metric)
    ]
    detail = "no case regressed" if not lost else f"{len(lost)} cases regressed"
    return GateResult(
        name=f"no regressions ({gate.metric})",
        passed=not lost,
        detail=detail,
        regressed=lost,
    )


def _holdout(gate: MetricGate, holdouts: list[CaseResult]) -> GateResult:
    cand = _mean([getattr(c, gate.metric) for c in holdouts])
    least = gate.min if gate.min is not None else 0.0
    detail = f"{_pct(cand)} of {len(holdouts)} (min {_pct(least)})"
    return GateResult(
        name=f"holdouts {gate.metric}",
        passed=cand >= least,
        detail=detail,
        regressed=[],
    )


def _mean(values: list[Any]) -> float:
    return sum(bool(v) for v in values) / len(values) if values else 0.0


def _pct(value: float) -> str:
    return f"{value * 100:.1f}%"


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
