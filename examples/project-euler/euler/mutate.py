"""Small mutations of a program's logic: numeric literals ±1, comparisons flipped.

Python is tokenized with the standard tokenizer; JavaScript with a small
lexer that skips comments, strings and template literals (regex literals are
not recognized: a digit inside one may be mutated, which only adds a mutant).
A program that does not parse (an unclosed bracket, a bad dedent) is a
CannotMutate with the line, never an exception from inside the tokenizer.
"""

from __future__ import annotations

import io
import random
import re
import tokenize
from dataclasses import dataclass

_FLIP = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="}
_FLIP_JS = {**_FLIP, "===": "!==", "!==": "==="}
_INT = re.compile(r"^(\d+)(n?)$")  # plain decimal ints (and JS BigInt)
_JS = re.compile(
    r"""(?P<skip>//[^\n]*|/\*.*?\*/|'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*"|`(?:\\.|[^`\\])*`"""
    r"""|[A-Za-z_$][\w$]*|\d[\w.]*\.\d\w*|0[xXoObB]\w+|=>|<<=?|>>>?=?)"""
    r"""|(?P<num>\d+n?\b)|(?P<op>===|!==|==|!=|<=|>=|<|>)""",
    re.DOTALL,
)


class CannotMutate(Exception):
    """The program cannot be tokenized; the message says where."""


@dataclass(frozen=True)
class Mutant:
    description: str  # e.g. "line 4: 0 -> 1"
    source: str


def _replacements(text: str, flips: dict[str, str]) -> list[str]:
    if text in flips:
        return [flips[text]]
    match = _INT.match(text)
    if not match:
        return []
    value, suffix = int(match.group(1)), match.group(2)
    return [f"{v}{suffix}" for v in (value + 1, value - 1) if v >= 0]


def _sites_python(source: str) -> list[tuple[int, int, str]]:
    try:  # parsing only, nothing runs; mutants of a broken program mean nothing
        compile(source, "main.py", "exec", dont_inherit=True)
    except SyntaxError as e:
        raise CannotMutate(f"syntax error: line {e.lineno}: {e.msg}") from None
    except (ValueError, RecursionError, MemoryError) as e:  # null bytes, depth
        raise CannotMutate(f"cannot parse: {type(e).__name__}: {e}") from None
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    found = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type in (tokenize.NUMBER, tokenize.OP):
                start = starts[tok.start[0] - 1] + tok.start[1]
                found.append((start, start + len(tok.string), tok.string))
    except tokenize.TokenError as e:  # e.g. ("EOF in multi-line statement", (3, 0))
        line = e.args[1][0] if len(e.args) > 1 else "?"
        raise CannotMutate(f"cannot tokenize: line {line}: {e.args[0]}") from None
    except SyntaxError as e:  # IndentationError, TabError, bad characters
        raise CannotMutate(f"cannot tokenize: line {e.lineno}: {e.msg}") from None
    return found


def _sites_js(source: str) -> list[tuple[int, int, str]]:
    return [
        (m.start(), m.end(), m.group())
        for m in _JS.finditer(source)
        if m.lastgroup in ("num", "op")
    ]


def mutants(source: str, lang: str) -> list[Mutant]:
    """Every single-site mutant of ``source``, in source order."""
    if lang == "python":
        sites, flips = _sites_python(source), _FLIP
    else:
        sites, flips = _sites_js(source), _FLIP_JS
    found = []
    for start, end, text in sites:
        line = source.count("\n", 0, start) + 1
        for new in _replacements(text, flips):
            found.append(
                Mutant(
                    f"line {line}: {text} -> {new}",
                    source[:start] + new + source[end:],
                )
            )
    return found


def sample(found: list[Mutant], limit: int, seed: str) -> list[Mutant]:
    """At most ``limit`` mutants, chosen by the seed, kept in source order."""
    if len(found) <= limit:
        return found
    chosen = sorted(random.Random(seed).sample(range(len(found)), limit))
    return [found[i] for i in chosen]
