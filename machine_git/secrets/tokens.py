"""Runs of token characters: provider tokens, dotted tokens, random strings.

Every provider token, JWT part and random key is a run of
``[A-Za-z0-9+/_-]`` of 20 characters or more, so one regex pass finds every
candidate. A run is dispatched on its first two characters to the provider
rules that start that way (``rules.PROVIDERS``); a run behind a dot is
checked against the dotted shapes (``ya29.``, ``SG.``, JWTs); anything else is
judged on its own: long, random-looking runs are ``high-entropy`` unless
they are a known non-secret (a digest, a UUID, image data, base64 of
prose, a typed object id).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from collections.abc import Iterator

from machine_git.secrets import rules
from machine_git.secrets.found import ENTROPY
from machine_git.secrets.found import PROVIDER
from machine_git.secrets.found import STRUCT
from machine_git.secrets.found import Cand
from machine_git.secrets.heuristics import ALNUM
from machine_git.secrets.heuristics import BLOB_PREFIXES
from machine_git.secrets.heuristics import DIGEST_PREFIXES
from machine_git.secrets.heuristics import DIGITS
from machine_git.secrets.heuristics import HAS_DIGIT_RE
from machine_git.secrets.heuristics import HEXISH_RE
from machine_git.secrets.heuristics import WORDCH
from machine_git.secrets.heuristics import LazyPattern
from machine_git.secrets.heuristics import b64_prefix_decode
from machine_git.secrets.heuristics import distinct_enough
from machine_git.secrets.heuristics import entropy
from machine_git.secrets.heuristics import is_base64_prose
from machine_git.secrets.heuristics import is_placeholder
from machine_git.secrets.heuristics import looks_random
from machine_git.secrets.heuristics import typed_id
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
_DOTTED = tuple((k, h, LazyPattern(rx, re.ASCII)) for k, h, rx in rules.DOTTED)
_DOTTED_HEAD_RE = LazyPattern(
    "|".join(sorted({re.escape(h) for _, h, _ in rules.DOTTED} | {"eyJ"}))
)
_DOTCHAIN = WORDCH | {"-", "."}
_CHAIN_RE = LazyPattern(r"[\w.-]*", re.ASCII)
_TELEGRAM_RE = LazyPattern(r"[0-9]{8,10}:AA[\w-]{33}", re.ASCII)
_MAILCHIMP_RE = LazyPattern(r"[0-9a-f]{32}-us[0-9]{1,2}")
_DISCORD_RE = LazyPattern(r"[MNO][\w-]{23,27}\.[\w-]{6}\.[\w-]{27,40}", re.ASCII)
_FB_APP_RE = LazyPattern(r"[0-9]{15,16}\|[\w-]{27,40}", re.ASCII)
_JWT_RE = LazyPattern(r"eyJ[\w-]{10,}\.eyJ[\w-]{4,}\.[\w-]*(?:\.[\w-]+){0,2}", re.ASCII)
_MAXMIND_RE = LazyPattern(rules.MAXMIND[1], re.ASCII)
_GITLAB_SESSION_RE = LazyPattern(rules.GITLAB_SESSION[1], re.ASCII)
_TERRAFORM_RE = LazyPattern(rules.TERRAFORM[1], re.ASCII)
_AWS_SECRET_NEAR_RE = LazyPattern(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![\w/+=])")


def _end_ok(text: str, e: int) -> bool:
    return e >= len(text) or text[e] not in ALNUM


def _try_providers(text: str, pos: int, out: list[Cand]) -> int:
    """Match a provider token at ``pos``; return where it ends, or -1."""
    gate = _gate(BY_HEAD, text[pos : pos + 2])
    if gate is None or gate.match(text, pos) is None:
        return -1
    for kind, prefixes, rx, check in BY_HEAD[text[pos : pos + 2]][1]:
        if not text.startswith(prefixes, pos):
            continue
        m = rx.match(text, pos)
        if m is None or not _end_ok(text, m.end()):
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


def _try_dotted(text: str, s: int, e: int, out: list[Cand]) -> bool:
    # a dotted chain: ya29.<run>, SG.<run>.<run>, dp.st.<env>.<run>, JWTs; its
    # head is the first known prefix in reach that starts a chain running
    # unbroken up to this run
    if text.startswith("atlasv1.", s - 8) and s >= 23:
        m = _TERRAFORM_RE.match(text, s - 23)
        if m is not None and _end_ok(text, m.end()):
            out.append((s - 23, m.end(), PROVIDER, rules.TERRAFORM[0]))
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
                if m is not None and m.end() >= e and _end_ok(text, m.end()):
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
    if m is None or not _end_ok(text, m.end()):
        return False
    out.append((p, m.end(), PROVIDER, kind))
    return True


def _try_shapes(text: str, tok: str, s: int, e: int, out: list[Cand]) -> bool:
    """Provider tokens that are not a single run of token characters."""
    found = False
    prev = text[s - 1] if s > 0 else "\n"
    if prev == ".":
        found = _try_dotted(text, s, e, out)
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
            if m is not None and _end_ok(text, m.end()):
                cand = m.group()
                if HAS_DIGIT_RE.search(cand) and entropy(cand) >= 4.0:
                    out.append((s, m.end(), PROVIDER, "discord-token"))
                    found = True
    elif (
        prev == "="
        and text.endswith("_gitlab_session", 0, s - 1)
        and _GITLAB_SESSION_RE.fullmatch(tok)
    ):
        out.append((s, e, PROVIDER, rules.GITLAB_SESSION[0]))
        found = True
    if "-us" in tok and _MAILCHIMP_RE.fullmatch(tok):
        out.append((s, e, PROVIDER, "mailchimp-api-key"))
        found = True
    elif tok.endswith("_mmk") and _MAXMIND_RE.fullmatch(tok):
        out.append((s, e, PROVIDER, rules.MAXMIND[0]))
        found = True
    return found


# -- random strings --------------------------------------------------------------------

_SKIP_PREFIXES = (*BLOB_PREFIXES, *DIGEST_PREFIXES)
_SKIP_AFTER = (
    "base64,", "h1:", "sha1:", "sha256:", "sha384:", "sha512:", "md5:", "sha1-",
    "sha256-", "sha384-", "sha512-",
)  # fmt: skip
_HASH_CONTEXT_RE = LazyPattern(
    r"(?i)(?:sha-?(?:1|224|256|384|512)|hash|digest|checksum|md5|integrity|etag"
    r"|fingerprint|crc32c?|thumbprint)[\w-]{0,20}[\"']?[ \t]*[:=][ \t]*[\"']?$"
)
_PLAIN_PIECE_RE = LazyPattern(r"[a-z_.-]*")
_UUID_IN_RE = LazyPattern(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)
_SAMPLE = 512
_SHAPE_PREV = frozenset(".:|=")
# what may come before a run of lower case that still needs a look: dotted
# tokens, an app id's "|", "_gitlab_session=", an escaped newline ("\ndop_v1_")
_KEEP_AFTER = frozenset(".|=\\")
_PEM_B64_PREFIX = "LS0tLS1CRUdJT"  # base64 of "-----BEGI"


def _entropy_threshold(n: int) -> float:
    # random base62/64 runs score close to log2(min(n, 64)) bits per char;
    # identifiers, paths and words score well below that
    return min(3.9 + 0.015 * (n - 20), 4.5)


def classify(tok: str, text: str, start: int) -> str | None:
    """``high-entropy`` or ``private-key`` for a random-looking run, else None."""
    # a long run (a base64 blob) is judged on its head: enough to tell data
    # from words, and it keeps a megabyte blob from costing milliseconds
    core = tok[:_SAMPLE].rstrip("=")
    n = len(core)
    if n < 20:
        return None
    if core.startswith(_PEM_B64_PREFIX):
        if "PRIVATE KEY" in b64_prefix_decode(core, 96):
            return "private-key"
        return None  # base64 of a certificate or public key: not a secret
    if core.islower() or core.isupper() or not HAS_DIGIT_RE.search(core):
        return None
    if HEXISH_RE.fullmatch(core) or core.startswith(_SKIP_PREFIXES):
        return None
    if core.count("-") + core.count("_") > max(3, n // 8):
        return None  # names: test-8000Hz-le-3ch-24bit, my_var_2_name_x
    if _UUID_IN_RE.search(core):
        core = _UUID_IN_RE.sub("", core)  # judge what is left around a uuid
        n = len(core)
        if n < 20:
            return None
    if typed_id(core):
        return None  # typed object ids: toolu_..., msg_..., chatcmpl-..., cus_...
    return _judge(core, n, text, start)


def _judge(core: str, n: int, text: str, start: int) -> str | None:
    wordy = wordy_fraction(core)
    if "/" in core:
        # a path or url: its longest piece must look random on its own
        pieces = core.split("/")
        piece = max(pieces, key=len)
        if len(piece) < 16 or HEXISH_RE.fullmatch(piece):
            return None
        if wordy > 0.3 and (len(pieces) > 3 or wordy_fraction(piece) > 0.3):
            return None
    elif wordy > 0.4:
        return None
    if entropy(core) < _entropy_threshold(n):
        return None
    # the rarer, costlier checks run only on the few runs that got this far
    if is_placeholder(core) or is_base64_prose(core):
        return None  # AWS docs' ...EXAMPLEKEY; `echo VGhlIHF1aWNr | base64 -d`
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
            gate = _gate(by_head, tok[:2])
            if (gate is None or gate.match(text, s) is None) and (
                tok[0] != "/" or not _provider_after_slash(text, s, tok)
            ):
                continue  # classify() would say no, and no provider starts there
        _scan_run(text, s, e, n, out)


_GATES: dict[str, re.Pattern[str]] = {}


def _gate(
    by_head: dict[str, tuple[LazyPattern, tuple[_Entry, ...]]], head: str
) -> re.Pattern[str] | None:
    """The compiled "any provider of this head" pattern, or None."""
    gate = _GATES.get(head)
    if gate is None:
        got = by_head.get(head)
        if got is None:
            return None
        gate = _GATES[head] = got[0].get()
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
            _try_dotted(text, s, end, out)  # xoxe.xoxp-...: a head before the dot
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
    ) and _try_shapes(text, tok, s, e, out):
        return
    kind = classify(tok, text, s)
    if kind is not None:
        prio = STRUCT if kind == "private-key" else ENTROPY
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
