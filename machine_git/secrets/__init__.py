"""Secret scanner: find credentials in text and replace them by typed placeholders.

Every text machine writes (a row's content, a commit message, an imported
row, a context's system prompt and tools) passes through :func:`redact` or
:func:`redact_text` before any byte of it reaches git; hooks and
``machine-secrets`` read files through :func:`scan_bytes`. A secret is
replaced by ``[REDACTED:<kind>]``, where ``<kind>`` names the rule that
found it (``github-pat``, ``cli-secret``).

Two layers, one scan:

* the provider rules of a maintained engine (``engine``: Kingfisher's
  built-in rules, betterleaks' and Google's Veles'), by documented prefix
  and shape, found anywhere;
* machine's own context rules, for what no engine does: a value is a
  credential because of where it is, never because it looks random --
  ``assignments`` and ``names`` (``NAME=value``, ``name: value``,
  ``"name": "value"``, ``--name value``, XML, ``Authorization:`` and
  credential headers, for names that say password, secret, token, key,
  auth, credential), ``commands`` (``-p<pw>``, ``sshpass -p``,
  ``ldapsearch -w``, ``keytool -storepass``, positional passwords of
  ``htpasswd -b``, ``rabbitmqctl add_user``, ``wandb login``), ``places``
  (``.netrc``, ``.pgpass``, Oracle ``user/pw@``, PHP ``define``), and
  ``blocks`` (private key blocks, also JSON-escaped;
  ``scheme://user:password@host``).

``scanner`` runs both, then decodes each JSON string literal that holds an
escape and scans it again (a tool call's arguments are JSON in a string).
Public-by-construction values (digests, ids, public keys, signatures,
addresses, object keys) match no context rule and no provider shape, so they
are kept. The scanner fails closed: any internal error is raised as
:class:`~machine_git.core.errors.SecretScanError`, never swallowed. Redaction is
idempotent: a placeholder is never flagged again.

May use: core, bundled (pyproject.toml: [tool.importlinter]).
"""

from __future__ import annotations

from collections.abc import Iterator

from machine_git.core.errors import SecretScanError
from machine_git.core.errors import UsageError
from machine_git.secrets import engine
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
    "all_kinds",
    "file_leaks",
    "found_texts",
    "placeholder",
    "redact",
    "redact_text",
    "scan_bytes",
    "scan_text",
    "version",
]

JSON = None | bool | int | float | str | list["JSON"] | dict[str, "JSON"]

#: The kinds machine's own layer reports (the engine adds its rules' names):
#: provider tokens no engine rule finds, and credentials by their place.
KINDS: frozenset[str] = frozenset(
    {p[0] for p in rules.PROVIDERS}
    | {d[0] for d in shapes.DOTTED}
    | {lit[4] for lit in shapes.LITERALS}
    | {shapes.MAXMIND[0], shapes.GITLAB_SESSION[0], shapes.TERRAFORM[0]}
    | {shapes.BRAINTREE[0]}
    | set(rules.SHAPES)
)


def all_kinds() -> frozenset[str]:
    """Every kind a scan can report: the context layer's and the engine's."""
    return KINDS | engine.kinds()


def scan_text(text: str, engine_found: engine.Batch | None = None) -> list[Finding]:
    """Find the secrets in ``text``: non-overlapping findings sorted by position."""
    if not isinstance(text, str):
        raise SecretScanError(f"scan_text expects str, got {type(text).__name__}")
    try:
        return scan(text, engine_found=engine_found)
    except (SecretScanError, UsageError):  # UsageError: a bad MACHINE_* setting
        raise
    except Exception as exc:  # fail closed: never hand back unscanned text
        raise SecretScanError(f"secret scan failed: {exc!r}") from exc


def scan_bytes(data: bytes) -> list[Finding]:
    """Find the secrets in a file's bytes (UTF-8; other bytes are kept as escapes).

    The one entry point for files: the store's pre-receive hook, a clone's
    pre-commit hook and ``machine-secrets`` scan every file through it, rows
    or not. Offsets are those of the decoded text.
    """
    return scan_text(data.decode("utf-8", "surrogateescape"))


def file_leaks(data: bytes, old: bytes | None = None) -> list[str]:
    """Kinds of the secrets in a file's bytes that its ``old`` version lacked.

    For hooks: any file of a commit, rows or not. A binary file (a NUL byte
    in its first 8,000 bytes, git's own test) is not text and is not scanned.
    """
    if b"\0" in data[:8000]:
        return []
    text = data.decode("utf-8", "surrogateescape")
    found = {(f.kind, text[f.start : f.end]) for f in scan_text(text)}
    if found and old is not None and b"\0" not in old[:8000]:
        before = old.decode("utf-8", "surrogateescape")
        found -= {(f.kind, before[f.start : f.end]) for f in scan_text(before)}
    return sorted({kind for kind, _ in found})


def version() -> str:
    """``kingfisher-secret-scanner 1.5.0 (441 rules) + machine's context rules``."""
    number, count = engine.version()
    return (
        f"{engine.PACKAGE} {number} ({count} rules) + machine's own rules "
        f"({len(rules.PROVIDERS)} provider shapes, context rules)"
    )


def redact_text(
    text: str, engine_found: engine.Batch | None = None
) -> tuple[str, dict[str, int]]:
    """Replace every secret in ``text`` by ``[REDACTED:<kind>]``; count per kind."""
    findings = scan_text(text, engine_found)
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


def _strings(value: JSON, skip: frozenset[str], out: list[str], depth: int) -> None:
    """The strings :func:`_redact_value` scans, in the order it meets them."""
    if isinstance(value, str):
        out.append(value)
    elif depth >= 512:
        raise SecretScanError("JSON value nested too deeply to scan")
    elif isinstance(value, list):
        for v in value:
            _strings(v, skip, out, depth + 1)
    elif isinstance(value, dict):
        for key, v in value.items():
            key_obj: object = key  # callers may hand in what the types forbid
            if not isinstance(key_obj, str):
                raise SecretScanError(
                    f"JSON key must be str, not {type(key_obj).__name__}"
                )
            if isinstance(v, str) and (key in skip or names.named_secret(key, v)):
                continue
            _strings(v, skip, out, depth + 1)


def _engine_batch(value: JSON, skip: frozenset[str]) -> Iterator[engine.Batch]:
    """The engine's findings for each string of ``value``, from one engine call."""
    texts: list[str] = []
    _strings(value, skip, texts, 0)
    return iter(engine.scan_many(texts))


def _redact_value(
    value: JSON,
    counts: dict[str, int],
    depth: int,
    skip: frozenset[str],
    batch: Iterator[engine.Batch],
) -> JSON:
    if isinstance(value, str):
        red, found = redact_text(value, next(batch))
        _add(counts, found)
        return red
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if depth >= 512:
        raise SecretScanError("JSON value nested too deeply to scan")
    if isinstance(value, list):
        return [_redact_value(v, counts, depth + 1, skip, batch) for v in value]
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
                new[key] = _redact_value(v, counts, depth + 1, skip, batch)
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
        result = _redact_value(value, counts, 0, skip, _engine_batch(value, skip))
    except (SecretScanError, UsageError):  # UsageError: a bad MACHINE_* setting
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
        _collect_texts(value, out, 0, skip, _engine_batch(value, skip))
    except (SecretScanError, UsageError):  # UsageError: a bad MACHINE_* setting
        raise
    except Exception as exc:  # fail closed
        raise SecretScanError(f"secret scan failed: {exc!r}") from exc
    return out


def _collect_texts(
    value: JSON,
    out: set[tuple[str, str]],
    depth: int,
    skip: frozenset[str],
    batch: Iterator[engine.Batch],
) -> None:
    if isinstance(value, str):
        found = scan_text(value, next(batch))
        out.update((f.kind, value[f.start : f.end]) for f in found)
    elif depth >= 512:
        raise SecretScanError("JSON value nested too deeply to scan")
    elif isinstance(value, list):
        for v in value:
            _collect_texts(v, out, depth + 1, skip, batch)
    elif isinstance(value, dict):
        for key, v in value.items():
            if key in skip and isinstance(v, str):
                continue
            if isinstance(v, str) and names.named_secret(key, v):
                out.add(("env-secret", v))
            else:
                _collect_texts(v, out, depth + 1, skip, batch)
