"""Frozen eval sets, held out of training by session, and their scores.

``machine train eval init`` draws whole groups of rows, in the order of a
salted hash of (host, session id), until it has ``--size`` rows, and commits
the list as ``evals/<eval-id>.json``. A group is every row of a session, and
every row of any session that shares a row's content with it: the same
prompt and answer (after normalizing case, Unicode form and spacing), tagged
twice from two sessions, is one example, and it sits on one side only. From
then on every training export leaves out those rows, any other row from
those sessions (turns tagged later included) and any row with the same
content. ``train validate`` reports a training row that still shares a
session or content with the eval set (one drawn by an older machine) as
blocking. Baseline results are committed as
``evals/<eval-id>/results/<model-slug>.json``.
"""

from __future__ import annotations

import hashlib
import re
import string
import unicodedata
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from typing import Any
from typing import cast

from pygit2 import Commit
from pygit2 import Tree
from pygit2.enums import FileMode

from machine_git.core import jsonio
from machine_git.core.errors import TrainingError
from machine_git.export import export
from machine_git.history import history
from machine_git.rows import context
from machine_git.rows import rows
from machine_git.store.store import Change
from machine_git.store.store import Snapshot
from machine_git.store.store import Store
from machine_git.store.store import parse_row
from machine_git.train import config
from machine_git.train import pins

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Row

EVALS_DIR = "evals"
SALT = "machine-eval-v1"
DEFAULT_SIZE = 20
KINDS = config.KINDS
RULE = (
    f"sessions ordered by sha256('{SALT}' NUL host NUL session_id), lowest first; "
    "sessions sharing a row's normalized (prompt, answer) are one group; whole "
    "groups are taken until the set has at least `size` rows of kinds train and "
    "traces; training exports leave out every row of these sessions and every "
    "row with the content of one of them"
)


def session_hash(row: Mapping[str, Any]) -> str:
    """The hash that decides which side a row's session is on."""
    source = row.get("source") or {}
    key = f"{SALT}\x00{source.get('host', '')}\x00{source.get('session_id', '')}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def content_key(row: Row) -> str:
    """What makes two rows the same example: the normalized first user
    message and final assistant answer (a trace that ends on a call: "")."""
    messages = export.conversation(row, null_content=True)
    prompt = next((m for m in messages if m.get("role") == "user"), {})
    answers = [
        m.get("content")
        for m in messages
        if m.get("role") == "assistant" and isinstance(m.get("content"), str)
    ]
    key = f"{normalize(str(prompt.get('content') or ''))}\x00"
    key += normalize(str(answers[-1])) if answers else ""
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


def bad_records(store: Store, commit: Commit | None = None) -> list[str]:
    """One line for each eval set or result record that does not read."""
    snap = store.snapshot(commit)
    out = []
    for path, data in _eval_files(store, snap):
        try:
            _parse(data, path)
        except TrainingError as e:
            out.append(str(e))
    if snap.tree is None or EVALS_DIR not in snap.tree:
        return out
    for path in sorted(_result_paths(store, snap.tree[EVALS_DIR])):
        result = snap.read(path)
        if result is None:
            continue
        try:
            jsonio.load_object(result, path, TrainingError, "an eval result")
        except TrainingError as e:
            out.append(str(e))
    return out


def _result_paths(store: Store, entry: Any) -> Iterator[str]:
    if entry.filemode != FileMode.TREE:
        return
    for folder in store.repo[entry.id].peel(Tree):
        if folder.filemode != FileMode.TREE or "results" not in (
            tree := store.repo[folder.id].peel(Tree)
        ):
            continue
        results = tree["results"]
        if results.filemode != FileMode.TREE:
            continue
        for item in store.repo[results.id].peel(Tree):
            if item.filemode == FileMode.BLOB and (item.name or "").endswith(".json"):
                yield f"{EVALS_DIR}/{folder.name}/results/{item.name}"


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
    contents: frozenset[str] = frozenset()

    def excludes(self, row: Row) -> bool:
        if self.eval_id is None:
            return False
        return (
            row.get("id") in self.rows
            or session_hash(row) in self.sessions
            or (bool(self.contents) and content_key(row) in self.contents)
        )


def held_out(store: Store) -> HeldOut:
    """What the eval set in force now keeps out of training exports."""
    return rule_of(active(store))


def rule_of(eval_set: dict[str, Any] | None) -> HeldOut:
    """What ``eval_set`` keeps out of training (None: nothing)."""
    if eval_set is None:
        return HeldOut(None, frozenset(), frozenset())
    return HeldOut(
        str(eval_set["id"]),
        frozenset(eval_set.get("rows") or []),
        frozenset(eval_set.get("sessions") or []),
        frozenset(eval_set.get("contents") or []),
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
    drawn = _draw(_groups(store, head), size)
    ids = sorted(i for i, _, _ in drawn.rows)
    counts = {k: sum(1 for _, kind, _ in drawn.rows if kind == k) for k in KINDS}
    digest = hashlib.sha256(("\n".join(ids)).encode()).hexdigest()
    record: dict[str, Any] = {
        "id": f"eval-{digest[:8]}",
        "created_at": rows.now(),
        "dataset_commit": str(head.id),
        "size": size,
        "kinds": list(KINDS),
        "counts": counts,
        "rule": RULE,
        "sessions": sorted(drawn.sessions),
        "contents": sorted({key for _, _, key in drawn.rows}),
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
                f"eval init {record['id']}: {len(ids)} rows from "
                f"{len(drawn.sessions)} sessions"
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


Entry = tuple[str, str, str]  # (row id, kind, content key)


@dataclass
class Group:
    """Rows that must sit on one side: linked by session or by content."""

    sessions: set[str]
    rows: list[Entry]


def _groups(store: Store, head: Commit) -> list[Group]:
    """Every train/traces row at ``head``, grouped; lowest session hash first."""
    by_session: dict[str, list[Entry]] = {}
    sessions_of: dict[str, set[str]] = {}  # content key -> sessions holding it
    for path, data in store.iter_row_blobs(head):
        if rows.id_of_path(path) is None:
            continue
        row = cast("Row", parse_row(data, path))  # a stored row: schema-checked
        if row.get("kind") not in KINDS:
            continue
        session, key = session_hash(row), content_key(row)
        by_session.setdefault(session, []).append((row["id"], row["kind"], key))
        sessions_of.setdefault(key, set()).add(session)
    parent = {s: s for s in by_session}

    def root(s: str) -> str:
        while parent[s] != s:
            parent[s] = parent[parent[s]]
            s = parent[s]
        return s

    for linked in sessions_of.values():
        first, *others = sorted(linked)
        for other in others:
            a, b = root(first), root(other)
            parent[max(a, b)] = min(a, b)  # the root is the group's lowest hash
    groups: dict[str, Group] = {}
    for session in sorted(by_session):
        group = groups.setdefault(root(session), Group(set(), []))
        group.sessions.add(session)
        group.rows.extend(by_session[session])
    return [groups[k] for k in sorted(groups)]


@dataclass
class Drawn:
    sessions: set[str]
    rows: list[Entry]


def _draw(groups: list[Group], size: int) -> Drawn:
    """Whole groups in order until ``size`` rows; never every group."""
    if not groups:
        raise TrainingError("no train or traces rows to draw an eval set from")
    drawn = Drawn(set(), [])
    taken = 0
    for group in groups:
        if len(drawn.rows) >= size:
            break
        drawn.sessions |= group.sessions
        drawn.rows.extend(group.rows)
        taken += 1
    if taken == len(groups):
        sessions = sum(len(g.sessions) for g in groups)
        total = sum(len(g.rows) for g in groups)
        raise TrainingError(
            f"an eval set of {size} rows would take every session ({sessions} "
            f"sessions, {total} rows) and leave nothing to train on; lower --size "
            "or tag turns from more sessions"
        )
    return drawn


def overlap(
    store: Store, eval_set: dict[str, Any], items: Sequence[tuple[str, Row]]
) -> list[str]:
    """The labels of ``items`` that share a session or content with the eval set.

    Read from the eval rows themselves (at the commit the set was drawn
    from), not from the set's record, so a set drawn by an older machine
    (sessions only) is checked by content too.
    """
    commit = store.repo.revparse_single(str(eval_set["dataset_commit"])).peel(Commit)
    sessions = set(eval_set.get("sessions") or [])
    contents = set(eval_set.get("contents") or [])
    for row_id in eval_set.get("rows") or []:
        row = store.read_row(row_id, commit)
        if row is not None:
            sessions.add(session_hash(row))
            contents.add(content_key(row))
    return [
        label
        for label, row in items
        if session_hash(row) in sessions or content_key(row) in contents
    ]


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
