"""Credentials known by the file or the syntax they sit in, not by a ``name=``.

* ``.netrc``: ``machine <host> login <user> password <pw>`` (one line or
  several; ``default`` too) -- curl, git, Heroku and ftp read it;
* ``.pgpass``: ``host:port:database:user:password`` lines;
* ``user/password@`` logins of Oracle tools and JDBC thin URLs
  (``jdbc:oracle:thin:scott/tiger@db``, ``sqlplus system/pw@ORCL``);
* PHP constants: ``define('DB_PASSWORD', '...')`` (``wp-config.php``), when
  the constant's name says secret.

Only the password is replaced. Each shape is gated on a literal that
ordinary text rarely holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from machine_git.secrets import names
from machine_git.secrets.found import HEADER
from machine_git.secrets.found import Cand
from machine_git.secrets.heuristics import LazyPattern
from machine_git.secrets.heuristics import is_placeholder

_NETRC_RE = LazyPattern(r"(?:machine[ \t]+\S+|default)(?=\s)")
_NETRC_TOKEN_RE = LazyPattern(r"\s+(\S+)")
_NETRC_KEYS = frozenset({"login", "password", "account", "port", "macdef"})
# found from its port field (a literal ':' the regex engine skips to), then
# checked back to the start of its line
_PGPASS_RE = LazyPattern(
    r":(?:[0-9]{1,5}|\*):[^:\s]+:[^:\s]+:(?P<pw>(?:[^:\s\\]|\\.)+)[ \t]*$",
    re.MULTILINE,
)
_PGPASS_HOST_RE = LazyPattern(r"[ \t]*[A-Za-z0-9*._-]+")
_ORACLE_RE = LazyPattern(
    r"(?:jdbc:oracle:(?:thin|oci8?):|(?:sqlplus|sqlldr|expdp|impdp|rman"
    r"|dgmgrl)[ \t]+(?:-\w+[ \t]+)*)"
    r"[\"']?(?P<user>[A-Za-z_][\w$#]*)/(?P<pw>[^\s@/\"']+)@"
)
# the tools' names (each a fast search); the full pattern runs only when one is there
_ORACLE_WORDS = ("jdbc:oracle", "sqlplus", "sqlldr", "expdp", "impdp", "rman", "dgmgrl")
_TELEGRAM_RE = LazyPattern(
    r"api\.telegram\.org/(?:file/)?bot(?P<tok>[0-9]{5,12}:[\w-]{30,})"
)
# an Azure (or any) shared access signature: the sig= of a URL that has sv=
_SAS_RE = LazyPattern(r"[?&]sv=[^\s\"'<>]*?[?&]sig=(?P<sig>[\w%+/=-]{16,})")
_REDIS_RE = LazyPattern(
    r"(?i:\b(?:requirepass|masterauth)[ \t]+)[\"']?(?P<pw>[^\s\"']{4,256})"
)
_DEFINE_RE = LazyPattern(
    r"define\([ \t]*(?P<q1>['\"])(?P<name>\w+)(?P=q1)[ \t]*,[ \t]*"
    r"(?P<q2>['\"])(?P<val>[^'\"\\\r\n]{1,256})(?P=q2)[ \t]*\)"
)


def _ok(pw: str) -> bool:
    return bool(pw) and pw[0] not in "$%{<" and not is_placeholder(pw)


def scan_places(
    text: str, url: bool, out: list[Cand], gates: frozenset[str] | None = None
) -> None:
    """Add the passwords of netrc, pgpass, Oracle logins and PHP constants.

    ``url``: the text holds ``://``. ``gates``: the literals the engine found
    in ``text`` (None: each shape looks for its own).
    """
    if gates is None:
        gates = _gates(text, url)
    if "netrc" in gates:
        _netrc(text, out)
    if "pgpass" in gates:
        _pgpass(text, out)
    if "oracle" in gates and "@" in text:
        _found(_ORACLE_RE, text, "pw", "url-credentials", out)
    if url and "telegram" in gates:
        _found(_TELEGRAM_RE, text, "tok", "url-credentials", out)
    if url and "sas" in gates:
        _found(_SAS_RE, text, "sig", "url-credentials", out)
    if "redis" in gates:
        _found(_REDIS_RE, text, "pw", "env-secret", out)
    if "define" in gates:
        for m in _DEFINE_RE.finditer(text):
            if names.named_secret(m.group("name"), m.group("val")):
                out.append((m.start("val"), m.end("val"), HEADER, "env-secret"))


def _gates(text: str, url: bool) -> frozenset[str]:
    """The engine's gates of this module, looked for in ``text``."""
    found = set()
    if "password " in text and ("machine " in text or "default " in text):
        found.add("netrc")  # netrc's tokens are separated by blanks
    if text.count(":") >= 4:
        found.add("pgpass")
    if "@" in text and any(w in text for w in _ORACLE_WORDS):
        found.add("oracle")
    if url and "api.telegram.org/bot" in text:
        found.add("telegram")
    if url and "sig=" in text:
        found.add("sas")
    if "requirepass" in text or "masterauth" in text:
        found.add("redis")
    if "define(" in text:
        found.add("define")
    return frozenset(found)


def _found(rx: LazyPattern, text: str, group: str, kind: str, out: list[Cand]) -> None:
    for m in rx.finditer(text):
        if _ok(m.group(group)):
            out.append((m.start(group), m.end(group), HEADER, kind))


def _pgpass(text: str, out: list[Cand]) -> None:
    for m in _PGPASS_RE.finditer(text):
        line = text.rfind("\n", 0, m.start()) + 1
        host = _PGPASS_HOST_RE.fullmatch(text, line, m.start())
        if host is None or host.group().strip().isdigit():
            continue  # not a whole pgpass line (times, ports, addresses)
        if _ok(m.group("pw")):
            out.append((m.start("pw"), m.end("pw"), HEADER, "pgpass-password"))


def _netrc_entries(text: str) -> Iterator[int]:
    """Where each ``machine <host>`` / ``default`` entry's head ends."""
    for word in ("machine", "default"):
        i = text.find(word)
        while i != -1:
            m = _NETRC_RE.match(text, i) if i == 0 or text[i - 1].isspace() else None
            if m is not None:
                yield m.end()
            i = text.find(word, i + len(word))


def _netrc(text: str, out: list[Cand]) -> None:
    for pos in _netrc_entries(text):
        for _ in range(8):  # a machine entry: a few key/value pairs
            key = _NETRC_TOKEN_RE.match(text, pos)
            if key is None or key.group(1) not in _NETRC_KEYS:
                break
            val = _NETRC_TOKEN_RE.match(text, key.end())
            if val is None:
                break
            if key.group(1) == "password" and _ok(val.group(1)):
                out.append((val.start(1), val.end(1), HEADER, "netrc-password"))
            pos = val.end()
