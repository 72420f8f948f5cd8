"""The provider-rule layer: a maintained secret-detection engine, run offline.

Provider tokens (``ghp_...``, ``sk_live_...``, ``xoxb-...`` and some 400
more shapes) change every month; machine does not keep that list itself.
It runs Kingfisher (``kingfisher-secret-scanner``, MongoDB, Apache-2.0):
its built-in rules are betterleaks' (gitleaks' successor) default rules and
Google's Veles detectors, compiled into one Vectorscan database and matched
in Rust. Chosen on tests/secrets/secrets_agents.py's corpus (bench/RESULTS.md,
"Secret engines"): as few false positives as betterleaks on public data and
about 40 times faster, which the 2 ms budget per 48 KB row needs.

Only detection runs here. Kingfisher's validation and revocation, which call
the providers, are never used: nothing of a scanned text leaves the machine.

Loading compiles the rules (seconds) or reads them back from a cache in
``$MACHINE_SECRETS_CACHE`` (default ``$XDG_CACHE_HOME/machine/secrets``,
private to the user); it happens on the first scan of the process, so
commands that never scan never pay it. Even from the cache it costs 0.4 s
of CPU, so a process first asks the warm scanner (warm.py, daemon.py),
which keeps the rules loaded for every process of the user; it loads them
itself only when no warm scanner answers. The pinned version is in
pyproject.toml; ``scripts/update-secret-engine`` moves the pin.
"""

from __future__ import annotations

import _thread
import bisect
import contextlib
import os
import re
from pathlib import Path
from typing import Any

from machine_git.core.errors import SecretScanError
from machine_git.secrets import warm
from machine_git.secrets.assignments import GATED as GATED_KEYWORDS
from machine_git.secrets.found import ENGINE
from machine_git.secrets.found import Cand
from machine_git.secrets.heuristics import is_placeholder

PACKAGE = "kingfisher-secret-scanner"
CACHE_ENV = "MACHINE_SECRETS_CACHE"
# Texts shorter than this hold no provider token (the shortest rules want a
# prefix and 16 more characters): they skip the engine's per-call cost.
MIN_TEXT = 16
_KIND_CHARS_RE = re.compile(r"[^a-z0-9]+")
# Helpers (parts a rule needs to validate, not reported alone) that are
# secrets themselves: AWS's secret access key, STS tokens, passphrases.
_SECRET_HELPER_RE = re.compile(r"secret|token|passphrase|password")
# Literals machine's own context rules start from (places.py, commands.py):
# the engine finds them in the same pass as its rules, so those rules know
# at once which texts to look at instead of searching each text for each
# literal. (name, Vectorscan pattern)
GATES: tuple[tuple[str, str], ...] = (
    ("htpasswd", r"htpasswd"),
    ("rabbitmqctl", r"rabbitmqctl"),
    ("login", r"\slogin\s"),
    ("net-use", r"/user:"),
    ("config", r" config"),
    ("netrc", r"(?:machine\s+\S+|default)\s+(?:login|password|account)\s"),
    ("pgpass", r":(?:[0-9]{2,5}|\*):[^:\s\"',{}]+:[^:\s\"',{}]+:[^\s\"',{}]"),
    ("oracle", r"jdbc:oracle|sqlplus|sqlldr|expdp|impdp|rman|dgmgrl"),
    ("telegram", r"api\.telegram\.org/bot"),
    ("sas", r"sig="),
    ("redis", r"requirepass|masterauth"),
    ("define", r"define\("),
    # the rarer keywords of names that say secret (names.KEYWORDS): a text
    # without them is not searched for them
    *((f"kw-{kw}", f"(?i){re.escape(kw)}") for kw in sorted(GATED_KEYWORDS)),
)
GATE_PREFIX = "machine.gate."
# a text's engine findings, and the gates in it (None: not scanned, too short)
Batch = tuple[list[Cand], frozenset[str] | None]
_lock = _thread.allocate_lock()  # threading costs a millisecond to import
_scanner: Any = None
_rules: Any = None
_warm_socket: list[Path | None] = []  # the warm scanner's socket, once looked up


def cache_dir() -> Path:
    """Where the compiled rules are kept between processes."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache"
    )
    return Path(base) / "machine" / "secrets"


def _load() -> Any:
    global _scanner, _rules
    with _lock:
        if _scanner is not None:
            return _scanner
        try:
            import kingfisher_sdk
        except ImportError as e:  # fail closed: no engine, no scan
            raise SecretScanError(
                f"the secret engine is not installed ({PACKAGE}): {e}"
            ) from None
        folder = cache_dir()
        with contextlib.suppress(OSError):  # without a cache: slower, as good
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            gates = _gates_file(folder)
            _rules = kingfisher_sdk.Rules([gates], cache_dir=folder, confidence="low")
            _scanner = kingfisher_sdk.Scanner(_rules)
        except Exception as e:  # noqa: BLE001 - any failure: nothing is scanned
            raise SecretScanError(f"the secret engine failed to load: {e}") from None
        return _scanner


def _gates_text() -> str:
    """The rule file of :data:`GATES`."""
    lines = ["rules:"]
    for name, pattern in GATES:
        quoted = pattern.replace("'", "''")
        lines += [
            f"  - name: machine gate {name}",
            f"    id: {GATE_PREFIX}{name}",
            f"    pattern: '({quoted})'",
            "    min_entropy: 0",
            "    confidence: low",
        ]
    return "\n".join(lines) + "\n"


def gates_digest() -> str:
    """What names the gate rules: their file, and the warm scanner's socket."""
    import hashlib  # machine good has it loaded already

    return hashlib.sha256(_gates_text().encode()).hexdigest()[:16]


def _gates_file(folder: Path) -> Path:
    """The rule file of :data:`GATES` (written once; its content names it)."""
    import tempfile

    text = _gates_text()
    digest = gates_digest()
    for where in (folder, Path(tempfile.gettempdir())):
        path = where / f"machine-gates-{os.getuid()}-{digest}.yml"
        with contextlib.suppress(OSError):
            if not path.exists():
                tmp = path.with_suffix(f".{os.getpid()}.tmp")
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "w") as f:
                    f.write(text)
                os.replace(tmp, path)
            if path.read_text() == text:
                return path
    raise SecretScanError("cannot write the secret engine's gate rules")


def kind_of(rule_id: str) -> str:
    """``betterleaks.github-pat`` -> ``github-pat``: the placeholder's kind."""
    name = rule_id.rsplit("/", 1)[-1].split(".", 1)[-1].lower()
    return _KIND_CHARS_RE.sub("-", name).strip("-")[:40] or "secret"


def scan(text: str, out: list[Cand]) -> frozenset[str] | None:
    """Add the engine's findings in ``text``: its rules' and the secret helpers'.

    Returns the :data:`GATES` found in ``text`` (None: the text was too short
    to scan, and the context rules look for themselves).
    """
    if len(text) < MIN_TEXT:
        return None
    cands, gates = scan_many([text])[0]
    out.extend(cands)
    return gates


_SEPARATOR = b"\n\x00\n"


def scan_many(texts: list[str]) -> list[Batch]:
    """The engine's findings in each of ``texts``, in one call of the engine.

    A row holds a few dozen strings; one scan of them joined costs a tenth
    of a scan each (the engine's fixed cost per call dominates small texts).
    A match that would run from one text into the next is cut at the end of
    its text.
    """
    result: list[list[Cand]] = [[] for _ in texts]
    gates: list[set[str]] = [set() for _ in texts]
    chunks: list[bytes] = []
    starts: list[int] = []  # byte offset of each text in the joined buffer
    pos = 0
    for text in texts:
        data = text.encode("utf-8", "surrogatepass") if len(text) >= MIN_TEXT else b""
        chunks.append(data)
        starts.append(pos)
        pos += len(data) + len(_SEPARATOR)
    if pos == len(_SEPARATOR) * len(texts):
        return [(r, None) for r in result]
    found = _engine_scan(_SEPARATOR.join(chunks))
    # a helper alone matches any string of its shape (AWS's secret key: any
    # 40 base64 characters); it counts when a rule that needs it fired
    paired = any(f.visible and not f.rule_id.startswith(GATE_PREFIX) for f in found)
    for f in found:
        rule = f.rule_id
        if rule.startswith(GATE_PREFIX):
            k = bisect.bisect_right(starts, f.location["start_offset"]) - 1
            gates[k].add(rule[len(GATE_PREFIX) :])
            continue
        if not f.visible and not (paired and _SECRET_HELPER_RE.search(rule)):
            continue  # a helper that is an id, a host, a name: not a secret
        loc = f.location
        bs, be = loc["start_offset"], loc["end_offset"]
        k = bisect.bisect_right(starts, bs) - 1
        data, text = chunks[k], texts[k]
        bs, be = bs - starts[k], min(be - starts[k], len(data))
        if bs >= len(data):
            continue  # inside a separator
        s, e = bs, be
        if len(data) != len(text):  # byte offsets to str offsets
            s = len(data[:bs].decode("utf-8", "ignore"))
            e = len(data[:be].decode("utf-8", "ignore"))
        secret = f.secret
        if secret and is_placeholder(secret):
            continue  # mysql://root:password@localhost, <your-key>: a stand-in
        if secret and e - s > len(secret):  # a rule's match may hold its name too
            i = text.find(secret, s, e)
            if i != -1:
                s, e = i, i + len(secret)
        result[k].append((s, e, ENGINE, kind_of(rule)))
    return [
        (r, frozenset(g) if len(c) >= MIN_TEXT else None)
        for r, g, c in zip(result, gates, texts, strict=True)
    ]


def _engine_scan(data: bytes) -> list[Any]:
    """The engine's findings in ``data``: from the warm scanner if one answers.

    A process that has loaded the rules itself keeps scanning in-process.
    """
    if _scanner is None and warm.enabled():
        if not _warm_socket:
            _warm_socket.append(warm.socket_path(cache_dir(), gates_digest()))
        found = warm.scan(_warm_socket[0], data)
        if found is not None:
            return found
    return list(_load().scan(data))


def version() -> tuple[str, int]:
    """The engine's version and how many rules it runs (loads it)."""
    _load()
    import kingfisher_sdk

    visible = sum(
        1
        for r in _rules.metadata()
        if r.get("visible") and not r["id"].startswith(GATE_PREFIX)
    )
    return kingfisher_sdk.__version__, visible


def kinds() -> frozenset[str]:
    """Every kind the engine can report (loads it)."""
    _load()
    return frozenset(
        kind_of(r["id"])
        for r in _rules.metadata()
        if (r.get("visible") or _SECRET_HELPER_RE.search(r["id"]))
        and not r["id"].startswith(GATE_PREFIX)
    )
