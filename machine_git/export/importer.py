"""Importing rows from a JSONL (or Parquet) file in one commit, all or nothing.

A line is read as what its keys say, or as ``--format`` says: a machine row
(``kind`` and ``id``, as ``machine good --out`` and ``export --format rows``
write), any line ``machine export`` writes (tinker or OpenAI chat lines,
dpo or openai-dpo pairs, trajectory lines), a ShareGPT conversation, or a
Hugging Face ``datasets`` record (machine_git/rows/formats has each format's
reader). A line is checked against its format's schema, then the row made
of it against the row's.

A line that carries no id gets a hash of its conversation (and context), so
importing the same file twice, or an export of another store, finds the rows
already there instead of duplicating them. Every line is checked before
anything is written; one bad line imports nothing.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import BinaryIO
from typing import cast

from machine_git.core import inputs
from machine_git.core import jsonio
from machine_git.core.errors import ImportConflictError
from machine_git.core.errors import ImportProblemsError
from machine_git.core.errors import UsageError
from machine_git.core.progress import QUIET
from machine_git.core.progress import Progress
from machine_git.recovery.validate import Finding
from machine_git.rows import context
from machine_git.rows import formats
from machine_git.rows import images
from machine_git.rows import rows
from machine_git.rows import schemas
from machine_git.rows.formats import chat
from machine_git.rows.formats import hf
from machine_git.rows.formats.lines import Parsed
from machine_git.rows.schemas import KINDS
from machine_git.secrets import redaction
from machine_git.store import settings
from machine_git.store import stats
from machine_git.store.store import Change
from machine_git.store.store import Redaction
from machine_git.store.store import Snapshot
from machine_git.store.store import Store

if TYPE_CHECKING:
    from machine_git.rows.context import Context
    from machine_git.rows.rowtypes import Row

HOST = "import"
_TIMESTAMP = re.compile(
    r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})$"
)
_ID = re.compile(r"^[0-9a-f]{12}$")
_DEFAULT_KIND = {"messages": "train", "trajectory": "traces"}
_SHAPES = (
    "a machine row with kind and id, a messages line, a dpo pair, "
    "a trajectory line or a sharegpt conversation"
)
_BODIES = ("messages", "trajectory", "conversations")
_NONE = "no messages, trajectory or conversations"


@dataclass
class Loaded:
    """The valid rows of a file, in file order, and what was left out of them."""

    file: str
    rows: list[Row] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    # Generated rows get created_at and source from the import, not the line:
    # those fields are ignored when comparing with a row already stored.
    generated: set[str] = field(default_factory=set)
    ignored_keys: dict[str, int] = field(default_factory=dict)
    # How many lines of each format (machine_git/rows/formats) were read, and the
    # row fields none of them carried.
    formats: dict[str, int] = field(default_factory=dict)
    missing: dict[str, set[str]] = field(default_factory=dict)
    repeated: int = 0  # lines that repeat an earlier line's conversation
    redact: bool = True
    redacted: dict[str, int] = field(default_factory=dict)


@dataclass
class Imported:
    """What an import did."""

    file: str
    added: dict[str, int]
    present: int
    commit: str | None

    @property
    def count(self) -> int:
        """How many rows were added."""
        return sum(self.added.values())


def load(
    source: Path | BinaryIO,
    kind: str | None = None,
    *,
    fmt: str | None = None,
    name: str | None = None,
    redact: bool = True,
    progress: Progress = QUIET,
) -> Loaded:
    """Read and validate every line of ``source``; ImportProblemsError if any is bad.

    ``source`` is a file's path, or a stream (standard input). ``fmt`` is
    the format every line must have (machine_git/rows/formats); without it each
    line is read as what its keys say. ``name`` is how problems name the
    file (default: the path as given, or ``<stdin>``). ``progress`` hears of
    each line checked (and scanned for secrets).
    """
    if kind is not None and kind not in KINDS:
        raise UsageError(f"unknown kind {kind!r} (expected one of {', '.join(KINDS)})")
    if fmt is not None and fmt not in formats.FORMATS:
        raise UsageError(f"unknown format {fmt!r} (expected {formats.names()})")
    path = source if isinstance(source, Path) else None
    shown = name or (str(path) if path is not None else inputs.STDIN_NAME)
    items = numbered(source, shown, fmt)
    loaded = Loaded(file=shown, redact=redact)
    problems: list[Finding] = []
    seen: dict[str, tuple[int, dict[str, Any]]] = {}  # id -> first line, row
    # Where each generated row came from: the file (by name and absolute
    # path), or standard input, which has neither.
    origin = _Origin(
        path.name if path is not None else "stdin",
        str(path.resolve()) if path is not None else None,
    )
    progress.begin("checking rows", len(items))
    for number, text in items:
        progress.advance()
        found: list[tuple[str, str]] = []
        row = _row_of_line(text, number, origin, kind, fmt, loaded, found)
        if row is not None and not found:
            found = [(p.path, p.message) for p in schemas.row_problems(row)]
            blank = rows.blank_answer(row) if not found else None
            if blank is not None:
                found = [(blank, rows.BLANK_ANSWER)]
        if row is not None and not found and _repeats(row, number, seen, loaded, found):
            continue
        if found:
            problems.extend(Finding(shown, number, p, m) for p, m in found)
            continue
        assert row is not None
        valid = cast("Row", row)  # its schema passed above
        if redact:
            valid, replaced = redaction.redact_row(valid)
            for secret_kind, n in replaced.items():
                loaded.redacted[secret_kind] = loaded.redacted.get(secret_kind, 0) + n
        loaded.rows.append(valid)
        loaded.lines.append(number)
    progress.end()
    if problems:
        bad_lines = len({p.line for p in problems})
        raise ImportProblemsError(shown, [str(p) for p in problems], bad_lines)
    return loaded


def _repeats(
    row: dict[str, Any],
    number: int,
    seen: dict[str, tuple[int, dict[str, Any]]],
    loaded: Loaded,
    found: list[tuple[str, str]],
) -> bool:
    """True if ``row`` is an earlier line's conversation again (imported once);
    a problem if its id is an earlier line's with other content."""
    row_id = row["id"]
    if row_id not in seen:
        seen[row_id] = (number, row)
        return False
    first, earlier = seen[row_id]
    generated = row_id in loaded.generated
    if generated and _same(cast("Row", earlier), cast("Row", row), True):
        # A lossy format gives two rows that differ only in what it cannot
        # carry (a train and a rejected row of one conversation) one line.
        loaded.repeated += 1
        return True
    found.append(("$.id", f"duplicate id {row_id} (also line {first})"))
    return False


def numbered(
    source: Path | BinaryIO, shown: str, fmt: str | None
) -> list[tuple[int, bytes]]:
    """The numbered lines of ``source`` (a Parquet file's records, as JSON)."""
    path = source if isinstance(source, Path) else None
    if hf.is_parquet(path):
        assert path is not None
        if fmt not in (None, "hf"):
            raise UsageError(f"{shown} is Parquet: only --format hf reads it")
        return hf.parquet_records(path)
    try:
        if path is not None:
            data = inputs.read(path, inputs.JSONL_LIMIT)
        else:
            data = inputs.read_stream(cast("BinaryIO", source), inputs.JSONL_LIMIT)
    except inputs.Unreadable as e:
        raise UsageError(f"cannot read {shown}: {e}") from None
    return list(inputs.numbered_lines(data))


@dataclass(frozen=True)
class _Origin:
    file_name: str
    absolute: str | None


def _row_of_line(
    text: bytes,
    number: int,
    origin: _Origin,
    kind: str | None,
    fmt: str | None,
    loaded: Loaded,
    found: list[tuple[str, str]],
) -> dict[str, Any] | None:
    try:
        value = jsonio.loads(text)
    except jsonio.JSONDecodeError as e:
        found.append(("$", f"not valid JSON ({e})"))
        return None
    if not isinstance(value, dict):
        found.append(("$", "a line must be a JSON object"))
        return None
    if origin.absolute is not None and b'"image_url"' in text:
        value.update(_linked_images(value, Path(origin.absolute).parent, found))
        if found:
            return None
    line_format = line_format_of(value, fmt, found)
    if line_format is None:
        return None
    loaded.formats[line_format] = loaded.formats.get(line_format, 0) + 1
    if line_format == "rows":
        if kind is not None and value.get("kind") != kind:
            found.append(("$.kind", f"{value.get('kind')!r} but --kind {kind}"))
        return value
    parsed = formats.read_line(line_format, value, found, strict=fmt is not None)
    if parsed is None:
        return None
    lacks = formats.missing(line_format, parsed) - ({"kind"} if kind else set())
    loaded.missing[line_format] = loaded.missing.get(line_format, lacks) & lacks
    row_kind = _kind_of(parsed, kind, found)
    if row_kind is None:
        return None
    for key in parsed.ignored:
        loaded.ignored_keys[key] = loaded.ignored_keys.get(key, 0) + 1
    return _generated(parsed, row_kind, number, origin, loaded, found)


_IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}
IMAGE_FILE_LIMIT = 64 * 1024 * 1024  # the setting checks the stripped size


def _linked_images(
    value: dict[str, Any], folder: Path, found: list[tuple[str, str]]
) -> dict[str, Any]:
    """``value`` with each image a line names by a relative path (an export
    with ``--images-dir``) read in as a data URI.

    The path is resolved against the JSONL's folder and must stay inside it:
    no absolute path, no ``..``, a regular file named .png, .jpg or .jpeg.
    """
    messages = value.get("messages")
    if not isinstance(messages, list):
        return value
    out = []
    for m_index, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            out.append(message)
            continue
        parts = []
        for p_index, part in enumerate(content):
            url = (
                (part.get("image_url") or {}).get("url")
                if isinstance(part, dict)
                else None
            )
            if not isinstance(url, str) or url.startswith("data:"):
                parts.append(part)
                continue
            where = f"$.messages[{m_index}].content[{p_index}].image_url.url"
            uri = _image_file(url, folder)
            if uri.startswith("data:"):
                parts.append({"type": "image_url", "image_url": {"url": uri}})
            else:
                found.append((where, uri))
                parts.append(part)
        out.append({**message, "content": parts})
    return {**value, "messages": out}


def _image_file(url: str, folder: Path) -> str:
    """A data URI of the image file ``url`` names, or why it cannot be read."""
    relative = Path(url)
    media_type = _IMAGE_TYPES.get(relative.suffix.lower())
    if (
        "\\" in url
        or ":" in url
        or relative.is_absolute()
        or ".." in relative.parts
        or media_type is None
    ):
        return (
            f"image {url!r}: expected a data URI or a .png/.jpg path "
            "inside the JSONL's folder"
        )
    try:
        data = inputs.read(folder / relative, IMAGE_FILE_LIMIT)
    except inputs.Unreadable as e:
        return f"image {url!r}: {e}"
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


def line_format_of(
    value: dict[str, Any], fmt: str | None, found: list[tuple[str, str]]
) -> str | None:
    """The format a line is read as: ``fmt``, or what its keys say."""
    shape = formats.detect(value)
    if fmt is None:
        if shape is None:
            bodies = [b for b in _BODIES if b in value]
            why = " and ".join(bodies) if bodies else _NONE
            found.append(("$", f"unknown line shape: {why} (expected {_SHAPES})"))
        return shape
    if fmt == "hf" or shape is None:
        return fmt  # a record has columns of any name; its reader says
    same = shape == fmt or (shape in formats.CHAT and fmt in formats.CHAT)
    if not same:
        noun = formats.FORMATS[shape].noun
        found.append(("$", f"a {noun}, not a line of --format {fmt}"))
        return None
    return fmt


def _generated(
    parsed: Parsed,
    row_kind: str,
    number: int,
    origin: _Origin,
    loaded: Loaded,
    found: list[tuple[str, str]],
) -> dict[str, Any] | None:
    fields = parsed.fields
    given_id = fields.get("id")
    row_id = (
        given_id
        if isinstance(given_id, str) and _ID.match(given_id)
        else content_id(parsed.body, parsed.value, parsed.context)
    )
    created = fields.get("created_at")
    stamp = created if isinstance(created, str) and _TIMESTAMP.match(created) else None
    body, value = parsed.body, parsed.value
    if body == "messages" and row_kind in ("traces", "observed"):
        # a trace exported as chat messages, imported back as a trace
        body, value = "trajectory", chat.to_trajectory(value, stamp or rows.now())
    elif body == "trajectory" and row_kind == "train":
        found.append(("$.trajectory", "a train row holds messages (--kind traces)"))
        return None
    row: dict[str, Any] = {
        "id": row_id,
        "kind": row_kind,
        "tag": rows.TAG_OF_KIND[row_kind],
        "created_at": stamp or rows.now(),
        "note": fields.get("note") or None,
        "source": {
            "host": HOST,
            # Each line is its own conversation: an eval set drawn by session
            # can then split an imported file instead of taking all of it.
            "session_id": f"{origin.file_name}:{number}",
            "session_file": origin.absolute,
            "entry_ids": [f"line {number}"],
        },
        body: value,
    }
    if parsed.context is not None:
        row["context"] = parsed.context
    for key in ("original_answer", "redactions", "failure"):
        if key in fields:
            row[key] = fields[key]
    loaded.generated.add(row_id)
    return row


def _kind_of(
    parsed: Parsed, kind: str | None, found: list[tuple[str, str]]
) -> str | None:
    # The kind comes from --kind, else the line's kind, else its tag, else
    # its format's; when several are given they must agree, or the line
    # means two things.
    line_kind = parsed.fields.get("kind")
    if line_kind is not None and line_kind not in KINDS:
        found.append(("$.kind", f"unknown kind {line_kind!r}"))
        return None
    default = parsed.kind or _DEFAULT_KIND[parsed.body]
    tag = parsed.fields.get("tag")
    tag_kind: str | None = None
    if tag is not None:
        tag_kind = {
            "good": default if default != "rejected" else _DEFAULT_KIND[parsed.body],
            "bad": "rejected",
            "observed": "observed",
        }.get(str(tag))
        if tag_kind is None:
            found.append(
                ("$.tag", f"unknown tag {tag!r} (expected good, bad or observed)")
            )
            return None
    chosen = kind or line_kind or tag_kind or default
    if line_kind is not None and line_kind != chosen:
        found.append(("$.kind", f"{line_kind!r} but --kind {chosen}"))
        return None
    if tag is not None and rows.TAG_OF_KIND[chosen] != tag:
        found.append(("$.tag", f"{tag!r} does not fit kind {chosen}"))
        return None
    return chosen


def content_id(body: str, value: Any, found: Context | None = None) -> str:
    """The id of an imported conversation: a hash of the conversation alone
    (and the context it ran with, when the line gives one)."""
    whole: dict[str, Any] = {body: value}
    if found is not None:
        whole["context"] = found
    digest = hashlib.sha256(jsonio.canonical(whole)).hexdigest()
    return digest[: rows.ID_LENGTH]


def commit(store: Store, loaded: Loaded) -> Imported:
    """Write the loaded rows in one commit; rows already there are skipped.

    A row whose id is stored with other content is a conflict: nothing is
    written and the ids are named.
    """
    outcome: dict[str, Any] = {"added": {}, "present": 0, "first": False}

    def plan(snap: Snapshot) -> Change | None:
        # Into a store without rows, the import knows every count after it.
        outcome["first"] = snap.tree is None or rows.ROWS_DIR not in snap.tree
        files: dict[str, bytes | None] = {}
        added: dict[str, int] = {}
        present = 0
        conflicts: list[str] = []
        for line_row in loaded.rows:
            # A row written with --out carries its context inline: stored once.
            stored, contexts = context.stored(
                cast("dict[str, Any]", line_row),
                lambda where: context.in_tree(snap.tree, where),
            )
            if images.has_images(stored):
                # and its images too, stripped, by hash (rows/images.py)
                stored, pictures = images.stored(
                    stored,
                    lambda where: where in files or context.in_tree(snap.tree, where),
                    settings.image_limit(snap),
                )
                contexts.update(pictures)
            row = cast("Row", stored)
            path = rows.row_path(row["id"])
            existing_bytes = snap.read(path)
            if existing_bytes is None:
                files[path] = jsonio.canonical(row)
                files.update(contexts)
                added[row["kind"]] = added.get(row["kind"], 0) + 1
                continue
            existing = rows.parse(existing_bytes, path)
            if _same(existing, row, row["id"] in loaded.generated):
                present += 1
            else:
                conflicts.append(row["id"])
        if conflicts:
            raise ImportConflictError(loaded.file, conflicts)
        outcome.update(added=added, present=present)
        if not files:
            return None
        name = Path(loaded.file).name
        count = sum(added.values())
        return Change(
            summary=f"import {count} rows from {name}",
            files=files,
            trailers={"Action": "import", "Rows": str(count), "Source": name},
            body=by_kind(added),
            redaction=Redaction.SCANNED if loaded.redact else Redaction.OFF,
        )

    oid = store.write(plan)
    if oid is not None and outcome["first"]:
        stats.seed(store, str(oid), outcome["added"])
    return Imported(
        file=loaded.file,
        added=outcome["added"],
        present=outcome["present"],
        commit=str(oid) if oid is not None else None,
    )


def _same(existing: Row, row: Row, generated: bool) -> bool:
    if not generated:
        return existing == row
    # When and from which file a conversation was imported is not part of it.
    provenance = ("created_at", "source")
    return {k: v for k, v in existing.items() if k not in provenance} == {
        k: v for k, v in row.items() if k not in provenance
    }


def by_kind(counts: dict[str, int]) -> str:
    """``train 10, rejected 2`` in the fixed order of kinds."""
    return ", ".join(f"{k} {counts[k]}" for k in KINDS if counts.get(k))
