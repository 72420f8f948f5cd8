"""Checking a release: sample the candidate on its frozen gates and holdouts.

Every gate is judged against what was preregistered, never against anything
chosen after the fact: the eval set at its commit, the baseline results blob
named in the preregistration, and the holdouts stored with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pygit2
from pygit2 import Commit

from machine_git import jsonio
from machine_git import rows
from machine_git.errors import ReleaseError
from machine_git.releases import _object
from machine_git.releases import assert_frozen
from machine_git.releases import check_path
from machine_git.releases import checks
from machine_git.releases import holdouts_path
from machine_git.releases import state
from machine_git.releases import state_path
from machine_git.store import Change
from machine_git.store import Store

# -- checking --------------------------------------------------------------------------


@dataclass
class Gate:
    name: str
    passed: bool
    detail: str
    regressed: list[dict[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "passed": self.passed,
            "detail": self.detail,
            "regressed": self.regressed,
        }


Sampler = Callable[[list[Any], str, str], list[dict[str, Any]]]
"""(cases, base model, checkpoint) -> outputs, as train.sampling.sample gives."""


def holdout_cases(store: Store, release_id: str) -> list[Any]:
    from machine_git.train.evals import Case

    data = store.snapshot().read(holdouts_path(release_id)) or b""
    out = []
    for line in data.splitlines():
        if line.strip():
            case = jsonio.loads(line)
            out.append(
                Case(str(case["id"]), "holdout", case["messages"], case["reference"])
            )
    return out


def check(store: Store, release_id: str, sample: Sampler) -> tuple[dict[str, Any], str]:
    """Sample the candidate on the frozen gates and holdouts; commit the result."""
    from machine_git.train import evals

    record = assert_frozen(store, release_id)
    gates = record["gates"]
    eval_info = gates["eval"]
    eval_commit = store.repo.revparse_single(eval_info["commit"]).peel(Commit)
    eval_data = store.snapshot(eval_commit).read(evals.path_of(str(eval_info["id"])))
    if eval_data is None:
        raise ReleaseError(
            f"eval set {eval_info['id']} is not at {eval_info['commit'][:12]}"
        )
    eval_set = _object(eval_data, evals.path_of(str(eval_info["id"])))
    cases, skipped = evals.cases(store, eval_set)
    held = holdout_cases(store, release_id)
    candidate = record["candidate"]
    outputs = sample(cases + held, candidate["base_model"], candidate["checkpoint"])
    scored = [
        {**o, **evals.score(str(o.get("output") or ""), str(o["reference"]))}
        for o in outputs
    ]
    on_eval = scored[: len(cases)]
    on_holdouts = scored[len(cases) :]
    baseline_blob = store.repo[eval_info["baseline"]["blob"]].peel(pygit2.Blob).data
    baseline = _object(baseline_blob, eval_info["baseline"]["path"])
    by_row = {c["row"]: c for c in baseline.get("cases") or []}
    results: list[Gate] = []
    for gate in gates.get("metrics") or []:
        metric = gate["metric"]
        base_score = _mean([c[metric] for c in baseline.get("cases") or []])
        cand = _mean([c[metric] for c in on_eval])
        ok = cand >= base_score + float(gate.get("min_delta", 0.0)) and cand >= float(
            gate.get("min", 0.0)
        )
        results.append(Gate(f"eval {metric}", ok, _vs(base_score, cand, gate), []))
    regress = gates.get("no_regress")
    if regress:
        metric = regress["metric"]
        wanted = regress.get("cases", "all")
        lost = [
            {
                "row": c["row"],
                "reference": c["reference"],
                "baseline": by_row[c["row"]].get("output"),
                "candidate": c.get("output"),
            }
            for c in on_eval
            if c["row"] in by_row
            and (wanted == "all" or c["row"] in wanted)
            and by_row[c["row"]].get(metric)
            and not c[metric]
        ]
        detail = "no case regressed" if not lost else f"{len(lost)} cases regressed"
        results.append(Gate(f"no regressions ({metric})", not lost, detail, lost))
    for gate in (gates.get("holdouts") or {}).get("metrics") or []:
        metric = gate["metric"]
        cand = _mean([c[metric] for c in on_holdouts])
        ok = cand >= float(gate.get("min", 0.0))
        least = float(gate.get("min", 0.0))
        detail = f"{_pct(cand)} of {len(on_holdouts)} (min {_pct(least)})"
        results.append(Gate(f"holdouts {metric}", ok, detail, []))
    passed = all(g.passed for g in results)
    number = len(checks(store, release_id)) + 1
    result = {
        "release": release_id,
        "number": number,
        "created_at": rows.now(),
        "checkpoint": candidate["checkpoint"],
        "eval": {
            "id": eval_info["id"],
            "commit": eval_info["commit"],
            "skipped": skipped,
        },
        "passed": passed,
        "gates": [g.as_dict() for g in results],
        "cases": on_eval,
        "holdouts": on_holdouts,
    }
    current = state(store, release_id)
    new_state = {
        **current,
        "status": current.get("status")
        if current.get("status") in ("trial", "active")
        else ("passed" if passed else "failed"),
        "last_check": number,
        "last_check_passed": passed,
    }
    oid = store.write(
        lambda snap: Change(
            summary=(
                f"release check {release_id}: {'pass' if passed else 'fail'} "
                f"({sum(g.passed for g in results)}/{len(results)} gates)"
            ),
            files={
                check_path(release_id, number): jsonio.canonical(result),
                state_path(release_id): jsonio.canonical(new_state),
            },
            trailers={
                "Action": "release-check",
                "Release": release_id,
                "Result": "pass" if passed else "fail",
            },
        )
    )
    return result, str(oid)


def _mean(values: list[Any]) -> float:
    return sum(bool(v) for v in values) / len(values) if values else 0.0


def _pct(value: float) -> str:
    return f"{value * 100:.1f}%"


def _vs(base: float, cand: float, gate: dict[str, Any]) -> str:
    need = [f"delta >= {float(gate.get('min_delta', 0.0)) * 100:+.1f} pts"]
    if "min" in gate:
        need.append(f"min {_pct(float(gate['min']))}")
    return f"baseline {_pct(base)} -> candidate {_pct(cand)} ({', '.join(need)})"
