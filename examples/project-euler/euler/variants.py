"""Variants: hidden ones drawn per run from a seed, frozen ones from a file.

Hidden variants make answers impossible to memorize: each run draws a fresh
seed (unless one is given to reproduce a run), and every variant's parameters
come from its own sub-seed, so a receipt can name the seed of each variant.
Frozen transfer variants are a fixed list committed beside this module
(transfer.json, parameters only) that every run also reports, separately, so
scores stay comparable across runs.
"""

from __future__ import annotations

import hashlib
import json
import random
import secrets
from dataclasses import dataclass
from pathlib import Path

from euler import problems

TRANSFER = Path(__file__).with_name("transfer.json")


@dataclass(frozen=True)
class Variant:
    problem: str
    id: str  # unique within a run: <problem>/<hidden|transfer>-<n>
    seed: str | None  # the sub-seed hidden variants were drawn from
    params: dict[str, int]

    def answer(self) -> int:
        """The reference answer, computed now (answer keys are never stored)."""
        return problems.get(self.problem).solve(self.params)

    def stdin(self) -> bytes:
        return json.dumps(self.params, sort_keys=True).encode() + b"\n"

    def question(self) -> str:
        return problems.get(self.problem).question.format(**self.params)


def new_seed() -> str:
    return secrets.token_hex(8)


def sub_seed(run_seed: str, problem_id: str, index: int) -> str:
    text = f"{run_seed}:{problem_id}:{index}".encode()
    return hashlib.sha256(text).hexdigest()[:16]


def hidden(problem_id: str, run_seed: str, count: int) -> list[Variant]:
    """``count`` variants of a problem drawn from the run's seed."""
    problem = problems.get(problem_id)
    found: list[Variant] = []
    for index in range(count):
        seed = sub_seed(run_seed, problem_id, index)
        params = problem.sample(random.Random(int(seed, 16)))
        found.append(Variant(problem_id, f"{problem_id}/hidden-{index}", seed, params))
    return found


def transfer(problem_id: str, path: Path = TRANSFER) -> list[Variant]:
    """The frozen transfer variants of a problem (the committed list)."""
    problems.get(problem_id)
    table = json.loads(path.read_text())
    return [
        Variant(problem_id, f"{problem_id}/transfer-{i}", None, dict(params))
        for i, params in enumerate(table.get(problem_id, []))
    ]


def file_sha256(path: Path = TRANSFER) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
