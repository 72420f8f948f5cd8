"""Exporting a revision of the dataset as fine-tuning JSONL.

The same revision and options always give the same bytes: rows come in tree
order (sorted by id), every line is written with sorted keys, and nothing
about the moment of the export (time, host, path) goes into the data. That is
what lets a training run name its data by commit id and a manifest's sha256.

Formats (each one's writer and reader: machine_git/rows/formats/): ``tinker`` and
``openai`` chat lines, ``dpo`` and ``openai-dpo`` preference pairs from rows
rewritten with ``--as``, ``traces`` (trajectory-v1 lines) and ``rows``
(machine's rows themselves, the one format that carries everything).

A row's context (the system prompt and tools its turn ran with; see
machine_git/rows/context.py) leads the conversation as a system message and gives
the ``tools``, unless the export leaves it out (``--no-context``).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import tempfile
from collections.abc import Iterable
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from typing import TYPE_CHECKING
from typing import Any
from typing import cast

import pygit2
from pygit2 import Commit

from machine_git import __version__
from machine_git.core import jsonio
from machine_git.core import paths
from machine_git.core.errors import UsageError
from machine_git.core.progress import QUIET
from machine_git.core.progress import Progress
from machine_git.rows import context
from machine_git.rows import formats
from machine_git.rows import images
from machine_git.rows import rows
from machine_git.rows.formats import chat
from machine_git.rows.schemas import KINDS
from machine_git.store import parallel
from machine_git.store import stats
from machine_git.store.objects import Objects
from machine_git.store.store import Store
from machine_git.store.store import blobs_under
from machine_git.store.store import parse_row

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Row

FORMATS = formats.EXPORTS
PAIRS = formats.PAIRS  # the preference formats
MANIFEST_SUFFIX = ".manifest.json"

Message = chat.Message


def default_kinds(fmt: str) -> tuple[str, ...]:
    """The kinds a format exports when ``--kind`` is not given.

    Training formats take ``train`` only: traces are opt-in (long), and
    observed rows are unlabeled, so they are never exported unless named.
    Pairs take ``rejected``, ``traces`` its kind, ``rows`` every judged kind.
    """
    return _format(fmt).kinds


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
# Each format's writer lives with its reader in machine_git/rows/formats/; these
# names stay for the training code and tests that render one row.

trajectory_to_messages = chat.trajectory_to_messages
conversation = chat.conversation
tool_specs = chat.tool_specs
answers = chat.answers
pair = chat.pair
Pair = chat.Pair
to_tinker = formats.tinker.write
to_openai = formats.openai.write
to_dpo = formats.dpo.write
to_openai_dpo = formats.openai_dpo.write


# -- pairs of rows rated differently -------------------------------------------------

PAIR_FORMATS = formats.PAIRS


def rated(row: Row, field: str | None) -> int | None:
    """The row's value of the rating ``field``, if it has one."""
    labels = row.get("labels") if field else None
    value = labels.get(field) if isinstance(labels, dict) and field else None
    return value if isinstance(value, int) else None


def sibling_pairs(
    fmt: str, found: Iterable[tuple[str, Row]], field: str
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Preference pairs of rows that answer the same prompt (the conversation
    before the final answer, with the same tools) and are rated differently
    by ``field``: the higher-rated answer is preferred. Each line with the id
    of the row preferred; in a fixed order (prompt, then ids).
    """
    null = fmt == "openai-dpo"
    groups: dict[bytes, list[tuple[int, str, str, Row, Pair]]] = {}
    for row_id, row in found:
        score = rated(row, field)
        messages = conversation(row, null_content=null)
        final = messages[-1] if messages else {}
        answer = final.get("content")
        if (
            score is None
            or len(messages) < 2
            or final.get("role") != "assistant"
            or final.get("tool_calls")
            or not isinstance(answer, str)
            or not answer
        ):
            continue
        key = jsonio.canonical({"prompt": messages[:-1], "tools": tool_specs(row)})
        groups.setdefault(key, []).append(
            (score, row_id, answer, row, Pair(messages[:-1], answer, ""))
        )
    for key in sorted(groups):
        members = sorted(groups[key], key=lambda m: (-m[0], m[1]))
        for i, (score, row_id, answer, row, base) in enumerate(members):
            for other_score, _, other, _, _ in members[i + 1 :]:
                if other_score >= score or other == answer:
                    continue
                chosen = Pair(base.prompt, answer, other)
                writer = formats.openai_dpo if null else formats.dpo
                yield row_id, writer.line(chosen, row)


def _prepare(row: Row, redact: bool = True) -> Row:
    """Every exported row passes through here before it is rendered.

    Rows are redacted when they are tagged and then carry ``redactions``;
    a row without it (written with ``--no-redact``, or by an older machine)
    is scanned here unless the export itself says ``--no-redact``.
    """
    if not redact or "redactions" in row:
        return row  # scanned when it was written (see redaction.redact_row)
    from machine_git.secrets import redaction

    return redaction.redact_row(row)[0]


# Formats that carry images: OpenAI's as image_url parts, tinker's as the
# cookbook's image parts, rows as they are (inline). Every other format gets
# the ``[image]`` placeholders, as before.
IMAGE_FORMATS = frozenset({"openai", "tinker", "rows"})


def prepared(row: Row, with_context: bool = True, redact: bool = True) -> Row:
    """``row`` as :func:`render` reads it: its context kept or left out, and
    (``redact``) cleared of secrets."""
    return _prepare(row if with_context else context.without(row), redact)


def render(
    row: Row,
    fmt: str,
    redact: bool = True,
    with_context: bool = True,
    with_images: bool = True,
) -> dict[str, Any] | None:
    """The output object of ``row`` in ``fmt``, or None if it has none: a dpo
    pair needs a rewrite, a chat line an answer.

    ``row``'s context must be inline (:func:`machine_git.rows.context.inline`);
    ``with_context=False`` leaves it out.
    """
    write = _format(fmt).write
    assert write is not None  # _format names only the formats export writes
    if not with_context:
        row = context.without(row)
    if (not with_images or fmt not in IMAGE_FORMATS) and images.has_images(row):
        row = images.without(row)
    out = write(_prepare(row, redact))
    if out is not None and fmt in formats.CHAT and not answers(out["messages"]):
        return None  # a turn that failed before it said anything (machine bad)
    return out


def _format(fmt: str) -> formats.Format:
    """The format ``machine export`` writes as ``fmt``, or a UsageError."""
    found = formats.FORMATS.get(fmt)
    if found is None or found.write is None:
        raise UsageError(f"unknown format {fmt!r} (expected {', '.join(FORMATS)})")
    return found


# -- writing ---------------------------------------------------------------------


def line(rendered: dict[str, Any]) -> bytes:
    """One exported line: sorted keys, except inside ``tools`` (at any depth).

    The tools are written exactly in the order and key order the agent sent
    them (:func:`machine_git.rows.context.load` gives them so): a chat template
    renders them in that order, so sorting them would train a prompt the
    model never saw. Everything else is sorted, so the same revision still
    gives the same bytes.
    """
    return jsonio.line(_tools_as_sent(rendered))


def _tools_as_sent(value: dict[str, Any]) -> dict[str, Any]:
    # Tools sit at the top of a chat line, in ``input`` of an openai-dpo pair
    # and in the inline ``context`` of a rows or traces line: wherever they
    # are, they keep their order (an import stores that context by the same
    # hash again).
    return {
        key: jsonio.fragment(item)
        if key == "tools" and isinstance(item, list)
        else _tools_as_sent(item)
        if isinstance(item, dict)
        else item
        for key, item in value.items()
    }


def row_line(
    row: Row,
    fmt: str,
    redact: bool = True,
    with_context: bool = True,
    with_images: bool = True,
) -> bytes | None:
    """The exported line of ``row`` (:func:`render` then :func:`line`), or None.

    Every export and every training run writes its lines with this, and
    ``machine train validate`` renders these very bytes.
    """
    rendered = render(row, fmt, redact, with_context, with_images)
    return None if rendered is None else line(rendered)


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
    with_context: bool = True,
    progress: Progress = QUIET,
    where: tuple[str, ...] = (),
    with_images: bool = True,
    images_dir: ImagesDir | None = None,
) -> Iterator[bytes]:
    """The JSONL of the export in tree order, a part of ``rows/`` at a time.

    Each piece is the lines of one ``rows/ab`` subtree (never the whole export
    in memory). A large store is rendered by several processes
    (machine_git/store/parallel.py); the bytes are the same either way.
    ``progress`` counts the rows of ``kinds`` as they are done. ``where``
    keeps only rows whose labels meet it (``quality>=4``). A pair format adds,
    after the rows' own pairs, the pairs of rows rated differently
    (:func:`sibling_pairs`, by the label schema's first rating).
    """
    _format(fmt)
    top = store.rows_tree(commit)
    if top is None:
        return
    pieces = parallel.parts(top, f"{rows.ROWS_DIR}/")
    contexts = _context_tree(store, commit) if with_context else None
    pictures = _tree_of(commit, images.IMAGE_DIR) if with_images else None
    field = _rating_at(store, commit) if fmt in PAIR_FORMATS else None
    work = functools.partial(
        _render_part,
        fmt,
        frozenset(kinds),
        redact,
        with_context,
        contexts,
        where,
        field,
        with_images,
        pictures,
        images_dir,
    )
    objects = Objects(store.repo)
    workers = parallel.jobs(objects, pieces)
    known = stats.kept(store, commit)
    progress.begin("exporting rows", None if known is None else _total(known, kinds))
    candidates: list[tuple[str, Row]] = []
    for part in parallel.run(objects, pieces, work, workers):
        tally.rows += part.rows
        tally.skipped += part.skipped
        candidates.extend(part.rated)
        progress.advance(part.rows + part.skipped)
        if part.data:
            yield part.data
    if field is not None:
        pairs = [line(pair) for _, pair in sibling_pairs(fmt, candidates, field)]
        tally.rows += len(pairs)
        if pairs:
            yield b"".join(pairs)
    progress.end()


def _rating_at(store: Store, commit: Commit) -> str | None:
    from machine_git.rows import labels
    from machine_git.store import settings

    return labels.rating_field(settings.label_schema(store.snapshot(commit)))


def _total(counts: dict[str, int], kinds: tuple[str, ...]) -> int:
    return sum(counts.get(kind, 0) for kind in kinds)


@dataclass
class _Part:
    data: bytes
    rows: int
    skipped: int
    rated: list[tuple[str, Row]]  # rows a pair of siblings may come from


@dataclass(frozen=True)
class ImagesDir:
    """``--images-dir``: image files beside the JSONL instead of data URIs.

    Each image is ``<folder>/<sha256>.png`` (or ``.jpg``), written once
    (0600); a line names it by its path relative to ``base``, the JSONL's
    folder, which is what ``machine import`` resolves it against. Picklable:
    a worker process writes the files of its part of the rows.
    """

    folder: str
    base: str

    def linked(self, row: Row, read: context.Reader) -> Row:
        """``row`` with each stored image written out and named by ``url``."""

        def link(image: Any) -> Any:
            sha = image.get("sha256") if isinstance(image, dict) else None
            if not isinstance(sha, str):
                return image
            data = read(images.path_of(sha))
            if data is None:
                return image
            name = f"{sha}{images.SUFFIXES[image['media_type']]}"
            target = Path(self.folder) / name
            if not target.exists():
                temp = target.with_name(f".{name}.{os.getpid()}.tmp")
                fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "wb") as out:
                    out.write(data)
                os.replace(temp, target)
            url = os.path.relpath(target, self.base).replace(os.sep, "/")
            return {"media_type": image["media_type"], "url": url}

        return images.map_images(row, link)


def _tree_of(commit: Commit, name: str) -> str | None:
    """The hex id of the commit's ``name/`` tree, or None (picklable)."""
    try:
        return str(commit.tree[name].id)
    except KeyError:
        return None


def _context_tree(store: Store, commit: Commit) -> str | None:
    """The hex id of the commit's ``context/`` tree, or None (picklable)."""
    try:
        return str(commit.tree[context.CONTEXT_DIR].id)
    except KeyError:
        return None


def context_reader(
    objects: Objects, tree_hex: str | None, folder: str = context.CONTEXT_DIR
) -> context.Reader:
    """Reads ``context/...`` paths (or ``folder``'s) from one tree, each once."""
    cache: dict[str, bytes | None] = {}

    def read(path: str) -> bytes | None:
        if tree_hex is None:
            return None
        if path not in cache:
            rest = path.removeprefix(f"{folder}/")
            try:
                entry = objects.tree(pygit2.Oid(hex=tree_hex))[rest]
                cache[path] = objects.blob(entry.id)
            except KeyError:
                cache[path] = None
        return cache[path]

    return read


def _render_part(
    fmt: str,
    kinds: frozenset[str],
    redact: bool,
    with_context: bool,
    contexts: str | None,
    where: tuple[str, ...],
    field: str | None,
    with_images: bool,
    pictures: str | None,
    images_dir: ImagesDir | None,
    objects: Objects,
    path: str,
    oid: pygit2.Oid,
    is_tree: bool,
) -> _Part:
    # Runs in a worker process for a large store: module level, picklable.
    from machine_git.rows.labels import Where

    out: list[bytes] = []
    skipped = 0
    found: list[tuple[str, Row]] = []
    keep = Where.parse(where)
    read = context_reader(objects, contexts)
    for place, data in blobs_under(objects, path, oid, is_tree):
        if rows.id_of_path(place) is None:
            continue
        row = cast("Row", parse_row(data, place))
        if row.get("kind") not in kinds or not keep.holds(row):
            continue
        if with_context:
            row = context.inline(row, read)
        if rated(row, field) is not None:
            found.append((row["id"], prepared(row, with_context, redact)))
        if with_images and fmt in IMAGE_FORMATS and images.has_images(row):
            seen = context_reader(objects, pictures, images.IMAGE_DIR)
            if images_dir is not None:
                row = images_dir.linked(row, seen)
            else:
                row = images.inline(row, seen)
        exported = row_line(row, fmt, redact, with_context, with_images)
        if exported is None:
            skipped += 1
            continue
        out.append(exported)
    return _Part(b"".join(out), len(out), skipped, found)


def write_stream(
    store: Store,
    commit: Commit,
    fmt: str,
    kinds: tuple[str, ...],
    stream: IO[bytes],
    redact: bool = True,
    with_context: bool = True,
    progress: Progress = QUIET,
    where: tuple[str, ...] = (),
    with_images: bool = True,
    images_dir: ImagesDir | None = None,
) -> Tally:
    """Write the export to ``stream`` (stdout); no manifest file.

    The returned tally carries the sha256 of the bytes written, for a
    manifest the caller writes elsewhere (``--manifest FILE``).
    """
    tally = Tally()
    digest = hashlib.sha256()
    for line in lines(
        store,
        commit,
        fmt,
        kinds,
        tally,
        redact,
        with_context,
        progress,
        where,
        with_images,
        images_dir,
    ):
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
    context: bool = True
    machine_version: str = __version__
    where: tuple[str, ...] = ()  # the labels the rows had to meet

    def as_dict(self) -> dict[str, Any]:
        """The manifest as JSON-ready data."""
        extra: dict[str, Any] = {"where": list(self.where)} if self.where else {}
        return extra | {
            "file": self.file,
            "revision": self.revision,
            "commit": self.commit,
            "format": self.format,
            "kinds": list(self.kinds),
            "rows": self.rows,
            "skipped": self.skipped,
            "sha256": self.sha256,
            "redacted": self.redacted,
            "context": self.context,
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
    with_context: bool = True,
    where: tuple[str, ...] = (),
) -> Manifest:
    """The manifest of an export that wrote ``tally`` to ``file``."""
    return Manifest(
        where=where,
        file=file,
        revision=revision or "HEAD",
        commit=str(commit.id),
        format=fmt,
        kinds=kinds,
        rows=tally.rows,
        skipped=tally.skipped,
        sha256=tally.sha256,
        redacted=redact,
        context=with_context,
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
    progress: Progress = QUIET,
    redact: bool = True,
    with_context: bool = True,
    manifest_target: Path | None = None,
    where: tuple[str, ...] = (),
    with_images: bool = True,
    images_dir: ImagesDir | None = None,
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
            for line in lines(
                store,
                commit,
                fmt,
                kinds,
                tally,
                redact,
                with_context,
                progress,
                where,
                with_images,
                images_dir,
            ):
                out.write(line)
                digest.update(line)
            _sync(out)
        tally.sha256 = digest.hexdigest()
        manifest = manifest_of(
            tally,
            commit,
            revision,
            fmt,
            kinds,
            target.name,
            redact,
            with_context,
            where,
        )
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
