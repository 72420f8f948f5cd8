"""Shapes found by a literal: private key blocks, URLs, webhooks, odd tokens.

Each is gated on a literal (``PRIVATE KEY``, ``://``, ``Q~``, a webhook
host...) found with ``str.find``, so text without it costs one fast search.
"""

from __future__ import annotations

from machine_git.core.errors import SecretScanError
from machine_git.secrets import shapes
from machine_git.secrets.found import HEADER
from machine_git.secrets.found import PROVIDER
from machine_git.secrets.found import STRUCT
from machine_git.secrets.found import Cand
from machine_git.secrets.heuristics import LazyPattern
from machine_git.secrets.heuristics import is_placeholder

_PEM_BEGIN_RE = LazyPattern(r"-----BEGIN[ A-Z0-9]{0,30}PRIVATE KEY(?: BLOCK)?-----")
_PEM_BODY_RE = LazyPattern(
    r"(?:[A-Za-z0-9+/= \t\r\n]+|\\+[nrt]"
    r"|(?:Proc-Type|DEK-Info|Comment|Version|Hash|Charset):[^\n\\]*)*"
)
_PEM_END_RE = LazyPattern(r"-----END[ A-Z0-9]{0,30}PRIVATE KEY(?: BLOCK)?-----")
_B64_CHAR_RE = LazyPattern(r"[A-Za-z0-9+/]")
_ESCAPES_RE = LazyPattern(r"\\+[nrt]")
_PUTTY_MAC_RE = LazyPattern(r"[0-9a-fA-F]{16,}")


def try_pem(text: str, key_pos: int, out: list[Cand]) -> None:
    """``key_pos`` is where ``KEY`` of ``PRIVATE KEY`` starts."""
    begin = text.rfind("-----BEGIN", max(0, key_pos - 40), key_pos)
    if begin < 0:
        return
    head = _PEM_BEGIN_RE.match(text, begin)
    if head is None:
        return
    body = _PEM_BODY_RE.match(text, head.end())
    if body is None:  # pragma: no cover - the body pattern matches empty text
        raise SecretScanError("PEM body pattern failed")
    b64 = _ESCAPES_RE.sub("", body.group())
    if len(_B64_CHAR_RE.findall(b64)) < 32:
        return  # the header is mentioned (code, docs), no key follows
    end = body.end()
    tail = _PEM_END_RE.match(text, end)
    if tail is not None:
        end = tail.end()
    else:  # truncated key: redact what is there, keep trailing blank space
        while end > head.end() and text[end - 1] in " \t\r\n":
            end -= 1
    out.append((begin, end, STRUCT, "private-key"))


def scan_putty(text: str, start: int, out: list[Cand]) -> None:
    """A PuTTY key file starting at ``start``: through its MAC line."""
    j = text.find("Private-MAC: ", start, start + 8000)
    m = _PUTTY_MAC_RE.match(text, j + 13) if j != -1 else None
    if m is not None:
        out.append((start, m.end(), STRUCT, "private-key"))


_URL_AUTH_RE = LazyPattern(
    r"://(?P<user>[^\s:/?#@\[\]\"'<>`]{0,256}):(?P<pw>[^\s/\"'<>`]{1,512})@"
    r"(?=[A-Za-z0-9\[_%-])"
)
_SCHEME_CH = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+.-"
)


def scan_urls(text: str, out: list[Cand]) -> None:
    """The password of every ``scheme://user:password@host``."""
    i = text.find("://")
    while i != -1:
        m = _URL_AUTH_RE.match(text, i)
        if m is not None:
            j = i
            while j > 0 and text[j - 1] in _SCHEME_CH and i - j < 32:
                j -= 1
            pw = m.group("pw")
            if (
                j < i
                and text[j].isalpha()
                and not is_placeholder(pw)
                and pw[0] not in "$%{["
            ):
                out.append((m.start("pw"), m.end("pw"), HEADER, "url-credentials"))
        i = text.find("://", i + 3)


_LITERALS = tuple(
    (gate, lit, back, LazyPattern(rx), kind, group)
    for gate, lit, back, rx, kind, group in shapes.LITERALS
)


def scan_literals(text: str, tilde: bool, url: bool, out: list[Cand]) -> None:
    """The shapes of ``shapes.LITERALS`` whose gate ("~", "://") the text has."""
    n = len(text)
    for gate, lit, back, rx, kind, group in _LITERALS:
        if (gate == "~" and not tilde) or (gate == "://" and not url):
            continue
        i = text.find(lit)
        while i != -1:
            m = rx.search(text, max(0, i - back), min(n, i + 600))
            if m is not None and m.start() <= i < m.end():
                out.append((m.start(group), m.end(group), PROVIDER, kind))
                i = text.find(lit, m.end())
            else:
                i = text.find(lit, i + len(lit))
