"""Secret scanner: find credentials in text and replace them by typed placeholders.

Every text machine writes (a row's content, a commit message, an imported
row) passes through :func:`redact` or :func:`redact_text` before any byte
of it reaches git. A secret is replaced by ``[REDACTED:<kind>]``, where
``<kind>`` names its provider (``github-token``, ``openai-api-key``) or its
shape (``private-key``, ``url-credentials``, ``cli-secret``, ``env-secret``,
``high-entropy``); :data:`KINDS` lists them all.

The detectors, one module each:

* ``tokens``: runs of token characters, dispatched on their first two
  characters to the provider rules of ``rules`` (documented prefixes and
  shapes); ``shapes``: tokens that are more than one run (``ya29.``, ``SG.``,
  JWTs, ``<id>|<secret>``) and those found by a literal (``Q~``, webhook
  hosts); ``randomness``: random-looking runs with no name at all (entropy,
  minus digests, UUIDs, image data, base64 of prose, typed ids);
* ``assignments`` and ``names``: values of secret-ish names (``.env``, YAML,
  TOML, INI, JSON, code, ``--flag value``, XML, ``Authorization:`` and
  credential headers), and credential-looking values whatever their name;
* ``commands``: passwords given to command-line flags (``-p<pw>``,
  ``sshpass -p``, ``-u user:pw``, ``docker login -p``...);
* ``blocks``: private key blocks and ``scheme://user:password@host``.

``heuristics`` holds the judgements they share (entropy, pronounceable
words, placeholders); ``found`` merges what they find. ``scanner`` runs them
all, then decodes each JSON string literal that holds an escape and scans it
again (a tool call's arguments are JSON in a string).

Speed: under 2 ms of one core for a 48 KB trace row (bench/RESULTS.md):
every pass over the text is a C-speed search (``bytes.find`` for token runs,
``str.find`` per keyword, regexes that start with a literal), and Python
looks only at what those find; the rarer patterns compile on first use.
The scanner fails closed: any internal error is raised as
:class:`~machine_git.core.errors.SecretScanError`, never swallowed. Redaction is
idempotent: a placeholder is never flagged again.

May use: core, bundled (pyproject.toml: [tool.importlinter]).
"""

from __future__ import annotations

from machine_git.core.errors import SecretScanError
from machine_git.secrets import names
from machine_git.secrets import rules
from machine_git.secrets import shapes
from machine_git.secrets.found import Finding
from machine_git.secrets.found import placeholder
from machine_git.secrets.scanner import scan

__all__ = [
    "JSON",
    "KINDS",
    "Finding",
    "found_texts",
    "placeholder",
    "redact",
    "redact_text",
    "scan_text",
]

JSON = None | bool | int | float | str | list["JSON"] | dict[str, "JSON"]

#: Every kind the scanner can report.
KINDS: frozenset[str] = frozenset(
    {p[0] for p in rules.PROVIDERS}
    | {d[0] for d in shapes.DOTTED}
    | {lit[4] for lit in shapes.LITERALS}
    | {shapes.MAXMIND[0], shapes.GITLAB_SESSION[0], shapes.TERRAFORM[0]}
    | {shapes.BRAINTREE[0]}
    | set(rules.SHAPES)
)


def scan_text(text: str) -> list[Finding]:
    """Find the secrets in ``text``: non-overlapping findings sorted by position."""
    if not isinstance(text, str):
        raise SecretScanError(f"scan_text expects str, got {type(text).__name__}")
    try:
        return scan(text)
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


def _add(counts: dict[str, int], found: dict[str, int]) -> None:
    for kind, num in found.items():
        counts[kind] = counts.get(kind, 0) + num


def _redact_value(
    value: JSON, counts: dict[str, int], depth: int, skip: frozenset[str]
) -> JSON:
    if isinstance(value, str):
        red, found = redact_text(value)
        _add(counts, found)
        return red
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if depth >= 512:
        raise SecretScanError("JSON value nested too deeply to scan")
    if isinstance(value, list):
        return [_redact_value(v, counts, depth + 1, skip) for v in value]
    if isinstance(value, dict):
        new: dict[str, JSON] = {}
        for key, v in value.items():
            key_obj: object = key  # callers may hand in what the types forbid
            if not isinstance(key_obj, str):
                raise SecretScanError(
                    f"JSON key must be str, not {type(key_obj).__name__}"
                )
            if key in skip and isinstance(v, str):
                new[key] = v
            elif isinstance(v, str) and names.named_secret(key, v):
                # {"password": "hunter22"}: the name says what the value is
                new[key] = placeholder("env-secret")
                _add(counts, {"env-secret": 1})
            else:
                new[key] = _redact_value(v, counts, depth + 1, skip)
        return new
    raise SecretScanError(f"cannot scan a value of type {type(value).__name__}")


def redact(
    value: JSON, skip: frozenset[str] = frozenset()
) -> tuple[JSON, dict[str, int]]:
    """Redact a JSON value: every string in it, JSON inside strings included.

    Walks dicts and lists; object keys are kept, and a string whose key names
    a secret (``{"password": "..."}``) is replaced whole. String values of
    the keys in ``skip`` are left as they are (a row's timestamps and roles,
    which its schema pins to a pattern or a few words). Returns a new value
    and the number of secrets replaced, per kind.
    """
    counts: dict[str, int] = {}
    try:
        result = _redact_value(value, counts, 0, skip)
    except SecretScanError:
        raise
    except Exception as exc:  # fail closed
        raise SecretScanError(f"secret redaction failed: {exc!r}") from exc
    return result, counts


def found_texts(
    value: JSON, skip: frozenset[str] = frozenset()
) -> set[tuple[str, str]]:
    """Every secret in a JSON value as ``(kind, text)``, the way :func:`redact` sees it.

    For comparing two versions of a row: a secret the older one already held
    was let in before (with ``--no-redact``) and is not new.
    """
    out: set[tuple[str, str]] = set()
    try:
        _collect_texts(value, out, 0, skip)
    except SecretScanError:
        raise
    except Exception as exc:  # fail closed
        raise SecretScanError(f"secret scan failed: {exc!r}") from exc
    return out


def _collect_texts(
    value: JSON, out: set[tuple[str, str]], depth: int, skip: frozenset[str]
) -> None:
    if isinstance(value, str):
        out.update((f.kind, value[f.start : f.end]) for f in scan_text(value))
    elif depth >= 512:
        raise SecretScanError("JSON value nested too deeply to scan")
    elif isinstance(value, list):
        for v in value:
            _collect_texts(v, out, depth + 1, skip)
    elif isinstance(value, dict):
        for key, v in value.items():
            if key in skip and isinstance(v, str):
                continue
            if isinstance(v, str) and names.named_secret(key, v):
                out.add(("env-secret", v))
            else:
                _collect_texts(v, out, depth + 1, skip)
