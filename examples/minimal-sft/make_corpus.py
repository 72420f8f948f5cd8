"""Write corpus.jsonl: the minimal-sft example's self-authored rows.

Every row teaches one strict answer style: a unit-conversion or arithmetic
question answered with exactly ``ANSWER: <number> <unit>`` and nothing else.
The questions are written out below by hand; the answers are computed from
them with exact fractions, so no float noise (``0.30000000000000004``) can
reach a reference answer. Running the script twice writes the same bytes:
ids, dates and key order are all fixed.

Usage (from the repository, in machine's environment):

    python examples/minimal-sft/make_corpus.py          # (re)write corpus.jsonl
    python examples/minimal-sft/make_corpus.py --check  # exit 1 if it drifted
"""

from __future__ import annotations

import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

from machine_git.core import jsonio
from machine_git.rows import rows

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus.jsonl"
# A fixed date: the corpus must not change when it is regenerated.
CREATED_AT = "2025-01-01T00:00:00Z"
SESSION_PREFIX = "minimal-sft"


def F(text: str) -> Fraction:
    """An exact number written as text (``F("2.54")``)."""
    return Fraction(text)


def c_to_f(celsius: Fraction) -> Fraction:
    return celsius * 9 / 5 + 32


def f_to_c(fahrenheit: Fraction) -> Fraction:
    return (fahrenheit - 32) * 5 / 9


# (question, exact answer, unit). Each question is its own session, so the
# eval set (drawn by whole sessions) can take any of them.
QUESTIONS: list[tuple[str, Fraction, str]] = [
    # length
    ("Convert 3.5 km to metres.", F("3.5") * 1000, "m"),
    ("How many centimetres are in 2.4 metres?", F("2.4") * 100, "cm"),
    ("What is 850 mm in metres?", F("850") / 1000, "m"),
    ("Convert 12 inches to centimetres.", 12 * F("2.54"), "cm"),
    ("How many inches are in 5 feet?", 5 * F("12"), "in"),
    ("Convert 7200 m to kilometres.", F("7200") / 1000, "km"),
    ("How many millimetres are in 6.5 cm?", F("6.5") * 10, "mm"),
    (
        "A runner does 5 laps of 800 m. How far is that in km?",
        5 * F("800") / 1000,
        "km",
    ),
    # mass
    ("Convert 2.75 kg to grams.", F("2.75") * 1000, "g"),
    ("How many kilograms is 640 g?", F("640") / 1000, "kg"),
    ("What is 3 tonnes in kilograms?", 3 * F("1000"), "kg"),
    ("Convert 16 ounces to pounds.", F("16") / 16, "lb"),
    ("How many grams are in 0.125 kg?", F("0.125") * 1000, "g"),
    ("What is 1.25 kg minus 400 g, in grams?", F("1.25") * 1000 - 400, "g"),
    # volume
    ("Convert 1.2 L to millilitres.", F("1.2") * 1000, "mL"),
    ("How many litres is 350 mL?", F("350") / 1000, "L"),
    (
        "A glass holds 250 mL. How many litres do 6 glasses hold?",
        6 * F("250") / 1000,
        "L",
    ),
    ("How many millilitres are in 0.04 L?", F("0.04") * 1000, "mL"),
    ("A tank holds 120 L and 45 L is drained. How much is left?", F("120") - 45, "L"),
    # time
    ("How many minutes are in 2.5 hours?", F("2.5") * 60, "min"),
    ("Convert 90 seconds to minutes.", F("90") / 60, "min"),
    ("How many seconds are in 3 minutes and 20 seconds?", 3 * F("60") + 20, "s"),
    ("How many hours are in 3 days?", 3 * F("24"), "h"),
    ("A film runs 135 minutes. How long is it in hours?", F("135") / 60, "h"),
    ("How many days are in 6 weeks?", 6 * F("7"), "days"),
    (
        "A train leaves at 09:40 and arrives at 11:15. How long is the trip?",
        (11 * F("60") + 15) - (9 * 60 + 40),
        "min",
    ),
    # temperature
    ("Convert 100 °C to Fahrenheit.", c_to_f(F("100")), "°F"),
    ("Convert 25 °C to Fahrenheit.", c_to_f(F("25")), "°F"),
    ("What is 50 °F in Celsius?", f_to_c(F("50")), "°C"),
    ("What is -40 °C in Fahrenheit?", c_to_f(F("-40")), "°F"),
    # speed and distance
    (
        "A car covers 180 km in 2 hours. What is its average speed?",
        F("180") / 2,
        "km/h",
    ),
    ("Convert 36 km/h to metres per second.", F("36") * 1000 / 3600, "m/s"),
    (
        "A cyclist rides at 15 km/h for 40 minutes. How far do they go?",
        15 * F("40") / 60,
        "km",
    ),
    ("How long does it take to walk 6 km at 4 km/h?", F("6") / 4, "h"),
    # arithmetic with units
    (
        "Anna has 17 apples and buys 25 more. How many apples does she have?",
        F("17") + 25,
        "apples",
    ),
    ("A box holds 12 eggs. How many eggs are in 7 boxes?", 12 * F("7"), "eggs"),
    ("What is 15% of 80 dollars?", F("80") * 15 / 100, "dollars"),
    (
        "Split 96 euros equally among 8 people. How much does each get?",
        F("96") / 8,
        "euros",
    ),
    ("A 9 m rope is cut into 4 equal pieces. How long is each piece?", F("9") / 4, "m"),
    ("What is the area of a rectangle 7 m by 6 m?", 7 * F("6"), "m^2"),
    (
        "Three parcels weigh 2.5 kg each. What is their total weight?",
        3 * F("2.5"),
        "kg",
    ),
    (
        "A printer prints 30 pages a minute. How many pages in 12 minutes?",
        30 * F("12"),
        "pages",
    ),
    (
        "A recipe needs 200 g of sugar for 4 servings. How much for 10 servings?",
        F("200") / 4 * 10,
        "g",
    ),
    ("What is the perimeter of a square with 3.5 cm sides?", 4 * F("3.5"), "cm"),
    (
        "A phone plan costs 18 dollars a month. What does a year cost?",
        12 * F("18"),
        "dollars",
    ),
    ("How many 250 mL cups can be filled from 2 L?", F("2000") / 250, "cups"),
    ("A bag of flour weighs 1.5 kg. What do 4 bags weigh?", 4 * F("1.5"), "kg"),
    ("What is 0.75 of 2 hours, in minutes?", F("0.75") * 2 * 60, "min"),
]


def decimal(value: Fraction) -> str:
    """``value`` written out exactly in decimal, without trailing zeros."""
    sign = "-" if value < 0 else ""
    value = abs(value)
    whole, rest = divmod(value.numerator, value.denominator)
    digits = ""
    while rest and len(digits) < 12:
        rest *= 10
        digit, rest = divmod(rest, value.denominator)
        digits += str(digit)
    if rest:
        raise ValueError(f"{value} has no short exact decimal form")
    return f"{sign}{whole}" + (f".{digits}" if digits else "")


def answer(value: Fraction, unit: str) -> str:
    """The one answer style this corpus teaches."""
    return f"ANSWER: {decimal(value)} {unit}"


def row(number: int, question: str, value: Fraction, unit: str) -> dict[str, Any]:
    """A full machine train row (valid as it is: ``machine validate`` passes)."""
    session_id = f"{SESSION_PREFIX}-{number:02d}"
    entry_ids = [f"q{number:02d}"]
    return {
        "id": rows.make_id("import", session_id, entry_ids, "answer"),
        "kind": "train",
        "tag": "good",
        "created_at": CREATED_AT,
        "note": None,
        "source": {
            "host": "import",
            "session_id": session_id,
            "session_file": None,
            "entry_ids": entry_ids,
        },
        "messages": [
            {"role": "user", "content": question},
            {"role": "assistant", "content": answer(value, unit)},
        ],
    }


def render() -> bytes:
    """The corpus, one row per line, keys sorted."""
    return b"".join(
        jsonio.line(row(number, question, value, unit))
        for number, (question, value, unit) in enumerate(QUESTIONS, start=1)
    )


def main(argv: list[str]) -> int:
    data = render()
    if argv == ["--check"]:
        if CORPUS.exists() and CORPUS.read_bytes() == data:
            return 0
        print(f"{CORPUS.name} differs from make_corpus.py: rerun it", file=sys.stderr)
        return 1
    if argv:
        print("usage: make_corpus.py [--check]", file=sys.stderr)
        return 2
    CORPUS.write_bytes(data)
    print(f"wrote {len(QUESTIONS)} rows to {CORPUS}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
