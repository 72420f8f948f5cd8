"""Runs of token characters: where machine's own provider rules look.

Every provider token and JWT part is a run of ``[A-Za-z0-9+/_-]`` of 20
characters or more. Runs are found with ``bytes.find`` on a mask of the
text (one byte per character, so offsets hold), and each is dispatched on
its first two characters to the provider rules that start that way
(``rules.PROVIDERS``: the shapes the engine does not find); a run behind a
dot, a ``:`` or a ``|`` goes to ``shapes``. Nothing else: since issue 28 a
run is never taken for a key because it looks random (digests, ids and
public keys do too), so a run of lower case with no provider at its head is
turned away at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from collections.abc import Iterator

from machine_git.secrets import rules
from machine_git.secrets import shapes
from machine_git.secrets.found import PROVIDER
from machine_git.secrets.found import STRUCT
from machine_git.secrets.found import Cand
from machine_git.secrets.heuristics import HAS_DIGIT_RE
from machine_git.secrets.heuristics import LazyPattern
from machine_git.secrets.heuristics import distinct_enough
from machine_git.secrets.heuristics import entropy
from machine_git.secrets.heuristics import looks_random
from machine_git.secrets.heuristics import wordy_fraction

_RUN_CHARS = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-"
)
# Every byte to b"a" (a token character) or b" " (anything else): runs are then
# found with bytes.find, which skips ahead, instead of a regex that would try
# every position of every word.
_MASK = bytes(ord("a") if chr(i) in _RUN_CHARS else ord(" ") for i in range(256))
_NEEDLE = b"a" * 20
TOKEN_RE = LazyPattern(r"[A-Za-z0-9+/_-]{20,}={0,3}")  # what runs() finds


def _v_any(body: str) -> bool:
    return distinct_enough(body)


def _v_random(body: str) -> bool:
    flat = body.replace("-", "").replace("_", "")
    return distinct_enough(body) and looks_random(flat, 16)


def _v_digits(body: str) -> bool:
    return (
        distinct_enough(body)
        and bool(HAS_DIGIT_RE.search(body))
        and entropy(body) >= 3.5
    )


def _v_mixed(body: str) -> bool:
    return (
        distinct_enough(body)
        and not body.islower()
        and not body.isupper()
        and wordy_fraction(body) <= 0.5
    )


def _v_cased(body: str) -> bool:
    return distinct_enough(body) and not body.islower() and not body.isupper()


_CHECKS: dict[str, Callable[[str], bool]] = {
    "cased": _v_cased,
    "any": _v_any,
    "random": _v_random,
    "digits": _v_digits,
    "mixed": _v_mixed,
}
_Entry = tuple[str, tuple[str, ...], LazyPattern, Callable[[str], bool]]


def _by_head() -> dict[str, tuple[LazyPattern, tuple[_Entry, ...]]]:
    # per head: one pattern for "does any of these start here" (one regex
    # call turns away the many runs that share a head with a provider, such
    # as test_... and live_...), then the entries in order
    table: dict[str, list[tuple[_Entry, str]]] = {}
    for kind, prefixes, rx, check in rules.PROVIDERS:
        entry = (kind, prefixes, LazyPattern(rx, re.ASCII), _CHECKS[check])
        for head in sorted({p[:2] for p in prefixes}):
            table.setdefault(head, []).append((entry, rx))
    return {
        head: (
            LazyPattern("|".join(f"(?:{rx})" for _, rx in pairs), re.ASCII),
            tuple(entry for entry, _ in pairs),
        )
        for head, pairs in table.items()
    }


BY_HEAD = _by_head()
_AWS_SECRET_NEAR_RE = LazyPattern(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![\w/+=])")


def _try_providers(text: str, pos: int, out: list[Cand]) -> int:
    """Match a provider token at ``pos``; return where it ends, or -1."""
    gate = _gate(BY_HEAD, text[pos : pos + 2])
    if gate is None or gate.match(text, pos) is None:
        return -1
    for kind, prefixes, rx, check in BY_HEAD[text[pos : pos + 2]][1]:
        if not text.startswith(prefixes, pos):
            continue
        m = rx.match(text, pos)
        if m is None or not shapes.end_ok(text, m.end()):
            continue
        tok = m.group()
        cut = max(len(p) for p in prefixes if tok.startswith(p))
        if not check(tok[cut:]):
            continue
        out.append((pos, m.end(), PROVIDER, kind))
        if kind == "aws-access-key":
            _scan_aws_secret_near(text, pos, m.end(), out)
        return m.end()
    return -1


def _scan_aws_secret_near(text: str, s: int, e: int, out: list[Cand]) -> None:
    lo = max(0, s - 300)
    hi = min(len(text), e + 300)
    for m in _AWS_SECRET_NEAR_RE.finditer(text, lo, hi):
        tok = m.group()
        if tok.islower() or tok.isupper() or not HAS_DIGIT_RE.search(tok):
            continue
        if entropy(tok) >= 4.0:
            out.append((m.start(), m.end(), STRUCT, "aws-secret-key"))


_SHAPE_PREV = frozenset(".:|=")
# what may come before a run of lower case that still needs a look: dotted
# tokens, an app id's "|", "_gitlab_session=", an escaped newline ("\ndop_v1_")
_KEEP_AFTER = frozenset(".|=\\")


def runs(text: str) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of every ``TOKEN_RE`` match in ``text``, in order."""
    # one byte per character: offsets stay those of the text
    mask = text.encode("ascii", "replace").translate(_MASK)
    n = len(text)
    p = mask.find(_NEEDLE)
    while p != -1:
        e = mask.find(b" ", p + 20)
        if e == -1:
            e = n
        stop = e
        while e < n and e - stop < 3 and text[e] == "=":
            e += 1
        yield p, e
        p = mask.find(_NEEDLE, stop)


def scan_tokens(text: str, out: list[Cand]) -> None:
    """Add the candidates of every run of token characters in ``text``."""
    n = len(text)
    by_head = BY_HEAD
    gates = _GATES
    keep_after = _KEEP_AFTER
    mask = text.encode("ascii", "replace").translate(_MASK)
    p = mask.find(_NEEDLE)
    while p != -1:  # runs(), inlined: this loop is the scanner's hottest
        s = p
        e = mask.find(b" ", p + 20)
        if e == -1:
            e = n
        p = mask.find(_NEEDLE, e)
        stop = e
        while e < n and e - stop < 3 and text[e] == "=":
            e += 1
        tok = text[s:e]
        if (
            tok.islower()  # no upper-case letter: hex, paths, snake_case names
            and (s == 0 or text[s - 1] not in keep_after)
            and "-us" not in tok
        ):
            gate = gates.get(tok[:2])  # most heads start no provider: None
            if gate is not None and not isinstance(gate, re.Pattern):
                gate = _gate(by_head, tok[:2])  # compiled on first use
            if (gate is None or gate.match(text, s) is None) and (
                tok[0] != "/" or not _provider_after_slash(text, s, tok)
            ):
                continue  # classify() would say no, and no provider starts there
        _scan_run(text, s, e, n, out)


# head -> its compiled gate; a head no provider starts with is absent, and a
# head whose gate is not compiled yet maps to its LazyPattern
_GATES: dict[str, re.Pattern[str] | LazyPattern] = {
    h: g for h, (g, _) in BY_HEAD.items()
}


def _gate(
    by_head: dict[str, tuple[LazyPattern, tuple[_Entry, ...]]], head: str
) -> re.Pattern[str] | None:
    """The compiled "any provider of this head" pattern, or None."""
    gate = _GATES.get(head)
    if isinstance(gate, LazyPattern):
        gate = _GATES[head] = gate.get()
    return gate


def _provider_after_slash(text: str, s: int, tok: str) -> bool:
    """Does a provider token follow the run's leading slashes (``//ghp_...@``)?"""
    i = len(tok) - len(tok.lstrip("/"))
    gate = _gate(BY_HEAD, tok[i : i + 2]) if 0 < i < len(tok) else None
    return gate is not None and gate.match(text, s + i) is not None


def _provider_in_run(text: str, s: int, tok: str, out: list[Cand]) -> int:
    by_head = BY_HEAD
    end = _try_providers(text, s, out) if tok[:2] in by_head else -1
    if end < 0 and s > 0 and text[s - 1] == "\\" and tok[1:3] in by_head:
        end = _try_providers(text, s + 1, out)  # "\nghp_...": an escaped newline
    if end < 0 and "/" in tok:  # https://ghp_...@github.com: the run is "//ghp_"
        i = tok.find("/")
        while i != -1 and end < 0:
            if tok[i + 1 : i + 3] in by_head:
                end = _try_providers(text, s + i + 1, out)
            i = tok.find("/", i + 1)
    return end


def _scan_run(text: str, s: int, e: int, n: int, out: list[Cand]) -> None:
    """Judge one run of token characters, ``text[s:e]``."""
    while True:
        tok = text[s:e]
        end = _provider_in_run(text, s, tok, out)
        if end < 0:
            break
        if s > 0 and text[s - 1] == ".":
            shapes.try_dotted(text, s, end, out)  # xoxe.xoxp-...: a head before the dot
        # whatever follows a provider token in the same run is judged on its own
        s = end
        while s < e and text[s] in "+/=_-":
            s += 1
        if e - s < 20:
            return
    if (
        (s > 0 and text[s - 1] in _SHAPE_PREV)
        or (e < n and text[e] == ".")
        or "-us" in tok
        or tok.endswith("_mmk")
    ):
        shapes.try_shapes(text, tok, s, e, out)
    # nothing else: a run is never a secret for looking random
