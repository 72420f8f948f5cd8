"""One scan of one text: every detector, then JSON strings decoded and rescanned.

Text that machine stores is full of JSON inside strings: a tool call's
arguments are a JSON object in a string, and a command inside them may
quote JSON again. The detectors read raw text, where ``\\"``, ``\\n`` and
``\\u0041`` hide what a secret looks like. So every JSON string literal of
the text that holds an escape is decoded, scanned like any text (and its own
literals in turn, up to :data:`MAX_DEPTH` levels), and what is found there
is mapped back onto the raw span it came from, escapes included. Literals
without an escape need no decoding: the raw pass already saw them as they
are.
"""

from __future__ import annotations

import bisect
import re

from machine_git.secrets import assignments
from machine_git.secrets import blocks
from machine_git.secrets import commands
from machine_git.secrets import engine as engine_mod
from machine_git.secrets import places
from machine_git.secrets import tokens
from machine_git.secrets.found import Cand
from machine_git.secrets.found import Finding
from machine_git.secrets.found import merge
from machine_git.secrets.heuristics import LazyPattern

MAX_DEPTH = 4
_NO_SEPARATOR_RE = re.compile(r"[^=:\s\"'>$\\~|]*")
_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_ASCII_LOWER = str.maketrans(_UPPER, _UPPER.lower())
# A string literal holding at least one escape. On JSON text the literals
# are found in step: between two literals there is never a quote.
_ESCAPED_LITERAL_RE = re.compile(r'"([^"\\\r\n]*(?:\\.[^"\\\r\n]*)+)"')
_ESCAPE_RE = LazyPattern(r"\\(?:u[0-9a-fA-F]{4}|.)", re.DOTALL)
_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}  # else: the char


def scan(
    text: str, engine: bool = True, engine_found: engine_mod.Batch | None = None
) -> list[Finding]:
    """Sorted, disjoint findings of every detector in ``text``.

    ``engine_found``: the engine's findings and gates, when a batch scan
    already has them; ``engine=False`` runs machine's own context layer alone.
    """
    if len(text) < engine_mod.MIN_TEXT and (
        len(text) < 6 or _NO_SEPARATOR_RE.fullmatch(text)
    ):
        # "assistant", "call_5df30a0a_0_0": every context rule needs a name
        # and a separator, and no provider token is this short
        return []
    cands: list[Cand] = []
    gates: frozenset[str] | None = None
    if engine_found is not None:
        cands.extend(engine_found[0])
        gates = engine_found[1]
    elif engine:
        gates = engine_mod.scan(text, cands)
    _collect(text, cands, 0, gates)
    return merge(cands, text)


def _collect(
    text: str, out: list[Cand], depth: int, gates: frozenset[str] | None = None
) -> None:
    # ``gates``: the literals the engine found in ``text``; None (decoded
    # literals, a scan without the engine) has each rule look for its own
    # The engine reads the raw text once (its rules know tokens ending at
    # a \" or \n escape); the context rules read each decoded literal too.
    lower = text.lower()
    if len(lower) != len(text):  # a few non-ASCII letters grow when lowered
        lower = text.translate(_ASCII_LOWER)
    tokens.scan_tokens(text, out)
    assignments.scan_keywords(text, lower, out, gates)
    commands.scan_commands(text, out, gates)
    url = "://" in text
    places.scan_places(text, url, out, gates)
    blocks.scan_literals(text, "~" in text, url, out)
    if url:
        blocks.scan_urls(text, out)
    if depth < MAX_DEPTH and "\\" in text:
        for m in _ESCAPED_LITERAL_RE.finditer(text):
            if m.end(1) - m.start(1) >= 8:
                _scan_literal(text, m.start(1), m.end(1), out, depth + 1)


def _scan_literal(text: str, s: int, e: int, out: list[Cand], depth: int) -> None:
    """Scan the decoded ``text[s:e]``; map what is found back onto the raw text."""
    pieces: list[str] = []
    dec_at: list[int] = []  # where each escape starts in the decoded text
    raw_at: list[int] = []  # ... and in the raw text
    raw_len: list[int] = []
    pos = s
    dec = 0
    for m in _ESCAPE_RE.finditer(text, s, e):
        plain = text[pos : m.start()]
        pieces.append(plain)
        dec += len(plain)
        esc = m.group()
        # ``\u`` without its four hex digits (a summary cut a ``\u001b`` in
        # half) is no escape JSON knows: read it like any other, as its letter.
        whole = len(esc) == 6
        char = chr(int(esc[2:], 16)) if whole else _SIMPLE.get(esc[1], esc[1])
        dec_at.append(dec)
        raw_at.append(m.start())
        raw_len.append(len(esc))
        pieces.append(char)
        dec += len(char)
        pos = m.end()
    pieces.append(text[pos:e])
    decoded = "".join(pieces)
    found: list[Cand] = []
    _collect(decoded, found, depth)
    for ds, de, prio, kind in found:
        rs = _raw(ds, s, dec_at, raw_at, raw_len, False)
        out.append((rs, _raw(de, s, dec_at, raw_at, raw_len, True), prio, kind))


def _raw(
    d: int, s: int, dec_at: list[int], raw_at: list[int], raw_len: list[int], end: bool
) -> int:
    """The raw offset of decoded offset ``d``; an end offset covers its escape."""
    p = d - 1 if end else d  # the decoded character at or before the offset
    k = bisect.bisect_right(dec_at, p) - 1  # the last escape at or before it
    if k < 0:
        return s + p + end
    if dec_at[k] == p:  # the character is escape k
        return raw_at[k] + (raw_len[k] if end else 0)
    return raw_at[k] + raw_len[k] + (p - dec_at[k] - 1) + end
