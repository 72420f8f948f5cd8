"""Exporting a revision of the dataset as fine-tuning JSONL.

The same revision and options always give the same bytes: rows come in tree
order (sorted by id), every line is written with sorted keys, and nothing
about the moment of the export (time, host, path) goes into the data. That is
what lets a training run name its data by commit id and a manifest's sha256.

Formats:

- ``tinker``: ``{"messages": [...]}`` as tinker-cookbook reads a conversation
  file; an assistant message that only calls tools has ``content ""``.
- ``openai``: the OpenAI chat fine-tuning shape; such a message has
  ``content null`` and messages keep only the keys OpenAI accepts.
- ``dpo``: OpenAI preference pairs from rows rewritten with ``--as``: the
  rewrite is preferred over the agent's original answer.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import tempfile
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from typing import TYPE_CHECKING
from typing import Any
from typing import cast

import pygit2
from pygit2 import Commit

from machine_git import __version__
from machine_git import jsonio
from machine_git import parallel
from machine_git import paths
from machine_git import rows
from machine_git.errors import UsageError
from machine_git.objects import Objects
from machine_git.schemas import KINDS
from machine_git.store import Store
from machine_git.store import blobs_under

if TYPE_CHECKING:
    from machine_git.rowtypes import Row

FORMATS = ("tinker", "openai", "dpo")
MANIFEST_SUFFIX = ".manifest.json"
_OPENAI_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id")
_DROPPED = ("meta", "reasoning", "observation")  # not turns of the conversation

Message = dict[str, Any]
Progress = Callable[[int], None]


def default_kinds(fmt: str) -> tuple[str, ...]:
    """The kinds a format exports when ``--kind`` is not given.

    Training formats take ``train`` only: traces are opt-in (long), and
    observed rows are unlabeled, so they are never exported unless named.
    """
    return ("rejected",) if fmt == "dpo" else ("train",)


def normalize_kinds(kinds: Iterable[str], fmt: str) -> tuple[str, ...]:
    """The kinds to export, deduplicated and in the fixed order of KINDS.

    The order must not depend on how the options were typed, or the same
    export would give two different manifests.
    """
    wanted = set(kinds) or set(default_kinds(fmt))
    unknown = wanted - set(KINDS)
    if unknown:
        raise UsageError(f"unknown kind {sorted(unknown)[0]!r}")
    return tuple(k for k in KINDS if k in wanted)


# -- converting rows ---------------------------------------------------------------


def trajectory_to_messages(
    records: Iterable[Mapping[str, Any]], *, null_content: bool
) -> list[Message]:
    """Chat messages from trajectory-v1 records.

    ``meta``, ``reasoning`` and ``observation`` records are dropped (they are
    not turns of the conversation). An assistant text immediately followed by
    a tool-calls record becomes one message, as the model produced it; dropped
    records in between do not count, so a trace kept with ``--reasoning``
    gives the same messages as one without. A message that only calls tools
    has ``content`` None if ``null_content`` (OpenAI) else ``""`` (tinker
    renders content as a string).
    """
    out: list[Message] = []
    pending_text: str | None = None  # assistant text that may own the next calls

    def flush() -> None:
        nonlocal pending_text
        if pending_text is not None:
            out.append({"role": "assistant", "content": pending_text})
            pending_text = None

    for record in records:
        role = record.get("role")
        if role == "assistant" and record.get("tool_calls"):
            text = pending_text
            pending_text = None
            content = text if text else (None if null_content else "")
            out.append(
                {
                    "role": "assistant",
                    "content": content,
                    "tool_calls": [_tool_call(c) for c in record["tool_calls"]],
                }
            )
            continue
        if role in _DROPPED:
            continue
        flush()
        if role == "assistant":
            pending_text = str(record.get("content") or "")
        elif role in ("user", "system"):
            out.append({"role": role, "content": str(record.get("content") or "")})
        elif role == "tool":
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": record.get("tool_call_id"),
                    "content": str(record.get("content") or ""),
                }
            )
    flush()
    return out


def _tool_call(call: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "id": call.get("id"),
        "function": {"name": call.get("name"), "arguments": call.get("args", "")},
    }


def conversation(row: Row, *, null_content: bool) -> list[Message]:
    """A row's conversation as chat messages (stored messages, or a trajectory)."""
    if "messages" in row:
        return [dict[str, Any](m) for m in row["messages"]]
    if "trajectory" in row:
        return trajectory_to_messages(row["trajectory"], null_content=null_content)
    return []


def to_tinker(row: Row | Mapping[str, Any]) -> dict[str, Any]:
    """``{"messages": [...]}`` as tinker-cookbook reads it.

    ``row``: a stored row, or a row read back from a JSONL file (training
    reads its own exports), which has a row's shape once it passed the schema.
    """
    messages = conversation(cast("Row", row), null_content=False)
    for m in messages:
        if m.get("content") is None:
            m["content"] = ""  # tinker's renderers need a string
    return {"messages": messages}


def to_openai(row: Row) -> dict[str, Any]:
    """``{"messages": [...]}`` for OpenAI chat fine-tuning."""
    return {"messages": [_openai_message(m) for m in _openai_conversation(row)]}


def answers(messages: list[Message]) -> bool:
    """True if an assistant message says something: what a chat line (and
    machine import) needs to be learned from."""
    return any(
        m.get("role") == "assistant"
        and isinstance(m.get("content"), str)
        and bool(m["content"])
        for m in messages
    )


def _openai_conversation(row: Row) -> list[Message]:
    return conversation(row, null_content=True)


def _openai_message(message: Message) -> Message:
    out = {k: message[k] for k in _OPENAI_KEYS if k in message}
    if "tool_calls" in out:
        out["tool_calls"] = [
            {
                "type": "function",
                "id": c.get("id"),
                "function": {
                    "name": (c.get("function") or {}).get("name"),
                    "arguments": (c.get("function") or {}).get("arguments"),
                },
            }
            for c in out["tool_calls"]
        ]
    return out


def to_dpo(row: Row) -> dict[str, Any] | None:
    """An OpenAI preference pair, or None if the row has no rewrite.

    Only a row tagged with ``--as`` has one: ``original_answer`` holds what
    the agent said and the final assistant message holds the rewrite.
    """
    original = row.get("original_answer")
    if not isinstance(original, str) or not original:
        return None
    messages = [_openai_message(m) for m in _openai_conversation(row)]
    if not messages:
        return None
    final = messages[-1]
    rewrite = final.get("content")
    if (
        final.get("role") != "assistant"
        or "tool_calls" in final
        or not isinstance(rewrite, str)
        or not rewrite
        or rewrite == original
        or len(messages) < 2
    ):
        return None
    return {
        "input": {"messages": messages[:-1]},
        "preferred_output": [{"role": "assistant", "content": rewrite}],
        "non_preferred_output": [{"role": "assistant", "content": original}],
    }


_RENDER: dict[str, Callable[[Row], dict[str, Any] | None]] = {
    "tinker": to_tinker,
    "openai": to_openai,
    "dpo": to_dpo,
}


def _prepare(row: Row, redact: bool = True) -> Row:
    """Every exported row passes through here before it is rendered.

    Rows are redacted when they are tagged and then carry ``redactions``;
    a row without it (written with ``--no-redact``, or by an older machine)
    is scanned here unless the export itself says ``--no-redact``.
    """
    if not redact or "redactions" in row:
        return row  # scanned when it was written (see redaction.redact_row)
    from machine_git import redaction

    return redaction.redact_row(row)[0]


def render(
    row: Row | Mapping[str, Any], fmt: str, redact: bool = True
) -> dict[str, Any] | None:
    """The output object of ``row`` in ``fmt``, or None if it has none: a dpo
    pair needs a rewrite, a chat line an answer (``row`` as to_tinker takes it)."""
    if fmt not in _RENDER:
        raise UsageError(f"unknown format {fmt!r} (expected {', '.join(FORMATS)})")
    out = _RENDER[fmt](_prepare(cast("Row", row), redact))
    if out is not None and "messages" in out and not answers(out["messages"]):
        return None  # a turn that failed before it said anything (machine bad)
    return out


# -- writing ---------------------------------------------------------------------


@dataclass
class Tally:
    """What an export wrote and skipped (and the sha256 of what it wrote)."""

    rows: int = 0
    skipped: int = 0
    sha256: str = ""


def lines(
    store: Store,
    commit: Commit,
    fmt: str,
    kinds: tuple[str, ...],
    tally: Tally,
    redact: bool = True,
) -> Iterator[bytes]:
    """The JSONL of the export in tree order, a part of ``rows/`` at a time.

    Each piece is the lines of one ``rows/ab`` subtree (never the whole export
    in memory). A large store is rendered by several processes
    (machine_git/parallel.py); the bytes are the same either way.
    """
    if fmt not in _RENDER:
        raise UsageError(f"unknown format {fmt!r} (expected {', '.join(FORMATS)})")
    top = store.rows_tree(commit)
    if top is None:
        return
    pieces = parallel.parts(top, f"{rows.ROWS_DIR}/")
    work = functools.partial(_render_part, fmt, frozenset(kinds), redact)
    objects = Objects(store.repo)
    workers = parallel.jobs(objects, pieces)
    for part in parallel.run(objects, pieces, work, workers):
        tally.rows += part.rows
        tally.skipped += part.skipped
        if part.data:
            yield part.data


@dataclass
class _Part:
    data: bytes
    rows: int
    skipped: int


def _render_part(
    fmt: str,
    kinds: frozenset[str],
    redact: bool,
    objects: Objects,
    path: str,
    oid: pygit2.Oid,
    is_tree: bool,
) -> _Part:
    # Runs in a worker process for a large store: module level, picklable.
    out: list[bytes] = []
    skipped = 0
    for where, data in blobs_under(objects, path, oid, is_tree):
        if rows.id_of_path(where) is None:
            continue
        row = rows.parse(data, where)
        if row.get("kind") not in kinds:
            continue
        rendered = render(row, fmt, redact)
        if rendered is None:
            skipped += 1
            continue
        out.append(jsonio.line(rendered))
    return _Part(b"".join(out), len(out), skipped)


def write_stream(
    store: Store,
    commit: Commit,
    fmt: str,
    kinds: tuple[str, ...],
    stream: IO[bytes],
    redact: bool = True,
) -> Tally:
    """Write the export to ``stream`` (stdout); no manifest file.

    The returned tally carries the sha256 of the bytes written, for a
    manifest the caller writes elsewhere (``--manifest FILE``).
    """
    tally = Tally()
    digest = hashlib.sha256()
    for line in lines(store, commit, fmt, kinds, tally, redact):
        stream.write(line)
        digest.update(line)
    stream.flush()
    tally.sha256 = digest.hexdigest()
    return tally


@dataclass
class Manifest:
    """What a file export holds, written beside it as FILE.manifest.json."""

    file: str
    revision: str
    commit: str
    format: str
    kinds: tuple[str, ...]
    rows: int
    skipped: int
    sha256: str
    redacted: bool = True
    machine_version: str = __version__

    def as_dict(self) -> dict[str, Any]:
        """The manifest as JSON-ready data."""
        return {
            "file": self.file,
            "revision": self.revision,
            "commit": self.commit,
            "format": self.format,
            "kinds": list(self.kinds),
            "rows": self.rows,
            "skipped": self.skipped,
            "sha256": self.sha256,
            "redacted": self.redacted,
            "machine_version": self.machine_version,
        }


STDOUT_NAME = "<stdout>"  # a manifest's file when the rows went to stdout


def manifest_of(
    tally: Tally,
    commit: Commit,
    revision: str | None,
    fmt: str,
    kinds: tuple[str, ...],
    file: str,
    redact: bool = True,
) -> Manifest:
    """The manifest of an export that wrote ``tally`` to ``file``."""
    return Manifest(
        file=file,
        revision=revision or "HEAD",
        commit=str(commit.id),
        format=fmt,
        kinds=kinds,
        rows=tally.rows,
        skipped=tally.skipped,
        sha256=tally.sha256,
        redacted=redact,
    )


def write_manifest(manifest: Manifest, target: Path) -> None:
    """Write ``manifest`` to ``target`` (0600), atomically."""
    if target.is_dir():
        raise UsageError(f"manifest path {str(target)!r} is a directory")
    temps: list[str] = []
    try:
        tmp = _temp_file(target, temps)
        with open(tmp, "wb") as meta:
            meta.write(jsonio.canonical(manifest.as_dict()))
            _sync(meta)
        os.replace(tmp, target)
        temps.clear()
    except OSError as e:
        raise paths.write_error(target, e) from None
    finally:
        for leftover in temps:
            with contextlib.suppress(OSError):
                os.unlink(leftover)


def manifest_path(target: Path) -> Path:
    """Where the manifest of ``target`` goes: beside it, FILE.manifest.json."""
    return target.with_name(target.name + MANIFEST_SUFFIX)


def write_file(
    store: Store,
    commit: Commit,
    revision: str | None,
    fmt: str,
    kinds: tuple[str, ...],
    target: Path,
    progress: Progress | None = None,
    redact: bool = True,
    manifest_target: Path | None = None,
) -> Manifest:
    """Write the export to ``target`` and its manifest (both 0600): beside it,
    or at ``manifest_target``.

    Both are written to temporary files and renamed only once complete. The
    old manifest goes first, so a crash between the two renames leaves a file
    without a manifest, never a manifest whose sha256 does not match.
    """
    if target.is_dir():
        raise UsageError(f"output path {str(target)!r} is a directory")
    meta_target = manifest_target or manifest_path(target)
    if meta_target.is_dir():
        raise UsageError(f"manifest path {str(meta_target)!r} is a directory")
    tally = Tally()
    digest = hashlib.sha256()
    temps: list[str] = []
    try:
        data_tmp = _temp_file(target, temps)
        with open(data_tmp, "wb") as out:
            for line in lines(store, commit, fmt, kinds, tally, redact):
                out.write(line)
                digest.update(line)
                if progress is not None:
                    progress(tally.rows)
            _sync(out)
        tally.sha256 = digest.hexdigest()
        manifest = manifest_of(tally, commit, revision, fmt, kinds, target.name, redact)
        meta_tmp = _temp_file(meta_target, temps)
        with open(meta_tmp, "wb") as meta:
            meta.write(jsonio.canonical(manifest.as_dict()))
            _sync(meta)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(meta_target)
        os.replace(data_tmp, target)
        os.replace(meta_tmp, meta_target)
        temps.clear()
    except OSError as e:
        raise paths.write_error(target, e) from None
    finally:
        for tmp in temps:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return manifest


def _temp_file(target: Path, temps: list[str]) -> str:
    # In the target's folder, so the final rename is atomic; mkstemp makes it 0600.
    fd, tmp = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"
    )
    os.close(fd)
    temps.append(tmp)
    return tmp


def _sync(f: IO[bytes]) -> None:
    f.flush()
    os.fsync(f.fileno())
