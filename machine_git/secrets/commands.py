"""Passwords typed on a command line.

The flags people pass credentials with, where the flag's name says nothing
the keyword pass (``assignments.py``) could find:

* ``-p<password>`` glued to its flag (MySQL and MariaDB clients; elsewhere
  only when the value reads as a password, so ``-p8080:80`` stays);
* ``sshpass -p <password>``, ``docker login -p <password>`` (and podman,
  helm, oras, skopeo...), ``mongosh -p``, ``redis-cli -a``, ``sqlcmd -P``;
* ``-u user:password`` / ``--user user:password`` (curl, wget...), and
  ``-U user%password`` (smbclient).

Only the password is replaced, as ``cli-secret`` (openssl's ``pass:<pw>`` is
found by the keyword pass). One regex with a literal prefix (`` -``) finds
every flag.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from machine_git.secrets.found import HEADER
from machine_git.secrets.found import Cand
from machine_git.secrets.heuristics import is_placeholder
from machine_git.secrets.heuristics import password_like
from machine_git.secrets.names import named_secret

_MYSQLISH = frozenset(
    {
        "mysql", "mysqldump", "mysqladmin", "mysqlimport", "mysqlshow",
        "mysqlcheck", "mysqlpump", "mysqlsh", "mysqlslap", "mariadb",
        "mariadb-dump", "mariadb-admin", "mariadb-import",
    }
)  # fmt: skip
_REGISTRIES = frozenset(
    {
        "docker", "podman", "nerdctl", "buildah", "skopeo", "oras", "helm",
        "crane", "regctl", "finch",
    }
)  # fmt: skip
_MONGO = frozenset(
    {
        "cqlsh", "mongo", "mongosh", "mongodump", "mongorestore", "mongoexport",
        "mongoimport", "mongostat", "mongotop", "mongofiles",
    }
)  # fmt: skip
_CONTAINERS = frozenset(
    {"docker", "podman", "nerdctl", "kubectl", "buildah", "crictl", "runc", "ctr"}
)
_SEPARATORS = '\n;|&(`"{'
_STOP = frozenset(" \t\r\n\"'`;|)<>\\")


def _segment_words(text: str, pos: int) -> set[str]:
    """The command words (base names) of the shell command holding ``pos``."""
    lo = max(0, pos - 400)
    start = max(text.rfind(c, lo, pos) for c in _SEPARATORS) + 1
    start = max(start, lo)
    return {w.rsplit("/", 1)[-1] for w in text[start:pos].split()}


_WORD_RE = re.compile(r"[\w./-]+")


def _line_words(text: str, pos: int) -> set[str]:
    """The words of the command line holding ``pos``, across its quoted words."""
    lo = max(0, pos - 400)
    start = max(text.rfind(c, lo, pos) for c in "\n;|&") + 1
    escaped = text.rfind("\\n", lo, pos)  # a line break inside a JSON string
    start = max(start, lo, escaped + 2 if escaped != -1 else 0)
    return {w.rsplit("/", 1)[-1] for w in _WORD_RE.findall(text, start, pos)}


def flag_value(text: str, vs: int) -> tuple[str, int, int] | None:
    """The value starting at ``vs``: quoted ('x', "x", \\"x\\") or bare."""
    n = len(text)
    quote = ""
    if vs < n and text[vs] == "\\" and text[vs + 1 : vs + 2] in ("'", '"'):
        quote, vs = "\\" + text[vs + 1], vs + 2
    elif vs < n and text[vs] in "'\"":
        quote, vs = text[vs], vs + 1
    if quote:
        ve = text.find(quote, vs, vs + 512)
        if ve <= vs or "\n" in text[vs:ve]:
            return None
        return text[vs:ve], vs, ve
    ve = vs
    while ve < n and ve - vs < 512 and text[ve] not in _STOP:
        # a lone & is part of the word (agents write passwords unquoted);
        # "&&" or "& " ends the command
        if text[ve] == "&" and (ve + 1 >= n or text[ve + 1] in "& \t\r\n"):
            break
        ve += 1
    return (text[vs:ve], vs, ve) if ve > vs else None


def _ok(val: str) -> bool:
    return bool(val) and val[0] not in "$%{<" and not is_placeholder(val)


def _emit(out: list[Cand], got: tuple[str, int, int] | None) -> None:
    if got is not None and _ok(got[0]):
        out.append((got[1], got[2], HEADER, "cli-secret"))


def _spaced(text: str, i: int) -> int:
    """The first character after the blanks at ``i``."""
    while i < len(text) and text[i] in " \t":
        i += 1
    return i


def _flag_p(text: str, i: int, out: list[Cand]) -> None:
    """``-p<password>`` (MySQL), and the spaced ``-p`` of sshpass, logins, mongo."""
    vs = i + 3
    c = text[vs : vs + 1]
    if c and c not in " \t\r\n-=":
        got = flag_value(text, vs)
        if got is not None and _ok(got[0]):
            words = _segment_words(text, i)
            if (
                words & _MYSQLISH
                or "sshpass" in words
                or (password_like(got[0]) and "/" not in got[0])
            ):
                out.append((got[1], got[2], HEADER, "cli-secret"))
    elif c in (" ", "\t"):
        words = _segment_words(text, i)
        if "sshpass" in words or words & _MONGO or "login" in words:
            # docker/az/oc/cf login -p <password>
            _emit(out, flag_value(text, _spaced(text, vs)))


def _flag_user(text: str, i: int, vs: int, sep: str, out: list[Cand]) -> None:
    """``-u user:password``, ``--user[= ]user:password``, ``-U user%password``."""
    if text.startswith("=", vs):
        vs += 1
    got = flag_value(text, _spaced(text, vs))
    if got is None or sep not in got[0]:
        return
    user, pw = got[0].split(sep, 1)
    if not pw and sep == ":" and len(user) >= 16 and _ok(user):
        # curl -u sk_live_...: -- an API key as the user name (Stripe, Mailgun)
        out.append((got[1], got[1] + len(user), HEADER, "cli-secret"))
        return
    if not pw or pw == user or (user.isdigit() and pw.isdigit()) or not _ok(pw):
        return  # -u 1000:1000, -u app:app: a user and its group
    if sep == ":" and _segment_words(text, i) & _CONTAINERS:
        return  # docker run -u app:staff: user:group again
    out.append((got[1] + len(user) + 1, got[2], HEADER, "cli-secret"))


_TOOLS = {
    "a": frozenset({"redis-cli"}),
    "P": frozenset({"sqlcmd", "bcp", "osql"}),
    "w": frozenset(
        {
            "ldapsearch", "ldapmodify", "ldapadd", "ldapdelete", "ldappasswd",
            "ldapwhoami", "ldapcompare", "ldapmodrdn", "ldapexop",
        }
    ),
}  # fmt: skip
# keytool's (and jarsigner's) password flags: one dash, a word
_WORD_FLAGS = frozenset(
    {
        "storepass", "keypass", "srcstorepass", "deststorepass", "srckeypass",
        "destkeypass",
    }
)  # fmt: skip
_FLAG_RE = re.compile(
    r" -(?:(?:storepass|keypass|srcstorepass|deststorepass|srckeypass|destkeypass)"
    r"(?![\w-])|[pPauUw]|-user)"
)


def scan_commands(
    text: str, out: list[Cand], gates: frozenset[str] | None = None
) -> None:
    """Add the passwords given to command-line flags in ``text``.

    ``gates``: the literals the engine found in ``text`` (None: look).
    """
    for m in _FLAG_RE.finditer(text):
        i, flag = m.start(), m.group()[2:]
        if flag == "p":
            _flag_p(text, i, out)
        elif flag in _WORD_FLAGS:
            _emit(out, flag_value(text, _spaced(text, m.end())))
        elif flag in ("a", "P", "w"):
            if _line_words(text, i) & _TOOLS[flag]:
                _emit(out, flag_value(text, _spaced(text, m.end())))
        elif flag == "U":
            _flag_user(text, i, m.end(), "%", out)
        else:  # -u, --user
            _flag_user(text, i, m.end(), ":", out)
    if gates is None:
        gates = _gates(text)
    if "htpasswd" in gates or "login" in gates or "rabbitmqctl" in gates:
        _positional(text, out)
    if "net-use" in gates:
        _net_use(text, out)
    if "config" in gates:  # also " configure set"
        _config_set(text, out)


def _gates(text: str) -> frozenset[str]:
    """The engine's gates of this module, looked for in ``text``."""
    found = set()
    for name, literal in (
        ("htpasswd", "htpasswd"),
        ("rabbitmqctl", "rabbitmqctl"),
        ("login", " login "),
        ("net-use", "/user:"),
        ("config", " config"),
    ):
        if literal in text:
            found.add(name)
    return frozenset(found)


# `<tool> config set <name> <value>`: a setting given on the command line,
# a secret when its name says so (npm's //registry/:_authToken, aws's
# aws_secret_access_key)
_CONFIG_SET_RE = re.compile(
    r"(?:aws[ \t]+configure[ \t]+set|(?:npm|yarn|pnpm|pip|bundle|conda)[ \t]+config"
    r"[ \t]+set|git[ \t]+config(?:[ \t]+--(?:global|local|system|add))*"
    r"|poetry[ \t]+config|composer[ \t]+config(?:[ \t]+-g)?)"
    r"[ \t]+(?P<name>[\w.:/@-]+)[ \t]+"
)


_CONFIG_TOOLS = frozenset(
    {
        "aws",
        "npm",
        "yarn",
        "pnpm",
        "pip",
        "bundle",
        "conda",
        "git",
        "poetry",
        "composer",
    }
)


def _config_set(text: str, out: list[Cand]) -> None:
    # found from each "config" (a fast search), then matched from its tool's name
    i = text.find("config")
    while i != -1:
        j = i
        while j > 0 and text[j - 1] in " \t":
            j -= 1
        k = j
        while k > 0 and text[k - 1].isalpha():
            k -= 1
        m = None
        if text[k:j] in _CONFIG_TOOLS and (k == 0 or not text[k - 1].isalnum()):
            m = _CONFIG_SET_RE.match(text, k)
        i = text.find("config", i + 6)
        if m is None:
            continue
        got = flag_value(text, m.end())
        name = re.split(r"[.:/]", m.group("name"))[-1]
        if got is not None and _ok(got[0]) and named_secret(name, got[0]):
            out.append((got[1], got[2], HEADER, "cli-secret"))


# Commands that take a password (or key) as a positional argument: the
# command word, the words that must follow it, and which positional argument
# after them is the secret.
_POSITIONAL = ("htpasswd", "rabbitmqctl", "wandb", "vault")
_STOPS = frozenset(";|&)\n`")


def _args(text: str, pos: int) -> list[tuple[str, int, int]]:
    """The words after ``pos`` up to the end of the command, with their spans."""
    words: list[tuple[str, int, int]] = []
    i = pos
    n = len(text)
    while len(words) < 12:
        i = _spaced(text, i)
        if i >= n or text[i] in _STOPS or text.startswith("\\n", i):
            break
        got = flag_value(text, i)
        if got is None:
            break
        words.append(got)
        i = got[2] + (1 if got[2] < n and text[got[2]] in "'\"" else 0)
        if i < n and text[i] == "\\" and text[i + 1 : i + 2] in ("'", '"'):
            i += 2  # the end of a \"quoted\" word inside JSON
    return words


_CMD_BEFORE = frozenset(" \t\r\n;|&(`\"'/")


def _commands(text: str) -> Iterator[tuple[str, int]]:
    """Each of the positional commands in ``text``, and where its word ends."""
    for cmd in _POSITIONAL:
        i = text.find(cmd)
        while i != -1:
            e = i + len(cmd)
            if (i == 0 or text[i - 1] in _CMD_BEFORE) and text[e : e + 1] in (
                " ",
                "\t",
            ):
                yield cmd, e
            i = text.find(cmd, e)


def _positional(text: str, out: list[Cand]) -> None:
    for cmd, end in _commands(text):
        words = _args(text, end)
        names = [w[0] for w in words]
        target: tuple[str, int, int] | None = None
        if cmd == "htpasswd":
            flags = "".join(w[1:] for w in names if w.startswith("-"))
            plain = [w for w in words if not w[0].startswith("-")]
            if "b" in flags:  # -b: the password is on the command line
                at = 1 if "n" in flags else 2  # -n: user pw; else file user pw
                target = plain[at] if len(plain) > at else None
        elif cmd == "rabbitmqctl":
            for k, word in enumerate(names):
                if word in ("add_user", "change_password") and len(words) > k + 2:
                    target = words[k + 2]
                    break
        elif names[:1] == ["login"] and len(words) > 1:  # wandb login <key>
            target = words[1] if not words[1][0].startswith("-") else None
        if target is not None:
            _emit(out, target)


_NET_USE_RE = re.compile(r"/user:[^\s\"']+[ \t]+(?P<pw>[^\s/\"'][^\s\"']*)")


def _net_use(text: str, out: list[Cand]) -> None:
    """``net use Z: \\\\srv\\share /user:DOMAIN\\dana <password>``."""
    for m in _NET_USE_RE.finditer(text):
        words = _segment_words(text, m.start())
        if "net" in words or "net.exe" in words:
            _emit(out, (m.group("pw"), m.start("pw"), m.end("pw")))
