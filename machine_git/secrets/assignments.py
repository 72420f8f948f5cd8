"""Secrets by their name: assignments, flags, headers, XML elements.

One ``str.find`` pass per keyword (``names.KEYWORDS``) over the lowered
text finds every name that may hold a secret; what follows the name decides
the shape:

* ``NAME=value``, ``name: value``, ``"name": "value"``, ``name = "value"``,
  ``name := value``, ``name => value`` (``.env``, shell, YAML, TOML, INI,
  JSON, code), also inside JSON-escaped strings and at the very end of one;
* ``--name value`` / ``--name=value`` (command-line flags);
* ``<name>value</name>`` and ``key="...Password" value="..."`` (XML);
* ``Authorization: <scheme> value`` and credential headers
  (``X-Api-Key: value``).

Only the value is replaced. A value whose name says nothing is never taken
for a secret because it looks random: random-looking public data (digests,
ids, keys' public halves, object keys) is as random as any key.
"""

from __future__ import annotations

import re

from machine_git.secrets import names
from machine_git.secrets import shapes
from machine_git.secrets.blocks import scan_putty
from machine_git.secrets.blocks import try_pem
from machine_git.secrets.commands import flag_value
from machine_git.secrets.found import ASSIGNED
from machine_git.secrets.found import HEADER
from machine_git.secrets.found import PROVIDER
from machine_git.secrets.found import Cand
from machine_git.secrets.heuristics import WORDCH
from machine_git.secrets.heuristics import LazyPattern
from machine_git.secrets.heuristics import is_placeholder
from machine_git.secrets.heuristics import looks_random

_ENV_TAIL_RE = LazyPattern(
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
_CLI_TAIL_RE = LazyPattern(
    r"[ \t]+(?:(?P<q>\\?[\"'])(?P<qval>[^\"'\s\\]{1,512})(?P=q)"
    r"|(?P<bval>[^\s\"'`;&|)\\-][^\s\"'`;&|)\\]{0,511}))"
)
_AUTH_TAIL_RE = LazyPattern(
    r"[\"']?[ \t]*[:=](?:\\?[ \t])*[\"']?"
    r"(?:(?P<scheme>bearer|basic|token|bot|digest|apikey|api-key|sso-key|negotiate"
    r"|splunk|geniekey|ssws|key|dsn)"
    r"(?:\\?[ \t])+)?(?P<val>[A-Za-z0-9._~+/:=-]{8,})",
    re.IGNORECASE,
)
_XML_ATTR_RE = LazyPattern(
    r"\\?\"[ \t]+value[ \t]*=[ \t]*\\?\"(?P<val>[^\"\\\r\n]{4,256})"
)
_XML_TEXT_RE = LazyPattern(r">(?P<val>[^<>\s]{4,256})</")
_BRAINTREE_RE = LazyPattern(shapes.BRAINTREE[1])
_HEADER_NAME_RE = LazyPattern(r"[A-Za-z]+(?:-[A-Za-z]+)+")
_AFTER_NAME = frozenset("\"'\\:=] \t>")
_ENV_VALUE_END = frozenset(" \t\r\n\"'`\\")


def _value(m: re.Match[str], text: str, ns: int) -> tuple[str, int, int, bool] | None:
    qval = m.group("qval")
    if qval is not None:
        return qval, m.start("qval"), m.end("qval"), True
    val, vs, ve = m.group("bval"), m.start("bval"), m.end("bval")
    if m.group("sep") == ":" and not m.group("sp2"):
        return None  # `key:value` without a space is not YAML: ids, urls, times
    if ns > 0 and text[ns - 1] in "?&" and "&" in val:
        cut = val.index("&")  # a query string: the value ends at the next &
        val, ve = val[:cut], vs + cut
    return val, vs, ve, False


def _kind(raw_name: str, val: str, sep: str) -> str:
    name = raw_name.lower()
    if len(val) == 40 and ("aws" in name or "secretaccesskey" in name.replace("_", "")):
        return "aws-secret-key"
    if raw_name.startswith("-"):
        return "cli-secret"
    if sep == ":" and _HEADER_NAME_RE.fullmatch(raw_name):
        return "auth-header"  # X-Api-Key: ..., PRIVATE-TOKEN: ...
    return "env-secret"


def _try_env(text: str, ns: int, ke: int, cls: str, out: list[Cand]) -> None:
    m = _ENV_TAIL_RE.match(text, ke)
    if m is None:
        m = _XML_ATTR_RE.match(text, ke)  # <add key="ClearTextPassword" value="..."/>
        if (
            m is not None
            and ns > 0
            and text[ns - 1] == '"'
            and names.value_ok(cls, m.group("val"), True, True, "\n")
        ):
            out.append((m.start("val"), m.end("val"), ASSIGNED, "env-secret"))
        return
    got = _value(m, text, ns)
    if got is None:
        return
    val, vs, ve, quoted = got
    nxt = text[ve] if ve < len(text) else "\n"
    raw_name = text[ns:ke]
    if val.lower() == raw_name.lower().lstrip("-"):
        return
    env_style = (
        m.group("sep") == "="
        and not m.group("sp1")
        and not m.group("sp2")
        and (raw_name.isupper() or raw_name.startswith("-"))
    )
    if env_style and not quoted:
        # NAME=value in .env and shell runs to the blank: commas and brackets
        # are part of a password there
        while ve < len(text) and text[ve] not in _ENV_VALUE_END:
            ve += 1
        val = text[vs:ve]
    if names.value_ok(cls, val, quoted, env_style, nxt):
        kind = _kind(raw_name, val, m.group("sep"))
        out.append((vs, ve, HEADER if kind != "env-secret" else ASSIGNED, kind))


def _try_cli(text: str, ke: int, cls: str, out: list[Cand]) -> None:
    m = _CLI_TAIL_RE.match(text, ke)
    if m is None:
        return
    if m.group("qval") is not None:
        val, vs, ve = m.group("qval"), m.start("qval"), m.end("qval")
    else:
        val, vs, ve = m.group("bval"), m.start("bval"), m.end("bval")
    if names.value_ok(cls, val, True, True, "\n"):
        out.append((vs, ve, HEADER, "cli-secret"))


def _try_xml(text: str, ke: int, cls: str, out: list[Cand]) -> None:
    m = _XML_TEXT_RE.match(text, ke)  # <password>value</password>
    if m is not None and names.value_ok(cls, m.group("val"), True, True, "\n"):
        out.append((m.start("val"), m.end("val"), ASSIGNED, "env-secret"))


def _try_openssl(text: str, vs: int, out: list[Cand]) -> None:
    got = flag_value(text, vs)
    if got is not None and not is_placeholder(got[0]) and got[0][0] not in "$%{":
        out.append((got[1], got[2], HEADER, "cli-secret"))


def _try_auth_header(text: str, ks: int, out: list[Cand]) -> None:
    if ks > 0 and text[ks - 1] in WORDCH:
        return
    m = _AUTH_TAIL_RE.match(text, ks + len("authorization"))
    if m is None:
        return
    val = m.group("val")
    if is_placeholder(val) or len(set(val)) < 6 or val[0] in "$%{<":
        return
    if m.group("scheme") is None and not looks_random(val, 16):
        return
    out.append((m.start("val"), m.end("val"), HEADER, "auth-header"))


def _at_keyword(
    text: str, lower: str, i: int, ke: int, kw: str, out: list[Cand]
) -> None:
    """Try every shape that may follow the keyword at ``text[i:ke]``."""
    n = len(text)
    nxt = text[ke] if ke < n else "\n"
    if kw == "auth" and lower.startswith("orization", ke):
        _try_auth_header(text, i, out)
    elif kw == "key" and i >= 8 and text.startswith("PRIVATE KEY", i - 8):
        try_pem(text, i, out)
    elif kw == "key" and text.startswith("PuTTY-User-", i - 11):
        scan_putty(text, i - 11, out)
    elif kw == "token" and nxt == "$" and text.startswith("access_token$", i - 7):
        m = _BRAINTREE_RE.match(text, i - 7)  # access_token$production$<16>
        if m is not None:
            out.append((m.start(), m.end(), PROVIDER, shapes.BRAINTREE[0]))
    elif kw == "pass" and nxt == ":" and ke == i + 4:
        if i > 0 and text[i - 1] in " \t=\"'":  # openssl -passin pass:<pw>
            _try_openssl(text, ke + 1, out)
    elif nxt in "_.-" and ke < n - 1:
        _suffixed(text, i, ke, out)  # TOKEN_1=, API_KEY_PROD:, secret.value =
    elif nxt in _AFTER_NAME:
        _named(text, i, ke, nxt, out)


def _named(text: str, i: int, ke: int, nxt: str, out: list[Cand]) -> None:
    """The name ends at ``ke``, before ``nxt``: its value, in the shape it has."""
    n = len(text)
    cli = nxt in " \t" and i > 0 and text[i - 1] == "-"
    if nxt in " \t" and not cli:
        j = ke + 1
        while j < n and text[j] in " \t":
            j += 1
        if j >= n or text[j] not in ":=":
            return  # a word in prose, not a name = value
    ns = names.name_start(text, i)
    cls = names.classify_name(text, ns, i, ke)
    if cls is None:
        return
    if cli and text.startswith("-", ns):
        _try_cli(text, ke, cls, out)
    elif nxt == ">":
        if ns > 0 and text[ns - 1] == "<":
            _try_xml(text, ke, cls, out)
    else:
        _try_env(text, ns, ke, cls, out)


_NOT_SECRET_SUFFIXES = frozenset(
    {
        "id", "ids", "name", "names", "type", "types", "url", "uri", "urls",
        "file", "path", "dir", "length", "len", "size", "count", "endpoint",
        "policy", "timeout", "ttl", "expiry", "expires", "expiration", "field",
        "header", "prefix", "suffix", "env", "var", "mode", "format", "version",
        "location", "ref", "arn", "source", "provider", "method", "scheme",
        "kind", "label", "hint", "prompt", "reset", "min", "max", "limit",
        "required", "enabled", "changed", "rotation", "store", "manager",
        "helper", "class", "index", "regex", "pattern",
    }
)  # fmt: skip


def _suffixed(text: str, i: int, ke: int, out: list[Cand]) -> None:
    """A name that goes on after its keyword: ``TOKEN_1``, ``api_key_prod``."""
    n = len(text)
    j = ke
    while j < n and j - ke < 24 and text[j] in names.NAME_CH:
        j += 1
    if j >= n or text[j] not in ":=\"' \t":
        return
    parts = text[ke:j].lower().replace("-", "_").replace(".", "_").split("_")
    if any(p in _NOT_SECRET_SUFFIXES for p in parts):
        return  # token_url, password_reset_timeout, key_id
    ns = names.name_start(text, i)
    cls = names.classify_name(text, ns, i, ke)
    if cls is not None:
        if text[j] in " \t":
            k = j
            while k < n and text[k] in " \t":
                k += 1
            if k >= n or text[k] not in ":=":
                return
        # the suffix may say anything: a number is no longer a password
        _try_env(text, ns, j, "strong" if cls == "password" else cls, out)


_FOLLOW = _AFTER_NAME | {"_", ".", "-", "$"}
# the keywords the engine finds in its own pass (engine.GATES, kw-<keyword>)
GATED = frozenset({"secret", "token", "credential", "bearer", "honeycomb-team", "pw"})
# the letters that may follow a keyword in a longer keyword (password, pwd,
# credentials, Authorization): any other letter ends the hit at once
_GROWS = {"pass": "wp", "pw": "d", "credential": "s", "auth": "o"}


def scan_keywords(
    text: str, lower: str, out: list[Cand], gates: frozenset[str] | None = None
) -> None:
    """Add the values of every secret-ish name in ``text`` (``lower`` lowered).

    ``gates``: what the engine found in ``text``; a keyword it looks for
    (``kw-<keyword>``) and did not find is not searched for again.
    """
    n = len(text)
    for kw in names.KEYWORDS:
        if gates is not None and kw in GATED and f"kw-{kw}" not in gates:
            continue
        covered = 0  # end of the last value found: keywords inside it are data
        grows = _GROWS.get(kw, "")
        i = lower.find(kw)
        while i != -1:
            after = i + len(kw)
            nxt = lower[after : after + 1]
            # most hits are words (passed, keys, tokenize, Author): one look at
            # the next character sends them on
            if nxt.islower() and nxt not in grows:
                i = lower.find(kw, after)
                continue
            ke = names.kw_end(lower, kw, i)
            if i >= covered and (ke == n or text[ke] in _FOLLOW or kw == "auth"):
                found = len(out)
                _at_keyword(text, lower, i, ke, kw, out)
                if len(out) > found:
                    covered = max(covered, out[-1][1])
            i = lower.find(kw, ke)
