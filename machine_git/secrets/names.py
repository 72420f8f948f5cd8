"""Judging ``name = value``: does the name say secret, does the value look like one?

A name is secret-ish when it holds one of the keywords (password, pass,
passwd, pwd, pw, secret, token, credential, key, auth); short keywords must
start a component of the name (``DB_PASS``, ``apiKey``, not ``compass``).
Names for things that are not secrets (``public_key``, ``next_token``,
``sort_key``) are excluded. The value must then be a literal (not code, a
path, a template or a placeholder) and, for the vaguer names, look
machine-made.
"""

from __future__ import annotations

import functools

from machine_git.secrets.heuristics import HAS_DIGIT_RE
from machine_git.secrets.heuristics import PLACEHOLDER_RE
from machine_git.secrets.heuristics import LazyPattern
from machine_git.secrets.heuristics import is_placeholder
from machine_git.secrets.heuristics import looks_random
from machine_git.secrets.heuristics import wordy_fraction

# "pw" also finds pwd; "auth" also finds Authorization (and its Bearer);
# "bearer" is YAML's `bearer: <token>`; X-Honeycomb-Team is a key header
KEYWORDS = (
    "pass", "pw", "secret", "token", "credential", "key", "auth", "bearer",
    "honeycomb-team", "pat",
)  # fmt: skip
NAME_CH = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_BOUNDARY_KWS = frozenset({"pass", "pwd", "pw", "key", "auth", "bearer", "pat"})
_PASSWORD_KWS = frozenset({"password", "passwd", "passphrase", "pass", "pwd", "pw"})
_STRONG_KEY_SUFFIXES = (
    "apikey", "secretkey", "accesskey", "privatekey", "signingkey",
    "encryptionkey", "masterkey", "authkey", "clientkey", "appkey",
    "licensekey", "sessionkey", "subscriptionkey", "consumerkey", "adminkey",
    "servicekey", "accountkey", "hmackey", "jwtkey", "webhookkey", "deploykey",
    "storagekey", "dbkey", "databasekey", "applicationkey", "privkey",
    "routingkey", "integrationkey", "ingestkey", "writekey", "adminkey",
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
    "prompt", "completion", "reasoning", "cached", "context",
)  # fmt: skip
_NON_SECRET_NAMES = frozenset({"pwd", "oldpwd", "bypass", "compass", "keypass"})
_CODE_START = frozenset("([{$%<@")
_IDENT_RE = LazyPattern(r"[A-Za-z_][A-Za-z0-9_]*")
_ATTR_PATH_RE = LazyPattern(r"[A-Za-z_$][\w$]*(?:\??\.[A-Za-z_$][\w$]*)+")
_APP_PASSWORD_RE = LazyPattern(r"[a-z]{4}(?: [a-z]{4}){3}")
_NUMBER_RE = LazyPattern(r"[+-]?[0-9][0-9_]*(?:\.[0-9]+)?")
_TOKENISH_RE = LazyPattern(r"[A-Za-z0-9+/=_.:~-]+")
_UUIDISH_RE = LazyPattern(
    r"(?:[A-Za-z]+[-_])?[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
    r"[0-9a-fA-F]{4}-[0-9A-Za-z]{12}"
)


def kw_end(lower: str, kw: str, i: int) -> int:
    """Where the keyword found at ``i`` ends (``pass`` -> ``password``)."""
    j = i + len(kw)
    if kw == "pass":
        for ext in ("word", "wd", "phrase"):
            if lower.startswith(ext, j):
                return j + len(ext)
    elif (kw, lower[j : j + 1]) in (("credential", "s"), ("pw", "d")):
        return j + 1
    return j


def name_start(text: str, kw_start: int) -> int:
    """Where the name holding the keyword at ``kw_start`` starts."""
    i = kw_start
    while i > 0 and text[i - 1] in NAME_CH and kw_start - i < 80:
        i -= 1
    return i


def classify_name(text: str, ns: int, ks: int, ke: int) -> str | None:
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
        head = low[:-3].rstrip("_.-")
        if not head or head.endswith(_NON_SECRET_KEY_HEADS):
            return None  # a bare key: cache, sort, object (S3's "Key"), i18n keys
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
    if not val or val[0] in _CODE_START or PLACEHOLDER_RE.search(val):
        return True
    if val[0] == "!" and val[1:2].isalpha():
        return True  # a YAML tag: !vault, !Ref, !Sub
    if val[0] in "/~" or val.startswith(("./", "../", "\\\\")) or "://" in val:
        return True
    if len(val) > 2 and val[1] == ":" and val[2] in "\\/":  # C:\path
        return True
    if val.startswith(("arn:", "env:", "file:")):
        return True
    if _IDENT_RE.fullmatch(val) and val.isupper() and "_" in val:
        return True  # YOUR_TOKEN, FEEDBACK_TOKEN: a name standing for a value
    return is_placeholder(val)


def value_ok(cls: str, val: str, quoted: bool, env_style: bool, nxt: str) -> bool:
    """Is ``val``, assigned to a name of class ``cls``, a literal secret?"""
    if _bad_value(val):
        return False
    if quoted and (" " in val or "\t" in val):
        # a Google app password is four groups of four letters
        return cls == "password" and _APP_PASSWORD_RE.fullmatch(val) is not None
    if cls != "password" and _NUMBER_RE.fullmatch(val):
        return False
    has_digit = HAS_DIGIT_RE.search(val) is not None
    if not quoted:
        if "(" in val or "[" in val or "{" in val or _code_path(val):
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
        if not has_digit and not env_style and wordy_fraction(val) >= 0.6:
            return False  # "output_token": "NextToken", "secret": "none_needed"
        return not (
            len(val) < 16 and val.isalpha() and (val.islower() or val.isupper())
        )
    return _weak_value_ok(val)


def _code_path(val: str) -> bool:
    """``self.token``, ``config.api.key``: not ``dp.st.prd.<random>`` (a token)."""
    if _ATTR_PATH_RE.fullmatch(val) is None:
        return False
    last = val.rsplit(".", 1)[-1]
    return len(last) < 20 or HAS_DIGIT_RE.search(last) is None


def _weak_value_ok(val: str) -> bool:
    """Values of ambiguous names (``key``, ``auth``): must look machine-made."""
    if len(val) < 16 or not _TOKENISH_RE.fullmatch(val):
        return False
    if _UUIDISH_RE.fullmatch(val):
        return False
    return looks_random(val, 16)


def named_secret(name: str, value: str) -> bool:
    """Is ``value`` a secret because its JSON key ``name`` says so?

    The keyword must end the key (``api_key``, ``password``; not
    ``token_count``) and the value must pass the same test as ``name: value``.
    """
    cls = _key_class(name)
    return cls is not None and value_ok(cls, value, True, True, "\n")


@functools.lru_cache(maxsize=4096)
def _key_class(name: str) -> str | None:
    # a row has a handful of distinct keys, each met hundreds of times
    lower = name.lower()
    for kw in KEYWORDS:
        i = lower.rfind(kw)
        if i != -1 and kw_end(lower, kw, i) == len(name):
            return classify_name(name, 0, i, len(name))
    return None
