"""The problems: a statement, a parameter sampler and a reference solver each.

A candidate program reads one JSON object of parameters on stdin and prints
the answer as a decimal integer; the agent writes it once per problem and the
harness runs it on variants it has never seen. Reference solvers are here and
nowhere else: answer keys are computed when a run needs them, never stored.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Params = dict[str, int]


@dataclass(frozen=True)
class Problem:
    id: str
    title: str
    # The statement the agent sees: the task in general, with the I/O contract.
    statement: str
    # One concrete question for a chat model (holdouts): formatted with params.
    question: str
    sample: Callable[[random.Random], Params]
    solve: Callable[[Params], int]


def _multiples_sample(rng: random.Random) -> Params:
    a, b = sorted(rng.sample(range(2, 10), 2))
    return {"a": a, "b": b, "n": rng.randrange(500, 200_000)}


def _multiples(p: Params) -> int:
    def below(k: int) -> int:  # sum of the multiples of k below n
        m = (p["n"] - 1) // k
        return k * m * (m + 1) // 2

    both = p["a"] * p["b"] // math.gcd(p["a"], p["b"])
    return below(p["a"]) + below(p["b"]) - below(both)


def _fibonacci_sample(rng: random.Random) -> Params:
    return {"k": rng.randrange(2, 6), "n": rng.randrange(10**3, 10**12)}


def _fibonacci(p: Params) -> int:
    total, a, b = 0, 1, 2
    while a <= p["n"]:
        if a % p["k"] == 0:
            total += a
        a, b = b, a + b
    return total


def _prime_factor_sample(rng: random.Random) -> Params:
    # A product of a few primes, so the largest factor is not trivially n.
    n = 1
    while n < 10**5:
        n *= rng.choice(_PRIMES)
    return {"n": n}


def _is_prime(k: int) -> bool:
    return k > 1 and all(k % d for d in range(2, math.isqrt(k) + 1))


_PRIMES = [k for k in range(2, 5000) if _is_prime(k)]


def _largest_prime_factor(p: Params) -> int:
    n, d, last = p["n"], 2, 1
    while d * d <= n:
        while n % d == 0:
            n, last = n // d, d
        d += 1
    return n if n > 1 else last


def _smallest_multiple_sample(rng: random.Random) -> Params:
    lo = rng.randrange(1, 8)
    return {"lo": lo, "hi": rng.randrange(lo + 8, 31)}


def _smallest_multiple(p: Params) -> int:
    value = 1
    for k in range(p["lo"], p["hi"] + 1):
        value = value * k // math.gcd(value, k)
    return value


def _power_digits_sample(rng: random.Random) -> Params:
    return {"base": rng.randrange(2, 10), "exponent": rng.randrange(50, 1000)}


def _power_digits(p: Params) -> int:
    return sum(int(c) for c in str(p["base"] ** p["exponent"]))


_IO = (
    " Read one JSON object with the keys {keys} from standard input and print"
    " the answer as a decimal integer on standard output."
)

PROBLEMS: dict[str, Problem] = {
    p.id: p
    for p in [
        Problem(
            "multiples",
            "Sum of multiples",
            "Find the sum of all natural numbers below n that are multiples of a"
            " or of b (a number that is a multiple of both counts once). For"
            " a=3, b=5, n=10 the numbers are 3, 5, 6, 9 and the sum is 23."
            + _IO.format(keys="a, b, n"),
            "What is the sum of all natural numbers below {n} that are multiples"
            " of {a} or of {b}? Answer with the number only.",
            _multiples_sample,
            _multiples,
        ),
        Problem(
            "fibonacci",
            "Divisible Fibonacci sum",
            "The sequence 1, 2, 3, 5, 8, 13, ... starts with 1 and 2; each later"
            " term is the sum of the two before it. Find the sum of the terms"
            " that do not exceed n and are divisible by k. For k=2, n=100 the"
            " terms are 2, 8, 34 and the sum is 44." + _IO.format(keys="k, n"),
            "In the sequence 1, 2, 3, 5, 8, ... (each term the sum of the two"
            " before), what is the sum of the terms not exceeding {n} that are"
            " divisible by {k}? Answer with the number only.",
            _fibonacci_sample,
            _fibonacci,
        ),
        Problem(
            "prime-factor",
            "Largest prime factor",
            "Find the largest prime factor of n (n > 1). For n=13195 = 5*7*13*29"
            " the answer is 29." + _IO.format(keys="n"),
            "What is the largest prime factor of {n}? Answer with the number only.",
            _prime_factor_sample,
            _largest_prime_factor,
        ),
        Problem(
            "smallest-multiple",
            "Smallest common multiple of a range",
            "Find the smallest positive number divisible by every integer from"
            " lo to hi inclusive. For lo=1, hi=10 the answer is 2520."
            + _IO.format(keys="lo, hi"),
            "What is the smallest positive number divisible by every integer"
            " from {lo} to {hi}? Answer with the number only.",
            _smallest_multiple_sample,
            _smallest_multiple,
        ),
        Problem(
            "power-digits",
            "Digit sum of a power",
            "Find the sum of the decimal digits of base raised to exponent. For"
            " base=2, exponent=15: 2^15 = 32768 and the answer is 26."
            + _IO.format(keys="base, exponent"),
            "What is the sum of the decimal digits of {base}^{exponent}? Answer"
            " with the number only.",
            _power_digits_sample,
            _power_digits,
        ),
    ]
}


def get(problem_id: str) -> Problem:
    """The problem, or a one-line error naming the known ones."""
    try:
        return PROBLEMS[problem_id]
    except KeyError:
        known = ", ".join(PROBLEMS)
        raise ValueError(f"unknown problem {problem_id!r} (known: {known})") from None


def params_text(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())
