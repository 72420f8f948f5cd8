"""Score one program on one problem: correctness, transfer, mutation sensitivity.

Correctness is measured on the run's hidden variants (and, reported apart, on
the frozen transfer variants). Mutation sensitivity correlates changes to the
program with changes to its results: each sampled mutant runs on the first
few hidden variants and is *killed* when any answer differs from the
original's (a crash or timeout counts as different). A program that computes
its answer is killed by most mutants; one that prints a stored answer behind
decoy code is not, because its logic does not reach the output.

    score = correctness * min(1, mutation_sensitivity / FULL_CREDIT)

FULL_CREDIT is below 1 because some mutants of a correct program are
equivalent (``range(1, n)`` -> ``range(0, n)`` adds 0).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from euler import mutate
from euler import sandbox
from euler.variants import Variant

FULL_CREDIT = 0.5
SUSPICIOUS = 0.25  # below this sensitivity a program is flagged


@dataclass(frozen=True)
class Settings:
    mutants: int = 16  # at most this many mutants per program
    mutant_variants: int = 3  # hidden variants each mutant runs on
    # Mutants often loop forever (a divisor starting at 1); a timeout is a
    # kill, so waiting the full limit for one would only slow the run.
    mutant_timeout: float = 2.0
    isolation: str | None = None
    limits: sandbox.Limits = dataclasses.field(default_factory=sandbox.Limits)
    workers: int = max(2, os.cpu_count() or 2)


def evaluate(
    problem_id: str,
    source: bytes,
    lang: str,
    hidden: list[Variant],
    transfer: list[Variant],
    settings: Settings,
    seed: str,
) -> dict[str, Any]:
    """The result of one problem: every variant's output, the mutants, the score."""
    text = source.decode()
    chosen = mutate.sample(mutate.mutants(text, lang), settings.mutants, seed)
    probe = hidden[: settings.mutant_variants]
    short = dataclasses.replace(settings.limits, timeout=settings.mutant_timeout)
    jobs = [(source, v, settings.limits) for v in hidden + transfer]
    jobs += [(m.source.encode(), v, short) for m in chosen for v in probe]

    def one(job: tuple[bytes, Variant, sandbox.Limits]) -> sandbox.Result:
        program, variant, limits = job
        return sandbox.run(
            program, lang, variant.stdin(), limits=limits, isolation=settings.isolation
        )

    with ThreadPoolExecutor(settings.workers) as pool:
        results = list(pool.map(one, jobs))
    base = results[: len(hidden) + len(transfer)]
    outputs = {v.id: r.answer() for v, r in zip(hidden + transfer, base, strict=True)}
    rows = [_variant_row(v, r) for v, r in zip(hidden + transfer, base, strict=True)]
    killed = []
    for i in range(len(chosen)):
        runs = results[len(base) + i * len(probe) : len(base) + (i + 1) * len(probe)]
        killed.append(
            any(r.answer() != outputs[v.id] for v, r in zip(probe, runs, strict=True))
        )
    hidden_rows = rows[: len(hidden)]
    correctness = _fraction(sum(r["correct"] for r in hidden_rows), len(hidden))
    sensitivity = _fraction(sum(killed), len(chosen))
    expected = {v.answer() for v in hidden}
    given = {r["output"] for r in hidden_rows if r["output"] is not None}
    inputs = min(1.0, len(given) / len(expected)) if expected else 0.0
    return {
        "problem": problem_id,
        "language": lang,
        "program_sha256": hashlib.sha256(source).hexdigest(),
        "isolation": base[0].isolation if base else None,
        "variants": rows,
        "mutants": [
            {"change": m.description, "killed": k}
            for m, k in zip(chosen, killed, strict=True)
        ],
        "correctness": correctness,
        "transfer": _fraction(
            sum(r["correct"] for r in rows[len(hidden) :]), len(transfer)
        ),
        "mutation_sensitivity": sensitivity,
        "input_sensitivity": round(inputs, 4),
        "suspicious": sensitivity < SUSPICIOUS or (len(expected) > 1 and inputs < 1),
        "score": round(correctness * min(1.0, sensitivity / FULL_CREDIT), 4),
    }


def _fraction(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


def _variant_row(variant: Variant, result: sandbox.Result) -> dict[str, Any]:
    output = result.answer()
    return {
        "id": variant.id,
        "seed": variant.seed,
        "params": variant.params,
        "output": output,
        "correct": output == str(variant.answer()),
        "returncode": result.returncode,
        "timed_out": result.timed_out,
        "stdout_sha256": hashlib.sha256(result.stdout).hexdigest(),
        "stderr_tail": result.stderr.decode(errors="replace")[-300:],
    }


def summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals over problems: means of the per-problem numbers."""
    n = len(results)

    def mean(key: str) -> float:
        return round(sum(float(r[key]) for r in results) / n, 4) if n else 0.0

    return {
        "problems": n,
        "correctness": mean("correctness"),
        "transfer": mean("transfer"),
        "mutation_sensitivity": mean("mutation_sensitivity"),
        "score": mean("score"),
        "suspicious": [r["problem"] for r in results if r["suspicious"]],
    }
