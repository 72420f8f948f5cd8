"""Tokens that are not one run of token characters, and the shapes' tables.

A dotted token (``ya29.<run>``, ``SG.<run>.<run>``, ``dp.st.<env>.<run>``, a
JWT) is met by the token scanner as its last run, with a dot before it: its
head is found behind. A Telegram bot token is found behind its ``:``, a
Facebook app token behind its ``|``, a GitLab session cookie behind
``_gitlab_session=``. ``LITERALS`` are found by a literal inside them
(``blocks.scan_literals``).
"""

from __future__ import annotations

import re

from machine_git.secrets.found import PROVIDER
from machine_git.secrets.found import STRUCT
from machine_git.secrets.found import Cand
from machine_git.secrets.heuristics import ALNUM
from machine_git.secrets.heuristics import DIGITS
from machine_git.secrets.heuristics import HAS_DIGIT_RE
from machine_git.secrets.heuristics import WORDCH
from machine_git.secrets.heuristics import LazyPattern
from machine_git.secrets.heuristics import entropy

# Tokens with dots: the token run the scanner meets is the part after the
# last dot, and the head is found behind it. (kind, head, regex)
DOTTED: tuple[tuple[str, str, str], ...] = (
    ("google-oauth-token", "ya29.", r"ya29\.[\w-]{20,}"),
    ("sendgrid-api-key", "SG.", r"SG\.[\w-]{16,32}\.[\w-]{16,64}"),
    ("slack-token", "xoxe.", r"xoxe\.xox[bp]-[0-9]-[A-Z0-9]{120,}"),
    ("vault-token", "hvs.", r"hvs\.[\w-]{24,}"),
    ("vault-token", "hvb.", r"hvb\.[\w-]{24,}"),
    ("vault-token", "hvr.", r"hvr\.[\w-]{24,}"),
    *(
        (
            "doppler-token",
            f"dp.{sub}.",
            rf"dp\.{sub}\.(?:[\w-]{{1,40}}\.)?[A-Za-z0-9]{{40,44}}",
        )
        for sub in ("pt", "st", "sa", "ct", "scim", "audit")
    ),
    ("dynatrace-token", "dt0c01.", r"dt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}"),
    (
        "harness-token",
        "pat.",
        r"pat\.[\w-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}",
    ),
    (
        "harness-token",
        "sat.",
        r"sat\.[\w-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}",
    ),
    ("airtable-token", "pat", r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}"),
    ("mapbox-token", "sk.eyJ", r"sk\.eyJ[\w-]{20,}\.[\w-]{20,}"),
    ("dropbox-token", "sl.", r"sl\.(?:u\.)?[\w=-]{130,}"),
    ("yandex-api-key", "t1.", r"t1\.[\w-]+={0,2}\.[\w-]{86}={0,2}"),
    ("cloudflare-origin-ca-key", "v1.0-", r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}"),
    ("adyen-api-key", "AQE", r"AQE[a-z0-9]{5,}\.[\w=-]{50,80}"),
    (
        "authress-key",
        "sc_",
        r"(?:sc|ext|scauth|authress)_[A-Za-z0-9]{5,30}\.[a-z0-9]{4,6}\.acc[_-]"
        r"[a-z0-9-]{10,32}\.[\w+/=-]{30,120}",
    ),
)

# Shapes found by a literal inside them, in text that holds ``gate`` (one
# fast search; "" = always): (gate, literal, how many characters of the match may come
# before the literal, regex, kind, group redacted (0 = the whole match)).
LITERALS: tuple[tuple[str, str, int, str, str, int], ...] = (
    # a Django key is cut into short runs by its symbols: searched for itself
    (
        "",
        "django-insecure-",
        0,
        r"django-insecure-[^\s\"'`]{4,250}",
        "django-secret-key",
        0,
    ),
    (
        "~",
        "Q~",
        4,
        r"(?<![\w~.])[\w~.]{3}[0-9]Q~[\w~.-]{31,34}(?![\w~.-])",
        "azure-ad-client-secret",
        0,
    ),
    ("~", "sha256~", 0, r"sha256~[\w-]{43}(?![\w-])", "openshift-token", 0),
    (
        "://",
        "hooks.slack.com/",
        13,
        r"(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/[\w/+-]{20,}",
        "slack-webhook",
        0,
    ),
    (
        "://",
        "/api/webhooks/",
        40,
        r"https://(?:(?:canary|ptb)\.)?discord(?:app)?\.com/api/webhooks/[0-9]+/[\w-]{20,}",
        "discord-webhook",
        0,
    ),
    (
        "://",
        ".webhook.office.com/",
        40,
        r"https://[\w-]+\.webhook\.office\.com/webhookb2/[\w@-]+/IncomingWebhook"
        r"/[a-z0-9]{32}/[\w-]+",
        "teams-webhook",
        0,
    ),
    (
        "://",
        "claude.ai/code/session_",
        8,
        r"(?i:https?://)claude\.ai/code/session_[A-Za-z0-9]{16,}",
        "claude-session-url",
        0,
    ),
    (
        "://",
        "api.softlayer.com/soap/",
        8,
        r"api\.softlayer\.com/soap/v3(?:\.1)?/([a-z0-9]{64})",
        "softlayer-api-key",
        1,
    ),
)

# Tokens found from the run of token characters next to them, in
# tokens.py: (kind, regex).
MAXMIND = ("maxmind-license-key", r"[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk")
BRAINTREE = ("braintree-key", r"access_token\$(?:production|sandbox)\$[a-z0-9]{16}")
GITLAB_SESSION = ("gitlab-token", r"[0-9a-z]{32}")  # after _gitlab_session=
TERRAFORM = ("terraform-token", r"[A-Za-z0-9]{14}\.atlasv1\.[\w=-]{60,70}")


_DOTTED = tuple((k, h, LazyPattern(rx, re.ASCII)) for k, h, rx in DOTTED)
_DOTTED_HEAD_RE = LazyPattern(
    "|".join(sorted({re.escape(h) for _, h, _ in DOTTED} | {"eyJ"}))
)
_DOTCHAIN = WORDCH | {"-", "."}
_CHAIN_RE = LazyPattern(r"[\w.-]*", re.ASCII)
_TELEGRAM_RE = LazyPattern(r"[0-9]{8,10}:AA[\w-]{33}", re.ASCII)
_MAILCHIMP_RE = LazyPattern(r"[0-9a-f]{32}-us[0-9]{1,2}")
_DISCORD_RE = LazyPattern(r"[MNO][\w-]{23,27}\.[\w-]{6}\.[\w-]{27,40}", re.ASCII)
_FB_APP_RE = LazyPattern(r"[0-9]{15,16}\|[\w-]{27,40}", re.ASCII)
_JWT_RE = LazyPattern(r"eyJ[\w-]{10,}\.eyJ[\w-]{4,}\.[\w-]*(?:\.[\w-]+){0,2}", re.ASCII)
_MAXMIND_RE = LazyPattern(MAXMIND[1], re.ASCII)
_GITLAB_SESSION_RE = LazyPattern(GITLAB_SESSION[1], re.ASCII)
_TERRAFORM_RE = LazyPattern(TERRAFORM[1], re.ASCII)


def end_ok(text: str, e: int) -> bool:
    return e >= len(text) or text[e] not in ALNUM


def try_dotted(text: str, s: int, e: int, out: list[Cand]) -> bool:
    # a dotted chain: ya29.<run>, SG.<run>.<run>, dp.st.<env>.<run>, JWTs; its
    # head is the first known prefix in reach that starts a chain running
    # unbroken up to this run
    if text.startswith("atlasv1.", s - 8) and s >= 23:
        m = _TERRAFORM_RE.match(text, s - 23)
        if m is not None and end_ok(text, m.end()):
            out.append((s - 23, m.end(), PROVIDER, TERRAFORM[0]))
            return True
    found = False
    # a head may run past the dot before this run: "v1.0-" ends 2 into it
    for h in _DOTTED_HEAD_RE.finditer(text, max(0, s - 256), min(len(text), s + 8)):
        p = h.start()
        if p >= s:
            break
        if p > 0 and text[p - 1] in _DOTCHAIN:
            continue
        if _CHAIN_RE.fullmatch(text, p, s) is None:
            continue
        for kind, prefix, rx in _DOTTED:
            if text.startswith(prefix, p):
                m = rx.match(text, p)
                if m is not None and m.end() >= e and end_ok(text, m.end()):
                    out.append((p, m.end(), PROVIDER, kind))
                    found = True
        if text.startswith("eyJ", p):
            m = _JWT_RE.match(text, p)
            if m is not None and m.end() >= e:
                out.append((p, m.end(), STRUCT, "jwt"))
                found = True
        break
    return found


def _try_behind(text: str, s: int, prev: str, out: list[Cand]) -> bool:
    """Tokens whose head is behind a ``:`` (Telegram) or a ``|`` (Facebook)."""
    p = s - 1
    while p > 0 and text[p - 1] in DIGITS and s - p < 17:
        p -= 1
    if p > 0 and text[p - 1] in WORDCH:
        return False
    rx, kind = (_TELEGRAM_RE, "telegram-bot-token")
    if prev == "|":
        rx, kind = (_FB_APP_RE, "facebook-token")
    m = rx.match(text, p)
    if m is None or not end_ok(text, m.end()):
        return False
    out.append((p, m.end(), PROVIDER, kind))
    return True


def try_shapes(text: str, tok: str, s: int, e: int, out: list[Cand]) -> bool:
    """Provider tokens that are not a single run of token characters."""
    found = False
    prev = text[s - 1] if s > 0 else "\n"
    if prev == ".":
        found = try_dotted(text, s, e, out)
    elif (prev == ":" and tok.startswith("AA")) or prev == "|":
        found = _try_behind(text, s, prev, out)
    nxt = text[e] if e < len(text) else "\n"
    if nxt == ".":
        if tok.startswith("eyJ"):
            m = _JWT_RE.match(text, s)
            if m is not None:
                out.append((s, m.end(), STRUCT, "jwt"))
                found = True
        elif tok[0] in "MNO" and 24 <= len(tok) <= 28:
            m = _DISCORD_RE.match(text, s)
            if m is not None and end_ok(text, m.end()):
                cand = m.group()
                if HAS_DIGIT_RE.search(cand) and entropy(cand) >= 4.0:
                    out.append((s, m.end(), PROVIDER, "discord-token"))
                    found = True
    elif (
        prev == "="
        and text.endswith("_gitlab_session", 0, s - 1)
        and _GITLAB_SESSION_RE.fullmatch(tok)
    ):
        out.append((s, e, PROVIDER, GITLAB_SESSION[0]))
        found = True
    if "-us" in tok and _MAILCHIMP_RE.fullmatch(tok):
        out.append((s, e, PROVIDER, "mailchimp-api-key"))
        found = True
    elif tok.endswith("_mmk") and _MAXMIND_RE.fullmatch(tok):
        out.append((s, e, PROVIDER, MAXMIND[0]))
        found = True
    return found
