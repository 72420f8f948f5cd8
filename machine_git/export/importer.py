"""Importing rows from a JSONL file in one commit, all or nothing.

A line may be:

- a full machine row (it has ``kind`` and ``id``), e.g. from ``machine good
  --out`` or an older machine data folder: validated as it is;
- a ``messages`` line (tinker / OpenAI chat shape, as ``machine export``
  writes): a train row, or rejected if tagged bad;
- a ``trajectory`` line (trajectory-v1 records): a traces row, or rejected /
  observed by its tag.

For the last two the id is a hash of the conversation itself, so importing
the same file twice, or an export of another store, finds the rows already
there instead of duplicating them. Every line is checked before anything is
written; one bad line imports nothing.
"""

from __future__ import annotations

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
from machine_git.rows import rows
from machine_git.rows import schemas
from machine_git.rows.schemas import KINDS
from machine_git.secrets import redaction
from machine_git.store.store import Change
from machine_git.store.store import Redaction
from machine_git.store.store import Snapshot
from machine_git.store.store import Store

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Row

HOST = "import"
_BODIES = ("messages", "trajectory")
# Keys of a messages/trajectory line that carry over into the row; anything
# else (OpenAI's "tools", an old tool's bookkeeping) has no place in a row.
_KEPT = ("note", "tag", "kind", "created_at", "original_answer", "redactions")
_TIMESTAMP = re.compile(
    r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})$"
)
_DEFAULT_KIND = {"messages": "train", "trajectory": "traces"}


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
    name: str | None = None,
    redact: bool = True,
    progress: Progress = QUIET,
) -> Loaded:
    """Read and validate every line of ``source``; ImportProblemsError if any is bad.

    ``source`` is a file's path, or a stream (standard input). ``name`` is
    how problems name it (default: the path as given, or ``<stdin>``).
    ``progress`` hears of each line checked (and scanned for secrets).
    """
    if kind is not None and kind not in KINDS:
        raise UsageError(f"unknown kind {kind!r} (expected one of {', '.join(KINDS)})")
    path = source if isinstance(source, Path) else None
    shown = name or (str(path) if path is not None else inputs.STDIN_NAME)
    try:
        if isinstance(source, Path):
            data = inputs.read(source, inputs.JSONL_LIMIT)
        else:
            data = inputs.read_stream(source, inputs.JSONL_LIMIT)
    except inputs.Unreadable as e:
        raise UsageError(f"cannot read {shown}: {e}") from None
    loaded = Loaded(file=shown, redact=redact)
    problems: list[Finding] = []
    first_line: dict[str, int] = {}
    # Where each generated row came from: the file (by name and absolute
    # path), or standard input, which has neither.
    file_name = path.name if path is not None else "stdin"
    absolute = str(path.resolve()) if path is not None else None
    progress.begin("checking rows", data.count(b"\n") + (not data.endswith(b"\n")))
    for number, text in inputs.numbered_lines(data):
        progress.advance()
        found: list[tuple[str, str]] = []
        row = _row_of_line(text, number, file_name, absolute, kind, loaded, found)
        if row is not None and not found:
            found = [(p.path, p.message) for p in schemas.row_problems(row)]
        if row is not None and not found:
            row_id = row["id"]
            if row_id in first_line:
                found = [
                    ("$.id", f"duplicate id {row_id} (also line {first_line[row_id]})")
                ]
            else:
                first_line[row_id] = number
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


def _row_of_line(
    text: bytes,
    number: int,
    file_name: str,
    absolute: str | None,
    kind: str | None,
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
    if "kind" in value and "id" in value:
        if kind is not None and value["kind"] != kind:
            found.append(("$.kind", f"{value['kind']!r} but --kind {kind}"))
        return value
    bodies = [b for b in _BODIES if b in value]
    if len(bodies) != 1:
        why = "both messages and trajectory" if bodies else "no messages or trajectory"
        found.append(
            (
                "$",
                f"unknown line shape: {why} (expected a machine row with kind "
                "and id, a messages line or a trajectory line)",
            )
        )
        return None
    body = bodies[0]
    row_kind = _kind_of(value, body, kind, found)
    if row_kind is None:
        return None
    for key in value:
        if key != body and key not in _KEPT:
            loaded.ignored_keys[key] = loaded.ignored_keys.get(key, 0) + 1
    row_id = content_id(body, value[body])
    created = value.get("created_at")
    row: dict[str, Any] = {
        "id": row_id,
        "kind": row_kind,
        "tag": rows.TAG_OF_KIND[row_kind],
        "created_at": created
        if isinstance(created, str) and _TIMESTAMP.match(created)
        else rows.now(),
        "note": value.get("note") or None,
        "source": {
            "host": HOST,
            # Each line is its own conversation: an eval set drawn by session
            # can then split an imported file instead of taking all of it.
            "session_id": f"{file_name}:{number}",
            "session_file": absolute,
            "entry_ids": [f"line {number}"],
        },
        body: value[body],
    }
    for key in ("original_answer", "redactions"):
        if key in value:
            row[key] = value[key]
    loaded.generated.add(row_id)
    return row


def _kind_of(
    value: dict[str, Any], body: str, kind: str | None, found: list[tuple[str, str]]
) -> str | None:
    # The kind comes from --kind, else the line's kind, else its tag; when
    # several are given they must agree, or the line means two things.
    line_kind = value.get("kind")
    if line_kind is not None and line_kind not in KINDS:
        found.append(("$.kind", f"unknown kind {line_kind!r}"))
        return None
    tag = value.get("tag")
    tag_kind: str | None = None
    if tag is not None:
        tag_kind = {
            "good": _DEFAULT_KIND[body],
            "bad": "rejected",
            "observed": "observed",
        }.get(str(tag))
        if tag_kind is None:
            found.append(
                ("$.tag", f"unknown tag {tag!r} (expected good, bad or observed)")
            )
            return None
    chosen = kind or line_kind or tag_kind or _DEFAULT_KIND[body]
    if line_kind is not None and line_kind != chosen:
        found.append(("$.kind", f"{line_kind!r} but --kind {chosen}"))
        return None
    if tag is not None and rows.TAG_OF_KIND[chosen] != tag:
        found.append(("$.tag", f"{tag!r} does not fit kind {chosen}"))
        return None
    return chosen


def content_id(body: str, value: Any) -> str:
    """The id of an imported conversation: a hash of the conversation alone."""
    digest = hashlib.sha256(jsonio.canonical({body: value})).hexdigest()
    return digest[: rows.ID_LENGTH]


def commit(store: Store, loaded: Loaded) -> Imported:
    """Write the loaded rows in one commit; rows already there are skipped.

    A row whose id is stored with other content is a conflict: nothing is
    written and the ids are named.
    """
    outcome: dict[str, Any] = {"added": {}, "present": 0}

    def plan(snap: Snapshot) -> Change | None:
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
