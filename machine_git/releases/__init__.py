"""Behavior releases: a checkpoint becomes the default student only through gates.

A release is preregistered before it is evaluated (the candidate checkpoint,
the training bounds it came from, the frozen gates and the external
holdouts), checked against those gates, tried explicitly, and only then
activated. Each step is one commit that adds one record under
``releases/BR-NNN/`` and changes nothing else there (``records.py``); what a
step writes is a pure function of the store before it (``steps.py``), so
every command first audits the history (``audit.py``) and refuses a release
whose records were changed, removed or forged by anything else. A release's
status is read from its verified records every time, never stored.

May use: train, tagging, export, sync, recovery, history, store, sessions, rows,
secrets, core, bundled (pyproject.toml: [tool.importlinter]).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any

import pygit2

from machine_git import bundled
from machine_git.core import inputs
from machine_git.core import jsonio
from machine_git.core.errors import NotFoundError
from machine_git.core.errors import ReleaseError
from machine_git.core.errors import UsageError
from machine_git.recovery.validate import Finding
from machine_git.releases import steps
from machine_git.releases.audit import Audit
from machine_git.releases.audit import of_store
from machine_git.releases.records import RELEASES
from machine_git.releases.records import Check
from machine_git.releases.records import GateSpec
from machine_git.releases.records import Prereg
from machine_git.releases.records import Sample
from machine_git.releases.records import Sampling
from machine_git.releases.records import Spec
from machine_git.releases.records import check_id
from machine_git.releases.records import load
from machine_git.releases.records import parse
from machine_git.releases.records import split
from machine_git.rows import rows
from machine_git.store.store import Change
from machine_git.store.store import Snapshot
from machine_git.store.store import Store

__all__ = [
    "RELEASES",
    "Audit",
    "Release",
    "Sampler",
    "Stepped",
    "activate",
    "audit_store",
    "check",
    "check_id",
    "detail",
    "findings",
    "frozen",
    "listing",
    "load_spec",
    "new",
    "require_signer",
    "show",
    "trial",
]

TEMPLATES = {"pi-file-repair": "pi-file-repair.json"}

Sampler = Callable[[list[Any], str, str], list[dict[str, Any]]]
"""(cases, base model, checkpoint) -> answers, as ``train.sampling.sample`` gives."""


def audit_store(store: Store) -> Audit:
    """The audit of everything reachable from the store's branch."""
    return of_store(store)


# -- reading ---------------------------------------------------------------------------


@dataclass
class Release:
    """A release as it stands: its records at the newest commit, and their audit."""

    id: str
    prereg: Prereg | None
    status: str  # preregistered, failed, passed, trial, active, superseded, tampered
    checks: list[dict[str, Any]] = field(default_factory=list)
    tampered: list[str] = field(default_factory=list)
    unreadable: bool = False  # a prereg.json is there, but fails its model

    def state(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "checks": len(self.checks),
            "tampered": self.tampered,
        }

    def to_json(self) -> dict[str, Any]:
        record = self.prereg.model_dump(mode="json") if self.prereg else {"id": self.id}
        return {**record, "state": self.state(), "checks": self.checks}


def show(store: Store, release_id: str) -> Release:
    """One release; a removed one is still shown if its history says it existed."""
    check_id(release_id)
    found = audit_store(store)
    view = _view(store.snapshot(), release_id, found)
    if view.prereg is None and not view.tampered:
        raise NotFoundError(f"no release {release_id} (see 'machine release list')")
    return view


def listing(store: Store) -> list[Release]:
    """Every release the history knows of, with its state, in id order."""
    found = audit_store(store)
    snap = store.snapshot()
    names = set(found.registered) | {t.release for t in found.tampered if t.release}
    names |= {rid for rid in _folders(snap) if rid is not None}
    return [_view(snap, rid, found) for rid in sorted(names, key=_number)]


def _view(snap: Snapshot, release_id: str, found: Audit) -> Release:
    tampered = [str(t) for t in found.of(release_id)]
    folder = steps.folder(snap, release_id)
    prereg = None
    if folder.prereg_bytes is not None:
        try:
            prereg = folder.prereg()
        except ReleaseError:
            prereg = None  # only a tampered record fails its model
    checks = [_check_summary(n, data) for n, data in enumerate(folder.check_bytes, 1)]
    status = "tampered" if tampered else folder.status
    if status == "active" and found.active != release_id:
        status = "superseded"  # one active release: the last activated
    unreadable = folder.prereg_bytes is not None and prereg is None
    return Release(release_id, prereg, status, checks, tampered, unreadable)


def _check_summary(number: int, data: bytes) -> dict[str, Any]:
    try:
        value = jsonio.loads(data)
    except ValueError:
        value = {}
    passed = value.get("passed") if isinstance(value, dict) else None
    return {"number": number, "passed": passed}


def _folders(snap: Snapshot) -> list[str | None]:
    if snap.tree is None or RELEASES not in snap.tree:
        return []
    tree = snap.repo[snap.tree[RELEASES].id]
    return [split(f"{RELEASES}/{e.name}/x")[0] for e in tree]  # type: ignore[attr-defined]


def _number(release_id: str) -> int:
    return int(release_id[3:])


def detail(store: Store, release_id: str) -> dict[str, Any]:
    """A release's records as JSON values, with its state (for pages).

    ``prereg`` is None if there is none at the newest commit; the state says
    ``tampered``, with the lines, when the audit found any.
    """
    check_id(release_id)
    view = _view(store.snapshot(), release_id, audit_store(store))
    folder = steps.folder(store.snapshot(), release_id)
    state: dict[str, Any] = view.state()
    for key, data in (
        ("trial", folder.trial_bytes),
        ("activated", folder.activation_bytes),
    ):
        if data is not None:
            state[key] = _json(data)
    return {
        "prereg": None if folder.prereg_bytes is None else _json(folder.prereg_bytes),
        "state": state,
        "checks": [_json(data) for data in folder.check_bytes],
    }


def _json(data: bytes) -> dict[str, Any]:
    try:
        value = jsonio.loads(data)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def frozen(store: Store, release_id: str) -> Prereg:
    """The preregistration of an untampered release (what a check samples)."""
    check_id(release_id)
    found = audit_store(store)
    found.require_clean(release_id)
    prereg = steps.folder(store.snapshot(), release_id).prereg()
    found.require_run_clean(release_id, prereg.candidate.run)
    return prereg


def findings(store: Store) -> tuple[list[Finding], int]:
    """Every tampered release record, as ``validate --store`` lists it; how many
    releases they touch."""
    try:
        found = audit_store(store)
    except (pygit2.GitError, KeyError, ValueError, OSError) as e:
        # A damaged object in the history: say so, as the row check does.
        return [Finding(RELEASES, 0, "$", f"cannot audit the history: {e}")], 0
    touched = {t.release for t in found.tampered}
    return [t.finding() for t in found.tampered], len(touched)


# -- preregistering --------------------------------------------------------------------


def load_spec(path: Path | None, template: str | None) -> tuple[Spec, bytes | None]:
    """The gates to preregister (a file, a template or the default) and holdouts."""
    if path is not None and template is not None:
        raise UsageError("--gates and --template are exclusive")
    if template is not None:
        if template not in TEMPLATES:
            known = ", ".join(sorted(TEMPLATES))
            raise UsageError(f"unknown release template {template!r} (known: {known})")
        data = bundled.read_bytes("templates", f"releases/{TEMPLATES[template]}")
        spec = load(Spec, data, f"template {template}")
        return spec, _holdouts(spec, lambda name: _bundled(name))
    if path is None:
        return Spec(), None
    try:
        data = inputs.read(path, inputs.JSONL_LIMIT)  # never a FIFO or /dev/zero
    except inputs.Unreadable as e:
        raise UsageError(f"cannot read gates file {path}: {e}") from None
    value = jsonio.load_object(data, str(path), ReleaseError)
    spec = (
        parse(Spec, value, str(path))
        if "gates" in value
        else Spec(gates=parse(GateSpec, value, str(path)))
    )
    return spec, _holdouts(
        spec, lambda name: inputs.read(path.parent / name, inputs.JSONL_LIMIT)
    )


def _bundled(name: str) -> bytes:
    return bundled.read_bytes("templates", f"releases/{name}")


def _holdouts(spec: Spec, read: Callable[[str], bytes]) -> bytes | None:
    if spec.gates.holdouts is None:
        return None
    name = spec.gates.holdouts.file
    if not name or "/" in name or name.startswith("."):
        raise ReleaseError(
            f"holdouts file {name!r} must be a file name beside the gates"
        )
    try:
        return read(name)
    except (OSError, inputs.Unreadable) as e:
        why = e.strerror if isinstance(e, OSError) else str(e)
        raise ReleaseError(f"cannot read holdouts {name}: {why or e}") from None


def new(
    store: Store,
    release_id: str,
    run_id: str | None,
    *,
    title: str | None,
    gates_file: Path | None,
    template: str | None,
) -> tuple[Prereg, str]:
    """Preregister a release (one commit); the record and the commit id."""
    from machine_git.train import runs

    check_id(release_id)
    found = audit_store(store)
    found.require_clean(release_id)
    if release_id in found.registered:
        raise ReleaseError(
            f"{release_id} is already preregistered; its gates are frozen: "
            "preregister a new release id"
        )
    spec, holdouts = load_spec(gates_file, template)
    if template is not None and spec.id not in (None, release_id):
        raise ReleaseError(
            f"template {template} preregisters {spec.id}, not {release_id}"
        )
    run = runs.find(store, run_id)
    found.require_run_clean(release_id, str(run["id"]))
    from machine_git.releases import claims

    claims.require_true_claims(store, run)
    inputs = steps.PreregInputs(
        release_id=release_id,
        run=str(run["id"]),
        title=title or spec.title or f"release of {run['id']}",
        template=template,
        purpose=spec.purpose,
        created_at=rows.now(),
        gates=spec.gates,
        bounds=spec.training_bounds,
        trial=spec.trial,
    )
    oid = store.write(lambda snap: steps.preregister(snap, inputs, holdouts))
    record = steps.folder(store.snapshot(), release_id).prereg()
    return record, str(oid)


# -- checking --------------------------------------------------------------------------


def require_signer(store: Store) -> None:
    """Refuse now if this user may not sign the store's records."""
    from machine_git.store import signing
    from machine_git.store.store import author

    signing.admit(store.snapshot(), Change("", {}), author())


def check(
    store: Store, release_id: str, sample: Sampler, max_tokens: int
) -> tuple[Check, str]:
    """Sample the candidate on the frozen cases, judge, commit check N+1."""
    prereg = frozen(store, release_id)
    todo = steps.cases(store.snapshot(), release_id)
    candidate = prereg.candidate
    answers = sample(todo.all, candidate.base_model, candidate.checkpoint)
    samples = [Sample.of(a) for a in answers]
    created_at = rows.now()
    sampling = Sampling(max_tokens=max_tokens)
    made: list[Change] = []

    def plan(snap: Snapshot) -> Change:
        made[:] = [steps.check(snap, release_id, samples, created_at, sampling)]
        return made[0]

    oid = store.write(plan)
    path, data = next(iter(made[0].files.items()))
    assert data is not None
    return load(Check, data, path), str(oid)


# -- trial and activation --------------------------------------------------------------


@dataclass(frozen=True)
class Stepped:
    """A trial or activation: the commit made, or why none was needed."""

    commit: str | None
    already: str | None = None  # "BR-002 is already active (since ...)"


def trial(store: Store, release_id: str) -> Stepped:
    """Make the candidate this project's student, marked as a trial (one commit)."""
    return _student_step(store, release_id, steps.trial, "trial")


def activate(store: Store, release_id: str) -> Stepped:
    """Make the candidate the default student: every gate passed, a trial recorded."""
    return _student_step(store, release_id, steps.activate, "activate")


def _student_step(
    store: Store,
    release_id: str,
    step: Callable[[Snapshot, str, str], Change],
    verb: str,
) -> Stepped:
    frozen(store, release_id)
    found = audit_store(store)
    at = rows.now()
    try:
        oid = store.write(lambda snap: step(snap, release_id, at))
    except steps.AlreadyDone as done:
        since = found.since(done.path)[:12] or "?"
        text = (
            f"{release_id} is active (since {since}); a trial would change nothing"
            if verb == "trial" and done.status == "active"
            else f"{release_id} is already {done.status} (since {since}); "
            "nothing changed"
        )
        return Stepped(None, text)
    return Stepped(str(oid))
