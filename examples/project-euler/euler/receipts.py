"""Receipts in the machine store, and holdouts + gates for releases.

A receipt is one commit writing ``receipts/project-euler/<run-id>.json``
(trailer ``Machine-Action: receipt``): the run's seed, every variant's seed
and parameters, each program's sha256, outputs and scores, and the hashes of
the harness and of the frozen transfer list, so a result can be traced to
exactly what produced it. machine_git is imported here only, and lazily.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from euler import problems
from euler import variants

HERE = Path(__file__).parent
_HARNESS: tuple[str, ...] = (
    "problems.py",
    "variants.py",
    "sandbox.py",
    "launch.py",
    "group.py",
    "cgroup.py",
    "mutate.py",
)
_HARNESS += ("score.py", "guard_py.py", "guard_js.js")


def run_id(seed: str) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return f"{stamp}-{hashlib.sha256(seed.encode()).hexdigest()[:8]}"


def harness_sha256() -> str:
    digest = hashlib.sha256()
    for name in _HARNESS:
        digest.update(name.encode() + b"\0" + (HERE / name).read_bytes())
    return digest.hexdigest()


def build(
    rid: str, seed: str, results: list[dict[str, Any]], summary: dict[str, Any]
) -> dict[str, Any]:
    return {
        "kind": "project-euler",
        "run": rid,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seed": seed,
        "harness_sha256": harness_sha256(),
        "transfer_sha256": variants.file_sha256(),
        "results": results,
        "summary": summary,
    }


def path(rid: str) -> str:
    return f"receipts/project-euler/{rid}.json"


def commit(store_path: Path, receipt: dict[str, Any]) -> str:
    """Write the receipt as one commit; returns the commit id."""
    from machine_git.core import jsonio
    from machine_git.store.store import Change
    from machine_git.store.store import Snapshot
    from machine_git.store.store import Store

    store = Store.open(store_path)
    data = jsonio.canonical(receipt)
    rid = str(receipt["run"])

    def plan(_snapshot: Snapshot) -> Change:
        summary = receipt["summary"]
        return Change(
            summary=f"project-euler receipt {rid}: score {summary['score']}",
            files={path(rid): data},
            trailers={"Action": "receipt", "Receipt": rid},
        )

    oid = store.write(plan)
    return str(oid)


def holdouts(problem_ids: list[str], seed: str, count: int) -> list[dict[str, Any]]:
    """Release holdouts: hidden variants of the seed, then the frozen ones."""
    cases = []
    for pid in problem_ids:
        for v in variants.hidden(pid, seed, count) + variants.transfer(pid):
            cases.append(
                {
                    "id": f"project-euler/{v.id}",
                    "messages": [{"role": "user", "content": v.question()}],
                    "reference": str(v.answer()),
                }
            )
    return cases


def write_gates(
    out: Path, problem_ids: list[str], seed: str, count: int, mastery: float
) -> tuple[Path, Path]:
    """holdouts.jsonl + gates.json for ``machine release new --gates``."""
    for pid in problem_ids:
        problems.get(pid)
    out.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(c, sort_keys=True) for c in holdouts(problem_ids, seed, count)]
    hold = out / "holdouts.jsonl"
    hold.write_text("\n".join(lines) + "\n")
    gates = {
        "gates": {
            "metrics": [{"metric": "exact", "min_delta": 0.0}],
            "no_regress": {"metric": "exact", "cases": "all"},
            "holdouts": {
                "file": hold.name,
                "metrics": [{"metric": "exact", "min": mastery}],
            },
        }
    }
    gates_path = out / "gates.json"
    gates_path.write_text(json.dumps(gates, indent=2) + "\n")
    return hold, gates_path
