"""Secret scanner: find credentials in text and replace them by typed placeholders.

Every string that ends up in a training row passes through :func:`redact` (or
:func:`redact_text`) before any byte of it reaches git.  A secret is replaced
by ``[REDACTED:<kind>]``, where ``<kind>`` is a kebab-case name such as
``openai-api-key``, ``private-key``, ``url-credentials`` or ``high-entropy``
(see :data:`KINDS`).

Detectors, from most to least specific:

* provider tokens with documented prefixes (OpenAI, Anthropic, Tinker, GitHub,
  GitLab, AWS, Google, Slack, Stripe, npm, PyPI, Hugging Face, ...);
* PEM / PGP / PuTTY private key blocks, also base64-wrapped PEM;
* JWTs;
* credentials in URLs and connection strings (only the password is replaced);
* ``Authorization:`` header values and ``Bearer`` tokens;
* ``.env`` / JSON / YAML / shell / code assignments to secret-looking names
  (only the value is replaced), and ``--password VALUE`` style flags;
* long random-looking base64/base62 runs: Shannon entropy plus structure
  checks that spare git SHAs, UUIDs, hex digests, data URIs, integrity hashes,
  typed object ids (``toolu_...``, ``msg_...``) and ordinary identifiers.

Speed: the scan makes two linear passes over the text, one regex pass for
runs of token characters (every provider token, JWT part and high-entropy
candidate is such a run, dispatched on its first two characters) and one
``str.find`` pass per secret-ish keyword; rarer shapes (URLs, PEM blocks)
are gated on a literal.  The token pattern and the few heuristics every scan
uses are compiled at import; the ~80 patterns that only run once a literal
prefix has been seen are compiled on first use (``_LazyPattern``), which
keeps the import cheap.  The module imports only ``re``, ``math`` and
``dataclasses`` (plus ``collections``, which those already load).

The scanner fails closed: any internal error is raised as
:class:`~machine_git.errors.SecretScanError`, never swallowed.  Redaction is
idempotent: a placeholder is never flagged again.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from collections.abc import Iterator
from typing import NamedTuple

from machine_git.errors import SecretScanError

__all__ = [
    "JSON",
    "KINDS",
    "Finding",
    "placeholder",
    "redact",
    "redact_text",
    "scan_text",
]

JSON = None | bool | int | float | str | list["JSON"] | dict[str, "JSON"]


class Finding(NamedTuple):
    """A secret found in a text: ``text[start:end]`` is what gets replaced."""

    kind: str
    start: int
    end: int


def placeholder(kind: str) -> str:
    """The text that replaces a secret of ``kind``."""
    return f"[REDACTED:{kind}]"


# When detectors flag overlapping spans, the union is redacted and named after
# the most specific detector (the lowest number).
_P_PROVIDER = 0
_P_STRUCT = 1  # private keys, JWTs, AWS secret keys next to an access key id
_P_URL = 2  # url-credentials, auth-header
_P_ENV = 3
_P_ENTROPY = 4

_Cand = tuple[int, int, int, str]  # start, end, priority, kind
_Validator = Callable[[str], bool]

_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_WORDCH = _ALNUM | {"_"}
_DIGITS = frozenset("0123456789")
_DOTCHAIN = _WORDCH | {"-", "."}


class _LazyPattern:
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
        if endpos is None:
            return rx.fullmatch(text, pos)
        return rx.fullmatch(text, pos, endpos)

    def search(
        self, text: str, pos: int = 0, endpos: int | None = None
    ) -> re.Match[str] | None:
        rx = self.get()
        return rx.search(text, pos) if endpos is None else rx.search(text, pos, endpos)

    def finditer(
        self, text: str, pos: int = 0, endpos: int | None = None
    ) -> Iterator[re.Match[str]]:
        rx = self.get()
        if endpos is None:
            return rx.finditer(text, pos)
        return rx.finditer(text, pos, endpos)

    def findall(self, text: str) -> list[str]:
        return self.get().findall(text)

    def sub(self, repl: str, text: str) -> str:
        return self.get().sub(repl, text)


# --------------------------------------------------------------------------
# Shared heuristics
# --------------------------------------------------------------------------

_PLACEHOLDER_RE = _LazyPattern(r"\[REDACTED:[a-z0-9-]{1,40}\]")
_HAS_DIGIT_RE = re.compile(r"[0-9]")
_HEXISH_RE = re.compile(r"[0-9a-fA-F-]+")
_WORD_PIECE_RE = re.compile(r"[A-Z]?[a-z]{3,}|[A-Z]{3,}(?![a-z])")
_SAME_CHAR_RE = _LazyPattern(r"(.)\1*", re.DOTALL)
_IDENT_RE = _LazyPattern(r"[A-Za-z_][A-Za-z0-9_]*")
_ATTR_PATH_RE = _LazyPattern(r"[A-Za-z_$][\w$]*(?:\??\.[A-Za-z_$][\w$]*)+")
_NUMBER_RE = _LazyPattern(r"[+-]?[0-9][0-9_]*(?:\.[0-9]+)?")
_TOKENISH_RE = _LazyPattern(r"[A-Za-z0-9+/=_.:~-]+")
_UUIDISH_RE = _LazyPattern(
    r"(?:[A-Za-z]+[-_])?[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
    r"[0-9a-fA-F]{4}-[0-9A-Za-z]{12}"
)

_PLACEHOLDER_WORDS = frozenset(
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
        "notasecret",
    }
)  # fmt: skip
_PLACEHOLDER_PARTS = (
    "your", "example", "placeholder", "changeme", "change_me", "change-me",
    "redacted", "dummy", "xxxx", "****", "...", "<", ">", "${", "{{", "}}",
    "%(", "insert_", "insert-", "replace_me", "replace-me", "_here", "-here",
    "goes_here", "sample",
)  # fmt: skip


_PLACEHOLDER_PARTS_RE = _LazyPattern("|".join(map(re.escape, _PLACEHOLDER_PARTS)))


def _is_placeholder(value: str) -> bool:
    low = value.lower()
    if low in _PLACEHOLDER_WORDS or _SAME_CHAR_RE.fullmatch(value):
        return True
    return _PLACEHOLDER_PARTS_RE.search(low) is not None


_CLOGC = [0.0] + [c * math.log2(c) for c in range(1, 513)]


def _entropy(s: str) -> float:
    """Shannon entropy of ``s`` in bits per character (of its first 512)."""
    s = s[:512]
    n = len(s)
    if n == 0:
        return 0.0
    return math.log2(n) - sum(map(_CLOGC.__getitem__, Counter(s).values())) / n


def _wordy_fraction(s: str) -> float:
    """Fraction of ``s`` covered by word-like pieces (``camelCase``, ``HTTP``)."""
    if not s:
        return 1.0
    return sum(map(len, _WORD_PIECE_RE.findall(s))) / len(s)


def _looks_random(s: str, min_len: int) -> bool:
    """Does ``s`` look machine-generated (a key) rather than written (a word)?"""
    s = s[:512]
    n = len(s)
    if n < min_len or _is_placeholder(s):
        return False
    if not _HAS_DIGIT_RE.search(s):
        # letters only: must be long, mixed case and not made of words
        if n < 24 or s.islower() or s.isupper():
            return False
    elif s.isdigit():
        return False
    if _wordy_fraction(s) > 0.5:
        return False
    return _entropy(s) >= min(3.0 + 0.02 * n, 4.0)


def _distinct_enough(body: str) -> bool:
    """Reject template bodies such as ``xxxxxxxx`` or ``000000``."""
    return len(set(body)) >= min(8, max(3, len(body) // 4))


# --------------------------------------------------------------------------
# Provider tokens (dispatched on their first two characters)
# --------------------------------------------------------------------------


# Validators get the token body, i.e. the token without its literal prefix.


def _v_any(body: str) -> bool:
    return _distinct_enough(body)


def _v_random(body: str) -> bool:
    flat = body.replace("-", "").replace("_", "")
    return _distinct_enough(body) and _looks_random(flat, 16)


def _v_digits(body: str) -> bool:
    return (
        _distinct_enough(body)
        and bool(_HAS_DIGIT_RE.search(body))
        and _entropy(body) >= 3.5
    )


def _v_mixed_letters(body: str) -> bool:
    return (
        _distinct_enough(body)
        and not body.islower()
        and not body.isupper()
        and _wordy_fraction(body) <= 0.5
    )


# (kind, literal prefixes, full regex, validator)
_PROVIDERS: tuple[tuple[str, tuple[str, ...], str, _Validator], ...] = (
    ("anthropic-api-key", ("sk-ant-",), r"sk-ant-[\w-]{32,}", _v_any),
    ("openrouter-api-key", ("sk-or-",), r"sk-or-v1-[0-9a-f]{64}", _v_any),
    (
        "openai-api-key",
        ("sk-proj-", "sk-svcacct-", "sk-admin-", "sk-None-"),
        r"sk-(?:proj|svcacct|admin|None)-[\w-]{20,}",
        _v_any,
    ),
    ("openai-api-key", ("sk-",), r"sk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}", _v_any),
    ("openai-api-key", ("sk-",), r"sk-[A-Za-z0-9]{32,}", _v_digits),
    ("tinker-api-key", ("tml-",), r"tml-[\w-]{16,}", _v_random),
    (
        "github-token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        r"gh[pousr]_[A-Za-z0-9]{36,251}",
        _v_any,
    ),
    ("github-token", ("github_pat_",), r"github_pat_\w{40,}", _v_any),
    (
        "gitlab-token",
        (
            "glpat-",
            "gldt-",
            "glrt-",
            "glptt-",
            "glcbt-",
            "glft-",
            "glimt-",
            "gloas-",
            "glsoat-",
            "glagent-",
        ),
        r"gl(?:pat|dt|rt|ptt|cbt|ft|imt|oas|soat|agent)-[\w-]{20,}",
        _v_any,
    ),
    ("gitlab-token", ("GR1348941",), r"GR1348941[\w-]{20,}", _v_any),
    (
        "aws-access-key",
        ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
        r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}",
        _v_any,
    ),
    ("google-api-key", ("AIza",), r"AIza[\w-]{35}", _v_any),
    ("google-oauth-secret", ("GOCSPX-",), r"GOCSPX-[\w-]{28}", _v_any),
    ("slack-token", ("xox",), r"xox[abposer]-[0-9A-Za-z-]{10,}", _v_any),
    ("slack-token", ("xapp-",), r"xapp-[0-9]-[A-Za-z0-9-]{20,}", _v_any),
    (
        "stripe-key",
        ("sk_live_", "rk_live_", "sk_test_", "rk_test_"),
        r"[sr]k_(?:live|test)_[0-9A-Za-z]{16,}",
        _v_any,
    ),
    ("stripe-webhook-secret", ("whsec_",), r"whsec_[0-9A-Za-z+/]{24,}", _v_any),
    ("npm-token", ("npm_",), r"npm_[A-Za-z0-9]{36}", _v_any),
    ("pypi-token", ("pypi-AgE",), r"pypi-AgE[\w-]{50,}", _v_any),
    ("huggingface-token", ("hf_",), r"hf_[A-Za-z0-9]{30,}", _v_mixed_letters),
    (
        "huggingface-token",
        ("api_org_",),
        r"api_org_[A-Za-z0-9]{30,}",
        _v_mixed_letters,
    ),
    ("twilio-api-key", ("SK",), r"SK[0-9a-f]{32}", _v_any),
    (
        "digitalocean-token",
        ("dop_v1_", "doo_v1_", "dor_v1_"),
        r"do[opr]_v1_[a-f0-9]{64}",
        _v_any,
    ),
    (
        "shopify-token",
        ("shpat_", "shpca_", "shppa_", "shpss_"),
        r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}",
        _v_any,
    ),
    ("xai-api-key", ("xai-",), r"xai-[A-Za-z0-9]{60,}", _v_any),
    ("groq-api-key", ("gsk_",), r"gsk_[A-Za-z0-9]{48,}", _v_any),
    ("replicate-api-token", ("r8_",), r"r8_[A-Za-z0-9]{37}", _v_any),
    ("perplexity-api-key", ("pplx-",), r"pplx-[A-Za-z0-9]{40,}", _v_any),
    (
        "langsmith-api-key",
        ("lsv2_pt_", "lsv2_sk_"),
        r"lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}",
        _v_any,
    ),
    ("tavily-api-key", ("tvly-",), r"tvly-(?:dev-|prod-)?[A-Za-z0-9]{24,}", _v_any),
    ("mailgun-api-key", ("key-",), r"key-[0-9a-f]{32}", _v_any),
    ("atlassian-api-token", ("ATATT3",), r"ATATT3[\w=-]{150,}", _v_any),
    (
        "linear-api-key",
        ("lin_api_", "lin_oauth_"),
        r"lin_(?:api|oauth)_[A-Za-z0-9]{40}",
        _v_any,
    ),
    ("notion-token", ("ntn_",), r"ntn_[0-9]{11}[A-Za-z0-9]{35}", _v_any),
    ("notion-token", ("secret_",), r"secret_[A-Za-z0-9]{43}", _v_mixed_letters),
    ("databricks-token", ("dapi",), r"dapi[a-f0-9]{32}(?:-[0-9])?", _v_any),
    ("heroku-api-key", ("HRKU-",), r"HRKU-[\w-]{60,}", _v_any),
    (
        "age-secret-key",
        ("AGE-SECRET-KEY-1",),
        r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
        _v_any,
    ),
    ("postman-api-key", ("PMAK-",), r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}", _v_any),
    ("square-token", ("sq0atp-", "sq0csp-"), r"sq0(?:atp|csp)-[\w-]{22,60}", _v_any),
    ("sentry-token", ("sntrys_", "sntryu_"), r"sntry[su]_[\w=+/-]{40,}", _v_any),
    ("grafana-token", ("glsa_",), r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}", _v_any),
    ("grafana-token", ("glc_",), r"glc_[A-Za-z0-9+/]{32,}={0,2}", _v_any),
    ("pulumi-token", ("pul-",), r"pul-[a-f0-9]{40}", _v_any),
    ("supabase-token", ("sbp_",), r"sbp_[a-f0-9]{40}", _v_any),
    ("supabase-token", ("sb_secret_",), r"sb_secret_[\w-]{20,}", _v_any),
    ("dockerhub-token", ("dckr_pat_",), r"dckr_pat_[\w-]{27,}", _v_any),
    ("figma-token", ("figd_",), r"figd_[\w-]{40,}", _v_any),
    ("rubygems-token", ("rubygems_",), r"rubygems_[a-f0-9]{48}", _v_any),
    ("netlify-token", ("nfp_",), r"nfp_[A-Za-z0-9]{36,}", _v_any),
    ("fly-token", ("fm1_", "fm2_"), r"fm[12]_[\w+/-]{60,}={0,2}", _v_any),
)

_ProviderEntry = tuple[str, tuple[str, ...], "_LazyPattern", _Validator]


def _provider_table() -> dict[str, tuple[_ProviderEntry, ...]]:
    table: dict[str, list[_ProviderEntry]] = {}
    for kind, prefixes, rx, validator in _PROVIDERS:
        entry = (kind, prefixes, _LazyPattern(rx, re.ASCII), validator)
        for head in sorted({p[:2] for p in prefixes}):
            table.setdefault(head, []).append(entry)
    return {head: tuple(entries) for head, entries in table.items()}


_BY_HEAD = _provider_table()

# Tokens whose prefix ends in a dot: the token run starts after the dot.
_DOTTED: tuple[tuple[str, str, _LazyPattern], ...] = (
    ("google-oauth-token", "ya29.", _LazyPattern(r"ya29\.[\w-]{20,}", re.ASCII)),
    (
        "sendgrid-api-key",
        "SG.",
        _LazyPattern(r"SG\.[\w-]{16,32}\.[\w-]{16,64}", re.ASCII),
    ),
    ("vault-token", "hvs.", _LazyPattern(r"hvs\.[\w-]{24,}", re.ASCII)),
    ("vault-token", "hvb.", _LazyPattern(r"hvb\.[\w-]{24,}", re.ASCII)),
    ("vault-token", "hvr.", _LazyPattern(r"hvr\.[\w-]{24,}", re.ASCII)),
    *(
        (
            "doppler-token",
            f"dp.{sub}.",
            _LazyPattern(
                rf"dp\.{sub}\.(?:[\w-]{{1,40}}\.)?[A-Za-z0-9]{{40,44}}", re.ASCII
            ),
        )
        for sub in ("pt", "st", "sa", "ct", "scim", "audit")
    ),
)
_DOTTED_HEAD_RE = _LazyPattern(r"ya29\.|SG\.|hv[sbr]\.|dp\.|eyJ")
_CHAIN_RE = _LazyPattern(r"[\w.-]*", re.ASCII)
_TELEGRAM_RE = _LazyPattern(r"[0-9]{8,10}:AA[\w-]{33}", re.ASCII)
_MAILCHIMP_RE = _LazyPattern(r"[0-9a-f]{32}-us[0-9]{1,2}")
_DISCORD_RE = _LazyPattern(r"[MNO][\w-]{23,27}\.[\w-]{6}\.[\w-]{27,40}", re.ASCII)
_JWT_RE = _LazyPattern(
    r"eyJ[\w-]{10,}\.eyJ[\w-]{4,}\.[\w-]*(?:\.[\w-]+){0,2}", re.ASCII
)
_AWS_SECRET_NEAR_RE = _LazyPattern(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![\w/+=])")


def _end_ok(text: str, e: int) -> bool:
    return e >= len(text) or text[e] not in _ALNUM


def _try_providers(text: str, pos: int, out: list[_Cand]) -> int:
    """Match a provider token at ``pos``; return where it ends, or -1."""
    entries = _BY_HEAD.get(text[pos : pos + 2])
    if entries is None:
        return -1
    for kind, prefixes, rx, validator in entries:
        if not text.startswith(prefixes, pos):
            continue
        m = rx.match(text, pos)
        if m is None or not _end_ok(text, m.end()):
            continue
        tok = m.group()
        cut = max(len(p) for p in prefixes if tok.startswith(p))
        if not validator(tok[cut:]):
            continue
        out.append((pos, m.end(), _P_PROVIDER, kind))
        if kind == "aws-access-key":
            _scan_aws_secret_near(text, pos, m.end(), out)
        return m.end()
    return -1


def _scan_aws_secret_near(text: str, s: int, e: int, out: list[_Cand]) -> None:
    lo = max(0, s - 300)
    hi = min(len(text), e + 300)
    for m in _AWS_SECRET_NEAR_RE.finditer(text, lo, hi):
        tok = m.group()
        if tok.islower() or tok.isupper() or not _HAS_DIGIT_RE.search(tok):
            continue
        if _entropy(tok) >= 4.0:
            out.append((m.start(), m.end(), _P_STRUCT, "aws-secret-key"))


def _try_shapes(text: str, tok: str, s: int, e: int, out: list[_Cand]) -> bool:
    """Provider tokens that are not a single run of token characters."""
    found = False
    prev = text[s - 1] if s > 0 else "\n"
    if prev == ".":
        # a dotted chain: ya29.<run>, SG.<run>.<run>, dp.st.<env>.<run>, JWTs;
        # its head is the first known prefix in reach that starts a chain
        # running unbroken up to this run
        for h in _DOTTED_HEAD_RE.finditer(text, max(0, s - 256), s):
            p = h.start()
            if p > 0 and text[p - 1] in _DOTCHAIN:
                continue
            if _CHAIN_RE.fullmatch(text, p, s) is None:
                continue
            for kind, prefix, rx in _DOTTED:
                if text.startswith(prefix, p):
                    m = rx.match(text, p)
                    if m is not None and m.end() >= e and _end_ok(text, m.end()):
                        out.append((p, m.end(), _P_PROVIDER, kind))
                        found = True
            if text.startswith("eyJ", p):
                m = _JWT_RE.match(text, p)
                if m is not None and m.end() >= e:
                    out.append((p, m.end(), _P_STRUCT, "jwt"))
                    found = True
            break
    elif prev == ":" and tok.startswith("AA"):
        p = s - 1
        while p > 0 and text[p - 1] in _DIGITS and s - p < 12:
            p -= 1
        if p == 0 or text[p - 1] not in _WORDCH:
            m = _TELEGRAM_RE.match(text, p)
            if m is not None and _end_ok(text, m.end()):
                out.append((p, m.end(), _P_PROVIDER, "telegram-bot-token"))
                found = True
    nxt = text[e] if e < len(text) else "\n"
    if nxt == ".":
        if tok.startswith("eyJ"):
            m = _JWT_RE.match(text, s)
            if m is not None:
                out.append((s, m.end(), _P_STRUCT, "jwt"))
                found = True
        elif tok[0] in "MNO" and 24 <= len(tok) <= 28:
            m = _DISCORD_RE.match(text, s)
            if m is not None and _end_ok(text, m.end()):
                cand = m.group()
                if _HAS_DIGIT_RE.search(cand) and _entropy(cand) >= 4.0:
                    out.append((s, m.end(), _P_PROVIDER, "discord-token"))
                    found = True
    if "-us" in tok and _MAILCHIMP_RE.fullmatch(tok):
        out.append((s, e, _P_PROVIDER, "mailchimp-api-key"))
        found = True
    return found


# --------------------------------------------------------------------------
# High-entropy tokens
# --------------------------------------------------------------------------

_TOKEN_RE = re.compile(r"[A-Za-z0-9+/_-]{20,}={0,3}")
# base64 magic of png, jpeg, gif, webp/riff, pdf, svg, xml, zip, gzip, woff,
# mp4/ico-ish zero runs, wasm, bmp, tiff; SRI / nix integrity prefixes
_SKIP_PREFIXES = (
    "iVBORw0KGgo", "/9j/", "R0lGOD", "UklGR", "JVBERi0", "PHN2Zy", "PD94bWw",
    "UEsDB", "H4sI", "d09GR", "d09GMg", "AAAA", "AGFzbQ", "Qk0", "SUkq", "TU0A",
    "sha1-", "sha256-", "sha384-", "sha512-", "md5-",
)  # fmt: skip
_SKIP_AFTER = (
    "base64,", "h1:", "sha1:", "sha256:", "sha384:", "sha512:", "md5:", "sha1-",
    "sha256-", "sha384-", "sha512-",
)  # fmt: skip
_HASH_CONTEXT_RE = _LazyPattern(
    r"(?i)(?:sha-?(?:1|224|256|384|512)|hash|digest|checksum|md5|integrity|etag"
    r"|fingerprint|crc32c?|thumbprint)[\w-]{0,20}[\"']?[ \t]*[:=][ \t]*[\"']?$"
)
_PLAIN_PIECE_RE = re.compile(r"[a-z_.-]*")
_UUID_IN_RE = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)
_ID_PREFIX_RE = re.compile(r"([a-z]{2,12})[_-](?=[A-Za-z0-9]{12})")
_SECRETY_PREFIXES = frozenset(
    {
        "sk", "rk", "key", "keys", "secret", "token", "tok", "pat", "api",
        "apikey", "auth", "pw", "pass", "pwd", "live", "priv", "private",
        "access", "bearer", "sess", "session", "cred", "creds",
    }
)  # fmt: skip
_SAMPLE = 512
_PEM_B64_PREFIX = "LS0tLS1CRUdJT"  # base64 of "-----BEGI"
_B64_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_B64_INDEX = {c: i for i, c in enumerate(_B64_ALPHABET)}


def _b64_prefix_decode(s: str, max_chars: int) -> str:
    """Decode the first ``max_chars`` base64 characters (as latin-1 text)."""
    chunk = s[: min(len(s), max_chars) // 4 * 4]
    out: list[str] = []
    for i in range(0, len(chunk), 4):
        v = 0
        for c in chunk[i : i + 4]:
            idx = _B64_INDEX.get(c)
            if idx is None:
                return "".join(out)
            v = (v << 6) | idx
        out.append(chr((v >> 16) & 0xFF) + chr((v >> 8) & 0xFF) + chr(v & 0xFF))
    return "".join(out)


def _entropy_threshold(n: int) -> float:
    # random base62/64 runs score close to log2(min(n, 64)) bits per char;
    # identifiers, paths and words score well below that
    return min(3.9 + 0.015 * (n - 20), 4.5)


def _classify_token(tok: str, text: str, start: int) -> str | None:
    # a long run (a base64 blob) is judged on its head: enough to tell data
    # from words, and it keeps a megabyte blob from costing milliseconds
    core = tok[:_SAMPLE].rstrip("=")
    n = len(core)
    if n < 20:
        return None
    if core.startswith(_PEM_B64_PREFIX):
        if "PRIVATE KEY" in _b64_prefix_decode(core, 96):
            return "private-key"
        return None  # base64 of a certificate or public key: not a secret
    if core.islower() or core.isupper() or not _HAS_DIGIT_RE.search(core):
        return None
    if _HEXISH_RE.fullmatch(core) or core.startswith(_SKIP_PREFIXES):
        return None
    if core.count("-") + core.count("_") > max(3, n // 8):
        return None  # names: test-8000Hz-le-3ch-24bit, my_var_2_name_x
    if _UUID_IN_RE.search(core):
        core = _UUID_IN_RE.sub("", core)  # judge what is left around a uuid
        n = len(core)
        if n < 20:
            return None
    m = _ID_PREFIX_RE.match(core)
    if m is not None and m.group(1) not in _SECRETY_PREFIXES:
        return None  # typed object ids: toolu_..., msg_..., chatcmpl-..., cus_...
    wordy = _wordy_fraction(core)
    if wordy > 0.4:
        return None
    if "/" in core:
        # a path or url: its longest piece must look random on its own
        piece = max(core.split("/"), key=len)
        if len(piece) < 16 or _HEXISH_RE.fullmatch(piece) or wordy > 0.3:
            return None
    if _entropy(core) < _entropy_threshold(n):
        return None
    # the rarer, costlier checks run only on the few runs that got this far
    if _is_placeholder(core):
        return None  # AWS docs: ...EXAMPLEKEY, "your..." and the like
    before = text[max(0, start - 48) : start]
    if before.endswith(_SKIP_AFTER):
        return None  # a digest: integrity=, h1:..., sha256:...
    if before.rstrip(" \t\"'").endswith((":", "=")) and _HASH_CONTEXT_RE.search(before):
        return None  # a digest: "sha256": "...", checksum = ...
    if _in_public_pem(text, start):
        return None
    return "high-entropy"


def _in_public_pem(text: str, pos: int) -> bool:
    """Is ``pos`` inside a certificate / public key / signature armor block?"""
    begin = text.rfind("-----BEGIN ", max(0, pos - 20000), pos)
    if begin < 0 or text.find("-----END ", begin, pos) >= 0:
        return False
    if begin > 0 and text[begin - 1] not in "\n\r \t\"'`>n":
        return False  # armor starts a line (or a string, or follows a \n escape)
    header = text[begin : begin + 60]
    return "PRIVATE" not in header and "-----" in header[11:]


def _scan_tokens(text: str, out: list[_Cand]) -> None:
    n = len(text)
    for m in _TOKEN_RE.finditer(text):
        _scan_run(text, m.start(), m.end(), n, out)


def _scan_run(text: str, s: int, e: int, n: int, out: list[_Cand]) -> None:
    """Judge one run of token characters, ``text[s:e]``."""
    by_head = _BY_HEAD
    while True:
        tok = text[s:e]
        end = _try_providers(text, s, out) if tok[:2] in by_head else -1
        if end < 0 and "/" in tok:  # https://ghp_...@github.com: the run is "//ghp_"
            i = tok.find("/")
            while i != -1 and end < 0:
                if tok[i + 1 : i + 3] in by_head:
                    end = _try_providers(text, s + i + 1, out)
                i = tok.find("/", i + 1)
        if end < 0:
            break
        # whatever follows a provider token in the same run is judged on its own
        s = end
        while s < e and text[s] in "+/=_-":
            s += 1
        if e - s < 20:
            return
    if (
        (s > 0 and text[s - 1] in ".:") or (e < n and text[e] == ".") or "-us" in tok
    ) and _try_shapes(text, tok, s, e, out):
        return
    kind = _classify_token(tok, text, s)
    if kind is not None:
        prio = _P_STRUCT if kind == "private-key" else _P_ENTROPY
        if "/" in tok and kind == "high-entropy":
            s += _path_prefix_len(tok)  # /hooks/incoming/<secret>
        out.append((s, e, prio, kind))


def _path_prefix_len(tok: str) -> int:
    """Length of the leading plain path pieces (``/hooks/incoming/``) of a run."""
    pos = 0
    while True:
        cut = tok.find("/", pos)
        if cut < 0 or not _PLAIN_PIECE_RE.fullmatch(tok, pos, cut):
            return pos
        pos = cut + 1


# --------------------------------------------------------------------------
# Private keys, URLs
# --------------------------------------------------------------------------

_PEM_BEGIN_RE = _LazyPattern(r"-----BEGIN[ A-Z0-9]{0,30}PRIVATE KEY(?: BLOCK)?-----")
_PEM_BODY_RE = _LazyPattern(
    r"(?:[A-Za-z0-9+/= \t\r\n]+|\\+[nrt]"
    r"|(?:Proc-Type|DEK-Info|Comment|Version|Hash|Charset):[^\n\\]*)*"
)
_PEM_END_RE = _LazyPattern(r"-----END[ A-Z0-9]{0,30}PRIVATE KEY(?: BLOCK)?-----")
_B64_CHAR_RE = _LazyPattern(r"[A-Za-z0-9+/]")
_ESCAPES_RE = _LazyPattern(r"\\+[nrt]")
_PUTTY_MAC_RE = _LazyPattern(r"[0-9a-fA-F]{16,}")


def _try_pem(text: str, key_pos: int, out: list[_Cand]) -> None:
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
    out.append((begin, end, _P_STRUCT, "private-key"))


_URL_AUTH_RE = _LazyPattern(
    r"://(?P<user>[^\s:/?#@\[\]\"'<>`]{0,256}):(?P<pw>[^\s/\"'<>`]{1,512})@"
    r"(?=[A-Za-z0-9\[_%-])"
)
_WEBHOOKS: tuple[tuple[str, tuple[str, ...], _LazyPattern], ...] = (
    (
        "slack-webhook",
        ("hooks.slack.com/",),
        _LazyPattern(
            r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[\w/+-]{20,}"
        ),
    ),
    (
        "discord-webhook",
        (
            "discord.com/api/webhooks/",
            "discordapp.com/api/webhooks/",
            "canary.discord.com/api/webhooks/",
            "ptb.discord.com/api/webhooks/",
        ),
        _LazyPattern(
            r"https://(?:(?:canary|ptb)\.)?discord(?:app)?\.com/api/webhooks/"
            r"[0-9]+/[\w-]{20,}"
        ),
    ),
)
_SCHEME_CH = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+.-"
)


def _scan_urls(text: str, out: list[_Cand]) -> None:
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
                and not _is_placeholder(pw)
                and pw[0] not in "$%{["
            ):
                out.append((m.start("pw"), m.end("pw"), _P_URL, "url-credentials"))
        for kind, hosts, rx in _WEBHOOKS:
            if text.startswith(hosts, i + 3) and i >= 5:
                w = rx.match(text, i - 5)
                if w is not None:
                    out.append((w.start(), w.end(), _P_PROVIDER, kind))
        i = text.find("://", i + 3)


# --------------------------------------------------------------------------
# Keywords: .env / JSON / YAML / code assignments, CLI flags, auth headers
# --------------------------------------------------------------------------

_ENV_TAIL_RE = _LazyPattern(
    r"""
    (?P<nq>\\?["'])?\]?
    (?:[ \t]*:[ \t]*[A-Za-z_][A-Za-z0-9_.\[\], |]{0,40}?(?=[ \t]*=[^=]))?
    (?P<sp1>[ \t]*)
    (?P<sep>:=|=>|=(?!=)|:(?![:/\\]))
    (?P<sp2>[ \t]*)
    (?:
        [bBrRuU]{0,2}(?P<vq>\\?["'`])
        (?P<qval>(?:[^"'`\\\r\n]|\\[^"'`\r\n]){0,1024}?)(?P=vq)
      | (?P<bval>[^\s"'`,;)\]}>|\\]{1,1024})
    )
    """,
    re.VERBOSE,
)
_CLI_TAIL_RE = _LazyPattern(
    r"[ \t]+(?:(?P<q>[\"'])(?P<qval>[^\"'\s]{1,512})(?P=q)"
    r"|(?P<bval>[^\s\"'`;&|)\\-][^\s\"'`;&|)\\]{0,511}))"
)
_AUTH_TAIL_RE = _LazyPattern(
    r"[\"']?[ \t]*[:=][ \t]*[\"']?"
    r"(?:(?P<scheme>bearer|basic|token|bot|digest|apikey|api-key|sso-key|negotiate)"
    r"[ \t]+)?(?P<val>[A-Za-z0-9._~+/:=-]{8,})",
    re.IGNORECASE,
)
_BEARER_TAIL_RE = _LazyPattern(r"[ \t]+(?P<val>[A-Za-z0-9._~+/-]{16,}=*)")

_KEYWORDS = ("pass", "pwd", "secret", "token", "credential", "key", "auth", "bearer")
_AFTER_NAME = frozenset("\"'\\:=] \t")
_NAME_CH = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"
)
_BOUNDARY_KWS = frozenset({"pass", "pwd", "key", "auth"})
_PASSWORD_KWS = frozenset({"password", "passwd", "passphrase", "pass", "pwd"})
_STRONG_KEY_SUFFIXES = (
    "apikey", "secretkey", "accesskey", "privatekey", "signingkey",
    "encryptionkey", "masterkey", "authkey", "clientkey", "appkey",
    "licensekey", "sessionkey", "subscriptionkey", "consumerkey", "adminkey",
    "servicekey", "accountkey", "hmackey", "jwtkey", "webhookkey", "deploykey",
    "storagekey",
)  # fmt: skip
_NON_SECRET_KEY_HEADS = (
    "public", "publishable", "primary", "foreign", "sort", "partition", "cache",
    "lookup", "dict", "map", "hash", "row", "column", "group", "object", "s3",
    "idempotency", "unique", "composite", "range", "shard", "index", "id",
    "next", "prev", "field", "attr", "item", "node", "state", "query",
    "search", "route", "i18n", "translation", "label", "react", "vue",
    "keyboard", "hot", "short", "shortcut", "bind", "binding", "press", "enum",
    "mapping", "dedup", "host", "sign", "gpg", "pgp", "ssh", "fingerprint",
)  # fmt: skip
_NON_SECRET_TOKEN_HEADS = (
    "next", "page", "continuation", "lock", "change", "idempotency", "client",
    "sync", "cancel", "cancellation", "input", "output", "pagination",
    "marker", "first", "last", "start", "end", "eos", "bos", "pad", "unk",
    "sep", "mask", "cls", "special", "max", "num", "total", "count", "stop",
    "split", "prev", "previous", "resume", "cursor", "request", "upload",
    "current", "new", "old", "default", "csrf", "xsrf", "ws", "lexer",
    "starting", "publickey", "public_key", "public", "feedback", "verification",
)  # fmt: skip
_NON_SECRET_NAMES = frozenset({"pwd", "oldpwd", "bypass", "compass", "keypass"})
_CODE_START = frozenset("([{$%<@")


def _name_start(text: str, kw_start: int) -> int:
    i = kw_start
    while i > 0 and text[i - 1] in _NAME_CH and kw_start - i < 80:
        i -= 1
    return i


def _classify_name(text: str, ns: int, ks: int, ke: int) -> str | None:
    """Return "password", "strong" or "weak" for a secret-ish name, or None."""
    kw = text[ks:ke]
    kw_low = kw.lower()
    low = text[ns:ke].lower().lstrip("-")
    if low in _NON_SECRET_NAMES or (ns > 0 and text[ns - 1] == ":"):
        return None  # also namespaced names: "AWS::IAM::AccessKey"
    if kw_low in _BOUNDARY_KWS and ks > ns:
        # the keyword must start a name component: FOO_KEY, foo-key, fooKey
        prev = text[ks - 1]
        if not (prev in "_.-" or (prev.islower() and kw[0].isupper())):
            return None
    if kw_low in _PASSWORD_KWS:
        return "password"
    if kw_low == "key":
        flat = low.replace("_", "").replace("-", "").replace(".", "")
        if flat.endswith(_STRONG_KEY_SUFFIXES):
            return "strong"
        if low[:-3].rstrip("_.-").endswith(_NON_SECRET_KEY_HEADS):
            return None
        return "weak"
    if kw_low == "auth":
        return "weak"
    if kw_low == "token":
        head = low[:-5].rstrip("_.-")
        if head.endswith(_NON_SECRET_TOKEN_HEADS):
            return None
    return "strong"


def _bad_value(val: str) -> bool:
    """Values that are clearly not literal secrets: templates, code, paths, urls."""
    if not val or val[0] in _CODE_START or _PLACEHOLDER_RE.search(val):
        return True
    if val[0] == "!" and val[1:2].isalpha():
        return True  # a YAML tag: !vault, !Ref, !Sub
    if val[0] in "/~" or val.startswith(("./", "../", "\\\\")) or "://" in val:
        return True
    if len(val) > 2 and val[1] == ":" and val[2] in "\\/":  # C:\path
        return True
    if val.startswith("arn:"):
        return True
    if _IDENT_RE.fullmatch(val) and val.isupper() and "_" in val:
        return True  # YOUR_TOKEN, FEEDBACK_TOKEN: a name standing for a value
    return _is_placeholder(val)


def _value_ok(cls: str, val: str, quoted: bool, env_style: bool, nxt: str) -> bool:
    if _bad_value(val):
        return False
    if quoted and (" " in val or "\t" in val):
        return False
    if cls != "password" and _NUMBER_RE.fullmatch(val):
        return False
    has_digit = _HAS_DIGIT_RE.search(val) is not None
    if not quoted:
        if "(" in val or "[" in val or "{" in val or _ATTR_PATH_RE.fullmatch(val):
            return False  # code: password = get_password(), token = self.token
        if _IDENT_RE.fullmatch(val):
            if nxt in ",)":
                return False  # a keyword argument: f(password=password)
            if not has_digit and not env_style:
                return False  # password = other_variable, token: str
    if cls == "password":
        return len(val) >= 4
    if cls == "strong":
        if len(val) < 8:
            return False
        if not has_digit and not env_style and _wordy_fraction(val) >= 0.6:
            return False  # "output_token": "NextToken", "secret": "none_needed"
        return not (
            len(val) < 16 and val.isalpha() and (val.islower() or val.isupper())
        )
    return _weak_value_ok(val)


def _weak_value_ok(val: str) -> bool:
    """Values of ambiguous names (``key``, ``auth``): must look machine-made."""
    if len(val) < 16 or not _TOKENISH_RE.fullmatch(val):
        return False
    if _UUIDISH_RE.fullmatch(val):
        return False
    return _looks_random(val, 16)


def _try_env(text: str, ns: int, ks: int, ke: int, cls: str, out: list[_Cand]) -> None:
    m = _ENV_TAIL_RE.match(text, ke)
    if m is None:
        return
    qval = m.group("qval")
    if qval is not None:
        val, vs, ve, quoted = qval, m.start("qval"), m.end("qval"), True
    else:
        val, vs, ve, quoted = m.group("bval"), m.start("bval"), m.end("bval"), False
        if m.group("sep") == ":" and not m.group("sp2"):
            return  # `key:value` without a space is not YAML: ids, urls, times
        if ns > 0 and text[ns - 1] in "?&" and "&" in val:
            cut = val.index("&")  # a query string: the value ends at the next &
            val, ve = val[:cut], vs + cut
        if ve < len(text) and text[ve] in "\"'`":
            return
    nxt = text[ve] if ve < len(text) else "\n"
    raw_name = text[ns:ke]
    name = raw_name.lower()
    if val.lower() == name.lstrip("-"):
        return
    env_style = (
        m.group("sep") == "="
        and not m.group("sp1")
        and not m.group("sp2")
        and (raw_name.isupper() or raw_name.startswith("-"))
    )
    if not _value_ok(cls, val, quoted, env_style, nxt):
        return
    kind = "env-secret"
    if len(val) == 40 and ("aws" in name or "secretaccesskey" in name.replace("_", "")):
        kind = "aws-secret-key"
    out.append((vs, ve, _P_ENV, kind))


def _try_cli(text: str, ke: int, cls: str, out: list[_Cand]) -> None:
    m = _CLI_TAIL_RE.match(text, ke)
    if m is None:
        return
    if m.group("qval") is not None:
        val, vs, ve = m.group("qval"), m.start("qval"), m.end("qval")
    else:
        val, vs, ve = m.group("bval"), m.start("bval"), m.end("bval")
    if _value_ok(cls, val, True, True, "\n"):
        out.append((vs, ve, _P_ENV, "env-secret"))


def _try_auth_header(text: str, ks: int, out: list[_Cand]) -> None:
    if ks > 0 and text[ks - 1] in _WORDCH:
        return
    m = _AUTH_TAIL_RE.match(text, ks + len("authorization"))
    if m is None:
        return
    val = m.group("val")
    if _is_placeholder(val) or len(set(val)) < 6 or val[0] in "$%{<":
        return
    if m.group("scheme") is None and not _looks_random(val, 16):
        return
    out.append((m.start("val"), m.end("val"), _P_URL, "auth-header"))


def _try_bearer(text: str, ks: int, out: list[_Cand]) -> None:
    if ks > 0 and text[ks - 1] in _WORDCH:
        return
    m = _BEARER_TAIL_RE.match(text, ks + len("bearer"))
    if m is None:
        return
    val = m.group("val")
    if _is_placeholder(val) or not _HAS_DIGIT_RE.search(val):
        return
    if val.islower() or val.isupper() or _wordy_fraction(val) > 0.5:
        return
    out.append((m.start("val"), m.end("val"), _P_URL, "auth-header"))


def _kw_end(lower: str, kw: str, i: int) -> int:
    j = i + len(kw)
    if kw == "pass":
        for ext in ("word", "wd", "phrase"):
            if lower.startswith(ext, j):
                return j + len(ext)
    elif kw == "credential" and lower.startswith("s", j):
        return j + 1
    return j


def _scan_keywords(text: str, lower: str, out: list[_Cand]) -> None:
    n = len(text)
    for kw in _KEYWORDS:
        covered = 0  # end of the last value found: keywords inside it are data
        i = lower.find(kw)
        while i != -1:
            ke = _kw_end(lower, kw, i)
            if i < covered:
                i = lower.find(kw, ke)
                continue
            found = len(out)
            nxt = text[ke] if ke < n else "\n"
            if kw == "auth" and lower.startswith("orization", ke):
                _try_auth_header(text, i, out)
            elif kw == "bearer":
                if nxt in " \t":
                    _try_bearer(text, i, out)
            elif kw == "key" and i >= 8 and text.startswith("PRIVATE KEY", i - 8):
                _try_pem(text, i, out)
            elif nxt in _AFTER_NAME:
                cli = nxt in " \t" and i > 0 and text[i - 1] == "-"
                if nxt in " \t" and not cli:
                    j = ke + 1
                    while j < n and text[j] in " \t":
                        j += 1
                    if j >= n or text[j] not in ":=":
                        i = lower.find(kw, ke)
                        continue  # a word in prose, not a name = value
                ns = _name_start(text, i)
                cls = _classify_name(text, ns, i, ke)
                if cls is not None:
                    if cli and text.startswith("-", ns):
                        _try_cli(text, ke, cls, out)
                    else:
                        _try_env(text, ns, i, ke, cls, out)
            if len(out) > found:
                covered = max(covered, out[-1][1])
            i = lower.find(kw, ke)
    i = text.find("PuTTY-User-Key-File-")
    while i != -1:
        j = text.find("Private-MAC: ", i, i + 8000)
        m = _PUTTY_MAC_RE.match(text, j + 13) if j != -1 else None
        if m is not None:
            out.append((i, m.end(), _P_STRUCT, "private-key"))
        i = text.find("PuTTY-User-Key-File-", max(i + 1, m.end() if m else 0))


# --------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------

#: Every kind the scanner can report.
KINDS: frozenset[str] = frozenset(
    {p[0] for p in _PROVIDERS}
    | {d[0] for d in _DOTTED}
    | {w[0] for w in _WEBHOOKS}
    | {
        "telegram-bot-token",
        "mailchimp-api-key",
        "discord-token",
        "aws-secret-key",
        "private-key",
        "jwt",
        "url-credentials",
        "auth-header",
        "env-secret",
        "high-entropy",
    }
)

_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_ASCII_LOWER = str.maketrans(_UPPER, _UPPER.lower())


def _merge(cands: list[_Cand], text: str) -> list[Finding]:
    if not cands:
        return []
    holes: list[tuple[int, int]] = []
    if "[REDACTED:" in text:
        holes = [m.span() for m in _PLACEHOLDER_RE.finditer(text)]
    cands.sort()
    out: list[Finding] = []
    cur_s, cur_e, cur_p, cur_k = -1, -1, 99, ""
    h = 0  # the first placeholder that does not end before the candidate
    for s, e, p, k in cands:
        if e <= s:
            continue
        while h < len(holes) and holes[h][1] <= s:
            h += 1
        if h < len(holes) and holes[h][0] <= s and e <= holes[h][1]:
            continue  # inside a placeholder from an earlier pass
        if s < cur_e:
            cur_e = max(cur_e, e)
            if p < cur_p:
                cur_p, cur_k = p, k
            continue
        if cur_k:
            out.append(Finding(cur_k, cur_s, cur_e))
        cur_s, cur_e, cur_p, cur_k = s, e, p, k
    if cur_k:
        out.append(Finding(cur_k, cur_s, cur_e))
    return out


def _scan(text: str) -> list[Finding]:
    cands: list[_Cand] = []
    lower = text.lower()
    if len(lower) != len(text):  # a few non-ASCII letters grow when lowered
        lower = text.translate(_ASCII_LOWER)
    _scan_tokens(text, cands)
    _scan_keywords(text, lower, cands)
    if "://" in text:
        _scan_urls(text, cands)
    return _merge(cands, text)


def scan_text(text: str) -> list[Finding]:
    """Find the secrets in ``text``: non-overlapping findings sorted by position."""
    if not isinstance(text, str):
        raise SecretScanError(f"scan_text expects str, got {type(text).__name__}")
    try:
        return _scan(text)
    except SecretScanError:
        raise
    except Exception as exc:  # fail closed: never hand back unscanned text
        raise SecretScanError(f"secret scan failed: {exc!r}") from exc


def redact_text(text: str) -> tuple[str, dict[str, int]]:
    """Replace every secret in ``text`` by ``[REDACTED:<kind>]``; count per kind."""
    findings = scan_text(text)
    if not findings:
        return text, {}
    parts: list[str] = []
    counts: dict[str, int] = {}
    pos = 0
    for f in findings:
        parts.append(text[pos : f.start])
        parts.append(placeholder(f.kind))
        counts[f.kind] = counts.get(f.kind, 0) + 1
        pos = f.end
    parts.append(text[pos:])
    return "".join(parts), counts


def _redact_value(value: JSON, counts: dict[str, int], depth: int) -> JSON:
    if isinstance(value, str):
        red, found = redact_text(value)
        for kind, num in found.items():
            counts[kind] = counts.get(kind, 0) + num
        return red
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if depth >= 512:
        raise SecretScanError("JSON value nested too deeply to scan")
    if isinstance(value, list):
        return [_redact_value(v, counts, depth + 1) for v in value]
    if isinstance(value, dict):
        new: dict[str, JSON] = {}
        for key, v in value.items():
            key_obj: object = key  # callers may hand in what the types forbid
            if not isinstance(key_obj, str):
                raise SecretScanError(
                    f"JSON key must be str, not {type(key_obj).__name__}"
                )
            new[key] = _redact_value(v, counts, depth + 1)
        return new
    raise SecretScanError(f"cannot scan a value of type {type(value).__name__}")


def redact(value: JSON) -> tuple[JSON, dict[str, int]]:
    """Redact every string value of a JSON structure (object keys are kept).

    Returns a new structure and the number of secrets replaced, per kind.
    """
    counts: dict[str, int] = {}
    try:
        result = _redact_value(value, counts, 0)
    except SecretScanError:
        raise
    except Exception as exc:  # fail closed
        raise SecretScanError(f"secret redaction failed: {exc!r}") from exc
    return result, counts
