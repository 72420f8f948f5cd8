"""Frozen eval sets, held out of training by session, and their scores.

``machine train eval init`` draws whole sessions, in the order of a salted
hash of (host, session id), until it has ``--size`` rows, and commits the list
as ``evals/<eval-id>.json``. From then on every training export leaves out
those rows and any other row from those sessions (turns tagged later
included), so one session's turns never sit on both sides. Baseline results
are committed as ``evals/<eval-id>/results/<model-slug>.json``.
"""

from __future__ import annotations

import hashlib
import re
import string
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pygit2 import Commit
from pygit2 import Tree
from pygit2.enums import FileMode

from machine_git import context
from machine_git import export
from machine_git import history
from machine_git import jsonio
from machine_git import rows
from machine_git.errors import TrainingError
from machine_git.store import Change
from machine_git.store import Snapshot
from machine_git.store import Store
from machine_git.store import parse_row
from machine_git.train import pins

EVALS_DIR = "evals"
SALT = "machine-eval-v1"
DEFAULT_SIZE = 20
KINDS = ("train", "traces")
RULE = (
    f"sessions ordered by sha256('{SALT}' NUL host NUL session_id), lowest first; "
    "whole sessions are taken until the set has at least `size` rows of kinds "
    "train and traces; training exports leave out every row of these sessions"
)


def session_hash(row: dict[str, Any]) -> str:
    """The hash that decides which side a row's session is on."""
    source = row.get("source") or {}
    key = f"{SALT}\x00{source.get('host', '')}\x00{source.get('session_id', '')}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def path_of(eval_id: str) -> str:
    return f"{EVALS_DIR}/{eval_id}.json"


def results_path(eval_id: str, model: str) -> str:
    return f"{EVALS_DIR}/{eval_id}/results/{model_slug(model)}.json"


def model_slug(model: str) -> str:
    """A file name for a model name or tinker:// path (readable, unique)."""
    text = model.removeprefix("tinker://").replace("/", "--")
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "model"
    if len(slug) > 80 or slug != text:
        slug = f"{slug[:80]}-{hashlib.sha256(model.encode()).hexdigest()[:8]}"
    return slug


# -- the active eval set -------------------------------------------------------


def active(store: Store, commit: Commit | None = None) -> dict[str, Any] | None:
    """The eval set in force at ``commit`` (default: now), or None."""
    snap = store.snapshot(commit)
    found = [_parse(data, path) for path, data in _eval_files(store, snap)]
    if not found:
        return None
    return max(found, key=lambda e: (str(e.get("created_at")), str(e.get("id"))))


def _eval_files(store: Store, snap: Snapshot) -> Iterator[tuple[str, bytes]]:
    if snap.tree is None or EVALS_DIR not in snap.tree:
        return
    entry = snap.tree[EVALS_DIR]
    if entry.filemode != FileMode.TREE:
        return
    for item in store.repo[entry.id].peel(Tree):
        name = item.name or ""
        if item.filemode == FileMode.BLOB and name.endswith(".json"):
            path = f"{EVALS_DIR}/{name}"
            data = snap.read(path)
            if data is not None:
                yield path, data


def _parse(data: bytes, path: str) -> dict[str, Any]:
    value = jsonio.load_object(data, path, TrainingError, "an eval set")
    if not isinstance(value.get("id"), str):
        raise TrainingError(f"{path}: not an eval set")
    return value


@dataclass
class HeldOut:
    """The rule a training export applies: which rows stay out."""

    eval_id: str | None
    rows: frozenset[str]
    sessions: frozenset[str]

    def excludes(self, row: dict[str, Any]) -> bool:
        if self.eval_id is None:
            return False
        return row.get("id") in self.rows or session_hash(row) in self.sessions


def held_out(store: Store) -> HeldOut:
    """What the eval set in force now keeps out of training exports."""
    current = active(store)
    if current is None:
        return HeldOut(None, frozenset(), frozenset())
    return HeldOut(
        str(current["id"]),
        frozenset(current.get("rows") or []),
        frozenset(current.get("sessions") or []),
    )


# -- eval init -----------------------------------------------------------------


def init(store: Store, size: int, force: bool) -> tuple[dict[str, Any], bool]:
    """Draw and commit the eval set; returns it and whether a commit was made."""
    if size < 1:
        raise TrainingError("--size must be at least 1")
    if store.head is None:
        raise TrainingError("the store has no commits yet")
    head = pins.data_commit(store.head)
    current = active(store)
    if current is not None and not force:
        raise TrainingError(
            f"eval set {current['id']} exists ({len(current.get('rows') or [])} rows); "
            "--force replaces it (its results stay in history)"
        )
    sessions: dict[str, list[tuple[str, str]]] = {}
    for path, data in store.iter_row_blobs(head):
        if rows.id_of_path(path) is None:
            continue
        row = parse_row(data, path)
        if row.get("kind") in KINDS:
            sessions.setdefault(session_hash(row), []).append((row["id"], row["kind"]))
    total = sum(len(v) for v in sessions.values())
    if not sessions:
        raise TrainingError("no train or traces rows to draw an eval set from")
    taken: list[str] = []
    chosen: list[tuple[str, str]] = []
    for key in sorted(sessions):
        if len(chosen) >= size:
            break
        taken.append(key)
        chosen.extend(sessions[key])
    if len(taken) == len(sessions):
        raise TrainingError(
            f"an eval set of {size} rows would take every session ({len(sessions)} "
            f"sessions, {total} rows) and leave nothing to train on; lower --size "
            "or tag turns from more sessions"
        )
    ids = sorted(i for i, _ in chosen)
    counts = {k: sum(1 for _, kind in chosen if kind == k) for k in KINDS}
    digest = hashlib.sha256(("\n".join(ids)).encode()).hexdigest()
    record: dict[str, Any] = {
        "id": f"eval-{digest[:8]}",
        "created_at": rows.now(),
        "dataset_commit": str(head.id),
        "size": size,
        "kinds": list(KINDS),
        "counts": counts,
        "rule": RULE,
        "sessions": sorted(taken),
        "rows": ids,
    }

    def plan(snap: Snapshot) -> Change | None:
        files: dict[str, bytes | None] = {
            path: None for path, _ in _eval_files(store, snap)
        }
        previous = {path: jsonio.loads(data) for path, data in _eval_files(store, snap)}
        same = previous.get(path_of(record["id"]))
        if same is not None and same.get("rows") == ids:
            return None  # the same draw: keep the first one's date and commit
        files[path_of(str(record["id"]))] = jsonio.canonical(record)
        return Change(
            summary=(
                f"eval init {record['id']}: {len(ids)} rows from {len(taken)} sessions"
            ),
            files=files,
            trailers={
                "Action": "eval-init",
                "Eval": str(record["id"]),
                "Dataset": str(head.id),
            },
        )

    made = store.write(plan) is not None
    return (record if made else (active(store) or record)), made


def commit_of(store: Store, eval_id: str) -> Commit:
    """The commit that created eval set ``eval_id`` (what results pin)."""
    head = store.head
    if head is not None:
        for commit in history.walk(store, head):
            entry = history.entry(commit)
            if entry.action == "eval-init" and entry.trailers.get("Eval") == eval_id:
                return commit
    raise TrainingError(f"no commit created eval set {eval_id}")


# -- cases and scores ----------------------------------------------------------


@dataclass
class Case:
    """One eval case: the conversation up to the answer, and the answer."""

    row_id: str
    kind: str
    prompt: list[dict[str, Any]]
    reference: str
    tools: list[dict[str, Any]] | None = None  # what the turn was offered


def cases(store: Store, eval_set: dict[str, Any]) -> tuple[list[Case], list[str]]:
    """The eval set's cases, read at the commit it was drawn from; and skipped ids.

    A case is a row whose conversation ends in an assistant text answer; the
    prompt is everything before that answer (tool calls and results included),
    led by the turn's system prompt, with the tools it was offered.
    """
    commit = store.repo.revparse_single(str(eval_set["dataset_commit"])).peel(Commit)
    read = store.snapshot(commit).read
    out: list[Case] = []
    skipped: list[str] = []
    for row_id in eval_set.get("rows") or []:
        row = store.read_row(row_id, commit)
        line = export.to_tinker(context.inline(row, read)) if row is not None else {}
        messages = line.get("messages") or []
        last = messages[-1] if messages else {}
        answer = last.get("content")
        if (
            row is None
            or last.get("role") != "assistant"
            or last.get("tool_calls")
            or not isinstance(answer, str)
            or not answer.strip()
        ):
            skipped.append(row_id)
            continue
        out.append(
            Case(row_id, str(row.get("kind")), messages[:-1], answer, line.get("tools"))
        )
    return out, skipped


def normalize(text: str) -> str:
    """Case, Unicode form, spacing and surrounding punctuation do not count."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(folded.split()).strip(string.punctuation + " ")


def score(output: str, reference: str) -> dict[str, bool]:
    """The default scores: exact (after trimming) and normalized match."""
    return {
        "exact": output.strip() == reference.strip(),
        "normalized": normalize(output) == normalize(reference),
    }


def record_results(
    store: Store,
    eval_set: dict[str, Any],
    model: str,
    details: dict[str, Any],
    outputs: list[dict[str, Any]],
    skipped: list[str],
) -> tuple[dict[str, Any], str]:
    """Score the outputs and commit them; returns the results and the commit id."""
    eval_id = str(eval_set["id"])
    eval_commit = commit_of(store, eval_id)
    scored = []
    for case in outputs:
        scores = score(str(case.get("output") or ""), str(case["reference"]))
        scored.append({**case, **scores})
    n = len(scored)
    results = {
        "eval_id": eval_id,
        "eval_commit": str(eval_commit.id),
        "dataset_commit": eval_set["dataset_commit"],
        "model": model,
        **details,
        "created_at": rows.now(),
        "scores": {
            "cases": n,
            "exact": sum(c["exact"] for c in scored) / n if n else None,
            "normalized": sum(c["normalized"] for c in scored) / n if n else None,
        },
        "skipped": skipped,
        "cases": scored,
    }
    path = results_path(eval_id, model)
    summary = (
        f"eval {eval_id} baseline {model}: exact {_pct(results['scores']['exact'])}, "
        f"normalized {_pct(results['scores']['normalized'])} of {n}"
    )
    oid = store.write(
        lambda snap: Change(
            summary=summary,
            files={path: jsonio.canonical(results)},
            trailers={
                "Action": "eval-baseline",
                "Eval": eval_id,
                "Model": model,
                "Dataset": str(eval_set["dataset_commit"]),
            },
        )
    )
    head = store.head
    return results, str(oid) if oid is not None else str(head.id if head else "")


def _pct(value: Any) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"
