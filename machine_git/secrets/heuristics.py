"""What a secret looks like: entropy, character classes, placeholders, prose.

The detectors share these judgements. Each is a cheap test on one candidate
value; the regexes behind the rarer ones compile on first use
(:class:`LazyPattern`), which keeps importing the scanner cheap.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator

ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
WORDCH = ALNUM | {"_"}
DIGITS = frozenset("0123456789")
HAS_DIGIT_RE = re.compile(r"[0-9]")


class LazyPattern:
    """A regex compiled on its first use.

    Most patterns only run once a cheap literal test has passed (a provider
    prefix, ``://``, ``PRIVATE KEY``...), so ordinary text never needs them;
    compiling all of them up front would dominate the import time.
    """

    __slots__ = ("_compiled", "_flags", "_source")

    def __init__(self, source: str, flags: int = 0) -> None:
        self._source = source
        self._flags = flags
        self._compiled: re.Pattern[str] | None = None

    def get(self) -> re.Pattern[str]:
        rx = self._compiled
        if rx is None:
            rx = self._compiled = re.compile(self._source, self._flags)
        return rx

    def match(self, text: str, pos: int = 0) -> re.Match[str] | None:
        return self.get().match(text, pos)

    def fullmatch(
        self, text: str, pos: int = 0, endpos: int | None = None
    ) -> re.Match[str] | None:
        rx = self.get()
        return (
            rx.fullmatch(text, pos)
            if endpos is None
            else rx.fullmatch(text, pos, endpos)
        )

    def search(
        self, text: str, pos: int = 0, endpos: int | None = None
    ) -> re.Match[str] | None:
        rx = self.get()
        return rx.search(text, pos) if endpos is None else rx.search(text, pos, endpos)

    def finditer(
        self, text: str, pos: int = 0, endpos: int | None = None
    ) -> Iterator[re.Match[str]]:
        rx = self.get()
        return (
            rx.finditer(text, pos) if endpos is None else rx.finditer(text, pos, endpos)
        )

    def findall(self, text: str) -> list[str]:
        return self.get().findall(text)

    def sub(self, repl: str, text: str) -> str:
        return self.get().sub(repl, text)


_WORD_PIECE_RE = LazyPattern(r"[A-Z]?[a-z]{3,}|[A-Z]{3,}(?![a-z])")
PLACEHOLDER_RE = LazyPattern(r"\[REDACTED:[a-z0-9-]{1,40}\]")
_SAME_CHAR_RE = LazyPattern(r"(.)\1*", re.DOTALL)

PLACEHOLDER_WORDS = frozenset(
    {
        "password", "passwd", "pass", "pwd", "secret", "token", "key", "apikey",
        "api_key", "api-key", "changeme", "changeit", "none", "null", "nil",
        "true", "false", "undefined", "yes", "no", "on", "off", "example",
        "test", "testing", "dummy", "placeholder", "redacted", "hidden",
        "masked", "tbd", "foo", "bar", "baz", "foobar", "admin", "root",
        "postgres", "mysql", "guest", "user", "username", "default", "required",
        "optional", "string", "str", "bytes", "int", "secretstr", "empty", "n/a",
        "na", "unset", "unknown", "env", "environ", "getenv", "value",
        "mytoken", "mypassword", "mysecret", "secretkey", "secret_key",
        "notasecret", "prompt",
    }
)  # fmt: skip
_PLACEHOLDER_PARTS = (
    "your", "example", "placeholder", "changeme", "change_me", "change-me",
    "redacted", "dummy", "xxxx", "****", "...", "<", ">", "${", "{{", "}}",
    "%(", "insert_", "insert-", "replace_me", "replace-me", "_here", "-here",
    "goes_here", "sample", "fake", "notreal", "not_real", "not-real",
)  # fmt: skip
_PLACEHOLDER_PARTS_RE = LazyPattern("|".join(map(re.escape, _PLACEHOLDER_PARTS)))


def is_placeholder(value: str) -> bool:
    """A stand-in for a secret (``<your-key>``, ``xxxx``, ``changeme``), not one."""
    low = value.lower()
    if low in PLACEHOLDER_WORDS or _SAME_CHAR_RE.fullmatch(value):
        return True
    return _PLACEHOLDER_PARTS_RE.search(low) is not None


_CLOGC = [0.0] + [c * math.log2(c) for c in range(1, 513)]


def entropy(s: str) -> float:
    """Shannon entropy of ``s`` in bits per character (of its first 512)."""
    s = s[:512]
    n = len(s)
    if n == 0:
        return 0.0
    return math.log2(n) - sum(map(_CLOGC.__getitem__, Counter(s).values())) / n


_VOWELS = frozenset("aeiouyAEIOUY")
_CONSONANTS4_RE = LazyPattern(r"[^aeiouyAEIOUY]{4}")


def wordy_fraction(s: str) -> float:
    """Fraction of ``s`` covered by word-like pieces (``camelCase``, ``HTTP``).

    A piece is three or more letters that could be said aloud: a fifth to
    two thirds vowels, never four consonants in a row. Random keys have
    letter runs too, but almost never pronounceable ones: 1.5% of random
    44-character base62 strings reach 0.4, against 17% when any letter run
    counted.
    """
    if not s:
        return 1.0
    covered = 0
    for w in _WORD_PIECE_RE.findall(s):
        vowels = sum(map(_VOWELS.__contains__, w))
        if 0.2 * len(w) <= vowels <= 0.65 * len(w) and not _CONSONANTS4_RE.search(w):
            covered += len(w)
    return covered / len(s)


def char_classes(s: str) -> int:
    """How many of lower case, upper case, digits and other characters ``s`` uses."""
    return (
        (s.upper() != s)  # has a lower-case letter
        + (s.lower() != s)  # has an upper-case letter
        + (HAS_DIGIT_RE.search(s) is not None)
        + (not s.isalnum())
    )


def looks_random(s: str, min_len: int) -> bool:
    """Does ``s`` look machine-generated (a key) rather than written (a word)?"""
    s = s[:512]
    n = len(s)
    if n < min_len or is_placeholder(s):
        return False
    if not HAS_DIGIT_RE.search(s):
        # letters only: must be long, mixed case and not made of words
        if n < 24 or s.islower() or s.isupper():
            return False
    elif s.isdigit():
        return False
    if wordy_fraction(s) > 0.5:
        return False
    return entropy(s) >= min(3.0 + 0.02 * n, 4.0)


def distinct_enough(body: str) -> bool:
    """Reject template bodies such as ``xxxxxxxx`` or ``000000``."""
    return len(set(body)) >= min(8, max(3, len(body) // 4))


_SHAPED_RE = LazyPattern(
    r"v?[0-9]+(?:\.[0-9A-Za-z]+)+(?:[-+][\w.]+)*"  # versions: 1.2.3-rc1+b.5
    r"|[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[T ][0-9:.]+)?Z?"  # dates and times
    r"|[a-z]{2,3}[_-][A-Z]{2}(?:\.[\w-]+)?"  # locales: en_US.UTF-8
    r"|[0-9a-fA-F]{7,}|[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}"
)


def password_like(value: str) -> bool:
    """A short value that reads as a password: 8+ characters, 3+ classes."""
    if len(value) < 8 or is_placeholder(value):
        return False
    if char_classes(value) < 3 or _SHAPED_RE.fullmatch(value):
        return False
    return entropy(value) >= 2.5
