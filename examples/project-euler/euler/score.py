"""Score one program on one problem: correctness, transfer, mutation sensitivity.

Correctness is measured on the run's hidden variants and, apart, on the
frozen transfer variants (larger or edge-case inputs). Mutation sensitivity
correlates changes to the program with changes to its results: each sampled
mutant runs on the first few hidden variants and is *killed* when an answer
differs from the original's (a crash counts: the answer is gone). A program
that computes its answer is killed by most mutants; one that prints a stored
answer behind decoy code is not, because its logic does not reach the output.

Time cannot buy a kill: a mutant gets the time the original took on the same
variant, scaled (``budget_scale``, at least ``budget_min``), and a mutant that
runs out of it is a ``timeout``, which is not a kill. A program that sleeps
only makes its mutants wait as long.

    score = correctness * transfer * min(1, mutation_sensitivity / FULL_CREDIT)

Transfer is a factor: a program that ignores a parameter the hidden variants
happen not to exercise cannot score full. FULL_CREDIT is below 1 because
some mutants of a correct program are equivalent (``range(1, n)`` ->
``range(0, n)`` adds 0).

One bad program (not UTF-8, a syntax error the mutator cannot read, anything
that goes wrong while scoring it) is one failed result with a reason, never
the end of the whole evaluation.
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
    # A mutant's time: the original's on the same variant times budget_scale,
    # at least budget_min (start-up jitter), at most limits.timeout.
    budget_scale: float = 4.0
    budget_min: float = 1.0
    isolation: str | None = None
    allow_unsafe: bool = False  # isolation "none" (in-process guards only)
    limits: sandbox.Limits = dataclasses.field(default_factory=sandbox.Limits)
    workers: int = max(2, os.cpu_count() or 2)


Job = tuple[bytes, Variant, sandbox.Limits]


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
    try:
        return _evaluate(problem_id, source, lang, hidden, transfer, settings, seed)
    except sandbox.NoSandbox:
        raise  # the whole run has no sandbox: not this program's fault
    except Exception as e:  # noqa: BLE001 - one program's failure stays its own
        return failed(problem_id, lang, source, f"{type(e).__name__}: {e}")


def failed(problem_id: str, lang: str, source: bytes, reason: str) -> dict[str, Any]:
    """A result for a program that could not be scored, with the reason."""
    return {
        "problem": problem_id,
        "language": lang,
        "program_sha256": hashlib.sha256(source).hexdigest(),
        "isolation": None,
        "error": reason,
        "variants": [],
        "mutants": [],
        "correctness": 0.0,
        "transfer": 0.0,
        "mutation_sensitivity": 0.0,
        "input_sensitivity": 0.0,
        "suspicious": True,
        "score": 0.0,
    }


def _mutants(source: bytes, lang: str, settings: Settings, seed: str) -> tuple[
    list[mutate.Mutant], str | None
]:  # fmt: skip
    try:
        found = mutate.mutants(source.decode("utf-8"), lang)
    except UnicodeDecodeError as e:
        return [], f"not UTF-8 text (byte {e.start})"
    except mutate.CannotMutate as e:
        return [], str(e)
    return mutate.sample(found, settings.mutants, seed), None


def _evaluate(
    problem_id: str,
    source: bytes,
    lang: str,
    hidden: list[Variant],
    transfer: list[Variant],
    settings: Settings,
    seed: str,
) -> dict[str, Any]:
    everything = hidden + transfer
    chosen, error = _mutants(source, lang, settings, seed)
    base = _run_all([(source, v, settings.limits) for v in everything], lang, settings)
    probe = hidden[: settings.mutant_variants]
    limits = [
        dataclasses.replace(settings.limits, timeout=_budget(settings, r))
        for r in base[: len(probe)]
    ]
    jobs = [
        (m.source.encode(), v, lim)
        for m in chosen
        for v, lim in zip(probe, limits, strict=True)
    ]
    runs = _run_all(jobs, lang, settings)
    outcomes = [
        _outcome(base[: len(probe)], runs[i * len(probe) : (i + 1) * len(probe)])
        for i in range(len(chosen))
    ]
    rows = [_variant_row(v, r) for v, r in zip(everything, base, strict=True)]
    hidden_rows = rows[: len(hidden)]
    correctness = _fraction(sum(r["correct"] for r in hidden_rows), len(hidden))
    transferred = _fraction(
        sum(r["correct"] for r in rows[len(hidden) :]), len(transfer)
    )
    sensitivity = _fraction(outcomes.count("killed"), len(chosen))
    expected = {v.answer() for v in hidden}
    given = {r["output"] for r in hidden_rows if r["output"] is not None}
    inputs = min(1.0, len(given) / len(expected)) if expected else 0.0
    factor = transferred if transfer else 1.0
    result = {
        "problem": problem_id,
        "language": lang,
        "program_sha256": hashlib.sha256(source).hexdigest(),
        "isolation": base[0].isolation if base else None,
        "variants": rows,
        "mutants": [
            {
                "change": m.description,
                "status": status,
                "killed": status == "killed",
                "seconds": [round(lim.timeout, 3) for lim in limits],
            }
            for m, status in zip(chosen, outcomes, strict=True)
        ],
        "correctness": correctness,
        "transfer": transferred,
        "mutation_sensitivity": sensitivity,
        "input_sensitivity": round(inputs, 4),
        "suspicious": sensitivity < SUSPICIOUS or (len(expected) > 1 and inputs < 1),
        "score": round(correctness * factor * min(1.0, sensitivity / FULL_CREDIT), 4),
    }
    if error:
        result["error"] = error
    return result


def _run_all(jobs: list[Job], lang: str, settings: Settings) -> list[sandbox.Result]:
    def one(job: Job) -> sandbox.Result:
        program, variant, limits = job
        return sandbox.run(
            program,
            lang,
            variant.stdin(),
            limits=limits,
            isolation=settings.isolation,
            allow_unsafe=settings.allow_unsafe,
        )

    with ThreadPoolExecutor(settings.workers) as pool:
        return list(pool.map(one, jobs))


def _budget(settings: Settings, original: sandbox.Result) -> float:
    """A mutant's time on a variant: the original's, scaled, within the limit."""
    if original.stopped:
        return settings.limits.timeout
    scaled = max(settings.budget_min, settings.budget_scale * original.seconds)
    return min(settings.limits.timeout, scaled)


def _outcome(originals: list[sandbox.Result], runs: list[sandbox.Result]) -> str:
    """killed (an answer differs), timeout (not a kill), or survived."""
    pairs = list(zip(originals, runs, strict=True))
    if any(not m.timed_out and m.answer() != o.answer() for o, m in pairs):
        return "killed"
    if any(m.timed_out for _, m in pairs):
        return "timeout"
    return "survived"


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
        "stopped": result.stopped,
        "seconds": round(result.seconds, 3),
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
        "failed": [r["problem"] for r in results if "error" in r],
    }
