"""Behavior releases: a checkpoint becomes the default only through gates.

A release is preregistered before it is evaluated (``releases/BR-NNN/
prereg.json``: the candidate checkpoint, the training bounds it came from,
the frozen gates and the external holdouts), checked against those gates,
tried explicitly, and only then activated. Each step is a commit. The
preregistration is frozen: every later step compares it with the bytes the
``release-new`` commit wrote, and refuses if they differ.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import pygit2
from pygit2 import Commit

from machine_git import bundled
from machine_git import history
from machine_git import inputs
from machine_git import jsonio
from machine_git import rows
from machine_git import settings
from machine_git.errors import ReleaseError
from machine_git.errors import UsageError
from machine_git.store import Change
from machine_git.store import Snapshot
from machine_git.store import Store
from machine_git.store import read_path

RELEASES = "releases"
_ID = re.compile(r"^BR-\d{3,6}$")
METRICS = ("exact", "normalized")
DEFAULT_GATES: dict[str, Any] = {
    "metrics": [{"metric": "normalized", "min_delta": 0.0}],
    "no_regress": {"metric": "normalized", "cases": "all"},
}
TEMPLATES = {"pi-file-repair": "pi-file-repair.json"}


def check_id(release_id: str) -> str:
    """``BR-`` and three to six digits, or a one-line error."""
    if not _ID.match(release_id):
        raise UsageError(
            f"bad release id {release_id!r}: expected BR-NNN (e.g. BR-001)"
        )
    return release_id


def prereg_path(release_id: str) -> str:
    return f"{RELEASES}/{check_id(release_id)}/prereg.json"


def state_path(release_id: str) -> str:
    return f"{RELEASES}/{check_id(release_id)}/state.json"


def holdouts_path(release_id: str) -> str:
    return f"{RELEASES}/{check_id(release_id)}/holdouts.jsonl"


def check_path(release_id: str, number: int) -> str:
    return f"{RELEASES}/{check_id(release_id)}/checks/{number:03d}.json"


# -- reading ---------------------------------------------------------------------


def read(store: Store, release_id: str, commit: Commit | None = None) -> dict[str, Any]:
    """The preregistration of a release; one line if there is none."""
    data = store.snapshot(commit).read(prereg_path(release_id))
    if data is None:
        raise ReleaseError(f"no release {release_id} (see 'machine release list')")
    return _object(data, prereg_path(release_id))


def state(store: Store, release_id: str) -> dict[str, Any]:
    """Where a release stands: preregistered, checked, trial, active."""
    data = store.snapshot().read(state_path(release_id))
    return (
        _object(data, state_path(release_id)) if data else {"status": "preregistered"}
    )


def listing(store: Store) -> list[dict[str, Any]]:
    """Every release with its state, in id order."""
    snap = store.snapshot()
    tree = snap.tree
    if tree is None or RELEASES not in tree:
        return []
    found = []
    for entry in store.repo[tree[RELEASES].id].peel(pygit2.Tree):
        name = entry.name or ""
        if _ID.match(name) and snap.read(prereg_path(name)) is not None:
            found.append({**read(store, name), "state": state(store, name)})
    return sorted(found, key=lambda r: int(str(r["id"])[3:]))


def checks(store: Store, release_id: str) -> list[dict[str, Any]]:
    """The recorded checks of a release, oldest first."""
    snap = store.snapshot()
    out = []
    for number in range(1, 1000):
        data = snap.read(check_path(release_id, number))
        if data is None:
            break
        out.append(_object(data, check_path(release_id, number)))
    return out


def _object(data: bytes, where: str) -> dict[str, Any]:
    return jsonio.load_object(data, where, ReleaseError)


# -- preregistration -----------------------------------------------------------------


def load_gates(
    path: Path | None, template: str | None
) -> tuple[dict[str, Any], Path | None]:
    """The gates (and template) to preregister; the folder holdouts are read from."""
    if path is not None and template is not None:
        raise UsageError("--gates and --template are exclusive")
    if template is not None:
        if template not in TEMPLATES:
            known = ", ".join(sorted(TEMPLATES))
            raise UsageError(f"unknown release template {template!r} (known: {known})")
        data = bundled.read_bytes("templates", f"releases/{TEMPLATES[template]}")
        return {**_object(data, f"template {template}"), "template": template}, None
    if path is None:
        return {"gates": DEFAULT_GATES}, None
    try:
        data = inputs.read(path, inputs.JSONL_LIMIT)
    except inputs.Unreadable as e:
        raise UsageError(f"cannot read gates file {path}: {e}") from None
    value = _object(data, str(path))
    return (
        {"gates": value["gates"]} if "gates" in value else {"gates": value}
    ), path.parent


def _holdouts(
    gates: dict[str, Any], folder: Path | None, template: bool
) -> bytes | None:
    spec = gates.get("holdouts")
    if not spec:
        return None
    name = str(spec.get("file") or "")
    if not name or "/" in name or name.startswith("."):
        raise ReleaseError(
            f"holdouts file {name!r} must be a file name beside the gates"
        )
    try:
        if template:
            data = bundled.read_bytes("templates", f"releases/{name}")
        else:
            assert folder is not None
            data = inputs.read(folder / name, inputs.JSONL_LIMIT)
    except (OSError, inputs.Unreadable) as e:
        why = e.strerror if isinstance(e, OSError) else str(e)
        raise ReleaseError(f"cannot read holdouts {name}: {why or e}") from None
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            case = jsonio.loads(line)
        except jsonio.JSONDecodeError as e:
            raise ReleaseError(f"{name}:{number}: not valid JSON ({e})") from None
        if not (
            isinstance(case, dict)
            and isinstance(case.get("id"), str)
            and isinstance(case.get("messages"), list)
            and isinstance(case.get("reference"), str)
        ):
            raise ReleaseError(
                f"{name}:{number}: a holdout needs id, messages, reference"
            )
    return data


def _check_gates(gates: dict[str, Any]) -> None:
    for gate in [
        *gates.get("metrics", []),
        *(gates.get("holdouts") or {}).get("metrics", []),
    ]:
        if gate.get("metric") not in METRICS:
            raise ReleaseError(
                f"unknown gate metric {gate.get('metric')!r} ({', '.join(METRICS)})"
            )
    regress = gates.get("no_regress")
    if regress and regress.get("metric") not in METRICS:
        raise ReleaseError(f"unknown no_regress metric {regress.get('metric')!r}")


def _bounds_problems(run: dict[str, Any], bounds: dict[str, Any]) -> list[str]:
    hyper = run.get("hyperparameters") or {}
    found: list[str] = []
    kinds = bounds.get("kinds")
    kind = (run.get("dataset") or {}).get("kind")
    if kinds and kind not in kinds:
        found.append(f"kind {kind} is not one of {', '.join(kinds)}")
    for name in ("learning_rate", "lora_rank"):
        limits, value = bounds.get(name), hyper.get(name)
        if not isinstance(limits, dict) or not isinstance(value, int | float):
            continue
        if value < limits.get("min", value) or value > limits.get("max", value):
            found.append(
                f"{name} {value} outside [{limits.get('min')}, {limits.get('max')}]"
            )
    steps = run.get("steps_planned")
    if (
        bounds.get("max_steps") is not None
        and isinstance(steps, int)
        and steps > bounds["max_steps"]
    ):
        found.append(f"{steps} steps planned > max_steps {bounds['max_steps']}")
    rows_used = (run.get("dataset") or {}).get("rows")
    if (
        bounds.get("min_rows") is not None
        and isinstance(rows_used, int)
        and rows_used < bounds["min_rows"]
    ):
        found.append(f"{rows_used} rows < min_rows {bounds['min_rows']}")
    want = bounds.get("train_on_what")
    if want and run.get("train_on_what") != want:
        found.append(f"train_on_what {run.get('train_on_what')} is not {want}")
    return found


def candidate_checkpoint(run: dict[str, Any]) -> str:
    """The run's last sampler checkpoint (the one a release can serve)."""
    samplers = [
        c.get("sampler_path")
        for c in run.get("checkpoints") or []
        if c.get("sampler_path")
    ]
    if not samplers:
        raise ReleaseError(
            f"run {run['id']} has no sampler checkpoint yet "
            f"(status {run.get('status')}); "
            "train it with 'machine train run --yes' first"
        )
    return str(samplers[-1])


def new(
    store: Store,
    release_id: str,
    run: dict[str, Any],
    eval_set: dict[str, Any],
    eval_commit: Commit,
    *,
    title: str | None,
    gates_file: Path | None,
    template: str | None,
) -> tuple[dict[str, Any], str]:
    """Preregister a release (one commit); returns the record and the commit id."""
    from machine_git.train import evals

    check_id(release_id)
    spec, folder = load_gates(gates_file, template)
    if template is not None and spec.get("id") not in (None, release_id):
        raise ReleaseError(
            f"template {template} preregisters {spec['id']}, not {release_id}"
        )
    gates = dict(spec.get("gates") or DEFAULT_GATES)
    _check_gates(gates)
    problems = _bounds_problems(run, spec.get("training_bounds") or {})
    if problems:
        raise ReleaseError(
            f"run {run['id']} is outside {release_id}'s training bounds: "
            + "; ".join(problems)
        )
    checkpoint = candidate_checkpoint(run)
    base_model = str(run["base_model"])
    baseline_path = evals.results_path(str(eval_set["id"]), base_model)
    baseline_blob = store.snapshot().read(baseline_path)
    if baseline_blob is None:
        raise ReleaseError(
            f"no baseline of {base_model} on eval set {eval_set['id']}: "
            "record one first "
            "with 'machine train eval baseline --yes'"
        )
    baseline = _object(baseline_blob, baseline_path)
    holdouts = _holdouts(gates, folder, template is not None)
    frozen_gates = {
        **gates,
        "eval": {
            "id": eval_set["id"],
            "commit": str(eval_commit.id),
            "baseline": {
                "model": base_model,
                "path": baseline_path,
                "blob": str(pygit2.hash(baseline_blob)),
                "scores": baseline.get("scores"),
            },
        },
    }
    if holdouts is not None:
        frozen_gates["holdouts"] = {
            **gates["holdouts"],
            "sha256": hashlib.sha256(holdouts).hexdigest(),
            "cases": sum(1 for line in holdouts.splitlines() if line.strip()),
        }
    dataset = run.get("dataset") or {}
    record = {
        "id": release_id,
        "title": title or spec.get("title") or f"release of {run['id']}",
        "template": spec.get("template"),
        "purpose": spec.get("purpose"),
        "created_at": rows.now(),
        "candidate": {
            "run": run["id"],
            "checkpoint": checkpoint,
            "base_model": base_model,
            "renderer": run.get("renderer"),
        },
        "training": {
            "dataset_commit": dataset.get("commit"),
            "export_sha256": dataset.get("sha256"),
            "kind": dataset.get("kind"),
            "rows": dataset.get("rows"),
            "steps": run.get("steps_planned"),
            "train_on_what": run.get("train_on_what"),
            "hyperparameters": run.get("hyperparameters"),
            "bounds": spec.get("training_bounds"),
        },
        "gates": frozen_gates,
        "trial": spec.get("trial") or {"required": True},
    }

    def plan(snap: Snapshot) -> Change:
        if snap.read(prereg_path(release_id)) is not None:
            raise ReleaseError(
                f"{release_id} is already preregistered; its gates are frozen: "
                "preregister a new release id"
            )
        files: dict[str, bytes | None] = {
            prereg_path(release_id): jsonio.canonical(record),
            state_path(release_id): jsonio.canonical({"status": "preregistered"}),
        }
        if holdouts is not None:
            files[holdouts_path(release_id)] = holdouts
        return Change(
            summary=f"release new {release_id}: {record['title']}",
            files=files,
            trailers={
                "Action": "release-new",
                "Release": release_id,
                "Run": str(run["id"]),
                "Dataset": str(dataset.get("commit")),
            },
        )

    oid = store.write(plan)
    return record, str(oid)


def preregistration_commit(store: Store, release_id: str) -> Commit:
    """The commit that preregistered ``release_id``."""
    head = store.head
    if head is not None:
        for commit in history.walk(store, head):
            entry = history.entry(commit)
            if (
                entry.action == "release-new"
                and entry.trailers.get("Release") == release_id
            ):
                return commit
    raise ReleaseError(f"no preregistration commit for {release_id}")


def assert_frozen(store: Store, release_id: str) -> dict[str, Any]:
    """The preregistration, if its bytes are the ones first committed."""
    record = read(store, release_id)
    first = preregistration_commit(store, release_id)
    head = store.head
    for path in (prereg_path(release_id), holdouts_path(release_id)):
        before = read_path(store.repo, first.tree, path)
        now = read_path(store.repo, head.tree if head else None, path)
        if before != now:
            raise ReleaseError(
                f"the preregistration of {release_id} was changed after "
                f"{str(first.id)[:12]} ({path}); gates are frozen: preregister a new "
                "release id"
            )
    return record


# -- trial and activation ------------------------------------------------------


def trial(store: Store, release_id: str) -> str:
    """Make the candidate this project's student, marked as a trial (one commit)."""
    record = assert_frozen(store, release_id)
    return _student_commit(store, release_id, record, "trial")


def activate(store: Store, release_id: str) -> str:
    """Make the candidate the default student: every gate passed, a trial recorded."""
    record = assert_frozen(store, release_id)
    done = checks(store, release_id)
    if not done:
        raise ReleaseError(
            f"{release_id} has not been checked: "
            f"run 'machine release check {release_id} --yes'"
        )
    last = done[-1]
    if not last.get("passed"):
        failed = ", ".join(
            g["name"] for g in last.get("gates") or [] if not g["passed"]
        )
        raise ReleaseError(
            f"{release_id} failed its gates in check {last['number']} ({failed}); "
            "it cannot be activated"
        )
    current = state(store, release_id)
    if not current.get("trial"):
        raise ReleaseError(
            f"{release_id} has no trial: run 'machine release trial {release_id}' first"
        )
    return _student_commit(store, release_id, record, "active")


def _student_commit(
    store: Store, release_id: str, record: dict[str, Any], status: str
) -> str:
    checkpoint = record["candidate"]["checkpoint"]

    def plan(snap: Snapshot) -> Change:
        data = snap.read(settings.SETTINGS)
        stored = jsonio.loads(data) if data else {}
        stored = stored if isinstance(stored, dict) else {}
        values = {
            **stored,
            "student": checkpoint,
            "chat": "student",
            "student_release": release_id,
            "student_status": "trial" if status == "trial" else "default",
        }
        current_data = snap.read(state_path(release_id))
        current = _object(current_data, state_path(release_id)) if current_data else {}
        stamp = {"at": rows.now(), "checkpoint": checkpoint}
        new_state = {
            **current,
            "status": status,
            **({"trial": stamp} if status == "trial" else {"activated": stamp}),
        }
        verb = "trial" if status == "trial" else "activate"
        return Change(
            summary=f"release {verb} {release_id}: {checkpoint}",
            files={
                settings.SETTINGS: jsonio.canonical(values),
                state_path(release_id): jsonio.canonical(new_state),
            },
            trailers={
                "Action": f"release-{verb}",
                "Release": release_id,
                "Checkpoint": checkpoint,
            },
        )

    return str(store.write(plan))
